"""A first hour in a real browser (Debian's chromium, 1366 x 768): staff create a project and its overview says what
to do next, every step to do; once a bundle is in, each step shows its state and counts (read from the bundle's
files below) and links to its page; the creator is on the members page as its admin; an expert added to the project
is shown where to start annotating, with the items waiting for them, and no gold count (blind first)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from axe_playwright_python.sync_playwright import Axe

from labeling.models import Project
from labeling.services.bundle_import import bundle_import
from tests.browser import log_in, needs_chromium
from tests.factories import MembershipFactory, UserFactory
from tests.services.test_bundle_import import SMALL, write_bundle

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), needs_chromium]

SCREEN = {"width": 1366, "height": 768}
# Screenshots for a reader, where one asks for them: SCREENSHOT_DIR=/tmp/shots.
SHOTS = os.environ.get("SCREENSHOT_DIR")


def _shot(page, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=f"{SHOTS}/{name}.png", full_page=True)


def _steps(page) -> dict[str, tuple[str, str]]:
    """Each step shown: key -> (its state as shown, its counts as shown)."""
    return {
        step.get_attribute("data-step"): (step.locator(".step-state").inner_text().strip(),
                                          step.locator(".step-counts").inner_text().strip())
        for step in page.locator("[data-testid=next-steps] .step").all()
    }


def _serious_axe_violations(page) -> list[str]:
    return [f"{v['id']}: {v['help']}" for v in Axe().run(page).response["violations"]
            if v["impact"] in ("serious", "critical")]


def test_an_admin_is_shown_the_setup_steps_and_an_expert_where_to_start(browser, live_server, tmp_path):
    UserFactory(username="boss", is_staff=True)
    page, errors = log_in(browser, live_server, "boss", viewport=SCREEN)
    page.fill("#id_name", "Flood study")
    page.fill("#id_slug", "flood")
    page.click("#project-create button[type=submit]")
    page.wait_for_url(f"{live_server.url}/projects/flood/bundles/")

    page.goto(f"{live_server.url}/projects/flood/")
    assert _steps(page) == {
        "import": ("to do", "0 queries · 0 passages · 0 pairs"),
        "judge": ("to do", "0 judges"),
        "score": ("to do", "0 of 0 pairs judged by a judge"),
        "invite": ("to do", "0 experts · 0 invitations pending"),
        "label": ("to do", "0 labels · 0 of 0 pairs with a gold grade · 0 conflicts to adjudicate"),
        "export": ("waiting", "0 gold grades · 0 pairs judged"),
    }
    page.locator('[data-step="import"] .step-action').click()
    page.wait_for_url(f"{live_server.url}/projects/flood/bundles/")

    # The creator is the project's admin on its members page.
    page.goto(f"{live_server.url}/projects/flood/members/")
    assert page.locator('tr[data-member="boss"] select[name=role]').input_value() == "admin"

    # The bundle (tests.services.test_bundle_import.SMALL): 2 queries, 3 passages, a pool of 5 pairs; judge llm
    # judged 3 of them; annotators ann-a and ann-b (experts now) labelled q1/d1 2 and 1 (they disagree, but 2 and 1
    # is no conflict on a 0-2 scale: it needs 0 and 2, or two middle grades), ann-a adjudicated q2/d3; reference
    # grades for q1/d1 and q1/d2. Gold: q1/d1, q1/d2 (reference) and q2/d3 (adjudicated).
    bundle_import(path=write_bundle(tmp_path / "small", SMALL), project_slug="flood")
    page.goto(f"{live_server.url}/projects/flood/")
    assert _steps(page) == {
        "import": ("done", "2 queries · 3 passages · 5 pairs"),
        "judge": ("done", "1 judge"),
        "score": ("to do", "3 of 5 pairs judged by a judge"),
        "invite": ("done", "2 experts · 0 invitations pending"),
        "label": ("to do", "3 labels · 3 of 5 pairs with a gold grade · 0 conflicts to adjudicate"),
        "export": ("ready", "3 gold grades · 3 pairs judged"),
    }
    # No stopping target set: labelling is done when every pair of the pool has a gold grade, and it says so.
    assert page.locator('[data-step="label"] .step-target').inner_text() == (
        "Done when every pair has a gold grade, or set a stopping target in Settings.")
    assert page.locator('[data-count="gold"]').inner_text() == "3"
    assert page.locator('[data-count="labels"]').inner_text() == "3"
    assert page.locator('[data-step="score"] .step-action').get_attribute("href") == "/projects/flood/judges/"
    assert _serious_axe_violations(page) == []
    _shot(page, "overview-admin")

    project = Project.objects.get(slug="flood")
    project.queue_mix = {"sequential": 100}
    project.save(update_fields=["queue_mix"])
    MembershipFactory(project=project, user=UserFactory(username="erin"), role="expert")
    expert, expert_errors = log_in(browser, live_server, "erin", viewport=SCREEN)
    expert.goto(f"{live_server.url}/projects/flood/")
    # One expert label wanted per item: q1/d1 has two; q2/d3 only an adjudication. 4 items wait for erin.
    assert _steps(expert) == {
        "annotate": ("to do", "4 items waiting for you"),
        "my-labels": ("to do", "0 labels · 0 today"),
    }
    assert expert.locator('[data-count="gold"]').count() == 0
    assert _serious_axe_violations(expert) == []
    _shot(expert, "overview-expert")
    expert.locator('[data-step="annotate"] .step-action').click()
    expert.wait_for_url(f"{live_server.url}/projects/flood/annotate/")
    assert errors == [] and expert_errors == []

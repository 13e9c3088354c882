"""An expert's hour in a real browser (Debian's chromium, 1366 x 768, keyboard only) on the sample project: each
item's passage and grade buttons are on screen before the key is pressed, the next item comes without a wait
(it was prefetched), the database holds exactly the labels given, and the workspace passes an axe-core audit."""
from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

import pytest

from labeling.models import Label, Lease, Project
from labeling.services.bundle_import import bundle_import
from tests.browser import log_in, needs_chromium
from tests.factories import MembershipFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), needs_chromium]

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "climretrieve"
SCREEN = {"width": 1366, "height": 768}
ITEMS = 20
# Screenshots for a reader, where one asks for them: SCREENSHOT_DIR=/tmp/shots.
SHOTS = os.environ.get("SCREENSHOT_DIR")


def _inside(box: dict | None) -> bool:
    return box is not None and box["x"] >= 0 and box["y"] >= 0 and box["x"] + box["width"] <= SCREEN["width"] \
        and box["y"] + box["height"] <= SCREEN["height"]


def _expert_on_the_sample(browser, live_server):
    """The sample project (sequential queue), an expert of it, and their browser page on its workspace."""
    bundle_import(path=SAMPLE, project_slug="climretrieve")
    project = Project.objects.get(slug="climretrieve")
    project.queue_mix = {"sequential": 100}
    project.save()
    expert = UserFactory(username="erin")
    MembershipFactory(project=project, user=expert, role="expert")
    page, errors = log_in(browser, live_server, "erin", viewport=SCREEN)
    page.goto(f"{live_server.url}/projects/{project.slug}/annotate/")
    return expert, page, errors


def test_an_expert_labels_twenty_sample_items_by_keyboard_with_each_passage_on_screen(browser, live_server):
    expert, page, errors = _expert_on_the_sample(browser, live_server)
    grades = [str(i % 4) for i in range(ITEMS)]
    shown, waits, longest = [], [], 0
    for i, key in enumerate(grades):
        item = page.locator("#ws-current .ws-item")
        pair = item.get_attribute("data-pair")
        shown.append(int(pair))
        passage = item.locator(".ws-passage")
        if SHOTS and i == 0:
            Path(SHOTS).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=f"{SHOTS}/workspace.png")
        text = passage.inner_text()
        longest = max(longest, len(text))
        # The passage's first line, and every grade button, inside the window: nothing to scroll to.
        first_line = passage.bounding_box()
        assert _inside({**first_line, "height": 24}), (i, first_line)
        buttons = item.locator("button[name=grade]")
        assert buttons.count() == 4
        for b in range(buttons.count()):
            assert _inside(buttons.nth(b).bounding_box()), (i, b, buttons.nth(b).bounding_box())
        if len(text) <= 1500:  # the whole passage shows without scrolling its box
            sizes = passage.evaluate("box => [box.scrollHeight, box.clientHeight]")
            assert sizes[0] <= sizes[1] + 1, (i, len(text), sizes)
        start = time.perf_counter()
        page.keyboard.press(key)
        page.wait_for_selector(f"#ws-current .ws-item:not([data-pair='{pair}'])", timeout=10_000)
        waits.append(time.perf_counter() - start)
    median_ms = statistics.median(waits) * 1000
    print(f"\nmedian time between items: {median_ms:.0f} ms over {ITEMS} items (longest passage {longest} chars)")

    # The labels went in the background: once the last answer is in (the counter says so), the database holds
    # exactly what was pressed.
    page.wait_for_selector(f"[data-count=done-today]:text-is('{ITEMS}')", timeout=10_000)
    labels = list(Label.objects.filter(annotator=expert).order_by("id").values_list("pair_id", "grade"))
    assert labels == [(pair, int(key)) for pair, key in zip(shown, grades)]
    assert len(set(shown)) == ITEMS
    # Each label's time counts from when its item was on screen, not from when it was prefetched.
    spent = Label.objects.filter(annotator=expert).values_list("time_spent_seconds", flat=True)
    assert all(seconds is not None and seconds < 30 for seconds in spent)
    # Held now: the item on screen and the one prefetched after it.
    assert Lease.objects.filter(annotator=expert, skipped=False).count() == 2

    page.keyboard.press("f")
    page.wait_for_selector("[data-testid=session-summary]")
    assert page.locator("[data-count=session-items]").inner_text() == str(ITEMS)
    assert errors == []


def test_the_workspace_passes_an_axe_audit_and_the_definition_folds_by_key(browser, live_server):
    from axe_playwright_python.sync_playwright import Axe

    _, page, errors = _expert_on_the_sample(browser, live_server)
    aside = page.locator("#ws-current .ws-definition")
    assert "collapsed" in aside.get_attribute("class")
    page.keyboard.press("d")
    assert "collapsed" not in aside.get_attribute("class")
    assert aside.locator(".ws-definition-toggle").get_attribute("aria-expanded") == "true"
    # Opened for this question: the next item of the same question shows it opened too (remembered).
    query = page.locator("#ws-current .ws-grid").get_attribute("data-query")
    pair = page.locator("#ws-current .ws-item").get_attribute("data-pair")
    page.keyboard.press("0")
    page.wait_for_selector(f"#ws-current .ws-item:not([data-pair='{pair}'])")
    if page.locator("#ws-current .ws-grid").get_attribute("data-query") == query:
        assert "collapsed" not in page.locator("#ws-current .ws-definition").get_attribute("class")

    results = Axe().run(page)
    serious = [v for v in results.response["violations"] if v["impact"] in ("serious", "critical")]
    assert serious == [], "\n".join(
        f"{v['id']} ({v['impact']}): {v['help']} -> {[n['target'] for n in v['nodes']][:5]}" for v in serious)
    # Every grade button has a name a screen reader says.
    for button in page.locator("#ws-current button[name=grade]").all():
        assert button.get_attribute("aria-keyshortcuts") and button.inner_text().strip()
    assert errors == []

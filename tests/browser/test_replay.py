"""A replay from the page, as a person does it (#50), on the sample project that `make demo` loads (ClimRetrieve with
every pair in the pool: 7,136 pairs, 595 reference grades, all relevant; its imported judges scored only those 595),
with a real Celery worker, at 1366 x 768: the admin opens the Replay page, chooses two of the imported judges, the
default mixes, a small size and the TREC truth (6,541 pairs have no reference grade), starts it; the worker replays
it; the page follows it to done and shows the summary table first, then the curves, and the notes about the partial
judges. An expert of the project cannot open the page and is not shown its tab. No script error, no policy
violation."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from labeling.models import Project, ReplayJob
from labeling.services.bundle_import import bundle_import
from tests.browser import log_in, needs_chromium
from tests.browser.test_csp import RECORD_VIOLATIONS
from tests.factories import MembershipFactory, UserFactory
from tests.scoring_fixtures import SAMPLE

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True), needs_chromium]

VIEWPORT = {"width": 1366, "height": 768}
JUDGES = ("llama3-tok-generic", "gpt4-ask-generic")


def test_an_admin_replays_the_sample_from_the_page_and_an_expert_cannot(worker, browser, live_server):
    bundle_import(path=SAMPLE, project_slug="climretrieve", all_pairs=True)
    project = Project.objects.get(slug="climretrieve")
    admin, expert = UserFactory(username="ada"), UserFactory(username="eve")
    MembershipFactory(project=project, user=admin, role="admin")
    MembershipFactory(project=project, user=expert, role="expert")
    base = f"{live_server.url}/projects/{project.slug}"

    page, errors = log_in(browser, live_server, "ada", init_script=RECORD_VIOLATIONS, viewport=VIEWPORT)
    page.goto(f"{base}/")
    page.locator('a.project-tab[data-tab="replay"]').click()
    form = page.locator("[data-testid=replay-start]")
    expect(form.locator('[data-scored="llama3-tok-generic"]')).to_have_text("scored 595 of 7,136 pool pairs "
                                                                             "(partial: the report says what it "
                                                                             "leaves out)")
    for name in JUDGES:
        form.locator(f'input[name=judges][value="{name}"]').check()
    expect(form.locator("input[name=mixes]:checked")).to_have_count(2)  # the defaults
    form.locator("#replay-batch").fill("25")
    form.locator("#replay-rounds").fill("4")
    form.locator("#replay-seeds").fill("2")
    form.get_by_label("Reference grades, unjudged pairs counted irrelevant").check()
    form.locator("button[type=submit]").click()

    job = ReplayJob.objects.get(project=project)
    page.wait_for_url(f"{base}/replay/{job.id}/")
    expect(page.locator("[data-status]")).to_have_text("done", timeout=60_000)
    job.refresh_from_db()
    assert job.parameters["truth"] == "trec" and job.total == 8 and job.done == 8

    notes = page.locator("[data-testid=replay-notes]")
    expect(notes).to_contain_text("6,541 of the 7,136 pairs have no reference grade and count as irrelevant")
    for name in JUDGES:
        expect(notes).to_contain_text(f"Judge '{name}' scored 595 of the 7,136 pairs")
    rows = page.locator("[data-testid=replay-summary-table] tbody tr")
    expect(rows).to_have_count(4)
    expect(rows.first.locator("td").nth(0)).to_have_text("uncertain 80 / random 20")
    expect(rows.first.locator("td").nth(1)).to_have_text(min(JUDGES))  # the form sends the judges by name
    # Every judged pair is relevant: the judge's AUROC on the rest is undefined, and the page says so.
    expect(page.locator('[data-measure="auroc"] [data-empty]')).to_contain_text("the truth has one class only")
    expect(page.locator('[data-measure="verified_recall"] svg[data-chart]')).to_have_count(2)
    summary_top = page.locator("[data-testid=replay-summary]").bounding_box()["y"]
    assert summary_top < page.locator("[data-testid=replay-curves]").bounding_box()["y"]
    assert errors == [] and page.evaluate("window.__violations") == []
    page.close()

    other, _ = log_in(browser, live_server, "eve", viewport=VIEWPORT)
    other.goto(f"{base}/")
    expect(other.locator('a.project-tab[data-tab="annotate"]')).to_have_count(1)
    expect(other.locator('a.project-tab[data-tab="replay"]')).to_have_count(0)
    response = other.goto(f"{base}/replay/{job.id}/")
    assert response.status == 403
    expect(other.locator("[data-testid=forbidden-reason]")).to_contain_text("Only a project admin can replay the loop")
    other.close()

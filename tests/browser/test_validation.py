"""The Validation page in a real browser (Debian's chromium driven by playwright) on the ClimRetrieve sample: the judge
that scored only part of the gold pairs is marked partial where a reader compares the judges, every metric line says
what it measures, and a gold set of relevant pairs only sends the reader to the all-pairs view in one click.
A screenshot is saved as /tmp/validation-partial.png for a person to look at."""
from __future__ import annotations

from pathlib import Path

import pytest

from labeling.models import Membership, Project
from labeling.services.bundle_import import bundle_import
from labeling.services.validation import validation_refresh, validation_request
from tests.browser import log_in, needs_chromium
from tests.factories import MembershipFactory, UserFactory
from tests.scoring_fixtures import SAMPLE

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), needs_chromium]

SCREENSHOTS = Path("/tmp")


def test_the_partial_judge_is_marked_and_the_all_pairs_view_is_one_click_away(browser, live_server):
    bundle_import(path=SAMPLE, project_slug="cr")
    project = Project.objects.get(slug="cr")
    validation_request(project=project)
    validation_refresh(project_id=project.id)
    MembershipFactory(project=project, user=UserFactory(username="reader"), role=Membership.Role.VIEWER)
    page, errors = log_in(browser, live_server, "reader", viewport={"width": 1366, "height": 768})
    page.goto(f"{live_server.url}/projects/cr/validation/")

    # gpt35 judged 578 of the 595 gold pairs; the other judges all of them.
    mark = page.locator("th[data-judge='gpt35-ask-generic'] [data-partial]")
    assert mark.is_visible() and mark.inner_text() == "partial (97\u00a0%)"
    assert "578 of the 595 gold pairs; 17 missing" in mark.get_attribute("title")
    assert page.locator("th[data-judge='gpt4-ask-generic'] [data-partial]").count() == 0
    assert page.locator("td[data-metric='brier'] [data-best]").count() == 1
    assert page.locator("td[data-metric='brier']").nth(1).locator("[data-best]").count() == 0  # gpt35's column
    explain = page.locator("tr:has(td[data-metric='brier']) [data-explain]")
    assert explain.is_visible() and "lower is better" in explain.inner_text()

    # Every gold pair of the sample is relevant.
    note = page.locator("[data-few-non-relevant]")
    assert note.is_visible() and "0 of the 595 gold pairs are not relevant, fewer than 5%" in note.inner_text()
    page.screenshot(path=str(SCREENSHOTS / "validation-partial.png"), full_page=True)
    note.locator("[data-all-pairs-link]").click()
    page.wait_for_url("**all_pairs=1**")
    assert page.locator("input[name=all_pairs]").is_checked()
    assert page.locator("[data-options-applied]").is_visible()
    assert errors == []
    page.close()

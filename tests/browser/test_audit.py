"""The Robustness pages in a real browser (Debian's chromium driven by playwright): a judge audited by MiniLM shows
both reports with their curves; an admin estimates an audit, starts it, and its page follows the worker's progress
until the report is swapped in; a run's page shows its multi-condition report. No script error, no policy
violation. Screenshots are saved as /tmp/robustness-*.png for a person to look at."""
from __future__ import annotations

from pathlib import Path

import pytest
from django.urls import reverse

from labeling.models import AuditJob
from labeling.services.audit import audit_run
from tests.audit_fixtures import MULTICONDITION, PERTURBATION, audited_once, members, multicondition_project, oracle_run
from tests.browser import log_in, needs_chromium
from tests.browser.test_csp import RECORD_VIOLATIONS
from tests.scoring_fixtures import minilm_judge
from tests.url_matrix import ADMIN

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), needs_chromium]

SCREENSHOTS = Path("/tmp")


def test_a_judge_is_estimated_audited_and_its_reports_read(browser, live_server, private_broker):
    project = multicondition_project()
    judge = minilm_judge(project)
    admin = members(project)[ADMIN]
    audited_once(project, judge, AuditJob.Kind.PERTURBATION, PERTURBATION, admin)
    audited_once(project, judge, AuditJob.Kind.MULTICONDITION, MULTICONDITION, admin)
    page, errors = log_in(browser, live_server, admin.username, init_script=RECORD_VIOLATIONS)
    page.set_viewport_size({"width": 1280, "height": 900})

    page.goto(f"{live_server.url}{reverse('labeling:judges', args=[project.slug])}")
    page.locator("tr[data-judge='minilm'] a[data-robustness]").click()
    assert page.locator("[data-report='perturbation'] tr[data-test]").count() == 6
    assert page.locator("[data-report='multicondition'] svg[data-chart] polyline").count() >= 4
    page.screenshot(path=str(SCREENSHOTS / "robustness-judge.png"), full_page=True)

    card = page.locator("#audit-perturbation")
    card.locator("input[name='perturbation-sample']").fill("3")
    for test in ("length", "stuffing", "definition", "consistency"):
        card.locator(f"input[name='perturbation-tests'][value='{test}']").uncheck()
    card.locator("button:has-text('Estimate')").click()
    page.wait_for_selector("[data-estimate='perturbation']")
    assert page.evaluate("window.__violations") == []  # the swap, too
    probes = int(page.locator("[data-estimate='perturbation'] [data-probes]").inner_text())
    assert probes == 9  # 3 pairs x (the pair, an irrelevant passage as it is, and with the injected sentence)
    page.locator("#audit-perturbation").screenshot(path=str(SCREENSHOTS / "robustness-estimate.png"))

    page.locator("[data-estimate='perturbation'] button:has-text('Start audit')").click()
    page.wait_for_selector("[data-waiting]")
    job = AuditJob.objects.latest("id")
    assert (job.total, job.parameters["tests"]) == (probes, ["injection"])
    page.screenshot(path=str(SCREENSHOTS / "robustness-audit-running.png"), full_page=True)
    # No worker listens on this test's broker: the worker's function runs here, and the polling page catches up.
    audit_run(job_id=job.id)
    page.wait_for_selector("#audit-body [data-perturbation-report]", timeout=15_000)
    assert page.locator("#audit-body[hx-trigger]").count() == 0
    page.screenshot(path=str(SCREENSHOTS / "robustness-audit-done.png"), full_page=True)

    run = oracle_run(project)
    page.goto(f"{live_server.url}{reverse('labeling:systems', args=[project.slug])}")
    page.locator("tr[data-run='oracle'] a[data-robustness]").click()
    page.wait_for_url(f"**{reverse('labeling:run_robustness', args=[project.slug, run.id])}")
    assert page.locator("[data-task-verdict]").count() == 4
    page.screenshot(path=str(SCREENSHOTS / "robustness-run.png"), full_page=True)
    assert page.evaluate("window.__violations") == []
    assert errors == [], errors
    page.close()

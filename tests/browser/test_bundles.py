"""Bringing a project in through the browser (Debian's chromium driven by playwright) with a real Celery worker: a
staff user creates a project on the project list, uploads the sample bundle as a zip and, while the page polls the
job, sees it done with the counts its files hold (counted here from the files); an upload with one bad line shows
the line as `file:line` and stores nothing. Screenshots are saved as /tmp/bundle-*.png for a person to look at."""
from __future__ import annotations

from pathlib import Path

import pytest

from labeling.models import Judgment, Membership, Pair, Passage, Project, Query
from tests.browser import log_in, needs_chromium
from tests.factories import UserFactory
from tests.scoring_fixtures import SAMPLE
from tests.services.test_bundle_upload import _lines, sample_counts, zip_folder

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True), needs_chromium]

SCREENSHOTS = Path("/tmp")
# The sample imported with --all-pairs (the demo's way) and its judgments take a worker a few seconds on SQLite.
DONE_MS = 120_000


def _rows(project: Project) -> dict[str, int]:
    return {"queries": Query.objects.filter(project=project).count(),
            "passages": Passage.objects.filter(project=project).count(),
            "pairs": Pair.objects.filter(project=project).count(),
            "judgments": Judgment.objects.filter(pair__project=project).count()}


def test_staff_create_a_project_upload_the_sample_and_see_a_bad_line(browser, live_server, worker, tmp_path,
                                                                     settings):
    settings.MEDIA_ROOT = tmp_path / "media"
    UserFactory(username="staff", is_staff=True)
    page, errors = log_in(browser, live_server, "staff")
    page.set_viewport_size({"width": 1280, "height": 900})

    page.fill("#project-create input[name=name]", "ClimRetrieve")
    page.fill("#project-create input[name=slug]", "climretrieve")
    page.screenshot(path=str(SCREENSHOTS / "bundle-project-list.png"), full_page=True)
    page.click("#project-create button[type=submit]")
    page.wait_for_url(f"{live_server.url}/projects/climretrieve/bundles/")
    project = Project.objects.get(slug="climretrieve")
    assert Membership.objects.get(project=project, user__username="staff").role == Membership.Role.ADMIN
    assert page.locator("[data-no-imports]").count() == 1

    good = tmp_path / "climretrieve.zip"
    good.write_bytes(zip_folder(SAMPLE, top="climretrieve"))
    page.set_input_files("#bundle-upload input[name=file]", str(good))
    page.check("#bundle-upload input[name=all_pairs]")
    page.screenshot(path=str(SCREENSHOTS / "bundle-upload-form.png"), full_page=True)
    page.click("#bundle-upload button[type=submit]")
    page.wait_for_selector("tr[data-status=done] [data-written]", timeout=DONE_MS)

    counts = sample_counts()
    expected = {"queries": counts["queries"], "passages": counts["passages"],
                "pairs": counts["queries"] * counts["passages"], "judgments": counts["judgments"]}
    for kind, count in expected.items():
        assert page.locator(f"#project-counts [data-count={kind}]").inner_text() == str(count)
    assert page.locator("[data-written-kind=queries]").inner_text() == str(counts["queries"])
    assert page.locator("[data-written-kind='reference grades']").inner_text() == str(counts["reference grades"])
    assert _rows(project) == expected
    page.screenshot(path=str(SCREENSHOTS / "bundle-job-done.png"), full_page=True)

    judgments = _lines(SAMPLE / "judgments.jsonl")
    judgments[41] = judgments[41].replace('"guess": "yes"', '"guess": "maybe"')  # line 42: neither yes nor no
    assert '"maybe"' in judgments[41]
    bad = tmp_path / "climretrieve-v2.zip"
    bad.write_bytes(zip_folder(SAMPLE, replace={"judgments.jsonl": "\n".join(judgments) + "\n"}))
    page.set_input_files("#bundle-upload input[name=file]", str(bad))
    page.click("#bundle-upload button[type=submit]")
    page.wait_for_selector("tr[data-status=failed] [data-problems]", timeout=DONE_MS)
    problems = page.locator("tr[data-status=failed] [data-problem]").all_inner_texts()
    assert problems and problems[0].startswith("judgments.jsonl:42: ")
    assert _rows(project) == expected  # nothing stored
    page.locator("tr[data-status=failed]").scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "bundle-job-failed.png"), full_page=True)
    assert errors == []
    page.close()

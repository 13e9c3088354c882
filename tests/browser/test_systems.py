"""The Systems page in a real browser (Debian's chromium driven by playwright): the ClimRetrieve sample with three
BM25 runs, its published LLM judgments and the analysts' grades shows the runs, the leaderboards, the agreement
table and the scatter plots; an admin previews a pooling and adds it; a project without runs says what to do.
Screenshots of both pages are saved as /tmp/systems-*.png for a person to look at."""
from __future__ import annotations

from pathlib import Path

import pytest

from labeling.models import Membership, Pair, PairSource, Project, RetrievalJob
from labeling.services.bundle_import import bundle_import
from labeling.services.labels import label_submit
from labeling.services.retrieval import retrieval_create, retrieval_run
from tests.browser import log_in, needs_chromium
from tests.factories import LeaseFactory, MembershipFactory, ProjectFactory, QueryFactory, UserFactory
from tests.scoring_fixtures import SAMPLE

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), needs_chromium]

SCREENSHOTS = Path("/tmp")
RUNS = {"bm25": {}, "bm25-definition": {"use_definition": True}, "bm25-k1-0.9": {"k1": 0.9, "b": 0.4}}


def _sample_with_runs() -> Project:
    bundle_import(path=SAMPLE, project_slug="cr")
    project = Project.objects.get(slug="cr")
    for name, options in RUNS.items():
        job = retrieval_create(project=project, retriever="bm25", name=name, **options)
        assert retrieval_run(job_id=job.id).status == "done"
    expert = UserFactory(username="expert")
    MembershipFactory(project=project, user=expert, role=Membership.Role.EXPERT)
    for pair in Pair.objects.filter(project=project).order_by("id")[:5]:
        LeaseFactory(pair=pair, annotator=expert)  # the queue gave it to them
        label_submit(project=project, annotator=expert, pair_id=pair.id, grade=1)
    return project


def _admin(project: Project, username: str = "boss") -> str:
    MembershipFactory(project=project, user=UserFactory(username=username), role=Membership.Role.ADMIN)
    return username


@pytest.mark.worker
def test_a_project_with_runs_shows_its_leaderboard_and_pools_from_runs(browser, live_server, worker):
    project = _sample_with_runs()
    page, errors = log_in(browser, live_server, _admin(project))
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{live_server.url}/projects/cr/systems/")
    assert [page.locator(f"#runs tr[data-run='{name}']").count() for name in RUNS] == [1, 1, 1]
    human = page.locator("table[data-leaderboard='human']")
    assert human.locator("tbody tr").count() == 3
    # gpt35 judged 578 of the sample's 595 pairs, all of which the runs retrieve; 74 of the 76 in their top 10,
    # which nDCG@10 (the measure the board is ordered by) reads. It is marked, its board is not ranked, and it is
    # left out of the agreement and the plots until it is included.
    mark = page.locator("table[data-leaderboard='judge:gpt35-ask-generic'] caption [data-partial]")
    assert mark.is_visible() and mark.inner_text() == "partial (97\u00a0%)"
    assert "74 of the 76 pool pairs the runs retrieve in their top 10; 2 missing" in mark.get_attribute("title")
    assert page.locator("table[data-leaderboard='judge:gpt4-ask-generic'] [data-partial]").count() == 0
    assert page.locator("[data-left-out]").is_visible()
    assert page.locator("#agreement tbody tr").count() == 6  # human vs each of the 3 complete judges, nDCG@10 and AP
    assert page.locator("[data-scatter] svg circle").count() == 9  # 3 runs in each complete judge's plot
    page.locator("input[name=include_partial]").check()
    page.locator("form.source-choice button:has-text('Show')").click()
    page.wait_for_url("**include_partial=true**")
    assert page.locator("#agreement tbody tr").count() == 8  # human vs each of the 4 judges, nDCG@10 and AP
    assert page.locator("[data-scatter] svg circle").count() == 12  # 3 runs in each judge's plot
    assert page.locator("table[data-leaderboard='judge:gpt35-ask-generic'] caption [data-partial]").is_visible()
    page.screenshot(path=str(SCREENSHOTS / "systems-with-runs.png"), full_page=True)

    # The leaderboard comes first, on the first screen; the forms are folded below it, and open on a click.
    top = page.locator("#evaluation").bounding_box()["y"]
    assert top < 900
    folds = ("#upload", "#retrieve", "#pool", "#beyond-pool", "#query-generation")
    for fold in folds:
        assert page.locator(fold).bounding_box()["y"] > top, fold
        assert page.locator(fold).evaluate("el => el.tagName + ':' + el.open") == "DETAILS:false", fold
    assert not page.locator("#retrieve select[name=retriever]").is_visible()

    # What a dense run would take here, before anyone starts it (a worker loads the encoder and times it); nothing
    # starts.
    page.locator("#retrieve summary").click()
    page.locator("#retrieve select[name=retriever]").select_option("dense")
    page.locator("#retrieve button[name=estimate]").click()
    shown = page.locator("[data-retrieval-estimate]")
    shown.wait_for(timeout=60_000)
    passages = project.passages.count()
    assert shown.inner_text().startswith(f"dense over {passages} passages and ")
    text = shown.inner_text()
    assert f"{passages} passages to embed" in text and "encoding timed on 32 passages" in text
    assert RetrievalJob.objects.filter(project=project, retriever="dense").count() == 0
    shown.scroll_into_view_if_needed()
    page.locator("#retrieve").screenshot(path=str(SCREENSHOTS / "systems-retrieval-estimate.png"))

    pairs_before = Pair.objects.filter(project=project).count()
    page.locator("#pool summary").click()
    page.locator("#pool input[name=runs][value='bm25']").check()
    page.fill("#pool input[name=depth]", "20")
    page.locator("#pool button:has-text('Preview')").click()
    page.wait_for_selector("#pool-preview [data-pool-preview]")
    new_pairs = int(page.locator("[data-new-pairs]").inner_text())
    assert new_pairs > 0
    page.screenshot(path=str(SCREENSHOTS / "systems-pool-preview.png"), full_page=False,
                    clip={"x": 0, "y": 0, "width": 1280, "height": 900})
    assert Pair.objects.filter(project=project).count() == pairs_before  # a preview writes nothing
    page.locator("#pool-preview button:has-text('Add to the pool')").click()
    page.wait_for_selector(".message.success")
    assert Pair.objects.filter(project=project).count() == pairs_before + new_pairs
    assert PairSource.objects.filter(pair__project=project, system="bm25").count() > 0
    assert errors == []
    page.close()


def test_a_project_without_runs_says_how_to_add_one(browser, live_server):
    project = ProjectFactory(slug="fresh", name="Fresh project")
    QueryFactory(project=project)
    page, errors = log_in(browser, live_server, _admin(project))
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{live_server.url}/projects/fresh/systems/")
    empty = page.locator("[data-empty-state]")
    assert "manage.py import_run" in empty.inner_text() and "manage.py retrieve" in empty.inner_text()
    # With no run yet, the two ways to get one are open.
    assert page.locator("#upload form").is_visible() and page.locator("#retrieve form").is_visible()
    page.screenshot(path=str(SCREENSHOTS / "systems-empty.png"), full_page=True)
    assert errors == []
    page.close()

"""The Systems page and its forms through the test client: who sees what (blind first for the evaluation), run
uploads (problems by file and line, the size limit before the body is read, CSRF still checked), retrievers
started, polled and cancelled, runs deleted, pooling previewed then added, the leaderboard's numbers against
pytrec_eval and the agreement against scipy, untrusted names escaped; and the scatter plot's geometry."""
from __future__ import annotations

import gzip
import re
from html import unescape

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client, override_settings
from django.urls import reverse
from scipy import stats

from labeling.charts import scatter_chart
from labeling.models import Estimate, Judgment, Pair, PairSource, Passage, Project, RetrievalJob, Run, RunEntry
from labeling.services.bundle_import import bundle_import
from labeling.services.estimates import estimate_run
from labeling.services.retrieval import retrieval_create, retrieval_run
from tests.factories import PassageFactory, UserFactory
from tests.html_audit import audit_html
from tests.scoring_fixtures import SAMPLE, sample_ndcg10
from tests.selectors.test_systems import DEEP_DOCS, RUN_NAMES, coverage_project
from tests.url_matrix import ADMIN, EXPERT, VIEWER, build_world
from tests.views.test_xss import ESCAPED, PAYLOAD, RAW

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    return build_world()


def page(world) -> str:
    return reverse("labeling:systems", args=[world.project.slug])


def trec(world, passages: list[Passage], tag: str = "mine") -> bytes:
    """A TREC run ranking `passages` for the world's query, best first."""
    return "".join(f"{world.query.external_id} Q0 {p.external_id} {rank} {10 - rank} {tag}\n"
                   for rank, p in enumerate(passages, 1)).encode()


def upload(client, world, name: str, filename: str, content: bytes, **extra):
    file = SimpleUploadedFile(filename, content, content_type="text/plain")
    return client.post(reverse("labeling:run_upload", args=[world.project.slug]),
                       {"name": name, "description": "", "file": file}, **extra)


# --- Who sees what -----------------------------------------------------------------------------------------

def test_admins_see_runs_jobs_forms_and_the_leaderboard(client, world):
    client.force_login(world.users[ADMIN])
    html = client.get(page(world)).content.decode()
    assert 'data-run="run-a"' in html and f'data-retrieval-job="{world.retrieval_job.id}"' in html
    assert 'hx-trigger="every 2s"' in html  # the running job is polled
    for name in ("run_upload", "retrieval_start", "pool_preview"):
        assert reverse(f"labeling:{name}", args=[world.project.slug]) in html
    assert reverse("labeling:run_delete", args=[world.project.slug, world.run.id]) in html
    assert reverse("labeling:retrieval_cancel", args=[world.project.slug, world.retrieval_job.id]) in html
    assert 'data-leaderboard="human"' in html and 'data-leaderboard="judge:judge-a"' in html


def test_viewers_see_the_leaderboard_but_no_form(client, world):
    client.force_login(world.users[VIEWER])
    html = client.get(page(world)).content.decode()
    assert 'data-run="run-a"' in html and 'data-leaderboard="human"' in html
    assert html.count('method="post"') == 1 and 'action="/accounts/logout/"' in html  # logging out only
    assert "Delete" not in html and "Cancel" not in html


def test_experts_see_the_runs_but_no_score_from_labels_or_judges(client, world):
    # The human qrels are other experts' labels and reference grades, the judge's are P of items they have not
    # labelled: blind first hides both, as it hides the validation reports.
    client.force_login(world.users[EXPERT])
    html = client.get(page(world)).content.decode()
    assert 'data-run="run-a"' in html and "data-blind" in html
    assert "data-leaderboard" not in html and "data-scatter" not in html and 'id="agreement"' not in html


def test_the_project_page_links_to_the_systems_page(client, world):
    client.force_login(world.users[VIEWER])
    html = client.get(reverse("labeling:project_detail", args=[world.project.slug])).content.decode()
    assert f'href="{page(world)}"' in html


# --- Uploads ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("spooled", [False, True], ids=["in memory", "temporary file"])
def test_an_uploaded_run_is_stored_under_its_name(client, world, spooled):
    client.force_login(world.users[ADMIN])
    passages = list(Passage.objects.filter(project=world.project).order_by("id"))
    # Above FILE_UPLOAD_MAX_MEMORY_SIZE Django writes the upload to a temporary file, which is linked, not copied.
    with override_settings(FILE_UPLOAD_MAX_MEMORY_SIZE=10 if spooled else 2_621_440):
        response = upload(client, world, "mine", "mine.trec.gz", gzip.compress(trec(world, passages[::-1])))
    assert response.status_code == 302
    run = Run.objects.get(project=world.project, name="mine")
    assert (run.kind, run.source, run.entries, run.queries, run.parameters) == ("imported", "mine.trec.gz", 3, 1,
                                                                              {"tag": "mine"})
    ranked = RunEntry.objects.filter(run=run).order_by("rank").values_list("passage_id", flat=True)
    assert list(ranked) == [p.id for p in passages[::-1]]


def test_a_bad_run_file_lists_its_problems_by_file_and_line(client, world):
    client.force_login(world.users[ADMIN])
    passage = Passage.objects.filter(project=world.project).first()
    content = (f"{world.query.external_id} Q0 {passage.external_id} 1 2.0 mine\n"
               f"nope Q0 {passage.external_id} 2 1.0 mine\n"
               f"{world.query.external_id} Q0 {passage.external_id} 3\n").encode()
    response = upload(client, world, "bad", "bad.trec", content)
    assert response.status_code == 400
    problems = [unescape(re.sub(r"<[^>]+>", "", li))
                for li in re.findall(r'<li class="mono">(.*?)</li>', response.content.decode())]
    assert problems == ["bad.trec:2: unknown query 'nope'",
                        "bad.trec:3: expected 6 columns (qid Q0 docid rank score tag), got 4"]
    assert not Run.objects.filter(name="bad").exists()


@override_settings(RUN_UPLOAD_MAX_BYTES=1000)
def test_an_upload_over_the_limit_is_refused_unread_and_a_small_one_still_needs_the_csrf_token(world):
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.users[ADMIN])
    passages = list(Passage.objects.filter(project=world.project))
    big = upload(client, world, "big", "big.trec", b"x" * 2000)
    assert big.status_code == 413
    assert "this server takes run files of up to" in big.content.decode() and "manage.py import_run" in (
        big.content.decode())
    # Past the size check, the CSRF check the view took over from the middleware refuses a forged post.
    assert upload(client, world, "small", "small.trec", trec(world, passages)).status_code == 403
    assert not Run.objects.filter(name__in=["big", "small"]).exists()


# --- Retrieval jobs --------------------------------------------------------------------------------------

def test_a_started_retriever_is_polled_until_done_and_its_run_is_listed(client, world,
                                                                        django_capture_on_commit_callbacks):
    client.force_login(world.users[ADMIN])
    cancel = reverse("labeling:retrieval_cancel", args=[world.project.slug, world.retrieval_job.id])
    assert client.post(cancel).status_code == 302
    assert RetrievalJob.objects.get(id=world.retrieval_job.id).status == "cancelled"
    with django_capture_on_commit_callbacks() as queued:
        response = client.post(reverse("labeling:retrieval_start", args=[world.project.slug]),
                               {"retriever": "bm25", "name": "bm25", "depth": 2, "first_depth": 200, "keep": 60})
    assert response.status_code == 302 and len(queued) == 1
    job = RetrievalJob.objects.get(project=world.project, name="bm25")
    assert (job.status, job.parameters) == ("pending", {"depth": 2, "use_definition": False})
    assert 'hx-trigger="every 2s"' in client.get(page(world)).content.decode()

    retrieval_run(job_id=job.id)
    poll = client.get(page(world), headers={"HX-Request": "true"})
    body = poll.content.decode()
    assert "<html" not in body and "every 2s" not in body and f'data-retrieval-job="{job.id}"' in body
    assert poll["HX-Refresh"] == "true"  # the page reloads once, to list and score the new run
    assert 'data-run="bm25"' in client.get(page(world)).content.decode()


def test_the_estimate_button_says_what_the_run_would_take_here_and_starts_nothing(client, world):
    client.force_login(world.users[ADMIN])
    jobs = RetrievalJob.objects.count()
    response = client.post(reverse("labeling:retrieval_start", args=[world.project.slug]),
                           {"retriever": "bm25", "name": "", "depth": 5, "first_depth": 50, "keep": 20,
                            "estimate": "1"})
    assert response.status_code == 200 and RetrievalJob.objects.count() == jobs
    estimate = Estimate.objects.get(kind="retrieval")
    assert f'data-estimate-job="{estimate.id}"' in response.content.decode() and estimate.status == "pending"
    estimate_run(estimate_id=estimate.id)  # what the worker does with the task
    card = client.get(reverse("labeling:estimate", args=[world.project.slug, estimate.id]),
                      headers={"HX-Request": "true"}).content.decode()
    shown = re.search(r"<p class=\"small\" data-retrieval-estimate>(.*?)</p>", card, re.DOTALL).group(1)
    passages = world.project.passages.count()
    assert f"bm25 over {passages} passage" in shown and "BM25 timed on the whole corpus" in shown
    assert re.search(r"about <strong>(&lt; 0.1 s|[\d.]+ s)</strong> here", shown), shown  # labeling.durations
    assert RetrievalJob.objects.count() == jobs


@pytest.mark.parametrize(("retriever", "parameters"), [
    ("bm25", {"depth": 5, "use_definition": False}),
    ("cascade", {"first_depth": 50, "keep": 20, "use_definition": False}),
])
def test_the_form_passes_on_only_the_chosen_retrievers_sizes(client, world, retriever, parameters):
    # The page shows every size; the service refuses a size of another retriever, so the form leaves those out.
    client.force_login(world.users[ADMIN])
    response = client.post(reverse("labeling:retrieval_start", args=[world.project.slug]),
                           {"retriever": retriever, "name": "new", "depth": 5, "first_depth": 50, "keep": 20})
    assert response.status_code == 302
    assert RetrievalJob.objects.get(project=world.project, name="new").parameters == parameters


def test_a_retriever_for_a_taken_name_is_refused_with_the_reason(client, world):
    client.force_login(world.users[ADMIN])
    response = client.post(reverse("labeling:retrieval_start", args=[world.project.slug]),
                           {"retriever": "bm25", "name": "run-a", "depth": 10, "first_depth": 200, "keep": 60})
    assert response.status_code == 400
    assert "has a run named &#x27;run-a&#x27; already" in response.content.decode()


def test_a_failed_job_shows_its_error_to_admins_only(client, world):
    RetrievalJob.objects.filter(id=world.retrieval_job.id).update(status="failed", error="no /srv/models/x",
                                                                 finished_at=world.run.created_at)
    client.force_login(world.users[ADMIN])
    assert "no /srv/models/x" in client.get(page(world)).content.decode()
    client.force_login(world.users[VIEWER])
    html = client.get(page(world)).content.decode()
    assert "no /srv/models/x" not in html and "a project admin sees the reason" in html


# --- Deleting and pooling --------------------------------------------------------------------------------

def test_deleting_a_run_keeps_the_pairs_it_pooled(client, world):
    client.force_login(world.users[ADMIN])
    pairs = Pair.objects.filter(project=world.project).count()
    assert client.post(reverse("labeling:run_delete", args=[world.project.slug, world.run.id])).status_code == 302
    assert not Run.objects.filter(id=world.run.id).exists() and not RunEntry.objects.filter(run_id=world.run.id)
    assert Pair.objects.filter(project=world.project).count() == pairs


def test_pooling_is_previewed_then_added(client, world):
    client.force_login(world.users[ADMIN])
    old = list(Passage.objects.filter(project=world.project).order_by("id"))
    new = [PassageFactory(project=world.project) for _ in range(4)]
    # Top 3 at depth 3: two passages new to the pool and one of the pool's; the fourth new one is below the cut.
    assert upload(client, world, "fresh", "fresh.trec", trec(world, [new[0], old[1], new[1], new[2]])).status_code == 302
    preview_url = reverse("labeling:pool_preview", args=[world.project.slug])
    preview = client.get(preview_url, {"runs": ["fresh"], "depth": 3}, headers={"HX-Request": "true"})
    html = preview.content.decode()
    assert preview.status_code == 200 and "<html" not in html
    assert '<strong data-new-pairs>2</strong>' in html and "<span data-existing>1</span>" in html
    assert "<span data-sources>3</span>" in html  # each of the three pairs gains the run as a source
    assert Pair.objects.filter(project=world.project).count() == 3  # a preview writes nothing

    response = client.post(reverse("labeling:pool_add", args=[world.project.slug]), {"runs": ["fresh"], "depth": 3})
    assert response.status_code == 302
    pooled = set(Pair.objects.filter(project=world.project).values_list("passage_id", flat=True))
    assert pooled == {p.id for p in old} | {new[0].id, new[1].id}
    sources = PairSource.objects.filter(pair__project=world.project, system="fresh")
    assert sorted(sources.values_list("pair__passage_id", "rank")) == sorted(
        [(new[0].id, 1), (old[1].id, 2), (new[1].id, 3)])


def test_a_pool_preview_without_runs_says_what_is_missing(client, world):
    client.force_login(world.users[ADMIN])
    response = client.get(reverse("labeling:pool_preview", args=[world.project.slug]), {"depth": 0},
                          headers={"HX-Request": "true"})
    html = response.content.decode()
    assert response.status_code == 200 and "data-pool-errors" in html
    assert "runs: This field is required." in html and "depth: Ensure this value is greater than or equal to 1" in html


# --- The evaluation against independent references --------------------------------------------------------

def _cells(html: str, source: str) -> dict[str, list[str]]:
    """run -> the texts of its row's cells in the leaderboard of `source`."""
    table = re.search(rf'<table class="data metrics" data-leaderboard="{re.escape(source)}">(.*?)</table>', html,
                      re.DOTALL).group(1)
    rows = {}
    for run, row in re.findall(r'<tr data-run="([^"]+)">(.*?)</tr>', table, re.DOTALL):
        rows[unescape(run)] = [" ".join(re.sub(r"<[^>]+>", " ", cell).split())
                               for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.DOTALL)]
    return rows


def test_the_leaderboard_matches_pytrec_eval_and_the_agreement_matches_scipy(client):
    bundle_import(path=SAMPLE, project_slug="cr")
    project = Project.objects.get(slug="cr")
    runs = {"bm25": {}, "bm25-definition": {"use_definition": True}, "bm25-k1": {"k1": 0.6, "b": 0.3}}
    for name, options in runs.items():
        retrieval_run(job_id=retrieval_create(project=project, retriever="bm25", name=name, **options).id)
    viewer = UserFactory()
    project.memberships.create(user=viewer, role=VIEWER)
    client.force_login(viewer)
    html = client.get(reverse("labeling:systems", args=["cr"]),
                      {"source": ["human", "judge:gpt4-ask-generic"]}).content.decode()

    cells = _cells(html, "human")
    for name in runs:
        expected = sample_ndcg10(project, name)
        assert cells[name][1].split()[0] == f"{expected:.3f}", name

    # Kendall's tau of the two sources' rankings of the runs, from the means the page shows (3 decimals are
    # enough: the three runs' means differ by more).
    judge = _cells(html, "judge:gpt4-ask-generic")
    names = sorted(runs)
    human_means = [float(cells[name][1].split()[0]) for name in names]
    judge_means = [float(judge[name][1].split()[0]) for name in names]
    tau = stats.kendalltau(human_means, judge_means).statistic
    row = re.search(r'data-agreement="human\|judge:gpt4-ask-generic" data-measure="nDCG@10">(.*?)</tr>', html,
                    re.DOTALL).group(1)
    shown = re.search(r'data-coefficient="kendall_tau">([-\d.]+)', row).group(1)
    assert shown == f"{tau:.3f}"
    assert html.count("<circle ") == 3  # the scatter of human against the judge: one point per run


def test_untrusted_run_names_and_descriptions_are_shown_as_text(client, world):
    client.force_login(world.users[ADMIN])
    passages = list(Passage.objects.filter(project=world.project).order_by("id"))
    file = SimpleUploadedFile("x.trec", trec(world, passages[::-1]))
    response = client.post(reverse("labeling:run_upload", args=[world.project.slug]),
                           {"name": PAYLOAD, "description": f"about {PAYLOAD}", "file": file})
    assert response.status_code == 302
    for who in (ADMIN, VIEWER):
        client.force_login(world.users[who])
        # The world's judge has not scored the whole pool: included, so that it has a scatter plot too.
        html = client.get(page(world), {"include_partial": "true"}).content.decode()
        audit = audit_html(html)
        assert audit.inline_scripts == 0 and audit.handlers == [] and audit.script_urls == []
        assert ESCAPED in html and not any(raw in html for raw in RAW)
        assert "data-scatter" in html  # the hostile name is a point of the scatter plot too


# --- The scatter plot's geometry -------------------------------------------------------------------------

def _cross(chart, x: float, y: float) -> float:
    """Twice the signed area of (diagonal start, diagonal end, point): 0 on the diagonal, < 0 above it (svg y
    grows downwards)."""
    (x0, y0), (x1, y1) = (tuple(map(float, end.split(","))) for end in chart.diagonal.split())
    return (x1 - x0) * (y - y0) - (y1 - y0) * (x - x0)


def test_the_scatter_puts_equal_scores_on_the_diagonal_and_a_higher_y_above_it():
    chart = scatter_chart([("same", 0.42, 0.42), ("judge higher", 0.30, 0.55), ("human higher", 0.61, 0.33)])
    same, higher, lower = chart.points
    assert abs(_cross(chart, same.x, same.y)) < 0.5 * (chart.plot_right - chart.plot_left)  # rounding to 0.1 px
    assert _cross(chart, higher.x, higher.y) < 0 < _cross(chart, lower.x, lower.y)
    for point in chart.points:
        assert chart.plot_left <= point.x <= chart.plot_right and chart.plot_top <= point.y <= chart.plot_bottom
    ticks = [float(tick.label) for tick in chart.x_ticks]
    assert ticks[0] <= 0.30 and ticks[-1] >= 0.61 and ticks == sorted(ticks)
    assert [tick.label for tick in chart.x_ticks] == [tick.label for tick in chart.y_ticks]


def test_the_scatter_shortens_long_labels_and_survives_one_value():
    name = "a-very-long-system-name-from-an-imported-run"
    chart = scatter_chart([(name, 0.5, 0.5), ("b", 0.5, 0.5)])
    assert chart.points[0].label == name[:23] + "\u2026" and chart.points[0].title.startswith(name)
    assert chart.plot_left < chart.points[0].x < chart.plot_right  # the range is widened, never empty


def test_agreement_over_two_runs_says_it_cannot_show_anything_instead_of_a_tau(client):
    project = coverage_project(judged=100)
    viewer = UserFactory()
    project.memberships.create(user=viewer, role=VIEWER)
    client.force_login(viewer)
    url = reverse("labeling:systems", args=[project.slug])
    html = client.get(url).content.decode()
    assert html.count('data-coefficient="kendall_tau"') == 2  # four runs: nDCG@10 and AP, each with a tau
    Run.objects.filter(project=project, name__in=RUN_NAMES[2:]).delete()
    html = client.get(url).content.decode()
    assert "data-coefficient" not in html and 'id="agreement"' not in html
    message = re.search(r"<p class=\"empty\" data-too-few-runs>(.*?)</p>", html, re.DOTALL).group(1)
    assert "2 runs: agreement needs 3 or more" in message and "+1 or -1 whatever the sources say" in message


def test_a_partial_judge_is_marked_on_its_leaderboard_and_left_out_until_included(client):
    project = coverage_project(judged=60)
    viewer = UserFactory()
    project.memberships.create(user=viewer, role=VIEWER)
    client.force_login(viewer)
    url = reverse("labeling:systems", args=[project.slug])
    html = client.get(url).content.decode()
    caption = re.search(r'data-leaderboard="judge:llm">\s*<caption>(.*?)</caption>', html, re.DOTALL).group(1)
    # The board is ordered by nDCG@10, which reads the top 10: 60 of its 100 pairs.
    assert 'data-partial="60"' in caption and "60 of the 100 pool pairs the runs retrieve in their top 10" in caption
    assert "data-not-ranked" in caption
    # Not ranked: its runs stay in name order; the human board is ordered by nDCG@10.
    assert list(_cells(html, "judge:llm")) == sorted(RUN_NAMES)
    assert "data-left-out" in html and 'data-agreement="human|judge:llm"' not in html and "data-scatter" not in html
    included = client.get(url, {"include_partial": "true"}).content.decode()
    assert 'data-agreement="human|judge:llm"' in included and "data-scatter" in included
    assert "data-not-ranked" not in included and "Ranked all the same" in included
    means = [float(cells[1].split()[0]) for cells in _cells(included, "judge:llm").values()]
    assert means == sorted(means, reverse=True)
    assert list(_cells(included, "judge:llm")) != sorted(RUN_NAMES)  # so the name order above was not by chance


def test_a_judge_that_scored_the_top_10_is_ranked_on_ndcg_10_and_marked_on_the_measures_that_read_deeper(client):
    """What `make demo` shows while a judge scores the rest of the pool: the runs' top 10 scored first, the board
    is ordered and compared on nDCG@10, and AP, nDCG@100 and R@100 carry the mark with their own coverage."""
    project = coverage_project(judged=100)
    Judgment.objects.filter(judge__project=project, pair__passage__external_id__in=DEEP_DOCS).delete()
    viewer = UserFactory()
    project.memberships.create(user=viewer, role=VIEWER)
    client.force_login(viewer)
    html = client.get(reverse("labeling:systems", args=[project.slug])).content.decode()
    caption = re.search(r'data-leaderboard="judge:llm">\s*<caption>(.*?)</caption>', html, re.DOTALL).group(1)
    assert "data-partial" not in caption and "data-not-ranked" not in caption
    board = re.search(r'data-leaderboard="judge:llm">(.*?)</table>', html, re.DOTALL).group(1)
    marked = dict(re.findall(r'<th class="num"[^>]*data-measure="([^"]+)">[^<]*<br><span class="badge" '
                             r'data-partial="(\d+)"', board))
    assert marked == {"nDCG@100": "83", "AP": "83", "R@100": "83"}  # 100 of the 120 pairs at ranks 1-12
    means = [float(cells[1].split()[0]) for cells in _cells(html, "judge:llm").values()]
    assert means == sorted(means, reverse=True)  # ordered by nDCG@10
    assert 'data-agreement="human|judge:llm" data-measure="nDCG@10"' in html
    assert 'data-agreement="human|judge:llm" data-measure="AP"' not in html
    assert 'data-left-out-measure="AP"' in html and "data-left-out>" not in html

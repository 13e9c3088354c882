"""Re-ranking stages of a retrieval job: a BM25 -> cross-encoder run ranks BM25's top N by sentence-transformers'
CrossEncoder logits through a sigmoid computed here, keeps K, and records the stage; a cancelled job stops between
batches and closes the judge's model; unknown, remote and ensemble judges and a keep over the previous stage's
size are refused by the service, the API and the command; the estimate counts the stage; and on the ClimRetrieve
sample a re-ranked run is evaluated beside plain BM25 on the Systems page, its nDCG@10 as pytrec_eval computes."""
from __future__ import annotations

import io
import re

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient
from sentence_transformers import CrossEncoder
from torch.nn import Identity

from labeling.models import Membership, Project, RetrievalJob, Run, RunEntry
from labeling.selectors.definitions import current_definitions
from labeling.services import retrieval as retrieval_module
from labeling.services import retrieval_rerank
from labeling.services.bundle_import import bundle_import
from labeling.services.judges import judge_create
from labeling.services.retrieval import RetrievalError, retrieval_cancel, retrieval_create, retrieval_run
from labeling.services.retrieval_estimate import retrieval_estimate
from models_llm.types import CROSSENCODER_SEPARATOR
from tests.factories import MembershipFactory, UserFactory
from tests.scoring_fixtures import SAMPLE, minilm_judge, sample_ndcg10, small_scoring_project
from tests.views.test_systems import _cells

pytestmark = pytest.mark.django_db

MAX_LENGTH = 64  # what the judge and the reference read: short enough for quick CPU tests


@pytest.fixture
def project(tmp_path, settings, reranker_root):
    settings.MODEL_ROOTS = [reranker_root]
    return small_scoring_project(tmp_path / "b", queries=3, passages=20)


@pytest.fixture
def reranker(project, reranker_root):
    return judge_create(project=project, name="rerank", backend="crossencoder", model=str(reranker_root / "reranker"),
                        max_length=MAX_LENGTH)


def ranked(run: Run) -> dict[str, list[tuple[str, float]]]:
    """query external id -> (passage external id, score) by rank, as stored."""
    found: dict[str, list[tuple[str, float]]] = {}
    for query, passage, score in RunEntry.objects.filter(run=run).order_by("query_id", "rank").values_list(
            "query__external_id", "passage__external_id", "score"):
        found.setdefault(query, []).append((passage, score))
    return found


def sigmoid_reranked(project: Project, first: Run, folder: str, keep: int) -> dict[str, list[tuple[str, float]]]:
    """`first`'s ranking per query re-ordered by the cross-encoder's logit through a sigmoid (equal P in the
    first run's order), the `keep` best: the judge reads the definition, its separator, the question, and the
    passage's title line and text."""
    model = CrossEncoder(folder, local_files_only=True, device="cpu", max_length=MAX_LENGTH)
    definitions = current_definitions(project.queries.values_list("id", flat=True))
    entries = RunEntry.objects.filter(run=first).select_related("query", "passage").order_by("query_id", "rank")
    by_query: dict[str, list] = {}
    for entry in entries:
        by_query.setdefault(entry.query.external_id, []).append(entry)
    expected = {}
    for query, rows in by_query.items():
        sides = [(f"{definitions[row.query_id].text.strip()}{CROSSENCODER_SEPARATOR}{row.query.text}",
                  f"{row.passage.title.strip()}\n{row.passage.text.strip()}" if row.passage.title.strip()
                  else row.passage.text.strip()) for row in rows]
        logits = model.predict(sides, activation_fn=Identity(), convert_to_numpy=True).astype(np.float64)
        p = 1.0 / (1.0 + np.exp(-logits))
        order = sorted(range(len(rows)), key=lambda i: (-p[i], i))[:keep]
        expected[query] = [(rows[i].passage.external_id, float(p[i])) for i in order]
    return expected


def assert_rankings_equal(stored: dict, expected: dict) -> None:
    assert list(stored) == list(expected)
    for query, rows in expected.items():
        assert [passage for passage, _ in stored[query]] == [passage for passage, _ in rows], query
        np.testing.assert_allclose([s for _, s in stored[query]], [s for _, s in rows], atol=1e-5, rtol=0)


def test_a_bm25_then_cross_encoder_run_ranks_bm25s_top_n_by_the_sigmoid_of_the_logits(project, reranker, reranker_root):
    bm25 = retrieval_run(job_id=retrieval_create(project=project, retriever="bm25", name="bm25", depth=8).id).run
    job = retrieval_create(project=project, retriever="bm25", name="bm25>ce", depth=8,
                           rerank=[{"judge": "rerank", "keep": 5}])
    assert job.parameters["rerank"] == [{"judge": "rerank", "judge_id": reranker.id, "backend": "crossencoder",
                                         "keep": 5}]
    done = retrieval_run(job_id=job.id)
    assert done.status == "done", done.error
    run = done.run
    assert_rankings_equal(ranked(run), sigmoid_reranked(project, bm25, str(reranker_root / "reranker"), keep=5))
    assert (run.kind, run.depth, run.queries, run.entries) == ("bm25", 5, 3, 15)
    stage = run.parameters["rerank"][0]
    assert {key: stage[key] for key in ("judge", "judge_id", "backend", "keep", "method", "use_definition")} == {
        "judge": "rerank", "judge_id": reranker.id, "backend": "crossencoder", "keep": 5, "method": "crossencoder",
        "use_definition": True}
    assert stage["scorer"]["head"] == "sigmoid of one logit"
    versions = {query.external_id: 1 for query in project.queries.all()}
    assert stage["definition_versions"] == versions and run.parameters["depth"] == 8


def test_two_stages_each_keep_their_best_of_the_stage_before(project, reranker):
    minilm_judge(project, name="cosine")
    job = retrieval_create(project=project, retriever="cascade", name="three stages", first_depth=10, keep=6,
                           rerank=[{"judge": "rerank", "keep": 4}, {"judge": "cosine", "keep": 2}])
    run = retrieval_run(job_id=job.id).run
    assert [stage["keep"] for stage in run.parameters["rerank"]] == [4, 2] and run.depth == 2
    one = retrieval_run(job_id=retrieval_create(project=project, retriever="cascade", name="two stages",
                                                first_depth=10, keep=6, rerank=[{"judge": "rerank", "keep": 4}]).id).run
    # The second stage only reorders and cuts the first's four: each query's two are among them.
    first = ranked(one)
    for query, rows in ranked(run).items():
        assert {passage for passage, _ in rows} <= {passage for passage, _ in first[query]}


def test_a_job_cancelled_between_batches_writes_no_run_and_closes_the_judges_model(project, reranker, monkeypatch):
    job = retrieval_create(project=project, retriever="bm25", name="stopped", depth=8,
                           rerank=[{"judge": "rerank", "keep": 5}])
    monkeypatch.setattr(retrieval_module, "PROGRESS_SECONDS", 0)
    monkeypatch.setattr(retrieval_rerank, "RERANK_BATCH", 4)
    loaded, batches = [], []
    load, score = retrieval_rerank.load_scorer, retrieval_rerank.rerank_p

    def keep_scorer(config):
        loaded.append(load(config))
        return loaded[-1]

    def cancelled_after_the_first_batch(*args):
        batches.append(len(args[-1]))
        if len(batches) == 2:
            retrieval_cancel(job=job)
        return score(*args)

    monkeypatch.setattr(retrieval_rerank, "load_scorer", keep_scorer)
    monkeypatch.setattr(retrieval_rerank, "rerank_p", cancelled_after_the_first_batch)
    stopped = retrieval_run(job_id=job.id)
    assert (stopped.status, stopped.run, Run.objects.count()) == ("cancelled", None, 0)
    assert batches == [4, 4]  # the batch after the cancel was scored, and none after it
    assert len(loaded) == 1 and loaded[0].model is None  # closed


@pytest.mark.parametrize("rerank, message", [
    ([{"judge": "nobody", "keep": 5}], "re-rank stage 1: .*nobody"),
    ([{"judge": "remote", "keep": 5}], "judge 'remote' cannot re-rank: it asks a remote endpoint"),
    ([{"judge": "both", "keep": 5}], "judge 'both' cannot re-rank: it is a judges ensemble"),
    ([{"judge": "rerank", "keep": 9}], "re-rank stage 1 keeps 9 passages per query of the 8 the stage before it ranks"),
    ([{"judge": "rerank", "keep": 5}, {"judge": "rerank", "keep": 6}], "re-rank stage 2 keeps 6 .* of the 5 "),
    ([{"judge": "rerank", "keep": 0}], "keep must be 1 to 8"),
    ([{"judge": "rerank"}], "re-rank stage 1 must be"),
])
def test_judges_that_cannot_re_rank_here_and_keeps_over_the_stage_before_are_refused(project, reranker, rerank,
                                                                                      message):
    judge_create(project=project, name="remote", backend="openai", model="gpt-x", method="ask", endpoint="unreachable")
    judge_create(project=project, name="both", backend="ensemble", members=["rerank"])
    with pytest.raises(RetrievalError, match=message):
        retrieval_create(project=project, retriever="bm25", name="refused", depth=8, rerank=rerank)
    assert not RetrievalJob.objects.exists()


def test_a_cascade_s_keep_bounds_its_first_stage(project, reranker):
    with pytest.raises(RetrievalError, match="keeps 7 passages per query of the 6 the stage before it ranks"):
        retrieval_create(project=project, retriever="cascade", name="c", first_depth=10, keep=6,
                         rerank=[{"judge": "rerank", "keep": 7}])


def test_the_api_the_command_and_the_systems_form_take_the_stages(project, reranker, client,
                                                                  django_capture_on_commit_callbacks):
    judge_create(project=project, name="remote", backend="openai", model="gpt-x", method="ask", endpoint="unreachable")
    admin = UserFactory()
    MembershipFactory(project=project, user=admin, role=Membership.Role.ADMIN)
    api = APIClient()
    api.force_authenticate(admin)
    where = reverse("api:retrieval-list", args=[project.slug])
    with django_capture_on_commit_callbacks():
        started = api.post(where, {"retriever": "bm25", "name": "api", "depth": 8,
                                   "rerank": [{"judge": "rerank", "keep": 5}]}, format="json")
    assert started.status_code == 202
    assert started.json()["parameters"]["rerank"] == [{"judge": "rerank", "judge_id": reranker.id,
                                                       "backend": "crossencoder", "keep": 5}]
    refused = api.post(where, {"retriever": "bm25", "name": "x", "depth": 8, "rerank": [{"judge": "rerank", "keep": 9}]},
                       format="json")
    assert refused.status_code == 422 and "keep must be 1 to 8" in refused.json()["message"]

    out = io.StringIO()
    call_command("retrieve", "--project", project.slug, "--retriever", "bm25", "--name", "cli", "--depth", "6",
                 "--rerank", "rerank:3", "--inline", stdout=out)
    run = Run.objects.get(project=project, name="cli")
    assert run.depth == 3 and run.parameters["rerank"][0]["judge"] == "rerank"
    with pytest.raises(CommandError, match="keep must be 1 to 6"):
        call_command("retrieve", "--project", project.slug, "--retriever", "bm25", "--name", "cli2", "--depth", "6",
                     "--rerank", "rerank:7", stdout=out)

    # The form offers the judges that can re-rank, one stage.
    client.force_login(admin)
    form = {"retriever": "bm25", "name": "form", "depth": 8, "rerank_judge": "rerank", "rerank_keep": 4,
            "first_depth": 200, "keep": 60}
    with django_capture_on_commit_callbacks():
        assert client.post(reverse("labeling:retrieval_start", args=[project.slug]), form).status_code == 302
    assert RetrievalJob.objects.get(name="form").parameters["rerank"][0] | {"judge_id": 0} == {
        "judge": "rerank", "judge_id": 0, "backend": "crossencoder", "keep": 4}
    remote = client.post(reverse("labeling:retrieval_start", args=[project.slug]),
                         form | {"name": "form 2", "rerank_judge": "remote"})
    assert remote.status_code == 400 and not RetrievalJob.objects.filter(name="form 2").exists()
    offered = re.search(r'<select name="rerank_judge"[^>]*>(.*?)</select>', remote.content.decode(), re.DOTALL)
    assert re.findall(r'<option value="([^"]*)"', offered.group(1)) == ["", "rerank"]


def test_the_estimate_adds_the_judges_time(project, reranker):
    plain = retrieval_estimate(project=project, retriever="bm25", depth=8)
    found = retrieval_estimate(project=project, retriever="bm25", depth=8, rerank=[{"judge": "rerank", "keep": 5}])
    assert (plain.rerank_pairs, plain.rerank_s) == (0, None)
    assert found.rerank_pairs == 3 * 8 and found.rerank_s > 0
    assert found.wall_s == pytest.approx(found.bm25_s + found.rerank_s)
    assert "re-ranking by rerank timed on 16 pairs on cpu" in found.basis


def test_a_re_ranked_run_is_evaluated_beside_bm25_on_the_systems_page(client, settings, reranker_root):
    settings.MODEL_ROOTS = [reranker_root]
    bundle_import(path=SAMPLE, project_slug="cr")
    project = Project.objects.get(slug="cr")
    judge_create(project=project, name="minilm-ce", backend="crossencoder", model=str(reranker_root / "reranker"),
                 max_length=MAX_LENGTH)
    runs = {"bm25": {"depth": 8}, "bm25 > minilm-ce": {"depth": 8, "rerank": [{"judge": "minilm-ce", "keep": 6}]}}
    for name, options in runs.items():
        done = retrieval_run(job_id=retrieval_create(project=project, retriever="bm25", name=name, **options).id)
        assert done.status == "done", done.error
    viewer = UserFactory()
    MembershipFactory(project=project, user=viewer, role=Membership.Role.VIEWER)
    client.force_login(viewer)
    html = client.get(reverse("labeling:systems", args=["cr"]), {"source": ["human"]}).content.decode()

    cells = _cells(html, "human")
    assert set(cells) == set(runs)
    for name in runs:
        expected = sample_ndcg10(project, name)
        assert cells[name][1].split()[0] == f"{expected:.3f}", name
    assert "re-ranked by minilm-ce to 6" in html  # the runs table says how the run was made

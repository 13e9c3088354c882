"""Pooling from runs: the union of the runs' top k (checked against the files read by hand), provenance with ranks,
idempotence, the preview and its cost, and DIRAS's seeded sample inside and outside a run's top."""
import random
from pathlib import Path

import numpy as np
import pytest

from labeling.models import Pair, PairSource, ScoringJob
from labeling.services.judges import judge_create
from labeling.services.pooling import PoolingError, pool_add, pool_preview, pool_sample
from labeling.services.runs import run_import
from labeling.services.scoring import scoring_job_estimate
from tests.factories import PairFactory, PairSourceFactory, PassageFactory, ProjectFactory, QueryFactory

pytestmark = pytest.mark.django_db

QUERIES = ["q1", "q2", "q3", "q4"]
PASSAGES = [f"d{i}" for i in range(1, 41)]


@pytest.fixture
def project():
    project = ProjectFactory()
    for ext in QUERIES:
        QueryFactory(project=project, external_id=ext)
    for ext in PASSAGES:
        PassageFactory(project=project, external_id=ext)
    return project


def run_file(tmp_path: Path, name: str, seed: int) -> tuple[Path, dict[str, list[str]]]:
    """A run file with ties, and its rankings worked out by hand (score descending, then id descending)."""
    rng = random.Random(seed)
    lines, ranked = [], {}
    for query in QUERIES[:3] if seed % 2 else QUERIES:
        docs = rng.sample(PASSAGES, 15)
        scored = [(round(rng.random() * 4) / 2, doc) for doc in docs]
        lines += [f"{query} Q0 {doc} 0 {score} {name}" for score, doc in scored]
        ranked[query] = [doc for _, doc in sorted(scored, reverse=True)]
    path = tmp_path / f"{name}.trec"
    path.write_text("\n".join(lines) + "\n")
    return path, ranked


@pytest.fixture
def runs(project, tmp_path):
    """Two stored runs, A and B, with their rankings by hand."""
    stored, by_hand = [], {}
    for name, seed in (("A", 1), ("B", 2)):
        path, ranked = run_file(tmp_path, name, seed)
        stored.append(run_import(project=project, path=path, name=name))
        by_hand[name] = ranked
    return stored, by_hand


def pool(project) -> set[tuple[str, str]]:
    return set(Pair.objects.filter(project=project).values_list("query__external_id", "passage__external_id"))


def sources(project) -> set[tuple[str, str, str, int | None]]:
    return set(PairSource.objects.filter(pair__project=project).values_list(
        "pair__query__external_id", "pair__passage__external_id", "system", "rank"))


def test_pooling_adds_the_union_of_the_top_k_and_records_every_finder(project, runs):
    stored, by_hand = runs
    q1 = project.queries.get(external_id="q1")
    already = PairFactory(project=project, query=q1, passage=project.passages.get(external_id=by_hand["A"]["q1"][0]))
    PairSourceFactory(pair=already, system="A", rank=99)
    union = {(q, d) for ranked in by_hand.values() for q, docs in ranked.items() for d in docs[:5]}
    written = pool_add(project=project, runs=stored, depth=5)
    assert pool(project) == union
    assert written["pairs"] == len(union) - 1
    found = {(q, d, name, rank) for name, ranked in by_hand.items() for q, docs in ranked.items()
             for rank, d in enumerate(docs[:5], start=1)}
    # An existing source of the same system keeps its rank: provenance is added, never changed.
    kept = ("q1", by_hand["A"]["q1"][0], "A", 99)
    assert sources(project) == (found - {("q1", by_hand["A"]["q1"][0], "A", 1)}) | {kept}
    assert written["pool sources"] == len(found) - 1


def test_new_pairs_enter_by_query_then_best_rank(project, runs):
    stored, by_hand = runs
    pool_add(project=project, runs=stored, depth=3)
    order = list(Pair.objects.filter(project=project).order_by("id").values_list("query__external_id",
                                                                               "passage__external_id"))
    best = {}
    for ranked in by_hand.values():
        for q, docs in ranked.items():
            for rank, d in enumerate(docs[:3], start=1):
                best[(q, d)] = min(best.get((q, d), rank), rank)
    qid = {q.external_id: q.id for q in project.queries.all()}
    pid = {p.external_id: p.id for p in project.passages.all()}
    assert order == sorted(best, key=lambda pair: (qid[pair[0]], best[pair], pid[pair[1]]))


def test_pooling_again_writes_nothing(project, runs):
    stored, _ = runs
    pool_add(project=project, runs=stored, depth=4)
    before = pool(project), sources(project), Pair.objects.count(), PairSource.objects.count()
    assert pool_add(project=project, runs=stored[::-1], depth=4) == {"pairs": 0, "pool sources": 0}
    assert (pool(project), sources(project), Pair.objects.count(), PairSource.objects.count()) == before
    preview = pool_preview(project=project, runs=stored, depth=4)
    assert (preview.new_pairs, preview.sources) == (0, 0) and preview.existing == len(before[0])


def test_a_deeper_pool_adds_the_difference(project, runs):
    stored, by_hand = runs
    pool_add(project=project, runs=stored[:1], depth=2)
    written = pool_add(project=project, runs=stored, depth=6)
    union = {(q, d) for ranked in by_hand.values() for q, docs in ranked.items() for d in docs[:6]}
    assert pool(project) == union and written["pairs"] == len(union) - 2 * 3


def test_the_preview_says_what_pooling_writes_and_writes_nothing(project, runs):
    stored, by_hand = runs
    PairFactory(project=project, query=project.queries.get(external_id="q4"),
                passage=project.passages.get(external_id=by_hand["B"]["q4"][0]))
    preview = pool_preview(project=project, runs=stored, depth=5)
    assert Pair.objects.count() == 1 and PairSource.objects.count() == 0
    per_query = {}
    for ranked in by_hand.values():
        for q, docs in ranked.items():
            per_query.setdefault(q, set()).update(docs[:5])
    assert [(row.query, row.new + row.existing) for row in preview.per_query] == [
        (q, len(per_query[q])) for q in QUERIES]
    assert [row.existing for row in preview.per_query] == [0, 0, 0, 1]
    written = pool_add(project=project, runs=stored, depth=5)
    assert (preview.new_pairs, preview.sources) == (written["pairs"], written["pool sources"])
    assert preview.cost is None


def test_the_preview_prices_judging_the_new_pairs(project, runs):
    stored, _ = runs
    judge = judge_create(project=project, name="gpt", backend="openai", model="m", endpoint="unreachable",
                         price_in=0.15, price_out=0.6)
    preview = pool_preview(project=project, runs=stored, depth=3, judge=judge)
    assert Pair.objects.count() == 0
    pool_add(project=project, runs=stored, depth=3)
    # The same estimate, made over the pairs once they are pooled.
    after = scoring_job_estimate(project=project, judge=judge, scope=ScoringJob.Scope.SELECTION,
                                 pair_ids=list(Pair.objects.values_list("id", flat=True)))
    assert preview.cost.tokens.pairs == preview.new_pairs == Pair.objects.count()
    assert preview.cost.tokens == after.tokens and preview.cost.cost_usd == pytest.approx(after.cost_usd)


def test_pooling_refuses_runs_of_another_project_and_a_bad_depth(project, runs, tmp_path):
    stored, _ = runs
    other = ProjectFactory()
    with pytest.raises(PoolingError, match="are not runs of project"):
        pool_add(project=other, runs=stored, depth=5)
    with pytest.raises(PoolingError, match="depth must be at least 1"):
        pool_preview(project=project, runs=stored, depth=0)
    with pytest.raises(PoolingError, match="name at least one run"):
        pool_add(project=project, runs=[], depth=5)
    with pytest.raises(PoolingError, match="sample at least one passage"):
        pool_sample(project=project, run=stored[0], top=5, inside=0, outside=0, seed=1)
    with pytest.raises(PoolingError, match="the top must be at least 1"):
        pool_sample(project=project, run=stored[0], top=0, inside=1, outside=1, seed=1)
    assert Pair.objects.count() == 0


def expected_sample(project, ranked: dict[str, list[str]], top: int, inside: int, outside: int, seed: int):
    """DIRAS's sample worked out with the explicit candidate arrays: per query by id, numpy's choice of `inside`
    positions of its top (taken in rank order), then of `outside` ids of the sorted corpus less the whole top."""
    ids = {p.external_id: p.id for p in project.passages.all()}
    ext = {v: k for k, v in ids.items()}
    corpus = np.array(sorted(ids.values()))
    rng = np.random.default_rng(seed)
    drawn = {}
    for q in sorted(ranked, key=lambda q: project.queries.get(external_id=q).id):
        best = ranked[q][:top]
        picks = sorted(rng.choice(len(best), size=min(inside, len(best)), replace=False).tolist())
        rest = np.setdiff1d(corpus, [ids[d] for d in best])
        out = rng.choice(rest, size=min(outside, len(rest)), replace=False).tolist()
        drawn[q] = ([(best[i], i + 1) for i in picks], [ext[i] for i in out])
    return drawn


def test_the_diras_sample_is_seeded_and_apart_from_the_top(project, runs):
    stored, by_hand = runs
    written = pool_sample(project=project, run=stored[0], top=5, inside=3, outside=4, seed=11)
    drawn = expected_sample(project, by_hand["A"], 5, 3, 4, 11)
    insides = {(q, d, "A", rank) for q, (chosen, _) in drawn.items() for d, rank in chosen}
    outsides = {(q, d, "random:11", None) for q, (_, out) in drawn.items() for d in out}
    assert sources(project) == insides | outsides
    # By hand: 3 queries, 3 drawn from each one's 5 best and 4 from the 35 passages outside them.
    assert len(insides) == 9 and len(outsides) == 12
    assert all(d in by_hand["A"][q][:5] for q, d, _, _ in insides)
    assert all(d not in by_hand["A"][q][:5] for q, d, _, _ in outsides)
    assert written == {"pairs": 21, "pool sources": 21, "inside": 9, "outside": 12, "short queries": 0}
    assert pool_sample(project=project, run=stored[0], top=5, inside=3, outside=4, seed=11) == {
        "pairs": 0, "pool sources": 0, "inside": 9, "outside": 12, "short queries": 0}
    # Another seed draws others: its outside ones recorded as their own system.
    pool_sample(project=project, run=stored[0], top=5, inside=3, outside=4, seed=12)
    assert {row for row in sources(project) if row[2] == "random:12"} == {
        (q, d, "random:12", None) for q, (_, out) in expected_sample(project, by_hand["A"], 5, 3, 4, 12).items()
        for d in out}


def test_a_sample_larger_than_the_corpus_takes_all_of_it(project, runs):
    stored, by_hand = runs
    written = pool_sample(project=project, run=stored[0], top=5, inside=30, outside=1000, seed=0)
    assert pool(project) == {(q, d) for q in by_hand["A"] for d in PASSAGES}
    # Each of the 3 queries had 5 inside its top and 35 outside: all taken, and counted as short.
    assert (written["inside"], written["outside"], written["short queries"]) == (15, 105, 3)

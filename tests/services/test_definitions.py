"""Saving definitions as versions (refusals, concurrent saves) and stale judgments: their counts against a
hand count, re-scoring exactly the stale pairs once, and a re-scored query no longer stale."""
from __future__ import annotations

import threading

import pytest
from django.db import connections

from labeling.models import Judgment, RelevanceDefinition, ScoringJob
from labeling.selectors.definitions import stale_counts_for_queries, stale_pairs
from labeling.services.definitions import (
    MAX_DEFINITION_CHARS,
    DefinitionError,
    definition_save,
    stale_rescore_request,
)
from labeling.services.scoring import ScoringError, scoring_chunk_run, scoring_job_cancel, scoring_job_create
from tests.factories import (
    JudgeFactory,
    JudgmentFactory,
    PairFactory,
    ProjectFactory,
    QueryFactory,
    RelevanceDefinitionFactory,
    UserFactory,
)
from tests.scoring_fixtures import minilm_judge, small_scoring_project


def run_all(job: ScoringJob) -> int:
    return sum(scoring_chunk_run(chunk_id=c) for c in job.chunks.values_list("id", flat=True))


def _openai_judge(project, name: str):
    # Configured well enough to start a job; nothing here runs it (jobs are queued on commit).
    return JudgeFactory(project=project, name=name, backend="openai", model="gpt-x",
                        parameters={"endpoint": "unreachable", "method": "ask"})


@pytest.mark.django_db
def test_saves_make_consecutive_versions_with_their_author():
    query = QueryFactory()
    alice, bob = UserFactory(username="alice"), UserFactory(username="bob")
    first = definition_save(query=query, text="  Passages naming a target year.\n", author=alice)
    second = definition_save(query=query, text="Passages naming a target year\r\nand a baseline.", author=bob)
    assert (first.version, first.author, first.text) == (1, alice, "Passages naming a target year.")
    # Browsers send CRLF: it is stored as LF so the next comparison and the diff see real changes only.
    assert (second.version, second.author, second.text) == (2, bob, "Passages naming a target year\nand a baseline.")
    assert list(RelevanceDefinition.objects.filter(query=query).values_list("version", flat=True)) == [1, 2]


@pytest.mark.django_db
def test_versions_continue_after_imported_ones_and_other_queries_do_not_interfere():
    query, other = QueryFactory(), QueryFactory()
    RelevanceDefinitionFactory(query=query, text="imported v1")
    RelevanceDefinitionFactory(query=query, text="imported v2")
    RelevanceDefinitionFactory(query=other, text="other v1")
    assert definition_save(query=query, text="edited", author=None).version == 3
    assert definition_save(query=other, text="other edited", author=None).version == 2


@pytest.mark.django_db
def test_unchanged_text_saves_nothing():
    query = QueryFactory()
    definition_save(query=query, text="Relevant if it names a target.", author=None)
    with pytest.raises(DefinitionError, match="unchanged from version 1"):
        definition_save(query=query, text="\r\n Relevant if it names a target.  \n", author=None)
    assert RelevanceDefinition.objects.filter(query=query).count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize("text", ["", "   \n\t \r\n"])
def test_empty_text_is_refused(text):
    query = QueryFactory()
    with pytest.raises(DefinitionError, match="empty"):
        definition_save(query=query, text=text, author=None)
    assert not RelevanceDefinition.objects.exists()


@pytest.mark.django_db
def test_size_limit_is_named_and_the_limit_itself_is_allowed():
    query = QueryFactory()
    with pytest.raises(DefinitionError, match="50,001 characters; the limit is 50,000"):
        definition_save(query=query, text="x" * (MAX_DEFINITION_CHARS + 1), author=None)
    assert not RelevanceDefinition.objects.exists()
    assert len(definition_save(query=query, text="x" * MAX_DEFINITION_CHARS, author=None).text) == 50_000


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("threads", [2, 8])
def test_concurrent_saves_get_consecutive_versions_not_an_error(threads):
    query = QueryFactory()
    definition_save(query=query, text="version one", author=None)
    barrier = threading.Barrier(threads)
    saved: list[int] = []
    errors: list[BaseException] = []

    def save(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            saved.append(definition_save(query=query, text=f"edit from thread {i}", author=None).version)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    workers = [threading.Thread(target=save, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert errors == []
    assert sorted(saved) == list(range(2, threads + 2))
    assert RelevanceDefinition.objects.filter(query=query).count() == threads + 1


@pytest.fixture
def judged(db):
    """Two queries with two versions each, a query without a definition, two judges, and judgments spread
    over current and older versions. `stale` is the hand count: judge -> query -> stale pair ids."""
    project = ProjectFactory()
    a, b, c = (QueryFactory(project=project, external_id=x) for x in ("a", "b", "c"))
    a1, b1 = RelevanceDefinitionFactory(query=a), RelevanceDefinitionFactory(query=b)
    a2, b2 = RelevanceDefinitionFactory(query=a), RelevanceDefinitionFactory(query=b)
    pa = [PairFactory(project=project, query=a) for _ in range(5)]
    pb = [PairFactory(project=project, query=b) for _ in range(2)]
    pc = PairFactory(project=project, query=c)
    one, two = _openai_judge(project, "one"), _openai_judge(project, "two")
    imported = JudgeFactory(project=project, name="imported")

    def judge(pair, who, definition, status="ok"):
        JudgmentFactory(pair=pair, judge=who, definition=definition, status=status,
                        p_relevant=0.7 if status == "ok" else None)

    judge(pa[0], one, a1)                             # stale: only an older version
    judge(pa[1], one, a1)                             # re-judged under the current version...
    judge(pa[1], one, a2)                             # ...so not stale
    judge(pa[2], one, a2)                             # current
    judge(pa[3], one, None)                           # judged before the query had a definition: stale
    judge(pa[4], one, a1, "parse_error")              # a failed parse under v1 is stale too
    judge(pb[0], one, b1)                             # stale
    judge(pb[1], one, b2)                             # current
    judge(pc, one, None)                              # query c has no definition: nothing to be stale against
    judge(pa[0], two, a1, "failed")                   # stale
    judge(pa[2], two, a1)                             # stale for judge two even though judge one is current
    judge(pb[1], two, b2)                             # current
    judge(pa[1], imported, a1)                        # stale, but an imported judge cannot re-score
    stale = {
        "one": {"a": {pa[0].id, pa[3].id, pa[4].id}, "b": {pb[0].id}},
        "two": {"a": {pa[0].id, pa[2].id}},
        "imported": {"a": {pa[1].id}},
    }
    return project, {"a": a, "b": b, "c": c}, {"one": one, "two": two, "imported": imported}, stale


def test_stale_pairs_match_the_hand_count(judged, django_assert_max_num_queries):
    project, queries, _, stale = judged
    for key, query in queries.items():
        wanted = {name: per_query[key] for name, per_query in stale.items() if key in per_query}
        with django_assert_max_num_queries(3):
            found = stale_pairs(project=project, query=query)
        assert {row.judge.name: set(row.pair_ids) for row in found} == wanted
        assert all(row.queued_ids == frozenset() for row in found)
    assert [row.judge.name for row in stale_pairs(project=project, query=queries["a"])] == ["imported", "one", "two"]


def test_stale_counts_per_query_for_the_project_page(judged, django_assert_num_queries):
    project, queries, _, stale = judged
    page = list(queries.values())
    # Hand count: a: one 3 + two 2 + imported 1; b: one 1; c has no definition.
    with django_assert_num_queries(1):
        rows = stale_counts_for_queries(project=project, queries=page)
    assert [(query.external_id, n) for query, n in rows] == [("a", 6), ("b", 1), ("c", 0)]
    assert rows[0][1] == sum(len(per_query.get("a", ())) for per_query in stale.values())


def test_rescore_starts_a_selection_job_over_exactly_the_stale_pairs_of_the_query(judged):
    project, queries, judges, stale = judged
    user = UserFactory()
    job = stale_rescore_request(project=project, query=queries["a"], judge=judges["one"], user=user)
    assert (job.scope, job.status, job.total, job.created_by) == (ScoringJob.Scope.SELECTION, "running", 3, user)
    assert [(c.query_id, set(c.pair_ids)) for c in job.chunks.all()] == [(queries["a"].id, stale["one"]["a"])]

    only_b = stale_rescore_request(project=project, query=queries["b"], judge=judges["one"], user=user)
    assert [set(c.pair_ids) for c in only_b.chunks.all()] == [stale["one"]["b"]]


def test_queued_pairs_are_not_queued_twice(judged):
    project, queries, judges, stale = judged
    first = stale_rescore_request(project=project, query=queries["a"], judge=judges["one"], user=None)
    (row,) = stale_pairs(project=project, query=queries["a"], judge=judges["one"])
    assert (row.pair_ids, row.queued_ids, row.to_rescore) == (stale["one"]["a"], stale["one"]["a"], frozenset())
    with pytest.raises(DefinitionError, match="the 3 stale pairs of judge 'one' are queued in a running job"):
        stale_rescore_request(project=project, query=queries["a"], judge=judges["one"], user=None)
    # Another judge's stale pairs of the same query are not covered by that job.
    assert stale_rescore_request(project=project, query=queries["a"], judge=judges["two"], user=None).total == 2

    # A cancelled job re-judges nothing more: its pairs can be re-scored again.
    scoring_job_cancel(job=first)
    assert stale_rescore_request(project=project, query=queries["a"], judge=judges["one"], user=None).total == 3
    assert ScoringJob.objects.count() == 3


def test_judgments_under_the_current_version_clear_the_stale_pairs(judged):
    project, queries, judges, stale = judged
    current = RelevanceDefinition.objects.filter(query=queries["a"]).order_by("-version").first()
    for pair_id in stale["two"]["a"]:
        JudgmentFactory(pair_id=pair_id, judge=judges["two"], definition=current, p_relevant=0.2)
    assert "two" not in {row.judge.name for row in stale_pairs(project=project, query=queries["a"])}
    with pytest.raises(DefinitionError, match="judge 'two' has no stale judgments of query 'a'"):
        stale_rescore_request(project=project, query=queries["a"], judge=judges["two"], user=None)
    assert not ScoringJob.objects.exists()


def test_rescore_refusals(judged):
    project, queries, judges, _ = judged
    with pytest.raises(ScoringError, match="backend must be"):
        stale_rescore_request(project=project, query=queries["a"], judge=judges["imported"], user=None)
    with pytest.raises(DefinitionError, match="query .* belongs to another project"):
        stale_rescore_request(project=project, query=QueryFactory(), judge=judges["one"], user=None)
    with pytest.raises(DefinitionError, match="judge 'x' belongs to another project"):
        stale_rescore_request(project=project, query=queries["a"], judge=_openai_judge(ProjectFactory(), "x"),
                              user=None)
    with pytest.raises(DefinitionError, match="no stale judgments of query 'c'"):
        stale_rescore_request(project=project, query=queries["c"], judge=judges["one"], user=None)
    assert not ScoringJob.objects.exists()
    assert Judgment.objects.count() == 13


@pytest.mark.django_db
def test_a_rescored_query_is_no_longer_stale_and_other_queries_are_untouched(tmp_path):
    """End to end with the bundled MiniLM judge: score everything, edit one query's definition, re-score its
    stale pairs as a worker would, and nothing is stale any more; the other query was not re-judged."""
    project = small_scoring_project(tmp_path / "b", queries=2, passages=4)
    judge = minilm_judge(project)
    run_all(scoring_job_create(project=project, judge=judge))
    edited, other = project.queries.order_by("id")
    before = {j.id: (j.pair_id, j.definition_id, j.p_relevant) for j in Judgment.objects.filter(judge=judge)}
    new = definition_save(query=edited, text="Relevant only if the passage gives a number.", author=None)
    assert [len(row.pair_ids) for row in stale_pairs(project=project, query=edited)] == [4]

    job = stale_rescore_request(project=project, query=edited, judge=judge, user=None)
    assert run_all(job) == 4
    assert stale_pairs(project=project, query=edited) == []
    assert stale_counts_for_queries(project=project, queries=[edited, other])[0][1] == 0
    rescored = Judgment.objects.filter(judge=judge, definition=new)
    assert sorted(rescored.values_list("pair_id", flat=True)) == sorted(edited.pairs.values_list("id", flat=True))
    # The judgments under the old definition stay (the history), and the other query's are as they were.
    assert {j.id: (j.pair_id, j.definition_id, j.p_relevant) for j in Judgment.objects.filter(judge=judge)
            .exclude(definition=new)} == before

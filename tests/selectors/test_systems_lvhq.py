"""LVHQ through the real chain (queries with their set and twin in metadata, reference grades, runs): the runs'
nDCG@10 means on each query set and Kendall's tau between the two rankings, computed here by hand from DisastIR's
definition (tau = (concordant - discordant) / (n (n - 1) / 2) over the pairs of runs), overall and per intent; the
twin pairs or each set's queries resampled; the errors that name a query's bad set or twin."""
from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest

from labeling.selectors.query_sets import QuerySetError, query_sets
from labeling.selectors.systems_lvhq import EACH_SET, TWIN_PAIRS, lvhq_json, lvhq_report
from models_llm.systems.agreement import query_set_agreement
from tests.factories import ProjectFactory, QueryFactory
from tests.lvhq_fixtures import HUMAN_QUERIES, INTENTS, LLM_QUERIES, RANKS, RUNS, lvhq_project

pytestmark = pytest.mark.django_db


def ndcg_at_10(rank: int | None) -> float:
    # One relevant passage: DCG = gain / log2(1 + rank), the ideal DCG = gain / log2(2).
    return 0.0 if rank is None or rank > 10 else 1.0 / math.log2(1 + rank)


def mean_ndcg(run: str, queries) -> float:
    return sum(ndcg_at_10(RANKS[run][query]) for query in queries) / len(queries)


def kendall_tau(a: dict[str, float], b: dict[str, float]) -> float:
    """The paper's Kendall's tau, no ties: (C - D) / (n (n - 1) / 2)."""
    pairs = list(combinations(a, 2))
    assert all(a[x] != a[y] and b[x] != b[y] for x, y in pairs)
    concordant = sum((a[x] - a[y]) * (b[x] - b[y]) > 0 for x, y in pairs)
    return (concordant - (len(pairs) - concordant)) / len(pairs)


def test_lvhq_tau_on_two_query_sets_by_hand():
    project = lvhq_project()
    report = lvhq_report(project=project, source="human", draws=200)
    human = {run: mean_ndcg(run, HUMAN_QUERIES) for run in RUNS}
    llm = {run: mean_ndcg(run, LLM_QUERIES) for run in RUNS}
    # A > B > C > D on the human queries; B > A > C > D on the LLM ones: one discordant pair of six.
    assert sorted(human, key=human.get, reverse=True) == ["A", "B", "C", "D"]
    assert sorted(llm, key=llm.get, reverse=True) == ["B", "A", "C", "D"]
    assert kendall_tau(human, llm) == pytest.approx(2 / 3)
    assert (report.set_a, report.set_b, report.source, report.measure) == ("human", "llm", "human", "nDCG@10")
    assert report.overall.agreement.kendall_tau == pytest.approx(kendall_tau(human, llm))
    # tau_AP with the human queries as reference: C(2) = 0, C(3) = 2, C(4) = 3 -> 2/3 (0 + 2/2 + 3/3) - 1.
    assert report.overall.agreement.tau_ap == pytest.approx(1 / 3)
    by_run = {row.run: row for row in report.runs}
    for run in RUNS:
        assert by_run[run].mean_a == pytest.approx(human[run]) and by_run[run].mean_b == pytest.approx(llm[run])
    assert (by_run["B"].rank_a, by_run["B"].rank_b) == (2, 1)
    # Every query has its twin: the twin pairs are resampled together.
    assert (report.overall.resampled, report.overall.twin_pairs) == (TWIN_PAIRS, 3)
    low, high = report.overall.agreement.intervals["kendall_tau"]
    assert -1 <= low <= report.overall.agreement.kendall_tau <= high <= 1
    # Per intent (the queries' metadata): QA has the overall swap, FC none.
    intents = {group.intent: group for group in report.intents}
    assert set(intents) == {"FC", "QA"}
    for intent, group in intents.items():
        members_h = [query for query in HUMAN_QUERIES if INTENTS[query] == intent]
        members_l = [query for query in LLM_QUERIES if INTENTS[query] == intent]
        expected = kendall_tau({run: mean_ndcg(run, members_h) for run in RUNS},
                               {run: mean_ndcg(run, members_l) for run in RUNS})
        assert group.agreement.kendall_tau == pytest.approx(expected)
    assert intents["QA"].agreement.kendall_tau == pytest.approx(2 / 3)
    assert intents["FC"].agreement.kendall_tau == pytest.approx(1.0)
    out = lvhq_json(report)
    assert out["overall"]["agreement"]["kendall_tau"] == pytest.approx(2 / 3)
    assert out["intents"]["FC"]["queries_a"] == 1 and out["runs"][0]["run"] == "A"


def test_lvhq_without_twins_resamples_each_set():
    project = lvhq_project(twins=False, sets=("expert", "generated"))
    report = lvhq_report(project=project, set_a="expert", set_b="generated", draws=150, seed=4)
    assert (report.overall.resampled, report.overall.twin_pairs) == (EACH_SET, 0)
    values = [np.array([[ndcg_at_10(RANKS[run][query]) for query in members] for run in RUNS])
              for members in (HUMAN_QUERIES, LLM_QUERIES)]
    expected = query_set_agreement(list(RUNS), *values, draws=150, seed=4)
    assert report.overall.agreement.intervals == expected.intervals
    # Two sets, neither named human: both must be given, or the two are taken in name order.
    assert lvhq_report(project=project, draws=0).set_a == "expert"


def test_query_set_errors_name_the_query():
    project = ProjectFactory()
    QueryFactory(project=project, external_id="a", metadata={"query_set": "human", "twin": "b"})
    QueryFactory(project=project, external_id="b", metadata={"query_set": "human"})
    with pytest.raises(QuerySetError, match="query 'a': its twin 'b' is in the same query set"):
        query_sets(project)
    other = ProjectFactory()
    QueryFactory(project=other, external_id="a", metadata={"query_set": 3})
    with pytest.raises(QuerySetError, match="query 'a': metadata 'query_set' must be a non-empty text"):
        query_sets(other)
    third = ProjectFactory()
    QueryFactory(project=third, external_id="a", metadata={"query_set": "human", "twin": "zz"})
    with pytest.raises(QuerySetError, match="'zz' is not a query"):
        query_sets(third)
    only = lvhq_project(slug="one-set")
    with pytest.raises(QuerySetError, match="no query set 'web'"):
        lvhq_report(project=only, set_a="web", set_b="llm")

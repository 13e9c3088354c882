"""System evaluation through the real chain (labels, judgments and runs in the database, the qrels export's
reads, the evaluators): per-query values against pytrec_eval on qrels written by hand here, agreement against
scipy on means computed here, the judged shares counted here, the groups and the JSON shape."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import pytrec_eval
from scipy import stats

from labeling.models import Judgment, Pair, Project, Query, Run, RunEntry
from labeling.selectors.qrels_sources import (
    SystemsError,
    probabilities_for,
    qrels_for,
    qrels_source_parse,
    qrels_sources,
)
from labeling.selectors.systems import systems_report, systems_report_json
from tests.factories import (
    JudgeFactory,
    JudgmentFactory,
    LabelFactory,
    PairFactory,
    PassageFactory,
    ProjectFactory,
    QueryFactory,
)

pytestmark = pytest.mark.django_db

QUERIES = {"q1": {"intent": "info"}, "q2": {"intent": "info"}, "q3": {"intent": "action"},
           "q4": {"intent": "action"}, "q5": {}}
DOCS = [f"d{i}" for i in range(1, 16)]
# Human grades: a reference grade, or the labels of two annotators (gold when they agree, none when they do not).
REFERENCE = {("q1", "d1"): 2, ("q1", "d2"): 0, ("q1", "d3"): 1, ("q2", "d4"): 2, ("q2", "d5"): 1,
             ("q3", "d6"): 0, ("q3", "d7"): 2, ("q4", "d2"): 1, ("q5", "d9"): 2}
LABELS = {("q1", "d4"): (1, 1), ("q2", "d1"): (0, 2), ("q3", "d8"): (2, 2), ("q4", "d10"): (0, 0),
          ("q4", "d11"): (2, 2)}
# One judge's P; some pairs it judged have no human grade, some human grades it never judged.
JUDGE_P = {("q1", "d1"): 0.9, ("q1", "d2"): 0.2, ("q1", "d5"): 0.7, ("q2", "d4"): 0.8, ("q2", "d1"): 0.6,
           ("q2", "d6"): 0.1, ("q3", "d6"): 0.55, ("q3", "d7"): 0.4, ("q3", "d12"): 0.95, ("q4", "d2"): 0.3,
           ("q4", "d13"): 0.65, ("q5", "d9"): 0.5, ("q5", "d14"): 0.05}
RUN_NAMES = ("bm25", "dense", "hybrid", "random")
MEASURES_TREC = {"nDCG@10": "ndcg_cut_10", "nDCG@100": "ndcg_cut_100", "AP": "map", "P@10": "P_10",
                 "R@100": "recall_100"}


@dataclass
class Built:
    project: Project
    rankings: dict[str, dict[str, list[str]]]  # run -> query -> docs best first


def _rankings(seed: int) -> dict[str, dict[str, list[str]]]:
    rng = np.random.default_rng(seed)
    out = {}
    for index, name in enumerate(RUN_NAMES):
        # Each run leaves out one query (q5 for the first, ...), so a query a run lacks is exercised.
        queries = [q for q in QUERIES if q != list(QUERIES)[(4 - index) % 5]]
        out[name] = {q: list(rng.permutation(DOCS)[: int(rng.integers(6, 15))]) for q in queries}
    return out


def systems_project(*, slug: str = "systems", judge: str = "llm", seed: int = 7, human: bool = True,
                    runs: bool = True) -> Built:
    """The project above with its runs stored as RunEntry rows."""
    project = ProjectFactory(slug=slug)
    queries = {q: QueryFactory(project=project, external_id=q, metadata=metadata) for q, metadata in QUERIES.items()}
    passages = {d: PassageFactory(project=project, external_id=d) for d in DOCS}
    pairs: dict[tuple[str, str], Pair] = {}

    def pair(key: tuple[str, str]) -> Pair:
        if key not in pairs:
            pairs[key] = PairFactory(project=project, query=queries[key[0]], passage=passages[key[1]])
        return pairs[key]

    if human:
        for key, grade in REFERENCE.items():
            found = pair(key)
            found.reference_grade = grade
            found.save(update_fields=["reference_grade"])
        for key, grades in LABELS.items():
            for grade in grades:
                LabelFactory(pair=pair(key), grade=grade)
    found_judge = JudgeFactory(project=project, name=judge)
    for key, p in JUDGE_P.items():
        JudgmentFactory(pair=pair(key), judge=found_judge, p_relevant=p)
    rankings = _rankings(seed) if runs else {}
    for name, by_query in rankings.items():
        run = Run.objects.create(project=project, name=name, kind=Run.Kind.IMPORTED)
        RunEntry.objects.bulk_create(
            RunEntry(run=run, query=queries[q], passage=passages[d], rank=rank, score=100.0 - rank)
            for q, docs in by_query.items() for rank, d in enumerate(docs, 1)
        )
    return Built(project=project, rankings=rankings)


def human_qrels() -> dict[str, dict[str, int]]:
    graded = dict(REFERENCE) | {key: grades[0] for key, grades in LABELS.items() if len(set(grades)) == 1}
    return _nest(graded)


def judge_qrels() -> dict[str, dict[str, int]]:
    # The default scale (0, 1, 2) counts 1 as relevant: a judge's pair is 1 from P >= 0.5, else 0.
    return _nest({key: 1 if p >= 0.5 else 0 for key, p in JUDGE_P.items()})


def combined_qrels() -> dict[str, dict[str, int]]:
    human = {(q, d): grade for q, docs in human_qrels().items() for d, grade in docs.items()}
    return _nest({key: human.get(key, 1 if p >= 0.5 else 0) for key, p in JUDGE_P.items()} | human)


def _nest(flat: dict[tuple[str, str], float]) -> dict:
    out: dict = {}
    for (q, d), value in flat.items():
        out.setdefault(q, {})[d] = value
    return out


def trec_per_query(ranking: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> dict[str, dict[str, float]]:
    """pytrec_eval's measures per qrels query, a query the run lacks at 0 (trec_eval -c), and judged@10 counted."""
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, set(MEASURES_TREC.values()), relevance_level=1)
    run = {q: {d: float(len(docs) - i) for i, d in enumerate(docs)} for q, docs in ranking.items() if q in qrels}
    result = evaluator.evaluate(run)
    out = {}
    for q, judged in qrels.items():
        values = {m: result[q][name] if q in result else 0.0 for m, name in MEASURES_TREC.items()}
        top = ranking.get(q, [])[:10]
        values["judged@10"] = sum(d in judged for d in top) / len(top) if top else 0.0
        out[q] = values
    return out


@pytest.fixture
def built() -> Built:
    return systems_project()


def test_sources_name_human_then_each_judge_and_parse_refuses_what_the_project_lacks(built):
    assert [s.key for s in qrels_sources(built.project)] == ["human", "sample", "judge:llm", "combined:llm",
                                                            "expected:llm"]
    assert qrels_source_parse(project=built.project, key="expected:llm").expected
    with pytest.raises(SystemsError, match="no judge 'other'"):
        qrels_source_parse(project=built.project, key="judge:other")
    with pytest.raises(SystemsError, match="human, sample, judge:llm, combined:llm, expected:llm"):
        qrels_source_parse(project=built.project, key="gold")
    without_human = systems_project(slug="no-human", human=False)
    assert [s.key for s in qrels_sources(without_human.project)] == ["judge:llm", "expected:llm"]


def test_qrels_are_the_export_grades_and_the_judges_p(built):
    source = {key: qrels_source_parse(project=built.project, key=key)
              for key in ("human", "judge:llm", "combined:llm", "expected:llm")}
    assert qrels_for(project=built.project, source=source["human"]) == human_qrels()
    assert qrels_for(project=built.project, source=source["judge:llm"]) == judge_qrels()
    assert qrels_for(project=built.project, source=source["combined:llm"]) == combined_qrels()
    assert probabilities_for(project=built.project, source=source["expected:llm"]) == _nest(JUDGE_P)


@pytest.mark.parametrize(("key", "qrels"), [("human", human_qrels), ("judge:llm", judge_qrels),
                                             ("combined:llm", combined_qrels)])
def test_per_query_values_and_means_are_trec_eval_s(built, key, qrels):
    report = systems_report(project=built.project, sources=[key], draws=200)
    expected_qrels = qrels()
    for run, ranking in built.rankings.items():
        reference = trec_per_query(ranking, expected_qrels)
        scores = report.per_query[run][key]
        assert scores.queries == tuple(sorted(reference))
        for measure in (*MEASURES_TREC, "judged@10"):
            values = [reference[q][measure] for q in scores.queries]
            np.testing.assert_allclose(scores.values[measure], values, atol=1e-12)
            estimate = report.scores[run][key][measure]
            assert estimate.mean == pytest.approx(np.mean(values))
            assert min(values) - 1e-12 <= estimate.low <= estimate.mean <= estimate.high <= max(values) + 1e-12
        assert report.overall.queries[key] == len(reference)


def test_judged_entries_are_the_share_of_a_run_s_entries_with_a_grade(built):
    report = systems_report(project=built.project, sources=["human", "judge:llm"], draws=0)
    for key, qrels in (("human", human_qrels()), ("judge:llm", judge_qrels())):
        for run, ranking in built.rankings.items():
            entries = [(q, d) for q, docs in ranking.items() for d in docs]
            share = sum(d in qrels.get(q, {}) for q, d in entries) / len(entries)
            assert report.judged_entries[run][key] == pytest.approx(share)


def test_expected_precision_is_the_mean_p_of_the_top_10(built):
    report = systems_report(project=built.project, sources=["expected:llm"], draws=50)
    probabilities = _nest(JUDGE_P)
    for run, ranking in built.rankings.items():
        scores = report.per_query[run]["expected:llm"]
        by_hand = [sum(probabilities[q].get(d, 0.0) for d in ranking.get(q, [])[:10]) / 10 for q in scores.queries]
        np.testing.assert_allclose(scores.values["P@10"], by_hand)
        # AP has no expected form, and the judged share is the judge's own (judge:llm).
        assert report.scores[run]["expected:llm"]["AP"].mean is None
        assert report.scores[run]["expected:llm"]["judged@10"].mean is None


def _means(built: Built, qrels: dict, measure: str, queries: list[str]) -> list[float]:
    return [np.mean([trec_per_query(built.rankings[run], qrels)[q][measure] for q in queries]) for run in RUN_NAMES]


def test_agreement_of_human_with_each_source_is_scipy_s_on_the_means(built):
    # The judge has not judged every pool pair the runs retrieve: compared all the same (include_partial).
    report = systems_report(project=built.project, sources=["human", "judge:llm", "combined:llm"], draws=300,
                            include_partial=True)
    assert list(report.agreement) == [("human", "judge:llm"), ("human", "combined:llm")]
    assert report.agreement_measures == ("nDCG@10", "AP")
    human = human_qrels()
    for other_key, other in (("judge:llm", judge_qrels()), ("combined:llm", combined_qrels())):
        shared = sorted(set(human) & set(other))
        for measure in ("nDCG@10", "AP"):
            a, b = _means(built, human, measure, shared), _means(built, other, measure, shared)
            found = report.agreement[("human", other_key)][measure]
            assert found.kendall_tau == pytest.approx(stats.kendalltau(a, b).statistic)
            assert found.spearman == pytest.approx(stats.spearmanr(a, b).statistic)
            assert (found.n_systems, found.n_queries) == (len(RUN_NAMES), len(shared))


def test_without_human_grades_every_pair_of_sources_is_compared():
    built = systems_project(slug="judges-only", human=False)
    report = systems_report(project=built.project, draws=0, include_partial=True)
    assert list(report.agreement) == [("judge:llm", "expected:llm")]
    # Expected sources have no AP: only nDCG@10 is compared.
    assert report.agreement[("judge:llm", "expected:llm")]["AP"] is None
    assert report.agreement[("judge:llm", "expected:llm")]["nDCG@10"] is not None


def test_groups_by_a_metadata_key_have_their_own_means_and_agreement(built):
    report = systems_report(project=built.project, sources=["human", "judge:llm"], group_by="intent", draws=100,
                            include_partial=True)
    assert list(report.groups) == ["(none)", "action", "info"]
    members = {"info": ["q1", "q2"], "action": ["q3", "q4"], "(none)": ["q5"]}
    human, judge = human_qrels(), judge_qrels()
    for value, queries in members.items():
        table = report.groups[value]
        for key, qrels in (("human", human), ("judge:llm", judge)):
            evaluated = [q for q in queries if q in qrels]
            assert table.queries[key] == len(evaluated)
            for run, mean in zip(RUN_NAMES, _means(built, qrels, "nDCG@10", evaluated)):
                assert table.scores[run][key]["nDCG@10"].mean == pytest.approx(mean)
        a, b = (_means(built, qrels, "nDCG@10", queries) for qrels in (human, judge))
        found = table.agreement[("human", "judge:llm")]["nDCG@10"]
        # nan where one source ties every run (one query, say), as scipy answers.
        assert found.kendall_tau == pytest.approx(stats.kendalltau(a, b).statistic, nan_ok=True)
        assert found.n_queries == len(queries)


def test_json_is_the_issue_s_shape_with_intervals_and_groups_beside(built):
    report = systems_report(project=built.project, sources=["human", "judge:llm"], group_by="intent", draws=100,
                            include_partial=True)
    data = systems_report_json(report)
    measures = ["nDCG@10", "nDCG@100", "AP", "P@10", "R@100", "judged@10"]
    assert set(data["runs"]) == set(RUN_NAMES)
    for run in RUN_NAMES:
        assert list(data["runs"][run]) == ["human", "judge:llm"]
        for key in ("human", "judge:llm"):
            assert list(data["runs"][run][key]) == measures
            assert data["runs"][run][key]["nDCG@10"] == report.scores[run][key]["nDCG@10"].mean
            low, high = data["intervals"][run][key]["AP"]
            assert low <= data["runs"][run][key]["AP"] <= high
    assert list(data["agreement"]) == ["human|judge:llm"]
    assert set(data["agreement"]["human|judge:llm"]) == {"kendall_tau", "tau_ap", "spearman"}
    assert data["agreement_measure"] == "nDCG@10"
    assert set(data["agreement_by_measure"]["human|judge:llm"]) == {"nDCG@10", "AP"}
    assert data["groups"]["key"] == "intent"
    assert set(data["groups"]["values"]) == {"(none)", "action", "info"}
    assert set(data["groups"]["values"]["info"]["runs"]) == set(RUN_NAMES)
    assert [s["key"] for s in data["sources"]] == ["human", "judge:llm"]


def test_measures_asked_are_reported_with_judged_at_10(built):
    report = systems_report(project=built.project, sources=["human"], measures=["P@10"], draws=0)
    assert report.measures == ("P@10", "judged@10")
    assert report.agreement_measures == ("P@10",)
    with pytest.raises(SystemsError, match="unknown measure 'MRR'"):
        systems_report(project=built.project, measures=["MRR"])


def test_asking_for_qrels_that_grade_nothing_is_an_error():
    built = systems_project(slug="unresolved", human=False)
    pair = Pair.objects.filter(project=built.project).first()
    LabelFactory(pair=pair, grade=0)
    LabelFactory(pair=pair, grade=2)
    with pytest.raises(SystemsError, match="human qrels of project 'unresolved' are empty"):
        systems_report(project=built.project, sources=["human"])
    # Unasked, the empty source is left out.
    assert [s.key for s in systems_report(project=built.project, draws=0).sources] == ["judge:llm", "expected:llm"]


def test_a_project_without_runs_gets_a_report_without_runs():
    built = systems_project(slug="no-runs", runs=False)
    report = systems_report(project=built.project)
    assert report.runs == () and report.scores == {}
    assert Query.objects.filter(project=built.project).count() == len(QUERIES)


# --- Coverage: a judge that scored part of what the report needs -------------------------------------------------

COVERAGE_QUERIES = [f"c{i}" for i in range(10)]
TOP_DOCS = [f"e{i}" for i in range(10)]
DEEP_DOCS = ["e10", "e11"]


def coverage_project(*, judged: int) -> Project:
    """10 queries x 12 passages in the pool, each with a reference grade, and a pool pair of c0 that no run
    retrieves. Four runs rank e0..e9 of every query in their own order, then e10 and e11 (ranks 11 and 12). The
    judge scored the first `judged` of the 100 pairs in the runs' top 10 (by query, then passage), every pair at
    ranks 11 and 12, and nothing else."""
    rng = np.random.default_rng(5)
    project = ProjectFactory(slug=f"coverage-{judged}")
    judge = JudgeFactory(project=project, name="llm")
    queries = {q: QueryFactory(project=project, external_id=q) for q in COVERAGE_QUERIES}
    passages = {d: PassageFactory(project=project, external_id=d) for d in [*TOP_DOCS, *DEEP_DOCS, "unretrieved"]}
    top = [(q, d) for q in COVERAGE_QUERIES for d in TOP_DOCS]
    for index, (q, d) in enumerate([*top, *((q, d) for q in COVERAGE_QUERIES for d in DEEP_DOCS)]):
        pair = PairFactory(project=project, query=queries[q], passage=passages[d],
                           reference_grade=int(rng.integers(0, 3)))
        if index < judged or d in DEEP_DOCS:
            JudgmentFactory(pair=pair, judge=judge, p_relevant=float(rng.random()))
    PairFactory(project=project, query=queries["c0"], passage=passages["unretrieved"], reference_grade=0)
    for name in RUN_NAMES:
        run = Run.objects.create(project=project, name=name, kind=Run.Kind.IMPORTED)
        RunEntry.objects.bulk_create(
            RunEntry(run=run, query=queries[q], passage=passages[d], rank=rank, score=100.0 - rank)
            for q in COVERAGE_QUERIES
            for rank, d in enumerate([*rng.permutation(TOP_DOCS), *DEEP_DOCS], 1)
        )
    return project


def test_a_judge_that_scored_60_of_the_100_pairs_needed_is_partial_and_left_out_of_the_agreement():
    project = coverage_project(judged=60)
    asked = {"sources": ["human", "judge:llm"], "measures": ["nDCG@10"], "draws": 0}
    report = systems_report(project=project, **asked)
    # nDCG@10 and judged@10 read the top 10: the 100 pool pairs there are needed, ranks 11-12 and the pair no
    # run retrieves are not.
    assert report.depth == 10
    coverage = report.coverage["judge:llm"]
    assert (coverage.needed, coverage.covered, coverage.missing) == (100, 60, 40)
    assert coverage.share == pytest.approx(0.6) and coverage.partial
    assert report.coverage["human"] is None
    assert report.left_out == ("judge:llm",) and report.agreement == {}
    # Its scores are still reported: it is only kept out of the comparison.
    assert report.scores["bm25"]["judge:llm"]["nDCG@10"].mean is not None

    included = systems_report(project=project, include_partial=True, **asked)
    assert included.left_out == () and list(included.agreement) == [("human", "judge:llm")]
    assert included.agreement[("human", "judge:llm")]["nDCG@10"].n_systems == len(RUN_NAMES)
    data = systems_report_json(included)
    assert data["coverage"] == {"human": None, "judge:llm": {"needed": 100, "covered": 60, "share": 0.6,
                                                             "partial": True}}
    assert (data["depth"], data["include_partial"], data["left_out"]) == (10, True, [])
    assert systems_report_json(report)["left_out"] == ["judge:llm"] and systems_report_json(report)["agreement"] == {}

    # AP reads whole rankings: ranks 11 and 12 are needed too, and the judge scored all 20 of them.
    whole = systems_report(project=project, sources=["human", "judge:llm"], draws=0)
    assert whole.depth is None
    assert (whole.coverage["judge:llm"].needed, whole.coverage["judge:llm"].covered) == (120, 80)


def test_a_judge_that_scored_every_pair_needed_is_compared_without_asking():
    report = systems_report(project=coverage_project(judged=100), sources=["human", "judge:llm", "expected:llm"],
                            measures=["nDCG@10"], draws=0)
    assert report.coverage["judge:llm"] == report.coverage["expected:llm"]
    assert report.coverage["judge:llm"].share == 1.0 and not report.coverage["judge:llm"].partial
    assert report.left_out == ()
    assert list(report.agreement) == [("human", "judge:llm"), ("human", "expected:llm")]


def test_agreement_needs_three_runs():
    project = coverage_project(judged=100)
    Run.objects.filter(project=project, name__in=RUN_NAMES[2:]).delete()
    report = systems_report(project=project, sources=["human", "judge:llm"], measures=["nDCG@10"], draws=0)
    # Two runs are in the same or the opposite order under any two sources: no tau of +1 or -1 is given.
    assert report.runs == RUN_NAMES[:2]
    assert report.agreement == {("human", "judge:llm"): {"nDCG@10": None}}


def test_a_judge_that_scored_the_runs_top_10_ranks_them_on_the_top_10_measures_while_it_scores_the_rest():
    """A judge that has scored the top 10 but not ranks 11 and 12 is complete on nDCG@10 and P@10 (compared and
    ranked) and partial on AP, nDCG@100 and R@100 (left out of AP's agreement), each coverage counted by hand."""
    project = coverage_project(judged=100)
    Judgment.objects.filter(judge__project=project, pair__passage__external_id__in=DEEP_DOCS).delete()
    report = systems_report(project=project, sources=["human", "judge:llm"], draws=0)
    top10, whole = report.measure_coverage["judge:llm"]["nDCG@10"], report.measure_coverage["judge:llm"]["AP"]
    assert (top10.needed, top10.covered, top10.partial) == (100, 100, False)
    assert (whole.needed, whole.covered, whole.partial) == (120, 100, True)
    assert report.measure_coverage["judge:llm"]["R@100"] == whole  # 12 ranks: the top 100 is every rank
    assert report.coverage["judge:llm"] == whole  # what every measure asked needs
    assert report.lead_measure == "nDCG@10" and report.ranked("judge:llm") and not report.ranked("judge:llm", "AP")
    assert report.left_out == () and report.left_out_by_measure == {"nDCG@10": (), "AP": ("judge:llm",)}
    assert report.agreement[("human", "judge:llm")].keys() == {"nDCG@10"}
    assert report.agreement[("human", "judge:llm")]["nDCG@10"].n_systems == len(RUN_NAMES)
    data = systems_report_json(report)
    assert data["coverage_by_measure"]["judge:llm"]["P@10"] == {"needed": 100, "covered": 100, "share": 1.0,
                                                               "partial": False}
    assert data["coverage_by_measure"]["judge:llm"]["AP"]["partial"] and data["coverage_by_measure"]["human"] == {
        measure: None for measure in report.measures}
    assert data["left_out"] == [] and data["left_out_by_measure"]["AP"] == ["judge:llm"]

    included = systems_report(project=project, sources=["human", "judge:llm"], draws=0, include_partial=True)
    assert included.agreement[("human", "judge:llm")].keys() == {"nDCG@10", "AP"}

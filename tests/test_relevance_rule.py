"""One relevance rule per judge (#35, DisastIR's binarisation): a DisastIR prompt-strategy ensemble is relevant at
"score > 0" (P > 0 on its own P) wherever its P is binarised, every other judge at calibrated P >= 0.5, and a
threshold given to the export, `evaluate_runs`, the Systems page or the API grades every judge at calibrated
P >= threshold. Expected grades are computed here from JUDGE_P; measures from pytrec_eval."""
from __future__ import annotations

import json
from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from labeling.llm_adapter import judge_relevance_rule
from labeling.models import Judge, JudgeCalibration, Judgment, Membership, Pair
from labeling.selectors.export import export_source_parse, qrels_rows
from labeling.selectors.qrels_sources import qrels_for, qrels_source_parse
from labeling.selectors.queues import queue_candidates
from labeling.services.judging import judge_pairs
from labeling.services.releases import release_create
from models_llm.calibration import Calibrator
from models_llm.relevance_rule import POINTWISE, SCORE_ABOVE_ZERO
from tests.factories import JudgeFactory, JudgmentFactory, LabelFactory, MembershipFactory, UserFactory
from tests.selectors.test_systems import JUDGE_P, RUN_NAMES, systems_project, trec_per_query

pytestmark = pytest.mark.django_db

# Two of the judge's pairs get P = 0 (a mean score of 0 under every strategy): the only ones not relevant at P > 0.
ZERO = (("q1", "d2"), ("q5", "d14"))
# Maps P = 0 to a calibrated 0.25 (isotonic, as fitted on a judge whose zero scores are sometimes relevant): a
# calibrated P > 0 would make every pair relevant.
ISOTONIC = {"x": [0.0, 0.5, 1.0], "y": [0.25, 0.5, 0.9]}


def _ensemble_p() -> dict[tuple[str, str], float]:
    return {key: 0.0 if key in ZERO else p for key, p in JUDGE_P.items()}


def _nest(flat: dict[tuple[str, str], int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (q, d), grade in flat.items():
        out.setdefault(q, {})[d] = grade
    return out


@pytest.fixture
def strategy_judge():
    """systems_project's judge `llm` as a DisastIR prompt-strategy ensemble (its judgments imported), with P = 0
    on ZERO and a calibrator."""
    built = systems_project()
    judge = Judge.objects.get(project=built.project, name="llm")
    judge.parameters = {"method": Judge.Method.ENSEMBLE}
    judge.save(update_fields=["parameters"])
    Judgment.objects.filter(judge=judge, pair__query__external_id="q1", pair__passage__external_id="d2").update(
        p_relevant=0.0)
    Judgment.objects.filter(judge=judge, pair__query__external_id="q5", pair__passage__external_id="d14").update(
        p_relevant=0.0)
    JudgeCalibration.objects.create(judge=judge, method="isotonic", params=ISOTONIC, cv={}, n=40, n_relevant=20,
                                    fitted_on={"pair_ids": [], "p": [], "relevant": []})
    return built, judge


def _calibrated(p: float) -> float:
    return float(Calibrator.from_json({"method": "isotonic", "params": ISOTONIC}).apply(np.asarray([p]))[0])


def _qrels_file(project, source: str, threshold: float | None) -> dict[str, dict[str, int]]:
    parsed = export_source_parse(project=project, source=source, threshold=threshold)
    return _nest({(row.query_id, row.doc_id): row.grade for row in qrels_rows(project=project, source=parsed)})


def test_a_strategy_ensemble_is_relevant_above_a_score_of_zero_in_its_qrels_export_and_release(strategy_judge):
    built, judge = strategy_judge
    assert judge_relevance_rule(judge) == SCORE_ABOVE_ZERO
    # DisastIR: "relevant (score > 0) and not relevant (score = 0)", on the judge's own P (not the calibrated one,
    # which is above 0 for every pair here).
    assert _calibrated(0.0) > 0.2
    expected = _nest({key: int(p > 0) for key, p in _ensemble_p().items()})
    assert sum(grade == 0 for docs in expected.values() for grade in docs.values()) == len(ZERO)
    assert qrels_for(project=built.project, source=qrels_source_parse(project=built.project, key="judge:llm")) == expected
    assert _qrels_file(built.project, "judge:llm", None) == expected
    # A threshold is the operator's: calibrated P >= threshold, as before.
    at_half = _nest({key: int(_calibrated(p) >= 0.5) for key, p in _ensemble_p().items()})
    assert at_half != expected
    assert _qrels_file(built.project, "judge:llm", 0.5) == at_half
    assert qrels_for(project=built.project,
                     source=qrels_source_parse(project=built.project, key="judge:llm@0.5")) == at_half
    # A release records the rule in words, and no calibrator: its grades did not go through one.
    admin = UserFactory()
    MembershipFactory(project=built.project, user=admin, role=Membership.Role.ADMIN)
    release = release_create(project=built.project, by=admin, name="r1", source="judge:llm")
    assert "P > 0" in release.rule and release.calibrator is None
    assert release.relevant == sum(grade for docs in expected.values() for grade in docs.values())


def test_every_other_judge_keeps_calibrated_p_at_one_half():
    built = systems_project()
    judge = Judge.objects.get(project=built.project, name="llm")
    assert judge_relevance_rule(judge) == POINTWISE
    assert _qrels_file(built.project, "judge:llm", None) == _nest({key: int(p >= 0.5) for key, p in JUDGE_P.items()})


def test_a_judges_ensemble_follows_its_members_rule():
    built = systems_project()
    project = built.project
    a = JudgeFactory(project=project, name="a", parameters={"method": Judge.Method.ENSEMBLE})
    b = JudgeFactory(project=project, name="b", parameters={"method": Judge.Method.ENSEMBLE})
    tok = JudgeFactory(project=project, name="t", parameters={"method": Judge.Method.TOK})
    both = JudgeFactory(project=project, name="ab", backend=Judge.Backend.ENSEMBLE,
                        parameters={"members": [a.name, b.name]})
    mixed = JudgeFactory(project=project, name="at", backend=Judge.Backend.ENSEMBLE,
                         parameters={"members": [a.name, tok.name]})
    assert judge_relevance_rule(both) == SCORE_ABOVE_ZERO
    assert judge_relevance_rule(mixed) == POINTWISE
    assert judge_relevance_rule(tok) == POINTWISE
    # Their judgments' guess follows the rule: members' P 0.0 and 0.2 average to 0.1, relevant at P > 0 only.
    pair = Pair.objects.select_related("query", "passage").filter(project=project).first()
    for member, p in ((a, 0.0), (b, 0.2), (tok, 0.2)):
        JudgmentFactory(pair=pair, judge=member, p_relevant=p)
    (verdict,), _ = judge_pairs(judge=both, pairs=[pair], definitions={pair.query_id: None})
    assert verdict.p == pytest.approx(0.1) and verdict.guess is True
    (verdict,), _ = judge_pairs(judge=mixed, pairs=[pair], definitions={pair.query_id: None})
    assert verdict.p == pytest.approx(0.1) and verdict.guess is False


def _viewer(project) -> APIClient:
    client = APIClient()
    user = UserFactory()
    MembershipFactory(project=project, user=user, role=Membership.Role.VIEWER)
    client.force_authenticate(user)
    return client


def test_the_judges_list_states_each_judge_s_rule(strategy_judge, client):
    built, _judge = strategy_judge
    JudgeFactory(project=built.project, name="plain")
    rows = {row["name"]: row for row in _viewer(built.project).get(
        reverse("api:judge-list", args=[built.project.slug])).json()}
    assert rows["llm"]["relevance_rule"].startswith("P > 0")
    assert rows["plain"]["relevance_rule"].startswith("P >= 0.5")


def _means(ranking_qrels: dict[str, dict[str, int]], built, measure: str = "P@10") -> dict[str, float]:
    return {run: float(np.mean([v[measure] for v in trec_per_query(built.rankings[run], ranking_qrels).values()]))
            for run in RUN_NAMES}


def test_evaluate_runs_the_api_and_the_page_take_a_threshold(strategy_judge, client):
    built, _judge = strategy_judge
    project = built.project
    own = _means(_nest({key: int(p > 0) for key, p in _ensemble_p().items()}), built)
    at_07 = _means(_nest({key: int(_calibrated(p) >= 0.7) for key, p in _ensemble_p().items()}), built)
    assert own != at_07

    out = StringIO()
    call_command("evaluate_runs", "--project", project.slug, "--qrels", "judge:llm", "--measure", "P@10", "--draws",
                 "0", "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert {run: data["runs"][run]["judge:llm"]["P@10"] for run in RUN_NAMES} == pytest.approx(own)
    out = StringIO()
    call_command("evaluate_runs", "--project", project.slug, "--qrels", "judge:llm", "--measure", "P@10", "--draws",
                 "0", "--threshold", "0.7", "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert {run: data["runs"][run]["judge:llm@0.7"]["P@10"] for run in RUN_NAMES} == pytest.approx(at_07)

    api = _viewer(project)
    url = reverse("api:systems-evaluation", args=[project.slug])
    data = api.get(url, {"qrels": "judge:llm", "measure": "P@10", "threshold": "0.7"}).json()
    assert {run: data["runs"][run]["judge:llm@0.7"]["P@10"] for run in RUN_NAMES} == pytest.approx(at_07)
    refused = api.get(url, {"qrels": "judge:llm", "threshold": "1.5"})
    assert refused.status_code == 400 and "threshold" in refused.json()["errors"]

    user = UserFactory()
    MembershipFactory(project=project, user=user, role=Membership.Role.VIEWER)
    client.force_login(user)
    page = client.get(reverse("labeling:systems", args=[project.slug]),
                      {"source": ["human", "judge:llm"], "threshold": "0.7"}).content.decode()
    assert "judge:llm@0.7" in page and 'value="0.7"' in page
    bad = client.get(reverse("labeling:systems", args=[project.slug]), {"threshold": "lots"}).content.decode()
    assert "data-threshold-error" in bad and "lots" in bad


def test_the_conflict_queue_reads_the_queue_judge_s_rule(strategy_judge):
    built, judge = strategy_judge
    project = built.project
    project.queue_judge = judge
    project.save(update_fields=["queue_judge"])
    # q1/d5 has P = 0.7 and q4/d2 P = 0.3: both relevant at P > 0. An expert calls each not relevant: both are
    # contradictions; under P >= 0.5 only q1/d5 would be.
    for q, d in (("q1", "d5"), ("q4", "d2")):
        pair = Judgment.objects.get(judge=judge, pair__query__external_id=q, pair__passage__external_id=d).pair
        LabelFactory(pair=pair, grade=0)
    expert = MembershipFactory(project=project, role=Membership.Role.EXPERT).user
    ids = queue_candidates(project=project, annotator=expert, strategy="conflict", now=timezone.now(), limit=100)
    found = {(pair.query.external_id, pair.passage.external_id) for pair in project.pairs.filter(id__in=ids)}
    assert {("q1", "d5"), ("q4", "d2")} <= found
    # q1/d2 has P = 0 and no relevant label: not a contradiction.
    assert ("q1", "d2") not in found

"""A judge's metrics per definition version and origin through the real models and selectors: the numbers are
checked against scikit-learn (and a hand-written ECE) computed in the test from the rows it wrote."""
from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np
import pytest
from sklearn.metrics import brier_score_loss, cohen_kappa_score, f1_score, roc_auc_score

from labeling.models import Judgment, Label, RelevanceDefinition
from labeling.selectors.definition_metrics import default_comparison_judge, judge_metrics_by_definition
from labeling.selectors.scoring import judges_with_judgments
from tests.factories import (
    JudgeFactory,
    JudgmentFactory,
    LabelFactory,
    PairFactory,
    ProjectFactory,
    QueryFactory,
    RelevanceDefinitionFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

MANUAL, REFINED = RelevanceDefinition.Origin.MANUAL, RelevanceDefinition.Origin.LLM_REFINED


def reference_ece(p, relevant, bins=10):
    """Equal-width bins closed on the right ([0, .1], (.1, .2], ...), written out independently."""
    total = 0.0
    for k in range(bins):
        members = [i for i, value in enumerate(p) if value <= (k + 1) / bins and (k == 0 or value > k / bins)]
        if members:
            total += abs(sum(p[i] for i in members) - sum(relevant[i] for i in members))
    return total / len(p)


def reference(rows):
    """The metrics of (relevant, P, guess) rows: the binary call is the guess when there is one, else P >= 0.5."""
    relevant = [r for r, _, _ in rows]
    p = [value for _, value, _ in rows]
    predicted = [int(value >= 0.5) if guess is None else int(guess) for _, value, guess in rows]
    return {
        "n": len(rows),
        "kappa": cohen_kappa_score(relevant, predicted),
        "auroc": roc_auc_score(relevant, p),
        "brier": brier_score_loss(relevant, p),
        "ece": reference_ece(p, relevant),
        "f1": f1_score(relevant, predicted),
    }


def assert_matches(metrics, expected):
    assert metrics.n == expected["n"]
    for key in ("kappa", "auroc", "brier", "ece", "f1"):
        assert getattr(metrics, key) == pytest.approx(expected[key], abs=1e-12), key


@dataclass
class Study:
    """A project with gold grades for most pairs and one judge that judged every pair under v1 (a generic,
    hand-written definition) and the pairs of two of the three queries again under v2 (refined by an LLM from
    expert examples). `judged[version][pair_id] = (P, guess)` holds what was written."""

    project: object
    judge: object
    other: object
    gold: dict[int, int] = field(default_factory=dict)
    judged: dict[int, dict[int, tuple]] = field(default_factory=dict)

    def rows(self, version, pair_ids=None):
        chosen = self.judged[version] if pair_ids is None else {k: self.judged[version][k] for k in pair_ids}
        return [(int(self.gold[pid] >= 1), p, guess) for pid, (p, guess) in sorted(chosen.items())
                if pid in self.gold]


def build_study(*, per_query=24, seed=3) -> Study:
    rng = random.Random(seed)
    project = ProjectFactory()
    judge = JudgeFactory(project=project, name="qwen")
    other = JudgeFactory(project=project, name="other")
    study = Study(project=project, judge=judge, other=other, judged={1: {}, 2: {}})
    annotators = [UserFactory(), UserFactory()]
    for qi in range(3):
        query = QueryFactory(project=project)
        v1 = RelevanceDefinitionFactory(query=query, version=1, origin=MANUAL, text="Anything on the topic.")
        v2 = None
        if qi < 2:
            v2 = RelevanceDefinitionFactory(query=query, version=2, origin=REFINED, text="Only numeric targets.")
        for di in range(per_query):
            pair = PairFactory(project=project, query=query)
            if di == 0:
                # No gold: annotators disagree and nobody adjudicated.
                LabelFactory(pair=pair, annotator=annotators[0], grade=0, role=Label.Role.ANNOTATOR)
                LabelFactory(pair=pair, annotator=annotators[1], grade=2, role=Label.Role.ANNOTATOR)
            elif di == 1:
                pass  # not labelled at all
            elif di == 2:
                LabelFactory(pair=pair, annotator=annotators[0], grade=1, role=Label.Role.ANNOTATOR)
                study.gold[pair.id] = 1
            else:
                grade = rng.choice([0, 0, 1, 2])
                pair.reference_grade = grade
                pair.save(update_fields=["reference_grade"])
                study.gold[pair.id] = grade
            relevant = study.gold.get(pair.id, 0) >= 1
            p1 = min(max(rng.gauss(0.62 if relevant else 0.4, 0.25), 0.0), 1.0)
            guess1 = (p1 < 0.5) if di % 7 == 3 else None  # a stated guess that contradicts P
            JudgmentFactory(pair=pair, judge=judge, definition=v1, p_relevant=p1, guess=guess1)
            study.judged[1][pair.id] = (p1, guess1)
            JudgmentFactory(pair=pair, judge=other, definition=v1, p_relevant=1 - p1)
            if v2 is None:
                continue
            if di == 5:
                JudgmentFactory(pair=pair, judge=judge, definition=v2, status=Judgment.Status.PARSE_ERROR,
                                p_relevant=None)
                continue
            p2 = min(max(rng.gauss(0.75 if relevant else 0.25, 0.2), 0.0), 1.0)
            JudgmentFactory(pair=pair, judge=judge, definition=v2, p_relevant=p2)
            study.judged[2][pair.id] = (p2, None)
    return study


def test_groups_by_version_and_origin_with_metrics_on_all_and_on_common_gold_pairs():
    study = build_study()
    comparison = judge_metrics_by_definition(judge=study.judge)
    assert comparison.judge == "qwen" and comparison.comparable
    assert comparison.n_gold == len(study.gold) == 3 * 22

    v1, v2 = comparison.by_version.groups
    assert (v1.key, v2.key) == ("v1", "v2")
    # Every ok judgment counts in n_judgments; only gold pairs in the metrics; the parse error in neither.
    assert v1.n_judgments == 3 * 24 and v2.n_judgments == 2 * 23
    assert_matches(v1.gold, reference(study.rows(1)))
    assert_matches(v2.gold, reference(study.rows(2)))
    assert v1.gold.n == 3 * 22 and v2.gold.n == 2 * 21

    # The fair comparison: the gold pairs judged under both versions, the same ones for each.
    common = sorted(set(study.judged[1]) & set(study.judged[2]) & set(study.gold))
    assert comparison.by_version.n_common == len(common) == 2 * 21
    assert_matches(v1.common, reference(study.rows(1, common)))
    assert_matches(v2.common, reference(study.rows(2, common)))
    assert v2.common == v2.gold  # v2 judged only pairs that v1 judged too

    manual, refined = comparison.by_origin.groups
    assert (manual.key, refined.key) == ("manual", "llm_refined")
    assert manual.label == "written by a person"
    assert (manual.gold, manual.common, refined.gold) == (v1.gold, v1.common, v2.gold)
    assert comparison.by_origin.n_common == len(common)


def test_the_guess_is_the_binary_call_as_in_the_report():
    study = build_study()
    rows = study.rows(1)
    assert any(guess is not None and guess != (p >= 0.5) for _, p, guess in rows)
    by_threshold = reference([(r, p, None) for r, p, _ in rows])
    v1 = judge_metrics_by_definition(judge=study.judge).by_version.groups[0]
    assert v1.gold.kappa == pytest.approx(reference(rows)["kappa"])
    assert v1.gold.kappa != pytest.approx(by_threshold["kappa"])


def test_judgments_without_a_definition_and_a_pair_judged_under_two_manual_versions():
    project = ProjectFactory()
    judge = JudgeFactory(project=project)
    undefined, revised = QueryFactory(project=project), QueryFactory(project=project)
    a_pairs = [PairFactory(project=project, query=undefined, reference_grade=g) for g in (0, 2, 1, 0)]
    b_pairs = [PairFactory(project=project, query=revised, reference_grade=g) for g in (2, 0, 0, 1)]
    # Query a was judged before it had a definition, then again under its first one.
    a_v1 = RelevanceDefinitionFactory(query=undefined, version=1)
    p_none, p_a1 = (0.2, 0.7, 0.6, 0.45), (0.1, 0.9, 0.8, 0.3)
    for pair, before, after in zip(a_pairs, p_none, p_a1):
        JudgmentFactory(pair=pair, judge=judge, definition=None, p_relevant=before)
        JudgmentFactory(pair=pair, judge=judge, definition=a_v1, p_relevant=after)
    # Query b has two hand-written versions, judged under both: "manual" counts each pair once, under v2.
    b_v1, b_v2 = (RelevanceDefinitionFactory(query=revised, version=v, origin=MANUAL) for v in (1, 2))
    p_b1, p_b2 = (0.4, 0.6, 0.7, 0.2), (0.95, 0.65, 0.3, 0.45)
    for pair, first, second in zip(b_pairs, p_b1, p_b2):
        JudgmentFactory(pair=pair, judge=judge, definition=b_v1, p_relevant=first)
        JudgmentFactory(pair=pair, judge=judge, definition=b_v2, p_relevant=second)

    comparison = judge_metrics_by_definition(judge=judge)
    by_version = {group.key: group for group in comparison.by_version.groups}
    assert list(by_version) == ["v1", "v2", "none"]
    assert by_version["none"].label == "no definition"
    assert [by_version[k].gold.n for k in ("v1", "v2", "none")] == [8, 4, 4]
    # No pair was judged under all three: nothing to compare on, and the metrics say why.
    assert comparison.by_version.n_common == 0
    assert by_version["v1"].common.n == 0 and by_version["v1"].common.kappa is None
    assert by_version["v1"].common.null_reasons["kappa"] == "no gold pairs judged"

    manual, none = comparison.by_origin.groups
    assert (manual.key, none.key) == ("manual", "none")
    relevant = lambda pairs: [int(pair.reference_grade >= 1) for pair in pairs]  # noqa: E731
    newest = list(zip(relevant(a_pairs + b_pairs), p_a1 + p_b2, [None] * 8))
    assert manual.n_judgments == 8
    assert_matches(manual.gold, reference(newest))
    assert comparison.by_origin.n_common == 4
    assert_matches(manual.common, reference(newest[:4]))
    assert_matches(none.common, reference(list(zip(relevant(a_pairs), p_none, [None] * 4))))


def test_one_class_of_gold_leaves_kappa_and_auroc_undefined_with_the_reason():
    project = ProjectFactory()
    judge = JudgeFactory(project=project)
    query = QueryFactory(project=project)
    v1, v2 = (RelevanceDefinitionFactory(query=query, version=v) for v in (1, 2))
    for p in (0.2, 0.8, 0.6):
        pair = PairFactory(project=project, query=query, reference_grade=2)
        JudgmentFactory(pair=pair, judge=judge, definition=v1, p_relevant=p)
        JudgmentFactory(pair=pair, judge=judge, definition=v2, p_relevant=1 - p)
    v1_metrics = judge_metrics_by_definition(judge=judge).by_version.groups[0].gold
    assert v1_metrics.kappa is None and v1_metrics.auroc is None
    assert v1_metrics.null_reasons["auroc"] == "needs both relevant and non-relevant gold pairs; all 3 are relevant"
    assert v1_metrics.f1 == pytest.approx(f1_score([1, 1, 1], [0, 1, 1]))
    assert v1_metrics.brier == pytest.approx(brier_score_loss([1, 1, 1], [0.2, 0.8, 0.6]))


def test_a_judge_under_one_version_is_not_comparable():
    study = build_study(per_query=6)
    comparison = judge_metrics_by_definition(judge=study.other)
    assert not comparison.comparable
    assert [g.key for g in comparison.by_version.groups] == ["v1"]
    assert comparison.by_version.n_common == comparison.by_version.groups[0].gold.n == 3 * 4


def test_judges_with_judgments_and_the_default_one():
    study = build_study(per_query=4)
    idle = JudgeFactory(project=study.project, name="aaa-idle")
    failed_only = JudgeFactory(project=study.project, name="aab-failed")
    JudgmentFactory(pair=study.project.pairs.first(), judge=failed_only, status=Judgment.Status.FAILED,
                    p_relevant=None)
    judges = judges_with_judgments(project=study.project)
    assert [j.name for j in judges] == ["other", "qwen"] and idle not in judges
    assert default_comparison_judge(project=study.project, judges=judges) == study.other
    study.project.queue_judge = study.judge
    study.project.save(update_fields=["queue_judge"])
    assert default_comparison_judge(project=study.project, judges=judges) == study.judge
    assert default_comparison_judge(project=study.project, judges=[]) is None


def test_the_selector_reads_in_a_fixed_number_of_queries(django_assert_max_num_queries):
    study = build_study(per_query=8)
    with django_assert_max_num_queries(8):
        comparison = judge_metrics_by_definition(judge=study.judge)
    assert np.isfinite(comparison.by_version.groups[0].gold.brier)

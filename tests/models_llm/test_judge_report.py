"""judge_report: binary, calibration and uncertainty metrics against scikit-learn on seeded judges, small
hand-worked cases, and metrics that are undefined on the data (None with a reason, never NaN)."""
import json

import numpy as np
import pytest
from sklearn.metrics import (
    accuracy_score,
    average_precision_score,
    brier_score_loss,
    cohen_kappa_score,
    f1_score,
    precision_score,
    recall_score,
    roc_auc_score,
)

from models_llm.metrics import ScaleSpec, judge_report
from models_llm.metrics.calibration_error import ece, ece_adaptive
from tests.models_llm.synthetic import SCALE, judge, random_judge

METRIC_KEYS = {
    "n", "n_relevant", "f1", "precision", "recall", "accuracy", "kappa_vs_gold", "auroc", "brier", "ece",
    "ece_adaptive", "cal_avg", "ndcg", "map", "info_avg", "ndcg@10", "map@10", "kendall_tau", "ndcg_tie_aware",
    "map_tie_aware", "tie_warning", "uncertainty_ap", "n_uncertain", "reliability", "f1_curve", "group_kappa",
    "ci", "null_reasons",
}


def as_json(report: dict) -> dict:
    """The report through strict JSON (no NaN, no numpy types), as the cache and the API store it."""
    return json.loads(json.dumps(report, allow_nan=False))


@pytest.fixture(scope="module")
def seeded():
    data = random_judge(seed=11, n=3000, queries=30)
    return data, judge_report(data, SCALE, bootstrap_draws=200, seed=3)


def test_keys_and_plain_json(seeded):
    _, report = seeded
    assert METRIC_KEYS <= set(report)
    assert as_json(report) == report
    assert report["null_reasons"] == {}


def test_binary_metrics_match_sklearn(seeded):
    data, report = seeded
    gold = data.gold >= 1
    # The binary call is the guess where there is one, else P >= 0.5 (built here without the library).
    pred = np.array([g == 1.0 if g == g else p >= 0.5 for g, p in zip(data.guess, data.p)])
    assert not np.array_equal(pred, data.p >= 0.5)  # the guesses matter in this data
    assert report["precision"] == pytest.approx(precision_score(gold, pred), abs=1e-12)
    assert report["recall"] == pytest.approx(recall_score(gold, pred), abs=1e-12)
    assert report["f1"] == pytest.approx(f1_score(gold, pred), abs=1e-12)
    assert report["accuracy"] == pytest.approx(accuracy_score(gold, pred), abs=1e-12)
    assert report["kappa_vs_gold"] == pytest.approx(cohen_kappa_score(gold, pred), abs=1e-12)
    assert (report["n"], report["n_relevant"]) == (3000, int(gold.sum()))


def test_calibration_metrics_match_sklearn(seeded):
    data, report = seeded
    gold = data.gold >= 1
    auroc = roc_auc_score(gold, data.p)
    assert report["auroc"] == pytest.approx(auroc, abs=1e-12)
    assert report["brier"] == pytest.approx(brier_score_loss(gold, data.p), abs=1e-12)
    assert report["ece"] == ece(data.p, gold) and report["ece_adaptive"] == ece_adaptive(data.p, gold)
    expected_avg = (auroc + 1 - report["ece"] + 1 - brier_score_loss(gold, data.p)) / 3
    assert report["cal_avg"] == pytest.approx(expected_avg, abs=1e-12)
    assert sum(b["count"] for b in report["reliability"]) == 3000 and len(report["reliability"]) == 10


def test_uncertainty_ap_matches_sklearn(seeded):
    data, report = seeded
    stated = ~np.isnan(data.confidence)
    confidence = np.maximum(data.p, 1 - data.p)
    confidence[stated] = data.confidence[stated]
    assert report["uncertainty_ap"] == pytest.approx(average_precision_score(data.uncertain, 1 - confidence), abs=1e-12)
    assert report["n_uncertain"] == int(data.uncertain.sum())


def test_f1_curve_retrieves_p_at_or_above_each_threshold(seeded):
    data, report = seeded
    gold = data.gold >= 1
    curve = report["f1_curve"]
    assert [point["threshold"] for point in curve] == pytest.approx([k / 20 for k in range(21)])
    for point in curve:
        retrieved = data.p >= point["threshold"]
        assert point["n_retrieved"] == int(retrieved.sum())
        if retrieved.any():
            assert point["precision"] == pytest.approx(precision_score(gold, retrieved), abs=1e-12)
        else:
            assert point["precision"] is None
        assert point["recall"] == pytest.approx(recall_score(gold, retrieved), abs=1e-12)
        assert point["f1"] == pytest.approx(f1_score(gold, retrieved), abs=1e-12)
    assert curve[0]["recall"] == 1.0


def test_group_kappa_matches_sklearn_per_group(seeded):
    data, report = seeded
    gold, values = data.gold >= 1, data.groups["intent"]
    pred = np.where(np.isnan(data.guess), data.p >= 0.5, data.guess == 1)
    cells = report["group_kappa"]["intent"]
    present = {v for v in values if v is not None}
    assert set(cells) == present and sum(c["n"] for c in cells.values()) == sum(v is not None for v in values)
    for value in present:
        rows = values == value
        assert cells[value]["n"] == int(rows.sum())
        assert cells[value]["kappa"] == pytest.approx(cohen_kappa_score(gold[rows], pred[rows]), abs=1e-12)


def test_hand_worked_confusion_and_kappa():
    # 10 pairs, one query. Gold relevant: pairs 0-4. The judge says relevant (P >= 0.5) for 0, 1, 2 and 5.
    # tp = 3 (pairs 0-2), fn = 2 (3, 4), fp = 1 (5), tn = 4 (6-9).
    # precision = 3/4 = 0.75; recall = 3/5 = 0.6; F1 = 2*3 / (2*3 + 1 + 2) = 6/9; accuracy = 7/10.
    # Kappa: observed agreement po = 0.7; the judge says yes 4/10 and gold 5/10, so chance agreement
    # pe = 0.4*0.5 + 0.6*0.5 = 0.5 and kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4.
    gold = [2, 1, 2, 1, 1, 0, 0, 0, 0, 0]
    p = [0.9, 0.8, 0.6, 0.4, 0.2, 0.7, 0.3, 0.1, 0.2, 0.4]
    report = judge_report(judge([1] * 10, gold, p), SCALE, bootstrap_draws=0)
    assert report["precision"] == pytest.approx(0.75)
    assert report["recall"] == pytest.approx(0.6)
    assert report["f1"] == pytest.approx(6 / 9)
    assert report["accuracy"] == pytest.approx(0.7)
    assert report["kappa_vs_gold"] == pytest.approx(0.4)


def test_guess_overrides_p_and_stated_confidence_is_used():
    # Pair 0 has P 0.2 but guessed "yes"; pair 1 has P 0.9 but guessed "no": the calls are the guesses.
    # Both are right, pairs 2 and 3 (no guess) are called by P >= 0.5 and right too: accuracy 1.
    report = judge_report(
        judge([1] * 4, [2, 0, 1, 0], [0.2, 0.9, 0.6, 0.1], guess=[1, 0, np.nan, np.nan],
              confidence=[0.55, np.nan, np.nan, 0.99], uncertain=[True, False, False, False]),
        SCALE, bootstrap_draws=0,
    )
    assert report["accuracy"] == 1.0 and report["kappa_vs_gold"] == 1.0
    # Confidence 0.55 (stated), max(0.9, 0.1) = 0.9, max(0.6, 0.4) = 0.6, 0.99 (stated): the uncertain pair
    # has the lowest confidence, so ranking by 1 - confidence puts it first and AP = 1.
    assert report["uncertainty_ap"] == 1.0


def test_hand_worked_ece_and_brier():
    # Six pairs, bins (k/10, (k+1)/10] with the first closed on the left too:
    #   [0, 0.1]:   P 0.05, not relevant  -> |0.05 - 0| = 0.05
    #   (0.1, 0.2]: P 0.15, not relevant  -> |0.15 - 0| = 0.15
    #   (0.2, 0.3]: P 0.3, 0.3; one of two -> |0.6 - 1|  = 0.4   (0.3 itself is in this bin, not the next)
    #   (0.7, 0.8]: P 0.8, relevant       -> |0.8 - 1|  = 0.2
    #   (0.9, 1]:   P 0.95, relevant      -> |0.95 - 1| = 0.05
    # ECE = (0.05 + 0.15 + 0.4 + 0.2 + 0.05) / 6 = 0.85 / 6.
    # Brier = (0.05^2 + 0.15^2 + 0.7^2 + 0.3^2 + 0.2^2 + 0.05^2) / 6
    #       = (0.0025 + 0.0225 + 0.49 + 0.09 + 0.04 + 0.0025) / 6 = 0.6475 / 6.
    report = judge_report(judge([1] * 6, [0, 0, 2, 0, 1, 2], [0.05, 0.15, 0.3, 0.3, 0.8, 0.95]), SCALE,
                          bootstrap_draws=0)
    assert report["ece"] == pytest.approx(0.85 / 6)
    assert report["brier"] == pytest.approx(0.6475 / 6)
    third = report["reliability"][2]
    assert (third["count"], third["mean_p"], third["fraction_relevant"]) == (2, pytest.approx(0.3), 0.5)


def test_all_relevant_gold_leaves_negative_needing_metrics_empty():
    rng = np.random.default_rng(5)
    n = 595
    data = judge(rng.integers(0, 12, n), rng.integers(1, 3, n), rng.random(n))
    report = as_json(judge_report(data, SCALE, bootstrap_draws=100))
    for metric in ("auroc", "kappa_vs_gold", "cal_avg"):
        assert report[metric] is None
        assert "all 595 are relevant" in report["null_reasons"][metric]
    pred = data.p >= 0.5
    assert report["recall"] == pytest.approx(pred.mean()) and report["precision"] == 1.0
    assert report["f1"] == pytest.approx(f1_score(np.ones(n, bool), pred))
    assert report["accuracy"] == pytest.approx(pred.mean())
    # Grades 1 and 2 still differ in gain, so the ranking metrics exist.
    for metric in ("ndcg", "map", "info_avg", "brier", "ece"):
        assert isinstance(report[metric], float)
    assert report["ci"]["auroc"] is None and report["ci"]["kappa_vs_gold"] is None
    assert report["ci"]["f1"] is not None and report["ci"]["ndcg"] is not None


def test_no_relevant_gold_leaves_ranking_and_recall_empty():
    report = as_json(judge_report(judge([1, 1, 2, 2], [0, 0, 0, 0], [0.9, 0.1, 0.4, 0.6]), SCALE))
    assert report["f1"] == 0.0 and report["precision"] == 0.0  # two pairs called relevant, none is
    for metric in ("recall", "map", "map@10", "map_tie_aware", "ndcg", "info_avg", "auroc", "tie_warning"):
        assert report[metric] is None and report["null_reasons"][metric]
    assert report["ci"]["ndcg"] is None and "ndcg" in report["null_reasons"]["ci.ndcg"]


def test_constant_judge_has_kappa_zero_when_gold_has_both_classes():
    data = judge([1] * 6, [0, 1, 2, 0, 0, 1], [0.9] * 6)
    report = judge_report(data, SCALE, bootstrap_draws=0)
    assert report["kappa_vs_gold"] == cohen_kappa_score(data.gold >= 1, np.ones(6, bool)) == 0.0
    assert report["kendall_tau"] is None and "constant" in report["null_reasons"]["kendall_tau"]


def test_empty_input():
    report = as_json(judge_report(judge([], [], []), SCALE))
    assert report["n"] == 0
    for key in ("f1", "auroc", "ece", "ndcg", "map", "uncertainty_ap", "reliability", "f1_curve", "tie_warning"):
        assert report[key] is None and report["null_reasons"][key] == "no gold-judged pairs"
    assert all(value is None for value in report["ci"].values())


def test_no_uncertain_pairs_and_no_bootstrap():
    report = judge_report(judge([1, 1, 2, 2], [0, 2, 1, 0], [0.2, 0.9, 0.6, 0.3]), SCALE, bootstrap_draws=0)
    assert report["uncertainty_ap"] is None and "uncertain" in report["null_reasons"]["uncertainty_ap"]
    assert all(value is None for value in report["ci"].values())
    assert "bootstrap" in report["null_reasons"]["ci.f1"]


def test_single_query_has_no_interval():
    report = judge_report(judge([4] * 5, [0, 2, 1, 0, 2], [0.2, 0.9, 0.6, 0.3, 0.7]), SCALE)
    assert report["ci"]["f1"] is None and "2 queries" in report["null_reasons"]["ci.f1"]


def test_unknown_grade_is_an_error():
    with pytest.raises(ValueError, match="not on the scale"):
        judge_report(judge([1, 1], [0, 3], [0.2, 0.9]), SCALE)


def test_binary_scale():
    # Grades 0/1 with gains 0/1: nDCG and AP both rank the same relevant pairs.
    scale = ScaleSpec(gains={0: 0, 1: 1}, relevant_from=1)
    report = judge_report(judge([1, 1, 1], [1, 0, 1], [0.9, 0.5, 0.4]), scale, bootstrap_draws=0)
    # Ranked: relevant, not, relevant. AP = (1/1 + 2/3) / 2; DCG = 1 + 1/log2(4), ideal 1 + 1/log2(3).
    assert report["map"] == pytest.approx((1 + 2 / 3) / 2)
    assert report["ndcg"] == pytest.approx((1 + 0.5) / (1 + 1 / np.log2(3)))

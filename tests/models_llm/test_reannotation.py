"""DIRAS App. M: the re-annotation sample per confusion cell, query and confidence band, and the
agreement-vs-confidence-threshold curve, against counts made by hand here."""
from __future__ import annotations

import numpy as np
import pytest

from models_llm.metrics.reannotation import agreement_curve, confidence_band, judge_confidence, reannotation_sample


def test_bands_are_the_papers():
    # "above 0.9, between 0.9 and 0.7, and below 0.7"; the confidence of a No is 1 - P.
    assert list(confidence_band([0.95, 0.9, 0.8, 0.7, 0.69, 0.5])) == ["high", "mid", "mid", "mid", "low", "low"]
    assert judge_confidence(np.array([0.97, 0.2, 0.5])).tolist() == pytest.approx([0.97, 0.8, 0.5])


def _world():
    # Two queries; per query, the judge says Yes to 9 pairs the human says No to: 3 per band.
    query, p, human = [], [], []
    for q in ("q1", "q2"):
        for value in (0.99, 0.95, 0.92, 0.85, 0.8, 0.75, 0.65, 0.6, 0.55):
            query.append(q), p.append(value), human.append(False)
        # and one pair of each other cell
        for value, truth in ((0.97, True), (0.1, True), (0.02, False)):
            query.append(q), p.append(value), human.append(truth)
    return np.array(query), np.array(p), np.array(human)


def test_two_per_band_per_query_within_each_cell_seeded():
    query, p, human = _world()
    drawn = reannotation_sample(query, p, human, per_band=2, seed=3)
    fn = [d for d in drawn if d.cell == "judge_yes_human_no"]
    # 2 queries x 3 bands x 2 = 12, each from its own band
    assert len(fn) == 12
    for d in fn:
        assert human[d.index] == False and p[d.index] >= 0.5
        assert d.band == confidence_band([p[d.index]])[0]
    counts = {(query[d.index], d.band) for d in fn}
    assert len(counts) == 6 and all(sum(1 for d in fn if (query[d.index], d.band) == key) == 2 for key in counts)
    # the other cells hold one pair per query: each is taken
    assert sorted(d.cell for d in drawn if d.cell != "judge_yes_human_no") == sorted(
        ["judge_yes_human_yes", "judge_no_human_yes", "judge_no_human_no"] * 2)
    # the confidence of the No pairs: 1 - P (0.9 for P 0.1: mid; 0.98 for 0.02: high)
    assert {d.band for d in drawn if d.cell == "judge_no_human_yes"} == {"mid"}
    assert {d.band for d in drawn if d.cell == "judge_no_human_no"} == {"high"}
    again = reannotation_sample(query, p, human, per_band=2, seed=3)
    assert again == drawn
    other = [reannotation_sample(query, p, human, per_band=2, seed=s) for s in range(4, 12)]
    assert any(o != drawn for o in other)  # the seed matters: 3 choose 2 per band, 6 strata
    only = reannotation_sample(query, p, human, per_band=5, seed=0, cells=("judge_yes_human_no",))
    assert len(only) == 18 and {d.cell for d in only} == {"judge_yes_human_no"}  # all 3 per band when fewer


def test_bad_arguments_are_refused_by_name():
    query, p, human = _world()
    with pytest.raises(ValueError, match="per_band must be 1 or more"):
        reannotation_sample(query, p, human, per_band=0)
    with pytest.raises(ValueError, match=r"unknown cells \['FN'\]"):
        reannotation_sample(query, p, human, cells=("FN",))


def test_agreement_and_data_remaining_as_the_confidence_threshold_rises():
    # The judge says Yes to all six; the human agrees on the three most confident only.
    p = np.array([0.99, 0.96, 0.93, 0.8, 0.7, 0.6])
    human = np.array([True, True, True, False, True, False])
    curve = agreement_curve(p, human, side=True, thresholds=(0.5, 0.75, 0.9, 0.95, 0.995))
    assert [point.kept for point in curve] == [6, 4, 3, 2, 0]
    assert [point.remaining for point in curve] == pytest.approx([1.0, 4 / 6, 3 / 6, 2 / 6, 0.0])
    assert [point.agreement for point in curve[:4]] == pytest.approx([4 / 6, 3 / 4, 1.0, 1.0])
    assert curve[4].agreement is None and all(point.kappa is None for point in curve)


def test_the_curve_over_both_labels_has_cohens_kappa():
    p = np.array([0.95, 0.9, 0.2, 0.05])
    human = np.array([True, False, False, False])
    point = agreement_curve(p, human, thresholds=(0.5,))[0]
    # judge 1,1,0,0 vs human 1,0,0,0: observed 3/4; chance (2/4)(1/4) + (2/4)(3/4) = 1/2; kappa (3/4-1/2)/(1/2)
    assert point.agreement == pytest.approx(0.75) and point.kappa == pytest.approx(0.5)
    # at 0.92 only 0.95 (Yes) and 0.05 (No, confidence 0.95) stay: both agree
    point = agreement_curve(p, human, thresholds=(0.92,))[0]
    assert point.kept == 2 and point.agreement == 1.0 and point.kappa == pytest.approx(1.0)

"""Human agreement: per-annotator-pair Cohen's kappa against scikit-learn, Krippendorff's alpha against the
krippendorff package, a hand-worked case, the uncertain-pair rule, and undefined cases."""
import json
from itertools import combinations

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from models_llm.metrics import ScaleSpec, human_agreement, is_uncertain
from tests.models_llm.synthetic import SCALE


@pytest.mark.parametrize(("grades", "top", "expected"), [
    ([0, 2], 2, True),  # bottom and top grade
    ([0, 0, 2], 2, True),
    ([0, 1], 2, False),  # one intermediate only
    ([1, 1], 2, True),  # two intermediates
    ([2, 2, 1], 2, False),
    ([1, 2, 1], 2, True),
    ([1], 2, False),
    ([], 2, False),
    ([1, 2], 3, True),  # two intermediates of a 0-3 scale
    ([0, 3], 3, True),
    ([0, 2, 2], 3, True),
    ([0, 0, 2], 3, False),
    ([0, 1], 1, True),  # binary scale: bottom and top
    ([1, 1], 1, False),
])
def test_is_uncertain(grades, top, expected):
    assert is_uncertain(grades, top_grade=top) is expected


def test_hand_worked_kappas_and_overlap_weighting():
    # A and B label items 1-8; C labels items 1-4 like A; A alone labels item 9.
    #   A: 0 0 1 2 2 0 1 2      binary A: 0 0 1 1 1 0 1 1
    #   B: 0 1 1 2 0 0 2 2      binary B: 0 1 1 1 0 0 1 1
    # Binary A-B: agree on 6 of 8, po = 0.75; both say yes 5/8, pe = (5/8)^2 + (3/8)^2 = 34/64;
    #   kappa = (48/64 - 34/64) / (30/64) = 14/30 = 7/15.
    # Graded A-B: agree on items 1, 3, 4, 6, 8, po = 5/8; both have grade counts 3, 2, 3, pe = 22/64;
    #   kappa = (40/64 - 22/64) / (42/64) = 18/42 = 3/7.
    # Binary A-C on items 1-4: identical, kappa 1. Binary B-C on items 1-4: B 0 1 1 1, C 0 0 1 1:
    #   po = 3/4, pe = (3/4)(1/2) + (1/4)(1/2) = 1/2, kappa = 1/2.
    # Weighted by overlap: (8 * 7/15 + 4 * 1 + 4 * 1/2) / 16 = (56/15 + 6) / 16 = 146/240.
    a = [0, 0, 1, 2, 2, 0, 1, 2, 1]
    b = [0, 1, 1, 2, 0, 0, 2, 2]
    c = a[:4]
    item = list(range(1, 10)) + list(range(1, 9)) + list(range(1, 5))
    who = ["A"] * 9 + ["B"] * 8 + ["C"] * 4
    out = human_agreement(item, who, a + b + c, SCALE)
    pairs = {(p["a"], p["b"]): p for p in out["annotator_pairs"]}
    assert pairs["A", "B"]["n"] == 8
    assert pairs["A", "B"]["kappa_binary"] == pytest.approx(7 / 15)
    assert pairs["A", "B"]["kappa_graded"] == pytest.approx(3 / 7)
    assert pairs["A", "C"]["kappa_binary"] == pytest.approx(1.0)
    assert pairs["B", "C"]["kappa_binary"] == pytest.approx(0.5)
    assert out["human_kappa_binary"] == pytest.approx(146 / 240)
    assert out["n_overlap"] == 8


def random_labels(seed=0, items=300, annotators=4):
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 3, items)
    item, who, grade = [], [], []
    for k in range(annotators):
        for i in np.flatnonzero(rng.random(items) < 0.6):
            noisy = truth[i] if rng.random() < 0.7 else rng.integers(0, 3)
            item.append(int(i) * 10)
            who.append(f"ann{k}")
            grade.append(int(noisy))
    return item, who, grade


def test_seeded_annotators_match_sklearn_and_krippendorff():
    item, who, grade = random_labels()
    out = human_agreement(item, who, grade, SCALE)
    labels = {}
    for i, w, g in zip(item, who, grade):
        labels.setdefault(w, {})[i] = g
    names = sorted(labels)
    weights, binary, graded = [], [], []
    for (a, b), pair in zip(combinations(names, 2), out["annotator_pairs"]):
        shared = sorted(set(labels[a]) & set(labels[b]))
        ga, gb = [labels[a][i] for i in shared], [labels[b][i] for i in shared]
        assert (pair["a"], pair["b"], pair["n"]) == (a, b, len(shared))
        kb = cohen_kappa_score([g >= 1 for g in ga], [g >= 1 for g in gb])
        kg = cohen_kappa_score(ga, gb, labels=[0, 1, 2])
        assert pair["kappa_binary"] == pytest.approx(kb, abs=1e-12)
        assert pair["kappa_graded"] == pytest.approx(kg, abs=1e-12)
        weights.append(len(shared))
        binary.append(kb)
        graded.append(kg)
    assert len(out["annotator_pairs"]) == 6
    assert out["human_kappa_binary"] == pytest.approx(np.average(binary, weights=weights), abs=1e-12)
    assert out["human_kappa_graded"] == pytest.approx(np.average(graded, weights=weights), abs=1e-12)
    all_items = sorted(set(item))
    matrix = [[labels[w].get(i, np.nan) for i in all_items] for w in names]
    reference = krippendorff.alpha(reliability_data=matrix, level_of_measurement="ordinal", value_domain=[0, 1, 2])
    assert out["krippendorff_alpha"] == pytest.approx(reference, abs=1e-12)
    assert out["n_overlap"] == sum(sum(i in labels[w] for w in names) >= 2 for i in all_items)
    assert out["null_reasons"] == {}
    json.dumps(out, allow_nan=False)


def test_a_later_label_replaces_an_earlier_one():
    # A first says 2 for item 1 and then 0: with the 0, A and B agree on both items.
    out = human_agreement([1, 2, 1, 1, 2], ["A", "A", "A", "B", "B"], [2, 2, 0, 0, 2], SCALE)
    assert out["annotator_pairs"][0]["kappa_graded"] == 1.0


def test_single_annotator_and_empty_input():
    for out in (human_agreement([1, 2], ["A", "A"], [0, 2], SCALE), human_agreement([], [], [], SCALE)):
        for key in ("human_kappa_binary", "human_kappa_graded", "krippendorff_alpha"):
            assert out[key] is None and "two annotators" in out["null_reasons"][key]
        assert out["annotator_pairs"] == [] and out["n_overlap"] == 0


def test_annotators_without_shared_items():
    out = human_agreement([1, 2], ["A", "B"], [0, 2], SCALE)
    assert out["annotator_pairs"] == [{"a": "A", "b": "B", "n": 0, "kappa_binary": None, "kappa_graded": None}]
    assert out["human_kappa_binary"] is None
    assert "no pair is labelled by two" in out["null_reasons"]["human_kappa_binary"]
    assert out["krippendorff_alpha"] is None


def test_one_shared_label_throughout_is_undefined():
    # Both annotators give grade 2 to both shared items: chance agreement is 1, kappa 0/0; alpha likewise.
    out = human_agreement([1, 2, 1, 2], ["A", "A", "B", "B"], [2, 2, 2, 2], SCALE)
    assert out["human_kappa_binary"] is None and out["human_kappa_graded"] is None
    assert "chance agreement is 1" in out["null_reasons"]["annotator_pairs[A, B].kappa_binary"]
    assert out["krippendorff_alpha"] is None and "same grade" in out["null_reasons"]["krippendorff_alpha"]
    assert out["n_overlap"] == 2


def test_binary_agreement_can_exist_where_graded_differs():
    # Grades 1 and 2 are both relevant: binary labels agree perfectly (1 1 0 vs 1 1 0), grades do not.
    scale = ScaleSpec(gains={0: 0, 1: 0.5, 2: 1}, relevant_from=1)
    out = human_agreement([1, 2, 3, 1, 2, 3], ["A"] * 3 + ["B"] * 3, [1, 2, 0, 2, 1, 0], scale)
    assert out["human_kappa_binary"] == 1.0
    assert out["human_kappa_graded"] == pytest.approx(cohen_kappa_score([1, 2, 0], [2, 1, 0]), abs=1e-12)

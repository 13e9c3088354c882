"""The degenerate-judge rule: one side of the threshold, or chance agreement with gold (kappa against sklearn's)."""
import numpy as np
from sklearn.metrics import cohen_kappa_score

from models_llm.metrics import degeneracy


def test_a_judge_calling_every_pair_relevant_is_degenerate_on_both_counts():
    # The sample's minilm at 0.5: every pair relevant; gold has 184 relevant and 2 non-relevant pairs.
    gold = np.r_[np.ones(184, bool), np.zeros(2, bool)]
    found = degeneracy(np.ones(7_136, bool), gold, np.ones(186, bool))
    assert found.degenerate and found.one_side and found.chance
    assert found.kappa == 0.0
    assert "calls 7,136 of the 7,136 pairs it judged relevant" in found.reason
    assert "Cohen's kappa 0.000 on 186 gold pairs" in found.reason


def test_98_percent_on_one_side_is_the_line():
    calls = np.r_[np.zeros(98, bool), np.ones(2, bool)]  # 98 of 100 called not relevant
    assert degeneracy(calls, np.zeros(0, bool), np.zeros(0, bool)).one_side
    calls = np.r_[np.zeros(97, bool), np.ones(3, bool)]
    assert not degeneracy(calls, np.zeros(0, bool), np.zeros(0, bool)).degenerate


def test_too_few_pairs_say_nothing_about_one_side():
    assert not degeneracy(np.ones(19, bool), np.zeros(0, bool), np.zeros(0, bool)).degenerate


def test_kappa_below_the_floor_is_chance_and_matches_sklearn():
    rng = np.random.default_rng(3)
    gold = rng.random(400) < 0.4
    guessing = rng.random(400) < 0.5  # independent of gold: kappa near 0
    found = degeneracy(guessing, gold, guessing)
    assert abs(found.kappa - cohen_kappa_score(gold, guessing)) < 1e-12
    assert abs(found.kappa) < 0.05 and found.chance and not found.one_side
    good = np.where(rng.random(400) < 0.85, gold, ~gold)
    found = degeneracy(good, gold, good)
    assert abs(found.kappa - cohen_kappa_score(gold, good)) < 1e-12
    assert found.kappa > 0.5 and not found.degenerate and found.reason == ""


def test_worse_than_chance_is_degenerate_and_one_gold_class_leaves_kappa_undefined():
    gold = np.r_[np.ones(30, bool), np.zeros(30, bool)]
    assert degeneracy(~gold, gold, ~gold).chance
    mixed = np.r_[np.ones(15, bool), np.zeros(15, bool)]
    found = degeneracy(mixed, np.ones(30, bool), mixed)
    assert found.kappa is None and not found.degenerate

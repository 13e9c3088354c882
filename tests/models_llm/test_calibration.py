"""Recalibration of a judge's raw P: out-of-fold figures, monotone export, agreement with scikit-learn (isotonic:
scikit-learn's blocks, each at its Jeffreys posterior mean rate, computed here from its fit), errors."""
import json

import numpy as np
import pytest
from scipy.special import expit, logit
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold

from models_llm.calibration import (
    LOGIT_EPS,
    PLATT_C,
    CalibrationError,
    Calibrator,
    _fit_isotonic,
    calibrator_fit,
)
from models_llm.metrics.calibration_error import brier, ece

GRID = np.linspace(0.0, 1.0, 10001)


def jeffreys_isotonic(p, y):
    """scikit-learn's isotonic fit of (p, y) with each block's rate replaced by (k + 1/2) / (n + 1), k of its n pairs
    relevant (blocks the prior reverses pooled again, their counts added), interpolated between its thresholds."""
    model = IsotonicRegression(increasing=True, out_of_bounds="clip", y_min=0, y_max=1).fit(p, y)
    fitted = model.predict(p)
    levels = sorted(set(fitted.tolist()))
    k = np.array([y[fitted == level].sum() for level in levels], dtype=float)
    n = np.array([(fitted == level).sum() for level in levels], dtype=float)
    pooled = IsotonicRegression().fit(np.arange(len(levels)), (k + 0.5) / (n + 1), sample_weight=n + 1)
    rate = dict(zip(levels, pooled.predict(np.arange(len(levels)))))
    thresholds = [rate[value] for value in model.y_thresholds_.tolist()]
    return model.X_thresholds_, np.array(thresholds)


def squashed_judge(n: int = 20000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """True probability q uniform; the judge reports it squashed toward 0.5."""
    rng = np.random.default_rng(seed)
    q = rng.uniform(0.0, 1.0, n)
    return 0.5 + 0.3 * (q - 0.5), rng.random(n) < q


def logistic_judge(n: int = 20000, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Miscalibrated exactly as Platt scaling models it: true probability sigmoid(2 logit(P) - 0.5)."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.01, 0.99, n)
    return p, rng.random(n) < expit(2.0 * logit(p) - 0.5)


def step_judge(n: int = 4000, seed: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """True probability jumps from 0.1 to 0.9 at P = 0.5, which no sigmoid of logit(P) follows closely."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.01, 0.99, n)
    return p, rng.random(n) < np.where(p < 0.5, 0.1, 0.9)


def contrary_judge(n: int = 4000, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """The higher the P, the less likely relevant: any Platt fit has a negative slope."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.0, 1.0, n)
    return p, rng.random(n) < 1.0 - p


def test_squashed_judge_is_better_calibrated_out_of_fold():
    p, y = squashed_judge()
    fit = calibrator_fit(p, y)
    # Raw ECE is about E|P - q| = 0.7 E|q - 0.5| = 0.175; raw Brier exceeds the best possible by E(P - q)^2 = 0.04.
    assert fit.cv["raw"]["ece"] > 0.15
    assert fit.cv["calibrated"]["ece"] < 0.03
    assert fit.cv["calibrated"]["brier"] < fit.cv["raw"]["brier"] - 0.03
    assert fit.cv["calibrated"] == fit.cv[fit.cv["chosen"]]


def test_raw_figures_are_those_of_the_raw_p():
    p, y = squashed_judge(n=3000)
    fit = calibrator_fit(p, y)
    assert fit.cv["raw"] == {"ece": ece(p, y), "brier": brier(p, y)}
    assert (fit.n, fit.n_relevant) == (3000, int(y.sum()))
    assert (fit.cv["folds"], fit.cv["seed"]) == (5, 0)


def test_figures_are_out_of_fold_predictions_of_models_fitted_without_the_fold():
    p, y = squashed_judge(n=3000)
    fit = calibrator_fit(p, y)
    isotonic, platt = np.empty(p.size), np.empty(p.size)
    features = logit(np.clip(p, LOGIT_EPS, 1 - LOGIT_EPS)).reshape(-1, 1)
    for train, test in StratifiedKFold(n_splits=5, shuffle=True, random_state=0).split(features, y):
        isotonic[test] = np.interp(p[test], *jeffreys_isotonic(p[train], y[train]))
        lr = LogisticRegression(C=PLATT_C, tol=1e-10).fit(features[train], y[train])
        platt[test] = lr.predict_proba(features[test])[:, 1]
    assert fit.cv["isotonic"] == pytest.approx({"ece": ece(isotonic, y), "brier": brier(isotonic, y)}, rel=1e-9)
    assert fit.cv["platt"] == pytest.approx({"ece": ece(platt, y), "brier": brier(platt, y)}, rel=1e-6)
    # The in-sample figure of the same fit is not what is reported.
    in_sample = IsotonicRegression(increasing=True, out_of_bounds="clip", y_min=0, y_max=1).fit(p, y).predict(p)
    assert fit.cv["isotonic"]["brier"] > brier(in_sample, y)


def test_seed_sets_the_folds():
    p, y = squashed_judge(n=3000)
    assert calibrator_fit(p, y, seed=7).cv == calibrator_fit(p, y, seed=7).cv
    assert calibrator_fit(p, y, seed=7).cv["isotonic"] != calibrator_fit(p, y, seed=8).cv["isotonic"]
    assert calibrator_fit(p, y, folds=3).cv["folds"] == 3


@pytest.mark.parametrize(
    "judge, chosen",
    [(squashed_judge, "isotonic"), (logistic_judge, "platt"), (step_judge, "isotonic"), (contrary_judge, "isotonic")],
)
def test_lower_out_of_fold_brier_is_chosen_and_export_is_monotone_within_unit_interval(judge, chosen):
    p, y = judge()
    fit = calibrator_fit(p, y)
    assert fit.cv["chosen"] == fit.calibrator.method == chosen
    if fit.cv["platt"] is not None:
        other = "isotonic" if chosen == "platt" else "platt"
        assert fit.cv[chosen]["brier"] <= fit.cv[other]["brier"]
    raw = np.sort(np.concatenate([GRID, p]))
    calibrated = fit.calibrator.apply(raw)
    assert np.all(np.diff(calibrated) >= 0)
    assert calibrated.min() >= 0.0 and calibrated.max() <= 1.0


def test_platt_is_skipped_when_its_slope_is_not_positive():
    p, y = contrary_judge()
    fit = calibrator_fit(p, y)
    assert fit.cv["platt"] is None
    # The first fold's fit already decreases, so Platt is not even evaluated out of fold.
    assert fit.cv["platt_skipped"].startswith("fitted slope a = -")
    assert fit.cv["platt_skipped"].endswith("<= 0 in fold 1: calibrated P would fall as raw P rises")
    assert fit.cv["chosen"] == "isotonic"
    assert calibrator_fit(*logistic_judge()).cv["platt_skipped"] is None


def test_platt_recovers_the_true_slope_and_intercept():
    fit = calibrator_fit(*logistic_judge())
    assert fit.calibrator.params["a"] == pytest.approx(2.0, abs=0.1)
    assert fit.calibrator.params["b"] == pytest.approx(-0.5, abs=0.1)


def test_isotonic_apply_is_sklearns_blocks_at_their_jeffreys_posterior_mean_on_all_pairs():
    p, y = step_judge()
    fit = calibrator_fit(p, y)
    x, rates = jeffreys_isotonic(p, y)
    assert fit.calibrator.params["x"] == x.tolist()
    assert fit.calibrator.params["y"] == pytest.approx(rates.tolist(), rel=1e-12)
    # GRID reaches below and above the fitted P (0.01 to 0.99), so clipping at the ends is compared too.
    np.testing.assert_allclose(fit.calibrator.apply(GRID), np.interp(GRID, x, rates), rtol=1e-12)
    np.testing.assert_allclose(fit.calibrator.apply(p), np.interp(p, x, rates), rtol=1e-12)


def test_platt_apply_is_sklearns_predict_proba_on_all_pairs():
    p, y = logistic_judge()
    fit = calibrator_fit(p, y)
    model = LogisticRegression(C=PLATT_C, tol=1e-10).fit(logit(np.clip(p, LOGIT_EPS, 1 - LOGIT_EPS)).reshape(-1, 1), y)
    expected = model.predict_proba(logit(np.clip(GRID, LOGIT_EPS, 1 - LOGIT_EPS)).reshape(-1, 1))[:, 1]
    np.testing.assert_allclose(fit.calibrator.apply(GRID), expected, rtol=0, atol=1e-7)


def test_hand_worked_isotonic_fit():
    # P:        0.1  0.2  0.3  0.4  0.5  0.6
    # relevant: 0    1    0    0    1    1
    # Pool adjacent violators: 1 > 0 at 0.2, 0.3 -> pool to 1/2; 1/2 > 0 at 0.4 -> pool 0.2..0.4 to 1/3; then
    # 0 <= 1/3 <= 1 <= 1 holds: blocks of 0 of 1, 1 of 3 and 2 of 2 relevant. The middle point at 0.3 equals both
    # neighbours, so it is not a threshold; between thresholds calibrated P is linear. Each block's rate is its
    # Jeffreys posterior mean (k + 1/2) / (n + 1): 0.5 / 2, 1.5 / 4, 2.5 / 3, never 0 or 1.
    calibrator = _fit_isotonic(np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6]), np.array([0.0, 1, 0, 0, 1, 1]), np.ones(6))
    assert calibrator.params["x"] == [0.1, 0.2, 0.4, 0.5, 0.6]
    assert calibrator.params["y"] == pytest.approx([1 / 4, 3 / 8, 3 / 8, 5 / 6, 5 / 6])
    # 0.05 is below the data (clipped to 1/4); 0.15 halfway from 1/4 to 3/8; 0.45 halfway from 3/8 to 5/6; 0.9 clipped.
    assert calibrator.apply([0.05, 0.15, 0.3, 0.45, 0.9]).tolist() == pytest.approx(
        [1 / 4, 5 / 16, 3 / 8, 29 / 48, 5 / 6])
    # One irrelevant pair at 0.1 (0.5 / 2) beside 1 relevant of 10 at 0.2 (1.5 / 11): the prior reversed them, so
    # they are pooled again, their posterior counts added: (0.5 + 1.5) / (2 + 11).
    reversed_pair = _fit_isotonic(np.array([0.1, 0.2, 0.2]), np.array([0.0, 1, 0]), np.array([1.0, 1, 9]))
    assert reversed_pair.params["y"] == pytest.approx([2 / 13, 2 / 13])


@pytest.mark.parametrize("judge", [step_judge, logistic_judge])
def test_json_round_trip_gives_the_same_calibrated_p(judge):
    fit = calibrator_fit(*judge())
    restored = Calibrator.from_json(json.loads(json.dumps(fit.calibrator.to_json())))
    assert restored == fit.calibrator
    np.testing.assert_array_equal(restored.apply(GRID), fit.calibrator.apply(GRID))
    assert json.loads(json.dumps(fit.cv)) == fit.cv


def test_to_json_is_a_copy():
    calibrator = calibrator_fit(*step_judge()).calibrator
    document = calibrator.to_json()
    document["params"]["y"][-1] = 0.0
    assert calibrator.params["y"][-1] > 0.5


ISOTONIC = {"x": [0.1, 0.5, 0.9], "y": [0.0, 0.4, 1.0]}


@pytest.mark.parametrize(
    "document, message",
    [
        ([], "must be a dict"),
        ({"method": "platt"}, "exactly the keys ['method', 'params']"),
        ({"method": "beta", "params": {}}, "method must be one of isotonic, platt; got 'beta'"),
        ({"method": "platt", "params": [1.0, 0.0]}, "platt params must be a dict"),
        ({"method": "platt", "params": {"a": 1.0}}, "platt params must have exactly the keys ['a', 'b']"),
        ({"method": "platt", "params": {"a": -1.0, "b": 0.0}}, "slope a must be > 0"),
        ({"method": "platt", "params": {"a": 0, "b": 0.0}}, "slope a must be > 0"),
        ({"method": "platt", "params": {"a": "1", "b": 0.0}}, "param a must be a finite number; got '1'"),
        ({"method": "platt", "params": {"a": True, "b": 0.0}}, "param a must be a finite number"),
        ({"method": "platt", "params": {"a": 1.0, "b": float("nan")}}, "param b must be a finite number"),
        ({"method": "isotonic", "params": {**ISOTONIC, "z": []}}, "isotonic params must have exactly the keys"),
        ({"method": "isotonic", "params": {**ISOTONIC, "x": []}}, "param x must be a non-empty list"),
        ({"method": "isotonic", "params": {**ISOTONIC, "x": "0.1 0.5 0.9"}}, "param x must be a non-empty list"),
        ({"method": "isotonic", "params": {**ISOTONIC, "x": [0.1, 0.5]}}, "one length; got 2 and 3"),
        ({"method": "isotonic", "params": {**ISOTONIC, "x": [0.1, 0.9, 0.5]}}, "x must be strictly increasing"),
        ({"method": "isotonic", "params": {**ISOTONIC, "x": [0.1, 0.5, 0.5]}}, "x must be strictly increasing"),
        ({"method": "isotonic", "params": {**ISOTONIC, "y": [0.0, 0.5, 0.4]}}, "y must be non-decreasing"),
        ({"method": "isotonic", "params": {**ISOTONIC, "y": [0.0, 0.4, 1.2]}}, "within [0, 1]; got 1.2"),
        ({"method": "isotonic", "params": {**ISOTONIC, "y": [0.0, None, 1.0]}}, "within [0, 1]; got None"),
    ],
)
def test_from_json_rejects_malformed_documents(document, message):
    with pytest.raises(CalibrationError) as raised:
        Calibrator.from_json(document)
    assert message in str(raised.value)


def test_from_json_accepts_a_well_formed_document():
    calibrator = Calibrator.from_json({"method": "isotonic", "params": ISOTONIC})
    assert calibrator.apply([0.05, 0.3, 0.95]).tolist() == pytest.approx([0.0, 0.2, 1.0])


FIVE_EACH = [0] * 5 + [1] * 5


@pytest.mark.parametrize(
    "p, relevant, kwargs, message",
    [
        ([0.1, 0.2], [1], {}, "P and relevant must have one length; got 2 and 1"),
        ([[0.1], [0.2]], [[1], [0]], {}, "must be 1-d"),
        ([1.5] + [0.5] * 9, FIVE_EACH, {}, "P must lie within [0, 1]; 1 do not, e.g. 1.5"),
        ([-0.1] + [0.5] * 9, FIVE_EACH, {}, "P must lie within [0, 1]"),
        ([float("nan")] + [0.5] * 9, FIVE_EACH, {}, "P must not be NaN; 1 are"),
        (["high"] * 10, FIVE_EACH, {}, "P must be numbers"),
        ([0.5] * 10, [0.5] * 10, {}, "relevant must be booleans or 0/1"),
        ([0.5] * 10, ["yes", "no"] * 5, {}, "relevant must be booleans or 0/1"),
        ([0.5] * 10, [None, True] * 5, {}, "relevant must be booleans or 0/1"),
        (
            [0.9] * 595,
            [True] * 595,
            {},
            "needs at least 5 relevant and 5 non-relevant gold pairs to fit with 5 folds; "
            "has 595 relevant and 0 non-relevant",
        ),
        ([0.5] * 14, [1] * 4 + [0] * 10, {}, "has 4 relevant and 10 non-relevant"),
        ([0.5] * 10, FIVE_EACH, {"folds": 6}, "needs at least 6 relevant and 6 non-relevant"),
        ([0.5] * 10, FIVE_EACH, {"folds": 1}, "folds must be an integer >= 2; got 1"),
    ],
)
def test_calibrator_fit_rejects_bad_input_naming_the_problem(p, relevant, kwargs, message):
    with pytest.raises(CalibrationError) as raised:
        calibrator_fit(p, relevant, **kwargs)
    assert message in str(raised.value)


def test_fits_with_the_fewest_pairs_the_folds_allow():
    fit = calibrator_fit([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0], [0.0] * 5 + [1.0] * 5)
    assert (fit.n, fit.n_relevant) == (10, 5)
    assert np.all(np.diff(fit.calibrator.apply(GRID)) >= 0)


def test_apply_rejects_p_outside_unit_interval():
    calibrator = Calibrator.from_json({"method": "platt", "params": {"a": 1.0, "b": 0.0}})
    with pytest.raises(CalibrationError, match="within"):
        calibrator.apply([0.5, 1.01])
    with pytest.raises(CalibrationError, match="NaN"):
        calibrator.apply([float("nan")])

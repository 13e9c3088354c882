"""Recalibrate a judge's raw P against gold pairs (isotonic regression or Platt scaling, chosen by
out-of-fold Brier) and report ECE and Brier before and after from cross-validation; and the calibrator's posterior,
whose draws carry the fit's own uncertainty into a sum of calibrated P."""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np
from scipy.special import expit, logit
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold

from models_llm.metrics.calibration_error import brier, ece

METHODS = ("isotonic", "platt")

# The folds of the cross-validated choice unless the caller says; a fit needs this many gold pairs of each class.
FOLDS = 5

# An isotonic block's calibrated P is the posterior mean of its rate under the Beta(PRIOR, PRIOR) prior, Jeffreys'
# (k + 1/2) / (n + 1): never exactly 0 or 1, so a block of 200 irrelevant gold pairs says 1 in 402, not "never",
# of the thousands of open pairs beside it. The uniform prior, (k + 1) / (n + 2), adds a pseudo-relevant pair to
# every block: over the many small blocks of a rare class it overstated the relevant count of simulated pools of
# 1,000 pairs (150 gold, a step-shaped truth) twice as much as Jeffreys' did (8.7 pairs on average against 4.1).
PRIOR = 0.5

# P is clipped to [LOGIT_EPS, 1 - LOGIT_EPS] before the logit only so that P = 0 or 1 stays finite; 1e-12 keeps
# the resolution of any probability a judge realistically reports.
LOGIT_EPS = 1e-12

# Effectively unregularized (the penalty a^2 / (2 C) is negligible beside the summed log loss of even 10 pairs),
# but finite so that perfectly separated gold pairs give a large finite slope instead of a diverging solver.
PLATT_C = 1e4
PLATT_TOL = 1e-8


class CalibrationError(ValueError):
    """Gold pairs or a stored calibrator that cannot be used, with what is wrong."""


def _is_number(value) -> bool:
    # bool is an int subclass, but True as a threshold is a malformed document, not 1.0.
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _checked_params(method: str, params) -> dict:
    """The params of `method` as plain floats, or CalibrationError naming what is wrong."""
    if method not in METHODS:
        raise CalibrationError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    if not isinstance(params, dict):
        raise CalibrationError(f"{method} params must be a dict; got {type(params).__name__}")
    expected = {"x", "y"} if method == "isotonic" else {"a", "b"}
    if set(params) != expected:
        raise CalibrationError(
            f"{method} params must have exactly the keys {sorted(expected)}; got {sorted(map(str, params))}"
        )
    if method == "platt":
        for key in ("a", "b"):
            if not _is_number(params[key]):
                raise CalibrationError(f"platt param {key} must be a finite number; got {params[key]!r}")
        if params["a"] <= 0:
            raise CalibrationError(
                f"platt slope a must be > 0 so that calibrated P rises with raw P; got {params['a']}"
            )
        return {"a": float(params["a"]), "b": float(params["b"])}
    for key in ("x", "y"):
        values = params[key]
        if not isinstance(values, (list, tuple)) or not values:
            raise CalibrationError(f"isotonic param {key} must be a non-empty list of numbers")
        bad = [v for v in values if not _is_number(v) or not 0.0 <= v <= 1.0]
        if bad:
            raise CalibrationError(f"isotonic param {key} must hold numbers within [0, 1]; got {bad[0]!r}")
    x, y = np.asarray(params["x"], dtype=float), np.asarray(params["y"], dtype=float)
    if x.size != y.size:
        raise CalibrationError(f"isotonic params x and y must have one length; got {x.size} and {y.size}")
    if np.any(np.diff(x) <= 0):
        raise CalibrationError("isotonic param x must be strictly increasing")
    if np.any(np.diff(y) < 0):
        raise CalibrationError("isotonic param y must be non-decreasing, else calibrated P would fall as raw P rises")
    return {"x": x.tolist(), "y": y.tolist()}


def _checked_p(p) -> np.ndarray:
    try:
        p = np.asarray(p, dtype=float)
    except (TypeError, ValueError) as exc:
        raise CalibrationError(f"P must be numbers: {exc}") from None
    if np.isnan(p).any():
        raise CalibrationError(f"P must not be NaN; {int(np.isnan(p).sum())} are")
    outside = (p < 0.0) | (p > 1.0)
    if outside.any():
        raise CalibrationError(
            f"P must lie within [0, 1]; {int(outside.sum())} do not, e.g. {float(p[outside].flat[0])!r}"
        )
    return p


@dataclass(frozen=True)
class Calibrator:
    """A monotone map from a judge's raw P to a calibrated P.

    isotonic: params {"x", "y"}: x the thresholds of scikit-learn's IsotonicRegression, y each threshold's block rate
    smoothed to its Beta posterior mean (see isotonic_posterior); calibrated P interpolates linearly between them and
    is constant beyond the ends (out_of_bounds="clip").
    platt: params {"a", "b"}; calibrated P = sigmoid(a * logit(P) + b) with P clipped to [LOGIT_EPS, 1 - LOGIT_EPS].
    """

    method: str
    params: dict

    def __post_init__(self) -> None:
        # Validating here, not only in from_json, means no Calibrator can exist that breaks monotonicity.
        object.__setattr__(self, "params", _checked_params(self.method, self.params))

    def apply(self, p) -> np.ndarray:
        """Calibrated P, within [0, 1] and non-decreasing in `p`; same shape as `p`."""
        p = _checked_p(p)
        if self.method == "isotonic":
            # np.interp is constant beyond the end thresholds, which is IsotonicRegression's clip, and gives the
            # same floats as its predict (tested).
            return np.asarray(np.interp(p, self.params["x"], self.params["y"]))
        return np.asarray(_platt(p, self.params["a"], self.params["b"]))

    def to_json(self) -> dict:
        # A copy, so that a caller editing the stored document cannot change this calibrator.
        return {"method": self.method, "params": copy.deepcopy(self.params)}

    @classmethod
    def from_json(cls, data: dict) -> Calibrator:
        """The calibrator `to_json` described; CalibrationError naming what is wrong if `data` is malformed."""
        if not isinstance(data, dict):
            raise CalibrationError(f"a stored calibrator must be a dict; got {type(data).__name__}")
        if set(data) != {"method", "params"}:
            raise CalibrationError(
                f"a stored calibrator must have exactly the keys ['method', 'params']; got {sorted(map(str, data))}"
            )
        return cls(method=data["method"], params=data["params"])


def _platt(p: np.ndarray, a: float, b: float) -> np.ndarray:
    return expit(a * logit(np.clip(p, LOGIT_EPS, 1.0 - LOGIT_EPS)) + b)


@dataclass(frozen=True)
class CalibrationFit:
    """A calibrator fitted on all the given gold pairs, with out-of-fold ECE and Brier.

    cv: {"folds", "seed", "chosen", "raw", "isotonic", "platt", "platt_skipped", "calibrated"}; each figure is
    {"ece", "brier"} over the out-of-fold predictions of all pairs ("raw": the raw P on the same pairs); "platt" is
    None when Platt scaling was not eligible, with the reason in "platt_skipped" (else None); "calibrated" repeats
    the chosen method's figures.
    """

    calibrator: Calibrator
    n: int
    n_relevant: int
    cv: dict


def _checked_pairs(p, relevant) -> tuple[np.ndarray, np.ndarray]:
    p = _checked_p(p)
    relevant = np.asarray(relevant)
    if p.ndim != 1 or relevant.ndim != 1:
        raise CalibrationError(f"P and relevant must be 1-d; got shapes {p.shape} and {relevant.shape}")
    if p.size != relevant.size:
        raise CalibrationError(f"P and relevant must have one length; got {p.size} and {relevant.size}")
    if relevant.dtype != bool:
        if relevant.dtype.kind not in "iuf" or not np.isin(relevant, (0, 1)).all():
            raise CalibrationError("relevant must be booleans or 0/1")
    return p, relevant.astype(float)


def _weighted_pairs(values: np.ndarray, index: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, ...]:
    """The pairs as (P, outcome, count) with one row per distinct P and outcome.

    Fitting on these counts instead of on every pair is what makes 1.3M pairs x 12 fits take seconds: both fits
    minimize a sum over pairs, so pairs sharing P and outcome contribute as one weighted row. IsotonicRegression
    even lands on the same floats, since it averages duplicate P as sum(weight * outcome) / sum(weight), which are
    the same whole numbers either way."""
    pos = np.bincount(index, weights=y, minlength=values.size)
    neg = np.bincount(index, minlength=values.size) - pos
    x = np.concatenate([values, values])
    t = np.repeat([0.0, 1.0], values.size)
    w = np.concatenate([neg, pos])
    keep = w > 0
    return x[keep], t[keep], w[keep]


def _fit_isotonic(x: np.ndarray, t: np.ndarray, w: np.ndarray) -> Calibrator:
    return _isotonic_posterior(x, t, w).mean()


def _platt_coefficients(x: np.ndarray, t: np.ndarray, w: np.ndarray) -> tuple[float, float]:
    features = logit(np.clip(x, LOGIT_EPS, 1.0 - LOGIT_EPS)).reshape(-1, 1)
    # Newton steps converge on one feature in a handful of iterations, about twice as fast as lbfgs here.
    model = LogisticRegression(C=PLATT_C, solver="newton-cholesky", tol=PLATT_TOL, max_iter=100)
    model.fit(features, t, sample_weight=w)
    return float(model.coef_[0, 0]), float(model.intercept_[0])


def _figures(p: np.ndarray, y: np.ndarray) -> dict:
    return {"ece": ece(p, y), "brier": brier(p, y)}


def calibrator_fit(p, relevant, *, folds: int = FOLDS, seed: int = 0) -> CalibrationFit:
    """Fit isotonic regression (each block smoothed to its Beta posterior mean) and Platt scaling of raw P to the
    gold outcomes; keep the one with the lower out-of-fold Brier (StratifiedKFold(folds, shuffle=True,
    random_state=seed)), refitted on all pairs.

    Platt scaling is skipped when any of its fits has slope a <= 0, as its calibrated P would then fall as raw P
    rises. On a Brier tie Platt is kept: it has two parameters and never merges distinct raw P into one value.
    """
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise CalibrationError(f"folds must be an integer >= 2; got {folds!r}")
    p, y = _checked_pairs(p, relevant)
    n, n_relevant = int(p.size), int(y.sum())
    if min(n_relevant, n - n_relevant) < folds:
        raise CalibrationError(
            f"needs at least {folds} relevant and {folds} non-relevant gold pairs to fit with {folds} folds; "
            f"has {n_relevant} relevant and {n - n_relevant} non-relevant"
        )
    # One sort for all the fits; each fit then sees its pairs as counts per distinct P.
    values, index = np.unique(p, return_inverse=True)

    oof_isotonic = np.empty(n)
    oof_platt = np.empty(n)
    platt_skipped = None
    splits = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed).split(p.reshape(-1, 1), y)
    for fold, (train, test) in enumerate(splits, start=1):
        pairs = _weighted_pairs(values, index[train], y[train])
        oof_isotonic[test] = _fit_isotonic(*pairs).apply(p[test])
        if platt_skipped is None:
            a, b = _platt_coefficients(*pairs)
            if a <= 0:
                platt_skipped = f"fitted slope a = {a:.4g} <= 0 in fold {fold}: calibrated P would fall as raw P rises"
            else:
                oof_platt[test] = _platt(p[test], a, b)

    pairs = _weighted_pairs(values, index, y)
    isotonic = _fit_isotonic(*pairs)
    platt = None
    if platt_skipped is None:
        a, b = _platt_coefficients(*pairs)
        if a <= 0:
            platt_skipped = f"fitted slope a = {a:.4g} <= 0 on all pairs: calibrated P would fall as raw P rises"
        else:
            platt = Calibrator("platt", {"a": a, "b": b})

    isotonic_figures = _figures(oof_isotonic, y)
    platt_figures = _figures(oof_platt, y) if platt is not None else None
    if platt_figures is not None and platt_figures["brier"] <= isotonic_figures["brier"]:
        chosen, calibrator, calibrated = "platt", platt, platt_figures
    else:
        chosen, calibrator, calibrated = "isotonic", isotonic, isotonic_figures
    cv = {
        "folds": folds,
        "seed": seed,
        "chosen": chosen,
        "raw": _figures(p, y),
        "isotonic": isotonic_figures,
        "platt": platt_figures,
        "platt_skipped": platt_skipped,
        "calibrated": dict(calibrated),
    }
    return CalibrationFit(calibrator=calibrator, n=n, n_relevant=n_relevant, cv=cv)


@dataclass(frozen=True, eq=False)
class IsotonicPosterior:
    """The posterior of an isotonic calibrator: the blocks pool adjacent violators made of the gold pairs, each
    block's rate r_b ~ Beta(PRIOR + relevant in it, PRIOR + non-relevant in it), drawn independently (the order
    between blocks is not imposed on a draw). `x`: the thresholds, `block`: each threshold's block; calibrated P
    interpolates the thresholds' rates as the calibrator does."""

    x: np.ndarray
    block: np.ndarray
    alpha: np.ndarray
    beta: np.ndarray
    method = "isotonic"

    def mean(self) -> Calibrator:
        """The calibrator of the posterior mean rates, (k + PRIOR) / (n + 2 PRIOR) per block (pooled where the
        prior reversed two blocks)."""
        return Calibrator("isotonic", {"x": self.x.tolist(),
                                       "y": (self.alpha / (self.alpha + self.beta))[self.block].tolist()})

    def draw(self, p, draws: int, rng: np.random.Generator) -> np.ndarray:
        """(draws, len(p)): the calibrated P of `p` under `draws` draws of the block rates."""
        p = _checked_p(p).ravel()
        rates = rng.beta(self.alpha, self.beta, size=(draws, self.alpha.size))[:, self.block]
        if self.x.size == 1:
            return np.repeat(rates, p.size, axis=1)
        left = np.clip(np.searchsorted(self.x, p, side="right") - 1, 0, self.x.size - 2)
        share = np.clip((p - self.x[left]) / (self.x[left + 1] - self.x[left]), 0.0, 1.0)
        return rates[:, left] * (1.0 - share) + rates[:, left + 1] * share


@dataclass(frozen=True, eq=False)
class PlattPosterior:
    """The posterior of a Platt calibrator by the Laplace approximation: (a, b) ~ Normal(the fit, the inverse of
    the penalised log-likelihood's Hessian there), flat prior but for the fit's own small penalty on a."""

    centre: np.ndarray
    covariance: np.ndarray
    method = "platt"

    def draw(self, p, draws: int, rng: np.random.Generator) -> np.ndarray:
        """(draws, len(p)): the calibrated P of `p` under `draws` draws of (a, b)."""
        feature = logit(np.clip(_checked_p(p).ravel(), LOGIT_EPS, 1.0 - LOGIT_EPS))
        a, b = rng.multivariate_normal(self.centre, self.covariance, size=draws, method="eigh").T
        return expit(a[:, None] * feature[None, :] + b[:, None])


CalibratorPosterior = IsotonicPosterior | PlattPosterior


def _isotonic_posterior(x: np.ndarray, t: np.ndarray, w: np.ndarray) -> IsotonicPosterior:
    model = IsotonicRegression(increasing=True, out_of_bounds="clip", y_min=0.0, y_max=1.0)
    model.fit(x, t, sample_weight=w)
    thresholds, means = model.X_thresholds_, model.y_thresholds_
    # np.interp gives the thresholds' own values at them and a flat block's value inside it, bit for bit: every
    # pair lands on its block's level exactly
    levels, block = np.unique(np.interp(x, thresholds, means), return_inverse=True)
    relevant = np.bincount(block, weights=w * t, minlength=levels.size)
    alpha, beta = PRIOR + relevant, PRIOR + np.bincount(block, weights=w, minlength=levels.size) - relevant
    # The prior can reverse two neighbours (one irrelevant pair, 1/3, beside 1 relevant of 10, 2/12): pool them
    # again, their posterior counts added, as pool adjacent violators pools raw ones.
    pooled = IsotonicRegression().fit(np.arange(levels.size), alpha / (alpha + beta), sample_weight=alpha + beta)
    _, group = np.unique(pooled.predict(np.arange(levels.size)), return_inverse=True)
    return IsotonicPosterior(x=np.asarray(thresholds, dtype=float), block=group[np.searchsorted(levels, means)],
                             alpha=np.bincount(group, weights=alpha), beta=np.bincount(group, weights=beta))


def _platt_posterior(x: np.ndarray, t: np.ndarray, w: np.ndarray) -> PlattPosterior | None:
    a, b = _platt_coefficients(x, t, w)
    if a <= 0:
        return None
    feature = logit(np.clip(x, LOGIT_EPS, 1.0 - LOGIT_EPS))
    p = _platt(x, a, b)
    design = np.stack([feature, np.ones_like(feature)], axis=1)
    hessian = (design * (w * p * (1.0 - p))[:, None]).T @ design + np.diag([1.0 / PLATT_C, 0.0])
    return PlattPosterior(centre=np.array([a, b]), covariance=np.linalg.pinv(hessian, hermitian=True))


def calibrator_posterior(method: str, p, relevant) -> CalibratorPosterior | None:
    """The posterior of a calibrator of `method` (isotonic or platt) fitted on all the given pairs: its draws are
    the calibrator's uncertainty. The isotonic posterior's mean is the isotonic calibrator calibrator_fit stores;
    Platt's is centred on its fit. None where the method cannot be fitted on these pairs (one class only, or a
    Platt slope a <= 0)."""
    if method not in METHODS:
        raise CalibrationError(f"unknown calibration method {method!r}")
    p, y = _checked_pairs(p, relevant)
    if y.size == 0 or y.min() == y.max():
        return None
    values, index = np.unique(p, return_inverse=True)
    pairs = _weighted_pairs(values, index, y)
    return _isotonic_posterior(*pairs) if method == "isotonic" else _platt_posterior(*pairs)

"""Significance of the differences between runs (#34): for each qrels source and measure of a systems report, every
pair of runs compared over the queries the source evaluates (models_llm.systems.significance), for the Systems
page, the API and `evaluate_runs --compare`."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from labeling.exceptions import DomainError
from labeling.selectors.systems import JUDGED, SystemsReport
from models_llm.systems.significance import (
    CORRECTIONS,
    DEFAULT_DRAWS,
    TESTS,
    Comparison,
    SignificanceError,
    compare_runs,
)

DEFAULT_TEST, DEFAULT_CORRECTION, DEFAULT_ALPHA = "randomization", "holm", 0.05


class SignificanceOptionError(DomainError):
    """A test, correction, number of draws or alpha that is not one of the choices."""


@dataclass(frozen=True)
class SignificanceOptions:
    test: str = DEFAULT_TEST
    correction: str = DEFAULT_CORRECTION
    draws: int = DEFAULT_DRAWS
    alpha: float = DEFAULT_ALPHA
    seed: int = 0


def significance_options(*, test: object = None, correction: object = None, draws: object = None,
                         alpha: object = None, seed: object = None) -> SignificanceOptions:
    """The options from a request's or a command's values (None: the default); SignificanceOptionError names a bad
    one."""
    options = SignificanceOptions(
        test=DEFAULT_TEST if test in (None, "") else str(test),
        correction=DEFAULT_CORRECTION if correction in (None, "") else str(correction),
        draws=DEFAULT_DRAWS if draws in (None, "") else _number(draws, int, "draws"),
        alpha=DEFAULT_ALPHA if alpha in (None, "") else _number(alpha, float, "alpha"),
        seed=0 if seed in (None, "") else _number(seed, int, "seed"),
    )
    try:
        compare_runs(["a", "b"], np.zeros((2, 2)), test=options.test, correction=options.correction,
                     draws=options.draws, alpha=options.alpha)
    except SignificanceError as exc:
        raise SignificanceOptionError(str(exc)) from None
    return options


def _number(value: object, kind: type, name: str):
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise SignificanceOptionError(f"{name} must be a number, not {value!r}") from None


def systems_significance(report: SystemsReport, options: SignificanceOptions | None = None,
                         measures: tuple[str, ...] | None = None) -> dict[str, dict[str, Comparison]]:
    """source key -> measure -> Comparison of every pair of the report's runs over the queries the source
    evaluates (judged@k left out: it says how much was judged, not how good a run is). Needs two runs."""
    options = options or SignificanceOptions()
    runs = list(report.runs)
    if len(runs) < 2:
        return {}
    chosen = measures or tuple(measure for measure in report.measures if measure != JUDGED)
    found: dict[str, dict[str, Comparison]] = {}
    for source in report.sources:
        per_source = {}
        for measure in chosen:
            rows = [report.per_query[run][source.key].values.get(measure) for run in runs]
            if any(row is None for row in rows) or rows[0].size == 0:
                continue
            per_source[measure] = compare_runs(runs, np.vstack(rows), test=options.test,
                                               correction=options.correction, draws=options.draws,
                                               seed=options.seed, alpha=options.alpha)
        found[source.key] = per_source
    return found


def _finite(value: float | None) -> float | None:
    return value if value is None or math.isfinite(value) else None


def comparison_json(comparison: Comparison) -> dict:
    """A Comparison as the API and `--json` give it (a number that is not finite as null)."""
    return {
        "test": comparison.test, "correction": comparison.correction, "alpha": comparison.alpha,
        "draws": comparison.draws, "queries": comparison.queries,
        "means": {run: _finite(mean) for run, mean in comparison.means.items()},
        "best": comparison.best, "tied_with_best": list(comparison.tied_with_best),
        "pairs": [{"a": pair.a, "b": pair.b, **{name: _finite(getattr(pair, name)) for name in (
            "mean_difference", "low", "high", "effect_size", "p", "p_corrected")}} for pair in comparison.pairs],
    }


__all__ = ["CORRECTIONS", "TESTS", "SignificanceOptionError", "SignificanceOptions", "comparison_json",
           "significance_options", "systems_significance"]

"""When a judge's P makes a pair relevant: one rule per judge, used by every binary reading of its P (its guess,
the validation's confusion and kappa, its `judge:NAME` qrels, the export, the Systems page, `evaluate_runs`).

- `POINTWISE`: P >= 0.5, on the calibrated P where the judge has a calibrator (DIRAS: a Tok judge's P is a
  probability; 0.5 is where Yes and No are equally likely).
- `SCORE_ABOVE_ZERO`: P > 0 on the judge's own P, i.e. its mean score above 0. DisastIR section 4.1 (LVHL):
  "we follow Wang et al. (2024b) and binarize the LLM scores into two levels: relevant (score > 0) and not
  relevant (score = 0)". The DisastIR prompt-strategy ensemble has P = mean score / top score, so P > 0 exactly
  when the mean score is above 0. A calibrated P is never compared with 0: a calibrator can map a score of 0 to
  a small positive P, which would make every pair relevant.
- `threshold_rule(t)`: P >= t on the calibrated P, what an operator asks for with a threshold (`--threshold`)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RelevanceRule:
    """Relevant when P >= `threshold` (P > `threshold` when `strict`); `calibrated`: compared with the calibrated
    P where the judge has a calibrator, else with the judge's own P."""

    threshold: float
    strict: bool = False
    calibrated: bool = True

    def relevant(self, p):
        """Whether P (a float or an array) is relevant under the rule; NaN is never relevant."""
        if isinstance(p, np.ndarray):
            return p > self.threshold if self.strict else p >= self.threshold
        return bool(p > self.threshold) if self.strict else bool(p >= self.threshold)

    @property
    def text(self) -> str:
        """The rule in one line, as pages, the API and release records state it."""
        said = f"P {'>' if self.strict else '>='} {self.threshold:g}"
        if self == SCORE_ABOVE_ZERO:
            return f"{said} (the mean score above 0; DisastIR: relevant (score > 0)), on the judge's own P"
        return f"{said}, on the calibrated P where the judge has a calibrator" if self.calibrated else said

    @property
    def slug(self) -> str:
        """The rule in a file name: `t0.5` (P >= 0.5), `gt0` (P > 0)."""
        return f"{'gt' if self.strict else 't'}{self.threshold:g}"


POINTWISE = RelevanceRule(0.5)
SCORE_ABOVE_ZERO = RelevanceRule(0.0, strict=True, calibrated=False)


def threshold_rule(threshold: float) -> RelevanceRule:
    """P >= `threshold` on the calibrated P: an operator's threshold; ValueError outside [0, 1]."""
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"a threshold is a P within [0, 1], got {threshold}")
    return RelevanceRule(float(threshold))


def is_probability(text: str) -> bool:
    """Whether `text` (a query parameter, a form field) is a number within [0, 1]; nan is not."""
    try:
        return 0.0 <= float(text) <= 1.0
    except ValueError:
        return False

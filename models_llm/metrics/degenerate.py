"""Whether a judge's binary calls tell relevant pairs from the others at all: a judge that puts (almost) every pair
on one side of its threshold, or whose calls agree with gold no better than chance, ranks systems and writes qrels
that say nothing (a judge calling every pair relevant gives every run an nDCG of 1). Such a judge is degenerate: the
reports warn where it grades and never mark it the best.

The rule, one place for every report:
- one side: at least ONE_SIDE_SHARE (98 %) of the pairs it judged are called relevant, or at least that share are
  called not relevant, once it has judged MIN_PAIRS pairs (fewer say nothing either way);
- chance agreement: Cohen's kappa of its calls against gold on the gold pairs it judged is below KAPPA_FLOOR
  (0.05), where kappa is defined (gold holds both relevant and non-relevant pairs it judged). A kappa below 0 is
  worse than chance, degenerate too. The point estimate decides, not its interval: an interval covering 0 on a
  dozen gold pairs says the gold set is small, not that the judge guesses."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models_llm.metrics.classification import Confusion

ONE_SIDE_SHARE = 0.98
MIN_PAIRS = 20
KAPPA_FLOOR = 0.05


@dataclass(frozen=True)
class Degeneracy:
    """A judge's calls as the rule reads them: `n` pairs judged, `n_relevant` of them called relevant; `kappa` of
    its calls against gold on the `n_gold` gold pairs it judged (None: undefined, gold there has one class);
    `one_side` and `chance` say which part of the rule it falls under."""

    n: int
    n_relevant: int
    n_gold: int
    kappa: float | None
    one_side: bool
    chance: bool

    @property
    def degenerate(self) -> bool:
        return self.one_side or self.chance

    @property
    def reason(self) -> str:
        """Why the judge is degenerate, in one plain sentence ("" when it is not)."""
        said = []
        if self.one_side:
            side = "relevant" if 2 * self.n_relevant >= self.n else "not relevant"
            count = self.n_relevant if side == "relevant" else self.n - self.n_relevant
            said.append(f"it calls {count:,} of the {self.n:,} pairs it judged {side}")
        if self.chance:
            said.append(f"its calls agree with gold no better than chance (Cohen's kappa {self.kappa:.3f} on "
                        f"{self.n_gold:,} gold pairs)")
        return "; ".join(said)

    def as_json(self) -> dict:
        return {"degenerate": self.degenerate, "reason": self.reason, "n": self.n, "n_relevant": self.n_relevant,
                "n_gold": self.n_gold, "kappa": self.kappa, "one_side": self.one_side, "chance": self.chance}

    @classmethod
    def from_json(cls, data: dict) -> Degeneracy:
        return cls(n=int(data["n"]), n_relevant=int(data["n_relevant"]), n_gold=int(data["n_gold"]),
                   kappa=data["kappa"], one_side=bool(data["one_side"]), chance=bool(data["chance"]))


def degeneracy(calls: np.ndarray, gold_relevant: np.ndarray, gold_calls: np.ndarray) -> Degeneracy:
    """The rule on a judge's binary calls: `calls` on every pair it judged (True: relevant), `gold_relevant` and
    `gold_calls` on the gold pairs it judged (gold's binary grade and the judge's call, aligned)."""
    calls = np.asarray(calls, bool)
    gold_relevant, gold_calls = np.asarray(gold_relevant, bool), np.asarray(gold_calls, bool)
    n, n_relevant = int(calls.size), int(calls.sum())
    one_side = n >= MIN_PAIRS and max(n_relevant, n - n_relevant) >= ONE_SIDE_SHARE * n
    kappa = float(Confusion.of(gold_relevant, gold_calls).kappa()) if gold_relevant.size else float("nan")
    defined = bool(np.isfinite(kappa))
    return Degeneracy(n=n, n_relevant=n_relevant, n_gold=int(gold_relevant.size), kappa=kappa if defined else None,
                      one_side=bool(one_side), chance=defined and kappa < KAPPA_FLOOR)

"""What the judge metrics take in: a graded relevance scale, one judge's gold-judged pairs, and the pairs
grouped by query."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class ScaleSpec:
    """A graded relevance scale: the nDCG gain of each grade and the lowest grade that counts as relevant."""

    gains: dict[int, float]
    relevant_from: int

    def __post_init__(self) -> None:
        if not self.gains:
            raise ValueError("a scale needs at least one grade")
        gains = {int(grade): float(gain) for grade, gain in sorted(self.gains.items())}
        if any(not np.isfinite(gain) or gain < 0 for gain in gains.values()):
            raise ValueError(f"gains must be finite and >= 0, got {gains}")
        if self.relevant_from not in gains:
            raise ValueError(f"relevant_from {self.relevant_from} is not a grade of the scale {sorted(gains)}")
        object.__setattr__(self, "gains", gains)

    @property
    def grades(self) -> list[int]:
        return sorted(self.gains)

    @property
    def top_grade(self) -> int:
        return max(self.gains)

    def gain_of(self, grades: np.ndarray) -> np.ndarray:
        """The gain of each grade; ValueError for a grade the scale does not have."""
        known = np.asarray(self.grades)
        grades = np.asarray(grades, dtype=np.int64)
        at = np.minimum(np.searchsorted(known, grades), known.size - 1)
        unknown = known[at] != grades
        if unknown.any():
            raise ValueError(f"grades {sorted(set(grades[unknown].tolist()))} are not on the scale {known.tolist()}")
        return np.asarray([self.gains[g] for g in self.grades])[at]


def _column(values, dtype, name: str, size: int | None) -> np.ndarray:
    array = np.asarray(values, dtype=dtype)
    if array.ndim != 1 or (size is not None and array.size != size):
        raise ValueError(f"{name} must be a 1-d array with one entry per pair (shape {array.shape})")
    return array


@dataclass(frozen=True)
class JudgeData:
    """One judge on the pairs that have a gold grade, one row per pair, in pool order. `query` is the ranking
    unit of the pair (a query, or a query and a passage metadata value). `judged` (default: all) marks the
    pairs the judge judged; the others hold P = 0 and no guess as placeholders: the rankings put them after every
    judged pair of their unit, as trec_eval ranks a document the run lacks, and the per-pair metrics (agreement,
    AUROC, calibration) leave them out, since a P the judge never gave is not 0."""

    query: np.ndarray
    gold: np.ndarray
    p: np.ndarray
    guess: np.ndarray
    confidence: np.ndarray
    uncertain: np.ndarray
    groups: dict[str, np.ndarray] = field(default_factory=dict)
    judged: np.ndarray | None = None

    def __post_init__(self) -> None:
        query = _column(self.query, np.int64, "query", None)
        n = query.size
        columns = {
            "query": query,
            "gold": _column(self.gold, np.int64, "gold", n),
            "p": _column(self.p, float, "p", n),
            "guess": _column(self.guess, float, "guess", n),
            "confidence": _column(self.confidence, float, "confidence", n),
            "uncertain": _column(self.uncertain, bool, "uncertain", n),
            "judged": np.ones(n, bool) if self.judged is None else _column(self.judged, bool, "judged", n),
        }
        p, guess, confidence = columns["p"], columns["guess"], columns["confidence"]
        if np.isnan(p).any() or (p < 0).any() or (p > 1).any():
            raise ValueError("p must hold probabilities within [0, 1]")
        if (p[~columns["judged"]] != 0).any() or not np.isnan(guess[~columns["judged"]]).all():
            raise ValueError("a pair the judge did not judge has P = 0 and no guess")
        if not np.isin(guess[~np.isnan(guess)], (0.0, 1.0)).all():
            raise ValueError("guess must be 1.0 (yes), 0.0 (no) or nan (no guess)")
        stated = confidence[~np.isnan(confidence)]
        if (stated < 0).any() or (stated > 1).any():
            raise ValueError("confidence must be within [0, 1] or nan (none stated)")
        groups = {str(key): _column(values, object, f"groups[{key!r}]", n) for key, values in self.groups.items()}
        for name, array in columns.items():
            object.__setattr__(self, name, array)
        object.__setattr__(self, "groups", groups)

    @property
    def n(self) -> int:
        return int(self.query.size)

    def take(self, rows: np.ndarray) -> JudgeData:
        """The pairs at `rows` (indices or a mask), every column and group cut alike."""
        return JudgeData(query=self.query[rows], gold=self.gold[rows], p=self.p[rows], guess=self.guess[rows],
                         confidence=self.confidence[rows], uncertain=self.uncertain[rows],
                         groups={key: values[rows] for key, values in self.groups.items()}, judged=self.judged[rows])

    def relevant(self, scale: ScaleSpec) -> np.ndarray:
        """Binary gold: grade >= the scale's relevant_from."""
        return self.gold >= scale.relevant_from

    def predicted_relevant(self) -> np.ndarray:
        """The judge's binary call: its guess where it gave one, else P >= 0.5."""
        return np.where(np.isnan(self.guess), self.p >= 0.5, self.guess == 1.0)

    def confidence_used(self) -> np.ndarray:
        """The stated confidence where there is one, else max(P, 1 - P)."""
        return np.where(np.isnan(self.confidence), np.maximum(self.p, 1.0 - self.p), self.confidence)


@dataclass(frozen=True)
class QueryLayout:
    """The pairs grouped by query: `order` lists pair indices query by query, keeping pool order within a
    query; query k holds order[starts[k]:starts[k + 1]]; `code` is each pair's query number k."""

    order: np.ndarray
    starts: np.ndarray
    code: np.ndarray

    @classmethod
    def of(cls, query: np.ndarray) -> QueryLayout:
        _, code = np.unique(query, return_inverse=True)
        code = code.reshape(-1)
        order = np.argsort(code, kind="stable")
        starts = np.concatenate(([0], np.cumsum(np.bincount(code)))).astype(np.int64)
        return cls(order=order, starts=starts, code=code)

    @property
    def n_queries(self) -> int:
        return int(self.starts.size - 1)

    @property
    def sizes(self) -> np.ndarray:
        return np.diff(self.starts)

    def position(self) -> np.ndarray:
        """Each grouped pair's index within its query (0, 1, ...), in the order of `order`."""
        return np.arange(self.order.size) - np.repeat(self.starts[:-1], self.sizes)

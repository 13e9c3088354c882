"""Is run A better than run B beyond chance? Paired significance tests over the same queries, corrected for the
many comparisons of a leaderboard (#34). Plain Python: numpy and scipy, no Django.

For two runs' per-query scores a_q, b_q on the same n queries, d_q = a_q - b_q:

- **t**: the paired Student's t-test, t = mean(d) / (sd(d) / sqrt(n)), two-sided (scipy.stats.ttest_rel, as ranx's
  "student").
- **wilcoxon**: the Wilcoxon signed-rank test on d, two-sided, zero differences dropped (scipy.stats.wilcoxon,
  zero_method "wilcox"; p = 1 when every difference is zero).
- **randomization**: Fisher's paired randomization test (Smucker, Allan and Carterette 2007, as ranx's "fisher"):
  under the null hypothesis the two scores of a query are exchangeable, i.e. each d_q's sign is a fair coin.
  p = (1 + #{draws with |mean(s * d)| >= |mean(d)|}) / (1 + draws), s a vector of random signs (seeded); the +1
  counts the observed assignment itself, so p is never 0 (ranx's estimate, #/draws, differs from it by at most
  1/draws).

Beside each p: the mean difference, its 95 % t interval mean(d) +- t_{0.975, n-1} sd(d) / sqrt(n), and the effect
size d_z = mean(d) / sd(d) (Cohen's d for paired samples).

Corrections over the k(k-1)/2 pairs of k runs (one family per qrels source and measure):
- **holm**: Holm-Bonferroni; sorted p_(1) <= ... <= p_(m), adjusted p_(i) = max_{j <= i} min(1, (m - j + 1) p_(j)).
- **tukey**: Tukey's HSD on the runs' per-query scores (scipy.stats.tukey_hsd, as ranx's "tukey"): its p-values
  stand in for the pairwise test's (kept beside them, raw). It treats the runs' scores as independent groups (as
  ranx does), which ignores the pairing by query and so is conservative for runs evaluated on the same queries.
- **none**: the raw p-values.

The runs indistinguishable from the best are those whose corrected p against the best (highest mean) is at least
alpha (default 0.05)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
from scipy import stats

TESTS = ("randomization", "t", "wilcoxon")
CORRECTIONS = ("holm", "tukey", "none")
DEFAULT_DRAWS = 10_000
MAX_DRAWS = 1_000_000
# The random signs are drawn in blocks of at most this many cells (draws x queries), to bound memory.
SIGN_BLOCK_CELLS = 4_000_000


class SignificanceError(ValueError):
    """A test, correction or number of draws that is not one of the choices, or scores that do not pair up."""


@dataclass(frozen=True)
class PairTest:
    """Run a against run b: the mean difference (a - b) with its 95 % t interval, the effect size d_z, and the
    raw and corrected p-values (None where the test is undefined: fewer than two queries)."""

    a: str
    b: str
    mean_difference: float
    low: float | None
    high: float | None
    effect_size: float | None
    p: float | None
    p_corrected: float | None = None


@dataclass(frozen=True)
class Comparison:
    """Every pair of runs on one measure and one set of queries, under one test and correction."""

    test: str
    correction: str
    alpha: float
    draws: int
    queries: int
    runs: tuple[str, ...]
    means: dict[str, float]
    pairs: list[PairTest]
    best: str | None
    tied_with_best: tuple[str, ...] = field(default=())

    def p_matrix(self) -> dict[str, dict[str, float | None]]:
        """run -> run -> corrected p (None on the diagonal)."""
        matrix: dict[str, dict[str, float | None]] = {run: dict.fromkeys(self.runs) for run in self.runs}
        for pair in self.pairs:
            matrix[pair.a][pair.b] = matrix[pair.b][pair.a] = pair.p_corrected
        return matrix


def _check(test: str, correction: str, draws: int, alpha: float) -> None:
    if test not in TESTS:
        raise SignificanceError(f"test must be one of {', '.join(TESTS)}, not {test!r}")
    if correction not in CORRECTIONS:
        raise SignificanceError(f"correction must be one of {', '.join(CORRECTIONS)}, not {correction!r}")
    if isinstance(draws, bool) or not isinstance(draws, int) or not 1 <= draws <= MAX_DRAWS:
        raise SignificanceError(f"draws must be a whole number from 1 to {MAX_DRAWS:,}, not {draws!r}")
    if not 0 < alpha < 1:
        raise SignificanceError(f"alpha must be within (0, 1), not {alpha!r}")


def randomization_p(differences: np.ndarray, *, draws: int = DEFAULT_DRAWS, seed: int = 0) -> np.ndarray:
    """Fisher's paired randomization test for each column of `differences` (queries x pairs), all columns under
    the same random sign vectors: p = (1 + #{|mean(s * d)| >= |mean(d)|}) / (1 + draws)."""
    d = np.asarray(differences, dtype=np.float64)
    if d.ndim == 1:
        d = d[:, None]
    n = d.shape[0]
    observed = np.abs(d.mean(axis=0))
    tolerance = 1e-12 * np.maximum(1.0, observed)  # a tie in exact arithmetic stays a tie in floating point
    hits = np.zeros(d.shape[1], dtype=np.int64)
    rng = np.random.default_rng(seed)
    block = max(1, SIGN_BLOCK_CELLS // max(n, 1))
    done = 0
    while done < draws:
        size = min(block, draws - done)
        signs = rng.integers(0, 2, size=(size, n), dtype=np.int8) * 2 - 1
        means = np.abs(signs.astype(np.float64) @ d) / n
        hits += (means >= observed - tolerance).sum(axis=0)
        done += size
    return (1.0 + hits) / (1.0 + draws)


def _pair_p(test: str, a: np.ndarray, b: np.ndarray) -> float | None:
    d = a - b
    if d.size < 2:
        return None
    if not np.any(d):
        return 1.0  # identical scores on every query: nothing to tell them apart
    if test == "t":
        if np.allclose(d, d[0]):
            return 0.0  # a constant, non-zero difference: t is infinite
        return float(stats.ttest_rel(a, b).pvalue)
    return float(stats.wilcoxon(a, b, zero_method="wilcox").pvalue)


def _summary(d: np.ndarray) -> tuple[float, float | None, float | None, float | None]:
    """mean(d), its 95 % t interval and d_z."""
    n = d.size
    mean = float(d.mean()) if n else math.nan
    if n < 2:
        return mean, None, None, None
    sd = float(d.std(ddof=1))
    if sd == 0:
        return mean, mean, mean, None
    half = float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
    return mean, mean - half, mean + half, mean / sd


def holm(p: list[float | None]) -> list[float | None]:
    """Holm-Bonferroni adjusted p-values, in the order given (None stays None and is not counted)."""
    known = [(value, index) for index, value in enumerate(p) if value is not None]
    m = len(known)
    adjusted: list[float | None] = [None] * len(p)
    running = 0.0
    for rank, (value, index) in enumerate(sorted(known)):
        running = max(running, min(1.0, (m - rank) * value))
        adjusted[index] = running
    return adjusted


def compare_runs(names: list[str], scores: np.ndarray, *, test: str = "randomization", correction: str = "holm",
                 draws: int = DEFAULT_DRAWS, seed: int = 0, alpha: float = 0.05) -> Comparison:
    """Every pair of `names` (rows of `scores`, runs x queries, the same queries in the same order) under `test`
    and `correction`; the best run (highest mean; the first named on a tie) and the runs indistinguishable from it."""
    _check(test, correction, draws, alpha)
    matrix = np.asarray(scores, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != len(names):
        raise SignificanceError(f"scores must be {len(names)} runs x queries, got shape {matrix.shape}")
    if not np.isfinite(matrix).all():
        raise SignificanceError("scores must be finite numbers")
    n = matrix.shape[1]
    means = {name: float(matrix[i].mean()) if n else math.nan for i, name in enumerate(names)}
    index_pairs = list(combinations(range(len(names)), 2))
    differences = np.column_stack([matrix[i] - matrix[j] for i, j in index_pairs]) if index_pairs else np.zeros((n, 0))
    if test == "randomization" and n >= 1 and index_pairs:
        raw: list[float | None] = [float(p) for p in randomization_p(differences, draws=draws, seed=seed)]
    else:
        raw = [_pair_p(test, matrix[i], matrix[j]) for i, j in index_pairs]
    if correction == "holm":
        corrected = holm(raw)
    elif correction == "tukey":
        corrected = _tukey(matrix, index_pairs)
    else:
        corrected = list(raw)
    pairs = []
    for column, (i, j) in enumerate(index_pairs):
        mean, low, high, effect = _summary(differences[:, column])
        pairs.append(PairTest(a=names[i], b=names[j], mean_difference=mean, low=low, high=high, effect_size=effect,
                              p=raw[column], p_corrected=corrected[column]))
    best = max(names, key=lambda name: (means[name], -names.index(name))) if names and n else None
    tied = ()
    if best is not None:
        against = {pair.b if pair.a == best else pair.a: pair.p_corrected for pair in pairs if best in (pair.a, pair.b)}
        tied = tuple(name for name in names if name == best or (against.get(name) is not None
                                                                 and against[name] >= alpha))
    return Comparison(test=test, correction=correction, alpha=alpha, draws=draws if test == "randomization" else 0,
                      queries=n, runs=tuple(names), means=means, pairs=pairs, best=best, tied_with_best=tied)


def _tukey(matrix: np.ndarray, index_pairs: list[tuple[int, int]]) -> list[float | None]:
    if matrix.shape[1] < 2 or len(matrix) < 2:
        return [None] * len(index_pairs)
    if np.all(matrix.std(axis=1, ddof=1) == 0):
        return [1.0 if np.allclose(matrix[i], matrix[j]) else 0.0 for i, j in index_pairs]
    result = stats.tukey_hsd(*matrix).pvalue
    return [float(min(1.0, result[i, j])) for i, j in index_pairs]

"""How far two rankings of the same systems agree: Kendall's tau-b, Spearman's rho and tau_AP (Yilmaz, Aslam &
Robertson 2008) of the systems' mean scores, with percentile bootstrap intervals over queries. Two uses: qrels
agreement (two qrels sources on the same queries, system_agreement) and DisastIR's LVHQ (the same qrels method on two
query sets, human-written and LLM-generated, query_set_agreement).

Systems are ranked by their mean over the queries that every system has a value for under both sources (a query
undefined, nan, for any system is left out for all of them, so that every mean is taken over the same queries).
Ties in the means: tau-b and Spearman's rho (average ranks) handle them as scipy does; tau_AP is its expected
value over the orders of the systems that b ties (each order as likely), where a pair that a ties counts half
concordant, or fully when b ties it too (both sources then agree that neither is ahead).
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from models_llm.metrics.bootstrap import BLOCK_CELLS, percentile_interval, resampling_counts

COEFFICIENTS = ("kendall_tau", "tau_ap", "spearman")
# Each coefficient in one plain line, with the way that is better.
COEFFICIENT_EXPLAIN = {
    "kendall_tau": "how alike the two sources order the runs: 1 same order, 0 unrelated, -1 reversed",
    "tau_ap": "Kendall's tau with swaps near the top weighing more; 1 is the same order",
    "spearman": "correlation of the runs' positions under the two sources; 1 is the same order",
}
# Fewer systems cannot show agreement: any two systems are in the same or the opposite order, so a rank
# correlation of two is +1 or -1 whatever the sources say.
MIN_SYSTEMS = 3


@dataclass(frozen=True)
class Agreement:
    """Agreement of source b's ranking of the systems with reference source a's (nan where a coefficient is
    undefined, e.g. every system tied)."""

    kendall_tau: float
    tau_ap: float
    spearman: float
    intervals: dict[str, tuple[float, float] | None]  # COEFFICIENTS -> bootstrap interval over queries
    largest_change: tuple[str, int, int] | None  # (system, rank under a, rank under b); None when no system moves
    n_systems: int
    n_queries: int


def tau_ap(reference: np.ndarray, other: np.ndarray) -> float:
    """tau_AP of the systems' ranking by `other` (scores, higher first) against the ranking by `reference`:
    2 / (N - 1) * sum over positions i = 2..N of C(i) / (i - 1), minus 1, where C(i) counts the systems `other`
    puts above position i that `reference` also ranks above that system. Ties as in the module docstring."""
    reference, other = np.asarray(reference, dtype=float), np.asarray(other, dtype=float)
    n = len(other)
    if n < 2 or len(reference) != n:
        raise ValueError(f"tau_AP needs two or more systems scored by both sources, got {len(reference)} and {n}")
    order = np.argsort(-other, kind="stable")
    ref, oth = reference[order], other[order]
    tied_ref, tied_other = ref[:, None] == ref[None, :], oth[:, None] == oth[None, :]
    # credit[j, x]: what j, placed above x by `other`, adds to C at x's position.
    credit = (ref[:, None] > ref[None, :]) + np.where(tied_ref, np.where(tied_other, 1.0, 0.5), 0.0)
    total = 0.0
    starts = np.flatnonzero(np.concatenate(([True], oth[1:] != oth[:-1])))
    for start, end in zip(starts, np.append(starts[1:], n)):
        size = end - start
        # A system of the tied group sits at each of its positions start + t alike; above it are the systems
        # before the group and t of the other size - 1 group members, drawn alike.
        before = credit[:start, start:end].sum(axis=0).mean()
        within = (credit[start:end, start:end].sum(axis=0) - 1.0).mean() / (size - 1) if size > 1 else 0.0
        t = np.arange(size)
        above = start + t
        kept = above > 0
        total += float(((before + t[kept] * within) / above[kept]).sum())
    return 2.0 * total / (n - 1) - 1.0


def _kendall_tau_b(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # Per row, scipy's tau-b: sum of sign products over the pairs of systems, over the square root of the numbers
    # of pairs each source does not tie. Rows are bootstrap draws, done together rather than one scipy call each.
    upper = np.triu_indices(a.shape[1], k=1)
    sign_a = np.sign(a[:, :, None] - a[:, None, :])[:, upper[0], upper[1]]
    sign_b = np.sign(b[:, :, None] - b[:, None, :])[:, upper[0], upper[1]]
    untied = np.sqrt(np.abs(sign_a).sum(axis=1) * np.abs(sign_b).sum(axis=1))
    return np.divide((sign_a * sign_b).sum(axis=1), untied, out=np.full(len(a), np.nan), where=untied > 0)


def _spearman(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # Per row, Pearson's correlation of the average ranks (scipy's spearmanr).
    rank_a = stats.rankdata(a, axis=1)
    rank_b = stats.rankdata(b, axis=1)
    rank_a -= rank_a.mean(axis=1, keepdims=True)
    rank_b -= rank_b.mean(axis=1, keepdims=True)
    spread = np.sqrt((rank_a**2).sum(axis=1) * (rank_b**2).sum(axis=1))
    return np.divide((rank_a * rank_b).sum(axis=1), spread, out=np.full(len(a), np.nan), where=spread > 0)


def _tau_ap_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # tau_ap per row. Bootstrap means rarely tie: rows without a tie in either source are done together (C(i) read
    # off one comparison array), and only the rows with ties go through tau_ap's expected value one by one.
    out = np.empty(len(a))
    n = a.shape[1]
    tied = np.array([len(np.unique(row_a)) < n or len(np.unique(row_b)) < n for row_a, row_b in zip(a, b)],
                    dtype=bool)
    plain = np.flatnonzero(~tied)
    if plain.size and n >= 2:
        order = np.argsort(-b[plain], axis=1)
        ref = np.take_along_axis(a[plain], order, axis=1)
        # above[d, j, i]: the system b puts at j (above i when j < i) is also above it for a.
        above = np.tril(np.ones((n, n), dtype=bool), k=-1).T[None] & (ref[:, :, None] > ref[:, None, :])
        c = above.sum(axis=1)[:, 1:]
        out[plain] = 2.0 * (c / np.arange(1, n)).sum(axis=1) / (n - 1) - 1.0
    for row in np.flatnonzero(tied):
        out[row] = tau_ap(a[row], b[row])
    return out


def _coefficients(mean_a: np.ndarray, mean_b: np.ndarray) -> dict[str, np.ndarray]:
    """COEFFICIENTS per row of (draws, systems) means under a and b; nan where every system ties."""
    return {"kendall_tau": _kendall_tau_b(mean_a, mean_b),
            "tau_ap": _tau_ap_rows(mean_a, mean_b),
            "spearman": _spearman(mean_a, mean_b)}


def _largest_change(systems: Sequence[str], mean_a: np.ndarray, mean_b: np.ndarray) -> tuple[str, int, int] | None:
    # Rank 1 is the best; tied systems share the best of their ranks.
    rank_a = stats.rankdata(-mean_a, method="min").astype(int)
    rank_b = stats.rankdata(-mean_b, method="min").astype(int)
    moved = np.abs(rank_a - rank_b)
    k = int(np.argmax(moved))
    return (systems[k], int(rank_a[k]), int(rank_b[k])) if moved[k] > 0 else None


def _agreement(systems: Sequence[str], a: np.ndarray, b: np.ndarray, blocks: Iterator[tuple[np.ndarray, np.ndarray]],
               level: float, n_queries: int) -> Agreement:
    """The coefficients of the means of a and b, with intervals from `blocks` of bootstrap weights (counts per
    query of a, counts per query of b)."""
    mean_a, mean_b = a.mean(axis=1), b.mean(axis=1)
    point = _coefficients(mean_a[None], mean_b[None])
    drawn = [_coefficients(counts_a @ a.T / a.shape[1], counts_b @ b.T / b.shape[1]) for counts_a, counts_b in blocks]
    samples = {name: np.concatenate([block[name] for block in drawn]) if drawn else np.zeros(0)
               for name in COEFFICIENTS}
    return Agreement(**{name: float(point[name][0]) for name in COEFFICIENTS},
                     intervals={name: percentile_interval(samples[name], level) for name in COEFFICIENTS},
                     largest_change=_largest_change(systems, mean_a, mean_b),
                     n_systems=len(systems), n_queries=n_queries)


def _check(systems: Sequence[str], *matrices: np.ndarray) -> list[np.ndarray]:
    out = [np.asarray(matrix, dtype=float) for matrix in matrices]
    for matrix in out:
        if matrix.ndim != 2 or matrix.shape[0] != len(systems):
            raise ValueError(f"values of shape {matrix.shape} must be ({len(systems)} systems, queries)")
    return out


def system_agreement(systems: Sequence[str], a: np.ndarray, b: np.ndarray, *, draws: int = 1000, seed: int = 0,
                     level: float = 0.95) -> Agreement | None:
    """Agreement of the system rankings by one measure under reference source a and source b.

    a, b: (len(systems), queries) per-query values, the same queries in the same columns. None with fewer than
    MIN_SYSTEMS systems or no query defined for all. Intervals: percentile bootstrap, each draw resampling the queries
    (the same draw for a and b) and recomputing the means and the coefficients.
    """
    a, b = _check(systems, a, b)
    if a.shape != b.shape:
        raise ValueError(f"a {a.shape} and b {b.shape} must both be ({len(systems)} systems, queries)")
    defined = np.isfinite(a).all(axis=0) & np.isfinite(b).all(axis=0)
    a, b = a[:, defined], b[:, defined]
    n_systems, n_queries = a.shape
    if n_systems < MIN_SYSTEMS or n_queries == 0:
        return None
    blocks = ((counts, counts) for counts in (resampling_counts(n_queries, draws, seed) if draws > 0 else ()))
    return _agreement(systems, a, b, blocks, level, n_queries)


def _independent_counts(n_a: int, n_b: int, draws: int, seed: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    # Each draw resamples set a's queries and, independently, set b's, with replacement, in blocks of bounded size.
    rng_a, rng_b = (np.random.default_rng(child) for child in np.random.SeedSequence(seed).spawn(2))
    block = max(1, BLOCK_CELLS // max(n_a, n_b))
    for start in range(0, draws, block):
        size = min(block, draws - start)
        yield (rng_a.multinomial(n_a, np.full(n_a, 1.0 / n_a), size=size).astype(float),
               rng_b.multinomial(n_b, np.full(n_b, 1.0 / n_b), size=size).astype(float))


def query_set_agreement(systems: Sequence[str], a: np.ndarray, b: np.ndarray, *, paired: bool = False,
                        draws: int = 1000, seed: int = 0, level: float = 0.95) -> Agreement | None:
    """LVHQ (DisastIR 4.3): agreement of the systems' ranking by their mean over query set a with their ranking by
    their mean over query set b, the same measure under the same qrels method.

    a: (len(systems), queries of a), b: (len(systems), queries of b). `paired`: column j of a and of b are twins (the
    same passage and intent): a query left out (nan for a system) drops its twin too, and each bootstrap draw
    resamples the twin pairs; otherwise each draw resamples the queries of a and of b independently. None with fewer
    than MIN_SYSTEMS systems or a set without a query defined for all. `n_queries` of the result: the twin pairs,
    or the queries of both sets together.
    """
    a, b = _check(systems, a, b)
    if paired:
        if a.shape != b.shape:
            raise ValueError(f"twin pairs need as many queries in a {a.shape} as in b {b.shape}")
        return system_agreement(systems, a, b, draws=draws, seed=seed, level=level)
    a, b = a[:, np.isfinite(a).all(axis=0)], b[:, np.isfinite(b).all(axis=0)]
    if len(systems) < MIN_SYSTEMS or a.shape[1] == 0 or b.shape[1] == 0:
        return None
    blocks = _independent_counts(a.shape[1], b.shape[1], draws, seed) if draws > 0 else iter(())
    return _agreement(systems, a, b, blocks, level, a.shape[1] + b.shape[1])

"""How complete are the qrels? Estimates of the number of relevant pairs in a pool, the recall of the
expert-verified qrels, and the rule that says when labelling more stops paying (#33). Plain Python: numpy and
scipy, no Django.

Two estimates of R, the number of relevant pairs, each with an interval at `level` (default 90 %):

- **model-based**: R = V + X, V the relevant pairs experts verified, X = sum over the pairs no expert graded of
  Bernoulli(P_i), P_i the judge's calibrated P. X is Poisson-binomial; its quantiles give the interval (exactly,
  by dynamic programming, up to EXACT_LIMIT unlabelled pairs; above, by the refined normal approximation of
  Volkova (1996), Hong (2013) eq. 14). Where the P come from a calibrator fitted on gold pairs, its own fit is
  uncertain too: count_draws draws the calibrator from its posterior (models_llm.calibration) and each open
  pair's relevance under it, and the interval is the draws' quantiles. Assumes the judge's P is calibrated on
  the pairs nobody graded; a judge whose P is a score gets no model-based estimate until it has a calibrator.
- **design-based** (Horvitz-Thompson): from the random validation sample alone. The sample is every pair of the
  pool whose random order key (uniform, drawn when the pair was made) lies below the first key no grade has
  reached: a simple random sample of n of the N pairs, each included with probability pi = n / N, whatever the
  other queues labelled. R_HT = sum over the sample of y_i / pi_i; the interval is the mid-p interval of the
  hypergeometric distribution of the sample's relevant count (exact for sampling without replacement). Assumes
  nothing of the judge.

When the two intervals do not overlap, the judge's calibration has drifted from what experts say (`drift`).

Stopping (TAR): the verified qrels' recall is V / R. Under the model, P(recall >= target) = P(X <= V (1 - target)
/ target); the target is met when that probability is at least 1 - alpha. The knee method of Cormack and
Grossman (2016), as tarexp implements it, is computed beside it from the gain curve."""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from models_llm.calibration import CalibratorPosterior

# Up to this many unlabelled pairs the Poisson-binomial is computed exactly (O(n^2) work: about 0.5 s at the
# limit); above, the refined normal approximation, whose error is below 1e-3 in the CDF at these sizes.
EXACT_LIMIT = 20_000
# Draws of the calibrator (and of the open pairs' relevance under each) behind a model-based interval: the share
# of 1,000 draws below the 5 % (95 %) quantile found is within 0.7 % of 5 % (95 %) (one standard error).
MODEL_DRAWS = 1000
# Pair-draws simulated at once: bounds the memory (a few arrays of this many floats) whatever the pool's size.
DRAW_CELLS = 2_000_000


class CompletenessError(ValueError):
    """Inputs an estimate cannot be computed from (a probability outside [0, 1], a sample larger than its pool)."""


@dataclass(frozen=True)
class Estimate:
    """An estimate of the number of relevant pairs: the point value and the interval at `level`."""

    method: str
    total: float
    low: float
    high: float
    level: float

    def covers(self, value: float) -> bool:
        return self.low <= value <= self.high

    def overlaps(self, other: Estimate) -> bool:
        return self.low <= other.high and other.low <= self.high

    def as_dict(self) -> dict:
        return {"method": self.method, "total": self.total, "low": self.low, "high": self.high, "level": self.level}


def _probabilities(p: Sequence[float] | np.ndarray, what: str) -> np.ndarray:
    array = np.asarray(p, dtype=float).ravel()
    if array.size and (not np.isfinite(array).all() or array.min() < 0.0 or array.max() > 1.0):
        raise CompletenessError(f"{what}: every probability must be a number within [0, 1]")
    return array


def _level(level: float) -> float:
    if not 0.0 < level < 1.0:
        raise CompletenessError(f"the interval's level must be within (0, 1), got {level}")
    return level


def poisson_binomial_pmf(p: Sequence[float] | np.ndarray, *, upto: int | None = None) -> np.ndarray:
    """P(X = k), k = 0..n (or 0..`upto`), for X the number of successes of independent Bernoulli(p_i) trials:
    the exact distribution, built one trial at a time (the terms past `upto` never feed those below it)."""
    probabilities = _probabilities(p, "poisson_binomial_pmf")
    length = probabilities.size + 1 if upto is None else max(0, min(upto, probabilities.size)) + 1
    pmf = np.zeros(length)
    pmf[0] = 1.0
    for count, value in enumerate(probabilities, start=1):
        top = min(count, length - 1)
        pmf[1:top + 1] = pmf[1:top + 1] * (1.0 - value) + pmf[:top] * value
        pmf[0] *= 1.0 - value
    return pmf


def poisson_binomial_cdf(p: Sequence[float] | np.ndarray, k: np.ndarray | Sequence[int] | int) -> np.ndarray:
    """P(X <= k) for the Poisson-binomial X of `p`: exact up to EXACT_LIMIT trials, else Volkova's refined
    normal approximation G((k + 0.5 - mu) / sigma), G(x) = Phi(x) + gamma (1 - x^2) phi(x) / 6, gamma the
    skewness."""
    probabilities = _probabilities(p, "poisson_binomial_cdf")
    ks = np.asarray(k, dtype=float)
    if probabilities.size <= EXACT_LIMIT:
        index = np.clip(np.floor(ks), -1, probabilities.size).astype(int)
        cdf = np.cumsum(poisson_binomial_pmf(probabilities, upto=int(index.max(initial=0))))
        return np.where(index < 0, 0.0, np.minimum(cdf[np.clip(index, 0, cdf.size - 1)], 1.0))
    mean = probabilities.sum()
    variance = float((probabilities * (1.0 - probabilities)).sum())
    if variance <= 0:
        return (ks >= mean).astype(float)
    sigma = math.sqrt(variance)
    gamma = float((probabilities * (1.0 - probabilities) * (1.0 - 2.0 * probabilities)).sum()) / sigma ** 3
    x = (np.floor(ks) + 0.5 - mean) / sigma
    return np.clip(stats.norm.cdf(x) + gamma * (1.0 - x ** 2) * stats.norm.pdf(x) / 6.0, 0.0, 1.0)


def model_based_total(verified_relevant: int, p_unlabelled: Sequence[float] | np.ndarray, *,
                      level: float = 0.9) -> Estimate:
    """R = V + X with X ~ Poisson-binomial(P of the pairs nobody graded), the P taken as known: the interval is X's
    quantiles."""
    _level(level)
    if verified_relevant < 0:
        raise CompletenessError("the verified relevant count cannot be negative")
    p = _probabilities(p_unlabelled, "the unlabelled pairs' P")
    low, high = (0, 0)
    if p.size:
        tail = (1.0 - level) / 2.0
        # no quantile asked for lies 10 standard deviations above the mean: the exact CDF stops there
        reach = float(p.sum()) + 10.0 * math.sqrt(float((p * (1.0 - p)).sum())) + 10.0
        grid = np.arange(min(p.size, math.ceil(reach)) + 1)
        cdf = poisson_binomial_cdf(p, grid)
        low, high = (int(min(np.searchsorted(cdf, q - 1e-12), grid[-1])) for q in (tail, 1.0 - tail))
    return Estimate("model", verified_relevant + float(p.sum()), float(verified_relevant + low),
                    float(verified_relevant + high), level)


@dataclass(frozen=True, eq=False)
class CountDraws:
    """Draws of X, the relevant pairs among those nobody graded, per group of them (the pool's queries): `counts`
    (draws, groups), each row one draw of the calibrator from its posterior and then of every open pair's relevance
    from its P under that draw; `expected` (draws, groups), the sum of those P."""

    counts: np.ndarray
    expected: np.ndarray

    def group(self, index: int) -> CountDraws:
        return CountDraws(self.counts[:, index:index + 1], self.expected[:, index:index + 1])

    def whole(self) -> CountDraws:
        return CountDraws(self.counts.sum(axis=1, keepdims=True), self.expected.sum(axis=1, keepdims=True))


def count_draws(posterior: CalibratorPosterior, raw_p: Sequence[float] | np.ndarray, group: Sequence[int] | np.ndarray,
                groups: int, *, draws: int = MODEL_DRAWS, seed: int = 0) -> CountDraws:
    """X's distribution with the calibrator's uncertainty in it, by simulation: `draws` times, a calibrator drawn
    from `posterior` gives each open pair (raw P `raw_p`, in group `group`) its P, and each pair is relevant with
    that P; the relevant are counted per group. Seeded; the draws go `DRAW_CELLS` pair-draws at a time."""
    raw = _probabilities(raw_p, "the open pairs' raw P")
    member = np.asarray(group, dtype=np.int64).ravel()
    if member.shape != raw.shape or (member.size and not 0 <= member.min() <= member.max() < groups):
        raise CompletenessError(f"one group within [0, {groups}) per open pair")
    counts, expected = np.zeros((draws, groups), dtype=np.int64), np.zeros((draws, groups))
    if not raw.size:
        return CountDraws(counts, expected)
    order = np.argsort(member, kind="stable")  # each group's pairs one run: summed by one reduceat
    raw, member = raw[order], member[order]
    present = np.flatnonzero(np.bincount(member, minlength=groups))
    starts = np.searchsorted(member, present)
    rng = np.random.default_rng(seed)
    step = max(1, DRAW_CELLS // raw.size)
    for begin in range(0, draws, step):
        stop = min(draws, begin + step)
        p = posterior.draw(raw, stop - begin, rng)
        expected[begin:stop, present] = np.add.reduceat(p, starts, axis=1)
        relevant = rng.random(p.shape, dtype=np.float32) < p.astype(np.float32)
        counts[begin:stop, present] = np.add.reduceat(relevant, starts, axis=1, dtype=np.int64)
    return CountDraws(counts, expected)


def model_based_total_drawn(verified_relevant: int, drawn: CountDraws, *, level: float = 0.9) -> Estimate:
    """R = V + X from draws of X that carry the calibrator's uncertainty (count_draws, one group): the interval is
    the draws' (1 - level)/2 and (1 + level)/2 quantiles (the smallest count whose share of draws at or below it
    reaches each), the point value V + the mean over draws of the sum of P."""
    _level(level)
    if verified_relevant < 0:
        raise CompletenessError("the verified relevant count cannot be negative")
    counts = drawn.counts.ravel()
    tail = (1.0 - level) / 2.0
    low, high = (float(np.quantile(counts, q, method="inverted_cdf")) for q in (tail, 1.0 - tail))
    return Estimate("model", verified_relevant + float(drawn.expected.mean()), verified_relevant + low,
                    verified_relevant + high, level)


# Gold codes of a pool's pairs (a grade is >= 0): no grade yet, or labels that disagree and await adjudication.
UNGRADED, UNRESOLVED = -1, -2


def sample_frontier(gold: np.ndarray, key: np.ndarray) -> float:
    """The random validation sample's frontier: the smallest random order key of a pair without a grade (inf when
    every pair is graded). The sample is every pair whose key lies below it."""
    waiting = gold < 0
    return float(key[waiting].min()) if waiting.any() else math.inf


@dataclass(frozen=True, eq=False)
class PoolTotals:
    """What the completeness estimates of a set of pairs are made of (pool_totals): the counts, the model-based and
    design-based estimates of R (None: withheld, no P, or no sample) and the P of the open pairs the judge scored."""

    pairs: int
    graded: int
    unresolved: int
    verified_relevant: int
    unjudged_open: int
    sample_size: int
    sample_relevant: int
    model: Estimate | None
    design: Estimate | None
    open_p: np.ndarray


def pool_totals(gold: np.ndarray, key: np.ndarray, p: np.ndarray, *, relevant_from: int, frontier: float,
                level: float = 0.9, drawn: CountDraws | None = None, withheld: bool = False) -> PoolTotals:
    """The estimates of R over pairs whose gold codes are `gold` (a grade, UNGRADED or UNRESOLVED), random order keys
    `key` and P `p` (calibrated; nan: not judged): V the graded relevant ones; model-based V + X over the open pairs
    the judge scored (from `drawn`, the calibrator's draws, when given), unless `withheld` or some open pair is
    unjudged while none is judged; design-based from the pairs whose key lies below `frontier`. One implementation
    for the live completeness report and the replay (models_llm.replay)."""
    graded = gold >= 0
    relevant = graded & (gold >= relevant_from)
    verified = int(relevant.sum())
    open_pairs = ~graded  # ungraded or unresolved: what the model has to guess
    judged = open_pairs & ~np.isnan(p)
    estimate = None
    if not withheld and (judged.any() or not open_pairs.any()):
        estimate = (model_based_total_drawn(verified, drawn, level=level) if drawn is not None
                    else model_based_total(verified, p[judged], level=level))
    in_sample = key < frontier
    sample_size, sample_relevant = int(in_sample.sum()), int(relevant[in_sample].sum())
    return PoolTotals(
        pairs=int(gold.size), graded=int(graded.sum()), unresolved=int((gold == UNRESOLVED).sum()),
        verified_relevant=verified, unjudged_open=int((open_pairs & ~judged).sum()),
        sample_size=sample_size, sample_relevant=sample_relevant, model=estimate,
        design=design_based_total(sample_relevant, sample_size, int(gold.size), level=level), open_p=p[judged])


def horvitz_thompson(y: Sequence[float] | np.ndarray, pi: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """The Horvitz-Thompson estimate of a population total, sum y_i / pi_i over the sample, and its variance
    estimate under Poisson sampling, sum (1 - pi_i) y_i^2 / pi_i^2."""
    values, inclusion = np.asarray(y, dtype=float), np.asarray(pi, dtype=float)
    if values.shape != inclusion.shape:
        raise CompletenessError("one inclusion probability per sampled pair")
    if inclusion.size and (not np.isfinite(inclusion).all() or inclusion.min() <= 0 or inclusion.max() > 1):
        raise CompletenessError("inclusion probabilities must be within (0, 1]")
    total = float((values / inclusion).sum())
    variance = float(((1.0 - inclusion) * values ** 2 / inclusion ** 2).sum())
    return total, variance


def _hypergeometric_bounds(relevant: int, sample: int, population: int, level: float) -> tuple[int, int]:
    """The mid-p interval for K, the relevant pairs among `population`, from `relevant` of `sample` drawn
    without replacement: K_low is the smallest K with P(X > k) + P(X = k) / 2 >= tail, K_high the largest with
    P(X < k) + P(X = k) / 2 >= tail (X ~ Hypergeometric(population, K, sample), tail = (1 - level) / 2)."""
    tail = (1.0 - level) / 2.0
    least, most = relevant, population - (sample - relevant)

    def upper_tail(total: int) -> float:  # rises with K
        return float(stats.hypergeom.sf(relevant, population, total, sample)
                     + 0.5 * stats.hypergeom.pmf(relevant, population, total, sample))

    def lower_tail(total: int) -> float:  # falls with K
        return float(stats.hypergeom.cdf(relevant - 1, population, total, sample)
                     + 0.5 * stats.hypergeom.pmf(relevant, population, total, sample))

    low, high = least, most
    while low < high:  # smallest K with upper_tail(K) >= tail
        middle = (low + high) // 2
        if upper_tail(middle) >= tail:
            high = middle
        else:
            low = middle + 1
    k_low = low
    low, high = least, most
    while low < high:  # largest K with lower_tail(K) >= tail
        middle = (low + high + 1) // 2
        if lower_tail(middle) >= tail:
            low = middle
        else:
            high = middle - 1
    return k_low, max(low, k_low)


def design_based_total(sample_relevant: int, sample_size: int, population: int, *,
                       level: float = 0.9) -> Estimate | None:
    """The Horvitz-Thompson estimate of R from a simple random sample of `sample_size` of the `population`
    pairs (pi = n / N for each), `sample_relevant` of them relevant, with the hypergeometric mid-p interval.
    None without a sample."""
    _level(level)
    if not 0 <= sample_relevant <= sample_size <= population:
        raise CompletenessError(f"a sample of {sample_size} with {sample_relevant} relevant does not fit a pool of "
                                f"{population}")
    if sample_size == 0:
        return None
    total, _ = horvitz_thompson(np.full(sample_relevant, 1.0), np.full(sample_relevant, sample_size / population))
    low, high = _hypergeometric_bounds(sample_relevant, sample_size, population, level)
    return Estimate("design", total, float(low), float(high), level)


def beyond_pool_total(p_sample: Sequence[float] | np.ndarray, population: int, *, level: float = 0.9) -> Estimate | None:
    """Beyond the pool: the expected relevant among the `population` entries of a run that did not enter the pool,
    from the judge's calibrated P on a simple random sample of them (`p_sample`, drawn without replacement).

        T = N / m * sum_{i in s} P_i
        Var = N^2 (1 - m / N) s_P^2 / m  +  N / m * sum_{i in s} P_i (1 - P_i)

    The first term is the sampling variance of the mean P (finite population correction); the second estimates
    the Bernoulli variance of the relevance the P's stand for, sum over all N of P_i (1 - P_i). The interval is
    normal, clipped to [0, N]. Assumes the judge's P is calibrated on these entries. None without a sample."""
    _level(level)
    p = _probabilities(p_sample, "beyond the pool")
    m = p.size
    if m > population:
        raise CompletenessError(f"a sample of {m} does not fit {population} entries below the pool")
    if m == 0:
        return None
    total = population / m * float(p.sum())
    spread = float(p.var(ddof=1)) if m > 1 else 0.0
    variance = population**2 * (1 - m / population) * spread / m + population / m * float((p * (1 - p)).sum())
    z = float(stats.norm.ppf(0.5 + level / 2))
    half = z * math.sqrt(max(variance, 0.0))
    return Estimate("beyond", total, max(0.0, total - half), min(float(population), total + half), level)


@dataclass(frozen=True)
class Recall:
    """The verified qrels' recall, V / R, from an estimate of R: the point value and the interval (V / high,
    V / low, at most 1)."""

    value: float | None
    low: float | None
    high: float | None

    def as_dict(self) -> dict:
        return {"value": self.value, "low": self.low, "high": self.high}


def verified_recall(verified_relevant: int, estimate: Estimate | None) -> Recall:
    if estimate is None:
        return Recall(None, None, None)
    if verified_relevant == 0:
        return Recall(0.0 if estimate.total > 0 else None, 0.0, 0.0 if estimate.low > 0 else 1.0)

    def ratio(total: float) -> float:
        return min(1.0, verified_relevant / total) if total > 0 else 1.0

    return Recall(ratio(estimate.total), ratio(estimate.high), ratio(estimate.low))


def recall_reached_probability(verified_relevant: int, p_unlabelled: Sequence[float] | np.ndarray | None,
                               target: float, *, drawn: CountDraws | None = None) -> float:
    """P(V / (V + X) >= target) under the model: P(X <= floor(V (1 - target) / target)), X the Poisson-binomial
    of the unlabelled pairs' P, or the share of `drawn`'s draws of X (one group) at or below it."""
    if not 0.0 < target <= 1.0:
        raise CompletenessError(f"the recall target must be within (0, 1], got {target}")
    allowed = math.floor(verified_relevant * (1.0 - target) / target + 1e-9)
    if drawn is not None:
        return float(np.mean(drawn.counts.ravel() <= allowed))
    return float(poisson_binomial_cdf(_probabilities(p_unlabelled, "the unlabelled pairs' P"), allowed))


def knee_stops(relevant_in_order: Sequence[bool], *, steps: int = 500) -> bool:
    """The knee method (Cormack and Grossman 2016) on the gain curve of the labels in the order they were given:
    tarexp's KneeStoppingRule, which stops when the slope ratio rho at the knee reaches 156 - min(relevant
    found, 150). The curve is taken in equal steps of ceil(labels / `steps`) labels (one label per step up to
    `steps` labels), tarexp's rounds."""
    from tarexp.component.stopping import KneeStoppingRule
    from tarexp.ledger import Ledger

    labels = [bool(value) for value in relevant_in_order]
    if not labels:
        return False
    size = max(1, math.ceil(len(labels) / steps))
    ledger = Ledger(len(labels))
    for start in range(0, len(labels), size):
        ledger.annotate({index: labels[index] for index in range(start, min(start + size, len(labels)))})
    ledger.annotate({})  # tarexp counts the rounds before the newest: an empty one makes the last step count
    return bool(KneeStoppingRule().checkStopping(ledger))


ACCURACY_METRICS = ("precision", "recall", "f1", "kappa", "accuracy")
# AUROC and ECE resample the pairs themselves: at most this many (draw, pair) cells, and at least this many draws.
PROBABILITY_DRAW_CELLS = 20_000_000
PROBABILITY_MIN_DRAWS = 100


def _confusion_metrics(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray, tn: np.ndarray) -> dict[str, np.ndarray]:
    """Precision, recall, F1, Cohen's kappa and accuracy from confusion counts (arrays: one value per draw); nan
    where a metric is undefined (no predicted relevant pair for precision, no relevant pair for recall...)."""
    n = tp + fp + fn + tn
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = tp / (tp + fp)
        recall = tp / (tp + fn)
        f1 = 2 * tp / (2 * tp + fp + fn)
        observed = (tp + tn) / n
        expected = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / n ** 2
        kappa = (observed - expected) / (1 - expected)
    return {"precision": precision, "recall": recall, "f1": f1, "kappa": kappa, "accuracy": observed}


def _auroc(p: np.ndarray, relevant: np.ndarray) -> float:
    """The probability that a relevant pair gets a higher P than a non-relevant one (ties count half): the
    Mann-Whitney U over the two groups' sizes; nan with one class only."""
    positives, n = int(relevant.sum()), relevant.size
    if positives in (0, n):
        return math.nan
    ranks = stats.rankdata(p)
    return float((ranks[relevant].sum() - positives * (positives + 1) / 2) / (positives * (n - positives)))


def _interval(values: np.ndarray, point: float, tail: float) -> list[float] | None:
    finite = values[np.isfinite(values)]
    if not math.isfinite(point) or not finite.size:
        return None
    interval = [float(np.quantile(finite, tail)), float(np.quantile(finite, 1.0 - tail))]
    return None if interval[0] == interval[1] else interval  # every resample the same: no interval to show


def _probability_metrics(p: np.ndarray, relevant: np.ndarray, level: float, draws: int, seed: int) -> dict:
    """AUROC and ECE (10 equal-width bins) of P against the gold, with percentile bootstrap intervals over the
    sampled pairs (`draws` resamples with replacement, seeded; fewer on a large sample, see PROBABILITY_DRAW_CELLS)."""
    from models_llm.metrics.calibration_error import ece

    tail = (1.0 - level) / 2.0
    rng = np.random.default_rng(seed + 1)
    draws = min(draws, max(PROBABILITY_MIN_DRAWS, PROBABILITY_DRAW_CELLS // max(p.size, 1)))
    measures = {"auroc": _auroc, "ece": lambda q, y: ece(q, y.astype(int))}
    spread: dict[str, list[float]] = {name: [] for name in measures}
    for _ in range(draws):  # one resample of the pairs feeds both measures
        pick = rng.integers(0, p.size, size=p.size)
        for name, measure in measures.items():
            spread[name].append(measure(p[pick], relevant[pick]))
    out = {}
    for name, measure in measures.items():
        point = measure(p, relevant)
        out[name] = {"value": point if math.isfinite(point) else None,
                     "interval": _interval(np.asarray(spread[name]), point, tail)}
    return out


def sample_accuracy(predicted: Sequence[bool] | np.ndarray, relevant: Sequence[bool] | np.ndarray, *,
                    p: Sequence[float] | np.ndarray | None = None, level: float = 0.95, draws: int = 1000,
                    seed: int = 0) -> dict:
    """Precision, recall, F1, kappa and accuracy of a judge's thresholded qrels over the whole pool, estimated from
    a simple random sample of it (equal inclusion probabilities, so the Horvitz-Thompson ratio estimates are the
    sample's own figures), each with a percentile bootstrap interval at `level` (`draws` resamples of the sample,
    seeded: multinomial draws of its four confusion counts); no interval where every resample gives the same value,
    as with no true positive in the sample, where a bootstrap cannot tell how far off it is. With `p` (the judge's
    calibrated P of the same pairs), AUROC and ECE too, their intervals from resampling the pairs."""
    _level(level)
    guess, truth = np.asarray(predicted, dtype=bool), np.asarray(relevant, dtype=bool)
    if guess.shape != truth.shape:
        raise CompletenessError("one prediction per sampled pair")
    counts = np.array([(guess & truth).sum(), (guess & ~truth).sum(), (~guess & truth).sum(), (~guess & ~truth).sum()])
    n = int(counts.sum())
    out: dict = {"n": n, "tp": int(counts[0]), "fp": int(counts[1]), "fn": int(counts[2]), "tn": int(counts[3])}
    if n == 0:
        return {**out, **{name: None for name in (*ACCURACY_METRICS, *(("auroc", "ece") if p is not None else ()))}}
    point = _confusion_metrics(*(np.array([value], dtype=float) for value in counts))
    resampled = np.random.default_rng(seed).multinomial(n, counts / n, size=draws).astype(float).T
    spread = _confusion_metrics(*resampled)
    tail = (1.0 - level) / 2.0
    for name in ACCURACY_METRICS:
        value = float(point[name][0])
        out[name] = {"value": value if math.isfinite(value) else None,
                     "interval": _interval(spread[name], value, tail)}
    if p is not None:
        probabilities = _probabilities(p, "the sampled pairs' P")
        if probabilities.shape != truth.shape:
            raise CompletenessError("one P per sampled pair")
        out.update(_probability_metrics(probabilities, truth, level, draws, seed))
    return out

"""The metric table: every judge-vs-gold metric once, with how it is computed on the pairs, how it is drawn in
the bootstrap, when it is undefined and how it is shown; the report, the bootstrap, the display rows and the
metrics by definition version all read it (as ranx's metric table)."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from sklearn.metrics import average_precision_score, roc_auc_score

from models_llm.metrics.calibration_error import brier, ece, ece_adaptive
from models_llm.metrics.classification import Confusion, single_class_reason
from models_llm.metrics.judge_data import JudgeData, QueryLayout, ScaleSpec
from models_llm.metrics.query_stats import Resampled
from models_llm.metrics.ranking import DEFAULT_CUTOFFS, QueryRanking, cutoffs_check, mean_defined, query_ranking


class JudgedPairs:
    """A judge's gold-judged pairs as the metric functions take them: binary gold and call, confusion counts and
    per-query rankings (nDCG and MAP also cut at each of `cutoffs`), each computed once, when a metric first
    asks for it. The rankings take every pair of `ranked` (a pair the judge did not judge ranks last in its unit,
    as trec_eval ranks a document the run lacks); everything else takes only the pairs it judged (`data`)."""

    def __init__(self, data: JudgeData, scale: ScaleSpec, *, cutoffs: tuple[int, ...] = DEFAULT_CUTOFFS) -> None:
        self.ranked = data
        self.cutoffs = cutoffs_check(cutoffs)
        self.gains = scale.gain_of(data.gold)  # before anything else: a grade off the scale is an error
        self.ranked_relevant = data.relevant(scale)
        self.scored = data.judged
        self.data = data if self.scored.all() else data.take(self.scored)
        self.relevant = self.ranked_relevant[self.scored]
        self.n = self.data.n
        self.n_relevant = int(self.relevant.sum())

    @cached_property
    def predicted(self) -> np.ndarray:
        return self.data.predicted_relevant()

    @cached_property
    def confusion(self) -> Confusion:
        return Confusion.of(self.relevant, self.predicted)

    @cached_property
    def layout(self) -> QueryLayout:
        return QueryLayout.of(self.ranked.query)

    @cached_property
    def ranking(self) -> QueryRanking:
        return query_ranking(self.layout, self.ranked.p, self.ranked.gold, self.gains, self.ranked_relevant,
                             cutoffs=self.cutoffs, retrieved=self.scored)

    @property
    def has_both_classes(self) -> bool:
        return 0 < self.n_relevant < self.n


@dataclass(frozen=True)
class Metric:
    """One metric of a judge against binary or graded gold, keyed as in the report.

    `compute` takes the pairs and returns the value (None or nan where undefined); a metric combined from
    others names them in `requires` and gets their values in `combine` instead, and is undefined, with their
    reasons, when one of them is. `undefined` says why a value is missing ({n}: the number of pairs; {one_class}:
    which gold class is missing). `draw` gives its value in each bootstrap draw; without one it has no interval.
    `explain`: what it measures in one plain line, shown beside it; `higher_is_better` which way is better, for
    the line and for picking the best judge of a row; `needs_non_relevant`: see below."""

    key: str
    label: str
    compute: Callable[[JudgedPairs], float | None] | None = None
    requires: tuple[str, ...] = ()
    combine: Callable[..., float] | None = None
    undefined: str = "undefined on these pairs"
    needs_negatives: bool = False  # undefined unless gold has non-relevant pairs as well as relevant ones
    draw: Callable[[Resampled], np.ndarray] | None = None
    decimals: int = 3
    explain: str = ""
    higher_is_better: bool = True
    # Says little when nearly every gold pair is relevant (any judge calling all relevant looks precise, any ranking
    # puts relevant pairs first), though it is defined: no judge is picked as best of it then.
    needs_non_relevant: bool = False


NO_GAIN = "no query has a gold pair of positive gain"
NO_RELEVANT = "no query has a relevant gold pair (all {n} are non-relevant)"


def _at_cutoff(k: int) -> tuple[Metric, Metric]:
    return (Metric(f"ndcg@{k}", f"nDCG@{k}", lambda s: mean_defined(s.ranking.ndcg_at[k]), undefined=NO_GAIN,
                   explain=f"nDCG of each query's top {k} pairs by P; higher is better"),
            Metric(f"map@{k}", f"MAP@{k}", lambda s: mean_defined(s.ranking.ap_at[k]), undefined=NO_RELEVANT,
                   explain=f"MAP of each query's top {k} pairs by P; higher is better", needs_non_relevant=True))


def _metrics(cutoffs: tuple[int, ...]) -> tuple[Metric, ...]:
    # In the order of DIRAS App. C, which is the order of the report's rows: nDCG@k and MAP@k of each cut-off
    # after info avg. `s` is the JudgedPairs, `d` a Resampled block of bootstrap draws.
    return (
        Metric("f1", "F1", lambda s: s.confusion.f1(), draw=lambda d: d.confusion.f1(),
               undefined="no pair is relevant, neither in gold nor by the judge",
               explain="balance of precision and recall of the judge's relevant calls; higher is better (1: perfect)"),
        Metric("precision", "precision", lambda s: s.confusion.precision(),
               undefined="the judge calls none of the {n} pairs relevant",
               explain="of the pairs the judge calls relevant, the share gold calls relevant; higher is better",
               needs_non_relevant=True),
        Metric("recall", "recall", lambda s: s.confusion.recall(),
               undefined="no gold pair is relevant (all {n} are non-relevant)",
               explain="of the pairs gold calls relevant, the share the judge calls relevant; higher is better"),
        Metric("accuracy", "accuracy", lambda s: s.confusion.accuracy(),
               explain="share of pairs where the judge's call matches gold; higher is better, but high whenever one "
                       "class dominates", needs_non_relevant=True),
        Metric("kappa_vs_gold", "Cohen's kappa", lambda s: s.confusion.kappa(), draw=lambda d: d.confusion.kappa(),
               needs_negatives=True, undefined="{one_class}; kappa would be 0 whatever the judge says",
               explain="agreement of the judge's calls with gold beyond chance (1: perfect, 0: chance); higher is "
                       "better", needs_non_relevant=True),
        Metric("auroc", "AUROC", lambda s: roc_auc_score(s.relevant, s.data.p), draw=Resampled.auroc,
               needs_negatives=True, undefined="{one_class}",
               explain="chance that a relevant pair gets a higher P than a non-relevant one (0.5: guessing, "
                       "1: perfect); higher is better", needs_non_relevant=True),
        Metric("brier", "Brier", lambda s: brier(s.data.p, s.relevant),
               explain="mean squared gap between P and gold's 0 or 1; lower is better (0: perfect)",
               higher_is_better=False),
        Metric("ece", "ECE", lambda s: ece(s.data.p, s.relevant), draw=Resampled.ece,
               explain="how far P is from the share actually relevant, over 10 equal-width bins of P; lower is "
                       "better (0: P means what it says)", higher_is_better=False),
        Metric("ece_adaptive", "ECE (equal-count)", lambda s: ece_adaptive(s.data.p, s.relevant),
               explain="ECE over 10 bins holding equally many pairs; lower is better", higher_is_better=False),
        Metric("cal_avg", "cal avg", requires=("auroc", "ece", "brier"),
               combine=lambda auroc, ece_, brier_: (auroc + (1 - ece_) + (1 - brier_)) / 3,
               explain="mean of AUROC, 1 - ECE and 1 - Brier: calibration in one number; higher is better",
               needs_non_relevant=True),
        Metric("ndcg", "nDCG", lambda s: mean_defined(s.ranking.ndcg), draw=lambda d: d.query_mean(d.stats.ndcg),
               undefined=NO_GAIN,
               explain="each query's pairs ranked by P against gold's grades, the top weighing most (1: gold's own "
                       "order); higher is better"),
        Metric("map", "MAP", lambda s: mean_defined(s.ranking.ap), draw=lambda d: d.query_mean(d.stats.ap),
               undefined=NO_RELEVANT,
               explain="mean average precision of the ranking by P: relevant pairs near the top; higher is better",
               needs_non_relevant=True),
        Metric("info_avg", "info avg", requires=("ndcg", "map"), combine=lambda ndcg, map_: (ndcg + map_) / 2,
               explain="mean of nDCG and MAP: ranking quality in one number; higher is better", needs_non_relevant=True),
        *(metric for k in cutoffs for metric in _at_cutoff(k)),
        Metric("kendall_tau", "Kendall tau-b", lambda s: mean_defined(s.ranking.kendall_tau),
               undefined="in every query P or the gold grade is constant (tau-b needs both to vary)",
               explain="per-query rank correlation of P with the gold grade (-1 to 1); higher is better"),
        Metric("ndcg_tie_aware", "nDCG tie-aware", lambda s: mean_defined(s.ranking.ndcg_tie_aware), undefined=NO_GAIN,
               explain="nDCG averaged over every order of the pairs that share a P; higher is better"),
        Metric("map_tie_aware", "MAP tie-aware", lambda s: mean_defined(s.ranking.ap_tie_aware), undefined=NO_RELEVANT,
               explain="MAP averaged over every order of the pairs that share a P; higher is better",
               needs_non_relevant=True),
        Metric("uncertainty_ap", "uncertainty AP",
               lambda s: average_precision_score(s.data.uncertain, 1.0 - s.data.confidence_used())
               if s.data.uncertain.any() else None,
               undefined="needs at least one uncertain pair; none of the {n} is",
               explain="how well the judge's low confidence finds the pairs experts disagreed on (average "
                       "precision); higher is better"),
    )


def metrics_for(cutoffs: tuple[int, ...] = DEFAULT_CUTOFFS) -> dict[str, Metric]:
    """Every metric of the report, keyed, with nDCG@k and MAP@k for each of `cutoffs`."""
    return {metric.key: metric for metric in _metrics(cutoffs_check(cutoffs))}


METRICS = metrics_for()
BOOTSTRAPPED = tuple(metric for metric in METRICS.values() if metric.draw is not None)


@dataclass(frozen=True)
class MetricValue:
    """A metric's value on some pairs, or None and why."""

    value: float | None
    reason: str | None = None


def _value(metric: Metric, pairs: JudgedPairs, value_of: Callable[[str], MetricValue]) -> MetricValue:
    if metric.requires:
        parts = {key: value_of(key) for key in metric.requires}
        missing = [f"{key} ({part.reason})" for key, part in parts.items() if part.value is None]
        if missing:
            return MetricValue(None, "needs " + "; ".join(missing))
        value = metric.combine(*(part.value for part in parts.values()))
    elif metric.needs_negatives and not pairs.has_both_classes:
        value = None
    else:
        value = metric.compute(pairs)
    if value is None or not np.isfinite(value):
        one_class = single_class_reason(pairs.n_relevant, pairs.n - pairs.n_relevant)
        return MetricValue(None, metric.undefined.format(n=pairs.n, one_class=one_class))
    return MetricValue(float(value))


def metric_values(pairs: JudgedPairs, keys: Iterable[str]) -> dict[str, MetricValue]:
    """The registered metrics named by `keys` on `pairs` (at least one pair), in that order; a combined metric's
    parts are computed once whether or not they are asked for."""
    done: dict[str, MetricValue] = {}
    metrics = METRICS if pairs.cutoffs == DEFAULT_CUTOFFS else metrics_for(pairs.cutoffs)

    def value_of(key: str) -> MetricValue:
        if key not in done:
            done[key] = _value(metrics[key], pairs, value_of)
        return done[key]

    return {key: value_of(key) for key in keys}

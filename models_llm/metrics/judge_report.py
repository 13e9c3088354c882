"""One judge against the gold grades: every DIRAS App. C metric as plain JSON values, each missing one
(None) with the reason it is undefined on these pairs."""
from __future__ import annotations

from dataclasses import asdict

import numpy as np

from models_llm.metrics.bootstrap import QueryStats, bootstrap_draws, percentile_interval
from models_llm.metrics.calibration_error import reliability_bins
from models_llm.metrics.classification import Confusion, group_kappas
from models_llm.metrics.judge_data import JudgeData, ScaleSpec
from models_llm.metrics.ranking import DEFAULT_CUTOFFS
from models_llm.metrics.registry import BOOTSTRAPPED, JudgedPairs, MetricValue, metric_values, metrics_for

CI_METRICS = tuple(metric.key for metric in BOOTSTRAPPED)
F1_CURVE_STEPS = 20  # thresholds 0.00, 0.05, ..., 1.00
TIE_TOLERANCE = 0.01
NO_PAIRS = "no gold-judged pairs"


class _Report:
    """The dict being built and its null_reasons, so that a value and its reason are set together."""

    def __init__(self, **counts: int) -> None:
        self.out: dict = dict(counts)
        self.reasons: dict[str, str] = {}

    def put(self, key: str, result: MetricValue) -> None:
        self.out[key] = result.value
        if result.value is None:
            self.reasons[key] = result.reason

    def get(self, key: str) -> float | None:
        return self.out.get(key)


def _tie_warning(report: _Report) -> None:
    gaps = [
        abs(report.get(plain) - report.get(plain + "_tie_aware"))
        for plain in ("ndcg", "map") if report.get(plain) is not None
    ]
    if gaps:
        report.out["tie_warning"] = bool(max(gaps) > TIE_TOLERANCE)
    else:
        report.put("tie_warning", MetricValue(None, "neither ndcg nor map is defined"))


def f1_curve(p: np.ndarray, relevant: np.ndarray) -> list[dict]:
    """Precision, recall and F1 when every pair with P >= threshold is retrieved, threshold 0, 0.05, ..., 1."""
    thresholds = np.arange(F1_CURVE_STEPS + 1) / F1_CURVE_STEPS
    all_p, relevant_p = np.sort(p), np.sort(p[relevant])
    retrieved = all_p.size - np.searchsorted(all_p, thresholds, side="left")
    hits = relevant_p.size - np.searchsorted(relevant_p, thresholds, side="left")
    curve = []
    for t, k, tp in zip(thresholds, retrieved, hits):
        c = Confusion(tp=tp, fp=k - tp, fn=relevant_p.size - tp, tn=0)
        curve.append({
            "threshold": float(t),
            "precision": _plain(c.precision()),
            "recall": _plain(c.recall()),
            "f1": _plain(c.f1()),
            "n_retrieved": int(k),
        })
    return curve


def _plain(value) -> float | None:
    return float(value) if np.isfinite(value) else None


def _groups(report: _Report, data: JudgeData, relevant: np.ndarray, predicted: np.ndarray) -> None:
    out = {}
    for key, values in sorted(data.groups.items()):
        out[key] = {}
        for cell in group_kappas(values, relevant, predicted):
            out[key][cell.value] = {"kappa": cell.kappa, "n": cell.n}
            if cell.reason:
                report.reasons[f"group_kappa.{key}.{cell.value}"] = cell.reason
    report.out["group_kappa"] = out


def _intervals(report: _Report, stats: QueryStats, n_queries: int, draws: int, seed: int) -> None:
    ci: dict[str, list[float] | None] = dict.fromkeys(CI_METRICS)
    report.out["ci"] = ci
    if draws <= 0 or n_queries < 2:
        why = "bootstrap turned off (bootstrap_draws = 0)" if draws <= 0 else (
            f"resampling queries needs at least 2 queries, there is {n_queries}")
        for metric in CI_METRICS:
            report.reasons[f"ci.{metric}"] = why
        return
    samples = bootstrap_draws(stats, draws, seed)
    for metric in CI_METRICS:
        interval = percentile_interval(samples[metric]) if report.get(metric) is not None else None
        if interval is None:
            report.reasons[f"ci.{metric}"] = f"{metric} is undefined on these pairs"
        else:
            ci[metric] = list(interval)


def _empty(report: _Report, cutoffs: tuple[int, ...]) -> dict:
    for key in (*metrics_for(cutoffs), "tie_warning"):
        report.put(key, MetricValue(None, NO_PAIRS))
    report.out.update(n_queries_ndcg=0, n_queries_map=0)
    for key in ("reliability", "f1_curve"):
        report.put(key, MetricValue(None, NO_PAIRS))
    report.out.update(group_kappa={}, ci=dict.fromkeys(CI_METRICS))
    report.reasons.update({f"ci.{metric}": NO_PAIRS for metric in CI_METRICS})
    return {**report.out, "null_reasons": report.reasons}


def judge_report(data: JudgeData, scale: ScaleSpec, *, bootstrap_draws: int = 1000, seed: int = 0,
                 cutoffs: tuple[int, ...] = DEFAULT_CUTOFFS) -> dict:
    """All of a judge's metrics against gold (DIRAS App. C definitions) as a JSON-ready dict, nDCG@k and MAP@k
    for each of `cutoffs`; a metric that is undefined on the data is None and `null_reasons[metric]` says why.
    Query-level 95% bootstrap intervals (`ci`) resample the ranking units (`data.query`: queries, or query and
    passage-metadata units) with replacement, `bootstrap_draws` times, from `seed`."""
    pairs = JudgedPairs(data, scale, cutoffs=cutoffs)
    layout = pairs.layout
    data = pairs.data  # the pairs the judge judged; the rankings below also rank the others, last
    report = _Report(n=data.n, n_relevant=pairs.n_relevant, n_uncertain=int(data.uncertain.sum()),
                     n_queries=layout.n_queries)
    if data.n == 0:
        return _empty(report, pairs.cutoffs)
    for key, result in metric_values(pairs, metrics_for(pairs.cutoffs)).items():
        report.put(key, result)
    _tie_warning(report)
    ranking = pairs.ranking
    report.out["n_queries_ndcg"] = int(np.isfinite(ranking.ndcg).sum())
    report.out["n_queries_map"] = int(np.isfinite(ranking.ap).sum())
    report.out["reliability"] = [asdict(b) for b in reliability_bins(data.p, pairs.relevant)]
    report.out["f1_curve"] = f1_curve(data.p, pairs.relevant)
    _groups(report, data, pairs.relevant, pairs.predicted)
    stats = QueryStats.collect(layout.code[pairs.scored], layout.n_queries, data.p, pairs.relevant,
                               pairs.predicted, ranking.ndcg, ranking.ap)
    _intervals(report, stats, layout.n_queries, bootstrap_draws, seed)
    return {**report.out, "null_reasons": report.reasons}

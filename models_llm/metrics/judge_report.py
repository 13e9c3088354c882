"""One judge against the gold grades: every DIRAS App. C metric as plain JSON values, each missing one
(None) with the reason it is undefined on these pairs."""
from __future__ import annotations

from dataclasses import asdict

import numpy as np
from sklearn.metrics import average_precision_score, roc_auc_score

from models_llm.metrics.bootstrap import QueryStats, bootstrap_draws, percentile_interval
from models_llm.metrics.calibration_error import brier, ece, ece_adaptive, reliability_bins
from models_llm.metrics.classification import Confusion, group_kappas, single_class_reason
from models_llm.metrics.judge_data import JudgeData, QueryLayout, ScaleSpec
from models_llm.metrics.ranking import mean_defined, query_ranking

METRICS = (
    "f1", "precision", "recall", "accuracy", "kappa_vs_gold", "auroc", "brier", "ece", "ece_adaptive",
    "cal_avg", "ndcg", "map", "info_avg", "ndcg@10", "map@10", "kendall_tau", "ndcg_tie_aware",
    "map_tie_aware", "tie_warning", "uncertainty_ap",
)
CI_METRICS = ("f1", "auroc", "ece", "ndcg", "map", "kappa_vs_gold")
F1_CURVE_STEPS = 20  # thresholds 0.00, 0.05, ..., 1.00
TIE_TOLERANCE = 0.01


class _Report:
    """The dict being built and its null_reasons, so that a value and its reason are set together."""

    def __init__(self, **counts: int) -> None:
        self.out: dict = dict(counts)
        self.reasons: dict[str, str] = {}

    def put(self, key: str, value, reason: str | None = None) -> None:
        if value is None or not np.isfinite(value):
            self.out[key] = None
            self.reasons[key] = reason or "undefined on these pairs"
        else:
            self.out[key] = float(value)

    def get(self, key: str) -> float | None:
        return self.out.get(key)

    def needs(self, *parts: str) -> str:
        missing = [part for part in parts if self.out.get(part) is None]
        return "needs " + "; ".join(f"{part} ({self.reasons[part]})" for part in missing) if missing else ""


def _classification(report: _Report, relevant: np.ndarray, predicted: np.ndarray) -> None:
    c = Confusion.of(relevant, predicted)
    n, n_rel = int(c.n), int(c.tp + c.fn)
    report.put("precision", c.precision(), f"the judge calls none of the {n} pairs relevant")
    report.put("recall", c.recall(), f"no gold pair is relevant (all {n} are non-relevant)")
    report.put("f1", c.f1(), "no pair is relevant, neither in gold nor by the judge")
    report.put("accuracy", c.accuracy())
    report.put("kappa_vs_gold", c.kappa(),
               single_class_reason(n_rel, n - n_rel) + "; kappa would be 0 whatever the judge says")


def _calibration(report: _Report, p: np.ndarray, relevant: np.ndarray) -> None:
    n, n_rel = p.size, int(relevant.sum())
    auroc = roc_auc_score(relevant, p) if 0 < n_rel < n else None
    report.put("auroc", auroc, single_class_reason(n_rel, n - n_rel))
    report.put("brier", brier(p, relevant))
    report.put("ece", ece(p, relevant))
    report.put("ece_adaptive", ece_adaptive(p, relevant))
    if report.get("auroc") is None:
        report.put("cal_avg", None, report.needs("auroc"))
    else:
        report.put("cal_avg", (report.get("auroc") + (1 - report.get("ece")) + (1 - report.get("brier"))) / 3)


def _ranking(report: _Report, ranking, n: int) -> None:
    no_gain = "no query has a gold pair of positive gain"
    no_relevant = f"no query has a relevant gold pair (all {n} are non-relevant)"
    report.put("ndcg", mean_defined(ranking.ndcg), no_gain)
    report.put("map", mean_defined(ranking.ap), no_relevant)
    report.put("ndcg@10", mean_defined(ranking.ndcg_at_10), no_gain)
    report.put("map@10", mean_defined(ranking.ap_at_10), no_relevant)
    report.put("ndcg_tie_aware", mean_defined(ranking.ndcg_tie_aware), no_gain)
    report.put("map_tie_aware", mean_defined(ranking.ap_tie_aware), no_relevant)
    report.put("kendall_tau", mean_defined(ranking.kendall_tau),
               "in every query P or the gold grade is constant (tau-b needs both to vary)")
    if report.get("ndcg") is None or report.get("map") is None:
        report.put("info_avg", None, report.needs("ndcg", "map"))
    else:
        report.put("info_avg", (report.get("ndcg") + report.get("map")) / 2)
    gaps = [
        abs(report.get(plain) - report.get(plain + "_tie_aware"))
        for plain in ("ndcg", "map") if report.get(plain) is not None
    ]
    if gaps:
        report.out["tie_warning"] = bool(max(gaps) > TIE_TOLERANCE)
    else:
        report.out["tie_warning"] = None
        report.reasons["tie_warning"] = "neither ndcg nor map is defined"
    report.out["n_queries_ndcg"] = int(np.isfinite(ranking.ndcg).sum())
    report.out["n_queries_map"] = int(np.isfinite(ranking.ap).sum())


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


def _empty(report: _Report) -> dict:
    for key in METRICS:
        report.put(key, None, "no gold-judged pairs")
    for key in ("reliability", "f1_curve"):
        report.out[key] = None
        report.reasons[key] = "no gold-judged pairs"
    report.out.update(group_kappa={}, ci=dict.fromkeys(CI_METRICS), n_queries_ndcg=0, n_queries_map=0)
    report.reasons.update({f"ci.{metric}": "no gold-judged pairs" for metric in CI_METRICS})
    return {**report.out, "null_reasons": report.reasons}


def judge_report(data: JudgeData, scale: ScaleSpec, *, bootstrap_draws: int = 1000, seed: int = 0) -> dict:
    """All of a judge's metrics against gold (DIRAS App. C definitions) as a JSON-ready dict; a metric that is
    undefined on the data is None and `null_reasons[metric]` says why. Query-level 95% bootstrap intervals
    (`ci`) resample queries with replacement, `bootstrap_draws` times, from `seed`."""
    gains = scale.gain_of(data.gold)
    relevant = data.relevant(scale)
    layout = QueryLayout.of(data.query)
    report = _Report(n=data.n, n_relevant=int(relevant.sum()), n_uncertain=int(data.uncertain.sum()),
                     n_queries=layout.n_queries)
    if data.n == 0:
        return _empty(report)
    predicted = data.predicted_relevant()
    _classification(report, relevant, predicted)
    _calibration(report, data.p, relevant)
    ranking = query_ranking(layout, data.p, data.gold, gains, relevant)
    _ranking(report, ranking, data.n)
    uncertainty_ap = None
    if data.uncertain.any():
        uncertainty_ap = average_precision_score(data.uncertain, 1.0 - data.confidence_used())
    report.put("uncertainty_ap", uncertainty_ap, f"needs at least one uncertain pair; none of the {data.n} is")
    report.out["reliability"] = [asdict(b) for b in reliability_bins(data.p, relevant)]
    report.out["f1_curve"] = f1_curve(data.p, relevant)
    _groups(report, data, relevant, predicted)
    stats = QueryStats.collect(layout.code, layout.n_queries, data.p, relevant, predicted, ranking.ndcg, ranking.ap)
    _intervals(report, stats, layout.n_queries, bootstrap_draws, seed)
    return {**report.out, "null_reasons": report.reasons}

"""Metrics comparing LLM judgments with human labels (DIRAS App. C, DisastIR LVHL)."""
from models_llm.metrics.calibration_error import ReliabilityBin, brier, ece, ece_adaptive, reliability_bins
from models_llm.metrics.degenerate import Degeneracy, degeneracy
from models_llm.metrics.display import MetricLine, MetricRow, human_rows, metric_table
from models_llm.metrics.human_agreement import human_agreement, is_uncertain
from models_llm.metrics.judge_data import JudgeData, ScaleSpec
from models_llm.metrics.judge_report import judge_report
from models_llm.metrics.ranking import DEFAULT_CUTOFFS, MAX_CUTOFF, cutoffs_check
from models_llm.metrics.reannotation import agreement_curve, reannotation_sample
from models_llm.metrics.registry import METRICS, JudgedPairs, Metric, MetricValue, metric_values, metrics_for

__all__ = [
    "DEFAULT_CUTOFFS",
    "Degeneracy",
    "MAX_CUTOFF",
    "METRICS",
    "JudgeData",
    "JudgedPairs",
    "Metric",
    "MetricLine",
    "MetricRow",
    "MetricValue",
    "ReliabilityBin",
    "ScaleSpec",
    "agreement_curve",
    "brier",
    "cutoffs_check",
    "degeneracy",
    "ece",
    "ece_adaptive",
    "human_agreement",
    "human_rows",
    "is_uncertain",
    "judge_report",
    "metric_table",
    "metric_values",
    "metrics_for",
    "reannotation_sample",
    "reliability_bins",
]

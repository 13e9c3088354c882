"""Metrics comparing LLM judgments with human labels (DIRAS App. C, DisastIR LVHL)."""
from models_llm.metrics.calibration_error import ReliabilityBin, brier, ece, ece_adaptive, reliability_bins
from models_llm.metrics.human_agreement import human_agreement, is_uncertain
from models_llm.metrics.judge_data import JudgeData, ScaleSpec
from models_llm.metrics.judge_report import judge_report

__all__ = [
    "JudgeData",
    "ReliabilityBin",
    "ScaleSpec",
    "brier",
    "ece",
    "ece_adaptive",
    "human_agreement",
    "is_uncertain",
    "judge_report",
    "reliability_bins",
]

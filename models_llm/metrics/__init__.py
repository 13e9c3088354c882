"""Metrics comparing LLM judgments with human labels (DIRAS App. C, DisastIR LVHL)."""
from models_llm.metrics.calibration_error import ReliabilityBin, brier, ece, ece_adaptive, reliability_bins

__all__ = ["ReliabilityBin", "brier", "ece", "ece_adaptive", "reliability_bins"]

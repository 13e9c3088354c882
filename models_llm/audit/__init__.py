"""Robustness audits of a judge: the perturbation audit's variants (perturb) and report (robustness); MultiConIR's
multi-condition tests (multicondition)."""
from models_llm.audit.multicondition import (
    MULTICONDITION_THRESHOLDS,
    FillerPadder,
    McItem,
    McRecord,
    multicondition_items,
    multicondition_needs,
    multicondition_report,
)
from models_llm.audit.perturb import (
    INJECTION,
    AuditItem,
    OtherPassage,
    content_words,
    inject_sentence,
    pad_to_words,
    perturbation_probes,
    stuff_words,
)
from models_llm.audit.robustness import (
    ROWS,
    THRESHOLDS,
    RowFigures,
    change_excerpt,
    overall_verdict,
    robustness_report,
    row_figures,
    row_verdict,
    samples_text,
)
from models_llm.audit.types import PAD_WORDS, PERTURBATION_TESTS, Probe, Verdict

__all__ = [
    "INJECTION",
    "MULTICONDITION_THRESHOLDS",
    "PAD_WORDS",
    "PERTURBATION_TESTS",
    "ROWS",
    "THRESHOLDS",
    "AuditItem",
    "FillerPadder",
    "McItem",
    "McRecord",
    "OtherPassage",
    "Probe",
    "RowFigures",
    "Verdict",
    "change_excerpt",
    "content_words",
    "inject_sentence",
    "multicondition_items",
    "multicondition_needs",
    "multicondition_report",
    "overall_verdict",
    "pad_to_words",
    "perturbation_probes",
    "robustness_report",
    "row_figures",
    "row_verdict",
    "samples_text",
    "stuff_words",
]

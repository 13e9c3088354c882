"""The validation report as display rows, shared by the dashboard and the `validation_report` command: a judge's
counts and then every registered metric (label, value, 95% interval, why a value is missing), and the human
agreement rows."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from models_llm.metrics.ranking import DEFAULT_CUTOFFS
from models_llm.metrics.registry import metrics_for


@dataclass(frozen=True)
class Shown:
    """A value of the report that is shown as a row, and how."""

    key: str
    label: str
    decimals: int


# The counts come first, then the metrics in the registry's order (DIRAS App. C).
COUNT_ROWS = (
    Shown("n", "pairs evaluated", 0), Shown("n_relevant", "relevant", 0), Shown("n_unresolved", "unresolved", 0),
    Shown("n_unjudged", "not judged by the judge", 0),
)


def judge_rows(cutoffs: tuple[int, ...] = DEFAULT_CUTOFFS) -> tuple[Shown, ...]:
    """The rows of a judge's section: counts, then every metric with nDCG@k and MAP@k for each of `cutoffs`."""
    return (*COUNT_ROWS, *(Shown(metric.key, metric.label, metric.decimals) for metric in metrics_for(cutoffs).values()))

HUMAN_ROWS = (
    Shown("n_overlap", "pairs labelled twice or more", 0), Shown("human_kappa_binary", "Cohen's kappa, binary", 3),
    Shown("human_kappa_graded", "Cohen's kappa, graded", 3),
    Shown("krippendorff_alpha", "Krippendorff's alpha (ordinal)", 3),
)


@dataclass(frozen=True)
class MetricRow:
    key: str
    label: str
    value: float | int | None
    ci: tuple[float, float] | None
    decimals: int
    reason: str | None


@dataclass(frozen=True)
class MetricLine:
    """One row of the judges-side-by-side table: a label and each judge's cell."""

    label: str
    cells: list[MetricRow]


def _rows(section: dict, shown: Iterable[Shown]) -> list[MetricRow]:
    cis, reasons = section.get("ci") or {}, section.get("null_reasons") or {}
    return [
        MetricRow(row.key, row.label, section.get(row.key), tuple(cis[row.key]) if cis.get(row.key) else None,
                  row.decimals, reasons.get(row.key))
        for row in shown
    ]


def metric_table(sections: list[dict], cutoffs: tuple[int, ...] = DEFAULT_CUTOFFS) -> list[MetricLine]:
    """The judges' report sections side by side: a line per row of judge_rows(cutoffs), a cell per judge."""
    shown = judge_rows(cutoffs)
    columns = [_rows(section, shown) for section in sections]
    return [MetricLine(row.label, [column[index] for column in columns]) for index, row in enumerate(shown)]


def human_rows(section: dict) -> list[MetricRow]:
    """The human-agreement part of the report as rows."""
    return _rows(section, HUMAN_ROWS)

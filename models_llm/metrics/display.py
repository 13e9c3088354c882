"""The validation report as display rows, shared by the dashboard and the `validation_report` command: a judge's
counts and then every registered metric (label, value, 95% interval, why a value is missing, what it measures,
the best judge of the row), and the human agreement rows."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from models_llm.metrics.ranking import DEFAULT_CUTOFFS
from models_llm.metrics.registry import metrics_for


@dataclass(frozen=True)
class Shown:
    """A value of the report that is shown as a row, and how: `explain` says in one plain line what it is;
    `higher_is_better` which way is better (None: a count, which has no better way); `needs_non_relevant` as the
    registry's Metric."""

    key: str
    label: str
    decimals: int
    explain: str = ""
    higher_is_better: bool | None = None
    needs_non_relevant: bool = False


# The counts come first, then the metrics in the registry's order (DIRAS App. C).
COUNT_ROWS = (
    Shown("n", "pairs evaluated", 0, "gold pairs the judge judged: what its metrics are computed on"),
    Shown("n_relevant", "relevant", 0, "of them, the pairs gold calls relevant"),
    Shown("n_unresolved", "unresolved", 0, "experts disagree and nobody adjudicated: left out of every metric"),
    Shown("n_unjudged", "not judged by the judge", 0, "gold pairs with no usable judgment: left out of its metrics"),
)


def judge_rows(cutoffs: tuple[int, ...] = DEFAULT_CUTOFFS) -> tuple[Shown, ...]:
    """The rows of a judge's section: counts, then every metric with nDCG@k and MAP@k for each of `cutoffs`."""
    return (*COUNT_ROWS, *(Shown(metric.key, metric.label, metric.decimals, metric.explain, metric.higher_is_better,
                                 metric.needs_non_relevant) for metric in metrics_for(cutoffs).values()))

HUMAN_ROWS = (
    Shown("n_overlap", "pairs labelled twice or more", 0, "what the experts' agreement is measured on"),
    Shown("human_kappa_binary", "Cohen's kappa, binary", 3,
          "two experts' agreement on relevant or not, beyond chance (1: perfect, 0: chance); higher is better", True),
    Shown("human_kappa_graded", "Cohen's kappa, graded", 3,
          "two experts' agreement on the exact grade, beyond chance; higher is better", True),
    Shown("krippendorff_alpha", "Krippendorff's alpha (ordinal)", 3,
          "all experts' agreement on the grades, near misses counting less (1: perfect, 0: chance); higher is "
          "better", True),
)


@dataclass(frozen=True)
class MetricRow:
    key: str
    label: str
    value: float | int | None
    ci: tuple[float, float] | None
    decimals: int
    reason: str | None
    explain: str = ""
    best: bool = False  # the best value of its line among the judges that are ranked


@dataclass(frozen=True)
class MetricLine:
    """One row of the judges-side-by-side table: a label, what it measures and each judge's cell."""

    label: str
    cells: list[MetricRow]
    explain: str = ""


def _rows(section: dict, shown: Iterable[Shown]) -> list[MetricRow]:
    cis, reasons = section.get("ci") or {}, section.get("null_reasons") or {}
    return [
        MetricRow(row.key, row.label, section.get(row.key), tuple(cis[row.key]) if cis.get(row.key) else None,
                  row.decimals, reasons.get(row.key), row.explain)
        for row in shown
    ]


def _best(cells: list[MetricRow], row: Shown, ranked: Sequence[bool], few_non_relevant: bool) -> list[MetricRow]:
    """The cells with the best value of the line among the `ranked` judges marked (ties all of them); nothing is
    marked for a count, with fewer than two ranked judges having a value (a best of one says nothing), or for a
    metric that needs non-relevant pairs when gold has `few_non_relevant`."""
    values = [cell.value for cell, rank in zip(cells, ranked) if rank and cell.value is not None]
    if row.higher_is_better is None or len(values) < 2 or (few_non_relevant and row.needs_non_relevant):
        return cells
    top = max(values) if row.higher_is_better else min(values)
    return [replace(cell, best=True) if rank and cell.value == top else cell for cell, rank in zip(cells, ranked)]


def metric_table(sections: list[dict], cutoffs: tuple[int, ...] = DEFAULT_CUTOFFS,
                 ranked: Sequence[bool] | None = None, few_non_relevant: bool = False) -> list[MetricLine]:
    """The judges' report sections side by side: a line per row of judge_rows(cutoffs), a cell per judge, the best
    value of each metric's line marked among the judges `ranked` says to rank (default: all), except where gold's
    `few_non_relevant` pairs leave the metric unreadable."""
    shown = judge_rows(cutoffs)
    ranked = [True] * len(sections) if ranked is None else list(ranked)
    columns = [_rows(section, shown) for section in sections]
    return [MetricLine(row.label, _best([column[index] for column in columns], row, ranked, few_non_relevant),
                       row.explain) for index, row in enumerate(shown)]


def human_rows(section: dict) -> list[MetricRow]:
    """The human-agreement part of the report as rows."""
    return _rows(section, HUMAN_ROWS)

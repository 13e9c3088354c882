"""The Systems page's view of a systems report: per qrels source a leaderboard (with the runs' significance
marks and p-values), the sources' agreement rows, the LVHQ groups and the human-against-judge scatter plots."""
from __future__ import annotations

import math
from dataclasses import dataclass

from labeling.charts import Scatter, scatter_chart
from labeling.selectors.qrels_sources import HUMAN, JUDGE
from labeling.selectors.systems import JUDGED, SystemsReport
from labeling.selectors.systems_lvhq import LvhqGroup, LvhqReport
from models_llm.systems.agreement import COEFFICIENTS, Agreement
from models_llm.systems.evaluation import MEASURE_DEPTHS, MEASURE_EXPLAIN, SAMPLE_MEASURES
from models_llm.systems.significance import Comparison

# A run whose top 10 the source judged less than this share of is marked: its unjudged passages count as not
# relevant, so its score is a lower bound, and a system that did not contribute to the pool is the one it hurts.
LOW_JUDGED = 0.5

# The measure the scatter plots compare the sources on.
SCATTER_MEASURE = "nDCG@10"


@dataclass(frozen=True)
class Cell:
    """A measure's Estimate on a leaderboard; `muted` where the source is partial on the measure."""

    mean: float | None
    low: float | None
    high: float | None
    muted: bool = False


@dataclass(frozen=True)
class LeaderboardRow:
    run: str
    cells: list[Cell]  # one per measure of the board
    judged: float | None
    mark: str = ""  # on the lead measure: "best", "tied" (indistinguishable from the best) or ""
    seconds: float | None = None  # the built-in retriever's wall time, its stages summed (None: not recorded)

    @property
    def low_judged(self) -> bool:
        return self.judged is not None and self.judged < LOW_JUDGED


@dataclass(frozen=True)
class ScatterCard:
    x_source: str
    y_source: str
    chart: Scatter


def leaderboards(report: SystemsReport, significance: dict[str, dict[str, Comparison]] | None = None,
                  seconds: dict[str, float] | None = None) -> list[dict]:
    """Per source: its runs x measures (judged@10 apart, as the warning column), best first on the first measure
    (nDCG@10), runs without a value last; a source partial on that measure (coverage within the depth it reads)
    that is not ranked keeps the runs in name order. A measure the source is partial on carries its own mark and
    its values are shown muted (a judge that has scored the runs' top 10 ranks them on nDCG@10 while AP, which
    reads every rank, waits for the rest). `seconds`: each run's recorded retrieval time, shown beside its measures
    (the crisis paper's Table 5: time and effectiveness of each retriever, with the significance marks). A source
    graded by a degenerate judge carries why, and marks no run best."""
    seconds = seconds or {}
    asked = [measure for measure in report.measures if measure != JUDGED]
    boards = []
    for source in report.sources:
        # A sample defines only its own measures, the other sources all but those: each board shows what it has.
        measures = [measure for measure in asked if (measure in SAMPLE_MEASURES) == source.sampled] or asked
        by_measure = report.measure_coverage.get(source.key, {})
        muted = [bool(by_measure.get(measure) and by_measure[measure].partial) for measure in measures]
        rows = []
        ranked = report.ranked(source.key)
        compared = (significance or {}).get(source.key, {})
        # A sample's board is ordered and marked on the first of its own measures.
        lead_measure = measures[0] if source.sampled else report.lead_measure
        first = measures.index(lead_measure) if lead_measure in measures else 0
        degenerate = report.degenerate.get(source.key)
        # A degenerate judge's ordering says nothing (every run ties at the top): no run is marked best under it.
        lead = compared.get(lead_measure) if ranked and degenerate is None else None
        for run in report.runs:
            scores = report.scores[run][source.key]
            cells = [Cell(scores[measure].mean, scores[measure].low, scores[measure].high, mute)
                     for measure, mute in zip(measures, muted)]
            mark = "" if lead is None else "best" if run == lead.best else "tied" if run in lead.tied_with_best else ""
            rows.append(LeaderboardRow(run=run, cells=cells, judged=scores[JUDGED].mean if JUDGED in scores else None,
                                       mark=mark, seconds=seconds.get(run)))
        if ranked:
            rows.sort(key=lambda row: (row.cells[first].mean is None, -(row.cells[first].mean or 0.0), row.run))
        lead_coverage = by_measure.get(report.lead_measure)
        columns = []
        for measure in measures:
            found = by_measure.get(measure)
            # The caption carries the lead measure's mark; a column is marked where the source is partial there
            # only (complete on the lead measure, partial on a deeper one).
            partial = found if found is not None and found.partial and not (
                lead_coverage is not None and lead_coverage.partial) else None
            columns.append({"name": measure, "explain": MEASURE_EXPLAIN[measure], "coverage": partial,
                            "ranked": report.ranked(source.key, measure), "depth_words": _depth_words(measure)})
        boards.append({"source": source, "queries": report.overall.queries.get(source.key, 0), "rows": rows,
                       "measures": columns, "coverage": lead_coverage, "ranked": ranked,
                       "comparison": lead, "lead_measure": lead_measure, "degenerate": degenerate,
                       "matrices": _p_matrices(compared, [row.run for row in rows])})
    return boards


def _p_matrices(compared: dict[str, Comparison], order: list[str]) -> list[dict]:
    """Per measure, the corrected p-values of every two runs (rows and columns in the leaderboard's order), each cell
    with the mean difference row - column and its interval for the tooltip."""
    matrices = []
    for measure, found in compared.items():
        by_pair = {frozenset((pair.a, pair.b)): pair for pair in found.pairs}
        rows = []
        for a in order:
            cells = []
            for b in order:
                pair = by_pair.get(frozenset((a, b)))
                if pair is None:
                    cells.append(None)
                    continue
                sign = 1 if pair.a == a else -1
                low, high = (pair.low, pair.high) if sign == 1 else (
                    None if pair.high is None else -pair.high, None if pair.low is None else -pair.low)
                effect = None if pair.effect_size is None else sign * pair.effect_size
                difference = sign * pair.mean_difference
                # Formatted here, not by the template's floatformat: a page of 10 runs holds thousands of these, and
                # floatformat (Decimal and locale) took most of the cached page's time.
                title = (f"mean difference {difference:.4f}"
                         + ("" if low is None else f" [{low:.4f}, {high:.4f}]")
                         + ("" if effect is None else f", d_z {effect:.2f}")
                         + ("" if pair.p is None else f"; raw p {pair.p:.4f}"))
                cells.append({"p": pair.p_corrected, "title": title,
                              "difference_text": f"{difference:.3f}",
                              "p_text": None if pair.p_corrected is None else f"{pair.p_corrected:.4f}",
                              "significant": pair.p_corrected is not None and pair.p_corrected < found.alpha})
            rows.append({"run": a, "cells": cells})
        matrices.append({"measure": measure, "comparison": found, "rows": rows})
    return matrices


def left_out_deeper(report: SystemsReport) -> list[tuple[str, tuple[str, ...], str]]:
    """(measure, sources, what they lack in words) for the agreement measures past the first on which sources
    that are in the main agreement are left out as partial (scored the top 10, not yet the whole rankings)."""
    lines = []
    for measure, keys in list(report.left_out_by_measure.items())[1:]:
        deeper = tuple(key for key in keys if key not in report.left_out)
        if deeper:
            lines.append((measure, deeper, _depth_words(measure)))
    return lines


def _depth_words(measure: str) -> str:
    """What a judge has to have scored for `measure`, in words, for the partial marks."""
    depth = MEASURE_DEPTHS[measure]
    within = "rankings" if depth is None else f"top {depth}"
    return f"pool pairs the runs retrieve in their {within}"


def needed_words(report: SystemsReport) -> str:
    """What a judge of the report has to have scored to be ranked (on the lead measure), in words."""
    return _depth_words(report.lead_measure)


@dataclass(frozen=True)
class Coefficient:
    name: str  # one of COEFFICIENTS
    value: float | None  # None: undefined (every run tied under a source)
    interval: tuple[float, float] | None


@dataclass(frozen=True)
class AgreementRow:
    a: str
    b: str
    measure: str
    coefficients: list[Coefficient] | None  # COEFFICIENTS' order; None: too few runs or no shared query
    largest_change: tuple[str, int, int] | None  # (run, rank under a, rank under b)
    queries: int
    span: int  # the rows of this source pair (one per measure both sources are ranked on)


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def _coefficient(agreement: Agreement, name: str) -> Coefficient:
    value, interval = getattr(agreement, name), agreement.intervals.get(name)
    shown = interval if interval is not None and all(_finite(end) for end in interval) else None
    return Coefficient(name=name, value=value if _finite(value) else None, interval=shown)


# The LVHQ card's coefficients (DisastIR reports Kendall's tau; tau-AP weighs the top).
LVHQ_COEFFICIENTS = ("kendall_tau", "tau_ap")


def lvhq_groups(lvhq: LvhqReport) -> list[tuple[LvhqGroup, list[Coefficient]]]:
    """Each LVHQ group (all queries, then each intent) with its coefficients as the agreement table shows them."""
    return [(group, [] if group.agreement is None else [_coefficient(group.agreement, name)
                                                        for name in LVHQ_COEFFICIENTS])
            for group in (lvhq.overall, *lvhq.intents)]


def agreement_rows(report: SystemsReport) -> list[AgreementRow]:
    rows = []
    for (a, b), by_measure in report.agreement.items():
        for measure, found in by_measure.items():
            rows.append(AgreementRow(
                a=a, b=b, measure=measure, span=len(by_measure),
                coefficients=None if found is None else [_coefficient(found, name) for name in COEFFICIENTS],
                largest_change=None if found is None else found.largest_change,
                queries=0 if found is None else found.n_queries,
            ))
    return rows


def scatters(report: SystemsReport) -> list[ScatterCard]:
    """Human (x) against each judge's thresholded qrels (y) on SCATTER_MEASURE, one point per run."""
    keys = {source.key for source in report.sources}
    if HUMAN not in keys or SCATTER_MEASURE not in report.measures:
        return []
    cards = []
    for source in report.sources:
        if source.kind != JUDGE or not report.ranked(source.key, SCATTER_MEASURE):
            continue
        points = [(run, report.scores[run][HUMAN][SCATTER_MEASURE].mean,
                   report.scores[run][source.key][SCATTER_MEASURE].mean) for run in report.runs]
        points = [(run, x, y) for run, x, y in points if x is not None and y is not None]
        if points:
            cards.append(ScatterCard(x_source=HUMAN, y_source=source.key, chart=scatter_chart(points)))
    return cards

"""DIRAS's distillation sample of a run (section 3), computed without writing: per query, `inside` passages drawn at
random from within the run's top `top` and `outside` passages drawn at random from the rest of the corpus, both
from one seeded generator. The paper: "For each question, we randomly sample 60 documents - 30 each from in the
top-5 and outside the top-5". When the project's passages name their report (metadata `report`), "the top" is each
report's `top` best-ranked passages, as DIRAS's released code computes it (get_training_data.py takes each report's
top 5 chunks and pools them over the reports). The pool services store the rows (labeling.services.pooling)."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from labeling.models import Passage, Project, Query, Run, RunEntry
from labeling.selectors.runs import run_top

# DIRAS section 3's values: "30 each from in the top-5 and outside the top-5".
DIRAS_TOP = 5
DIRAS_INSIDE = 30
DIRAS_OUTSIDE = 30
REPORT_KEY = "report"
NO_REPORT = ""  # the group of the passages that name no report, when others do
SHOWN_SHORT = 20
_CHUNK = 20_000

Row = tuple[int, int, int | None]  # (query id, passage id, the run's rank; None for a passage outside the top)


@dataclass(frozen=True)
class ShortQuery:
    """A query that had fewer passages on a side than asked: all of them were taken (`inside`, `outside`: how many
    it had there)."""

    query: str  # external id
    inside: int
    outside: int


@dataclass(frozen=True)
class DirasSample:
    """The rows of the sample, by query id: each query's inside draw (in rank order), then its outside draw (in the
    order drawn). `inside_drawn` / `outside_drawn`: rows on each side in all; `short`: the queries that had fewer
    than asked on a side (`short_queries` of them; the first SHOWN_SHORT listed)."""

    rows: tuple[Row, ...]
    queries: int
    inside_drawn: int
    outside_drawn: int
    short_queries: int
    short: tuple[ShortQuery, ...]
    report_rule: bool

    def counts(self) -> dict:
        """The counts as a training set's parameters and the API give them."""
        return {"queries": self.queries, "inside_drawn": self.inside_drawn, "outside_drawn": self.outside_drawn,
                "short_queries": self.short_queries,
                "short": [{"query": s.query, "inside": s.inside, "outside": s.outside} for s in self.short]}


def sample_size_problem(top: object, inside: object, outside: object) -> str | None:
    """Why these sizes make no sample (the services raise it as their own error), or None."""
    if not all(isinstance(size, int) and not isinstance(size, bool) for size in (top, inside, outside)):
        return f"the top, inside and outside sizes must be integers, got {top!r}, {inside!r}, {outside!r}"
    if top < 1:
        return f"the top must be at least 1 passage per query (DIRAS: {DIRAS_TOP}), got {top}"
    if inside < 0 or outside < 0 or inside + outside < 1:
        return f"sample at least one passage per query: inside {inside} and outside {outside}"
    return None


def passage_reports(project: Project) -> dict[int, str]:
    """Passage id -> its report, for the passages whose metadata name one (empty: reports do not group passages)."""
    rows = (Passage.objects.filter(project=project, metadata__has_key=REPORT_KEY)
            .values_list("id", f"metadata__{REPORT_KEY}").iterator(chunk_size=50_000))
    return {passage_id: str(report) for passage_id, report in rows}


def top_candidates(run: Run, top: int, reports: dict[int, str]) -> dict[int, list[tuple[int, int]]]:
    """Query id -> its (passage id, rank) within the top, in rank order. Without `reports`: the run's top `top`.
    With them: each report's `top` best-ranked passages in the run (the passages naming no report are one group of
    their own), over the whole run."""
    tops: dict[int, list[tuple[int, int]]] = {}
    if not reports:
        for query_id, passage_id, rank in run_top(run, top):
            tops.setdefault(query_id, []).append((passage_id, rank))
        return tops
    seen: dict[str, int] = {}
    current = None
    entries = (RunEntry.objects.filter(run=run).order_by("query_id", "rank")
               .values_list("query_id", "passage_id", "rank").iterator(chunk_size=_CHUNK))
    for query_id, passage_id, rank in entries:
        if query_id != current:
            current, seen = query_id, {}
            kept = tops.setdefault(query_id, [])
        report = reports.get(passage_id, NO_REPORT)
        if seen.get(report, 0) < top:
            seen[report] = seen.get(report, 0) + 1
            kept.append((passage_id, rank))
    return tops


def _draw(rng: np.random.Generator, passages: np.ndarray, excluded: np.ndarray, size: int) -> np.ndarray:
    """`size` of the sorted ids `passages` that are not in `excluded` (ids of `passages`), drawn without replacement:
    the same draw as rng.choice(np.setdiff1d(passages, excluded), size, replace=False), without building that array
    per query."""
    gone = np.sort(np.searchsorted(passages, excluded))
    available = len(passages) - len(gone)
    picks = rng.choice(available, size=min(size, available), replace=False)
    # The k-th id left is k places on, plus one for each excluded place before it: gone[j] - j ids are left
    # before the j-th excluded one.
    return passages[picks + np.searchsorted(gone - np.arange(len(gone)), picks, side="right")]


def draw_rows(passages: np.ndarray, query_ids: list[int], tops: dict[int, list[tuple[int, int]]], inside: int,
              outside: int, rng: np.random.Generator) -> Iterator[tuple[int, list[Row], int, int]]:
    """Per query of `query_ids` in that order: (query id, its rows, passages inside its top, passages outside it).
    Inside: rng.choice over the query's top (in rank order) of min(inside, its size) positions, without
    replacement, taken in rank order. Outside: min(outside, what is left) of the sorted corpus ids `passages` not in
    the query's top (the whole top, drawn or not), by _draw. One generator for all queries, inside then outside."""
    for query_id in query_ids:
        best = tops.get(query_id, [])
        picks = sorted(rng.choice(len(best), size=min(inside, len(best)), replace=False).tolist()) if inside else []
        rows: list[Row] = [(query_id, best[i][0], best[i][1]) for i in picks]
        excluded = np.fromiter((passage_id for passage_id, _ in best), dtype=np.int64, count=len(best))
        if outside:
            rows += [(query_id, passage_id, None) for passage_id in _draw(rng, passages, excluded, outside).tolist()]
        yield query_id, rows, len(best), len(passages) - len(best)


def diras_sample(*, project: Project, run: Run, top: int, inside: int, outside: int, seed: int) -> DirasSample:
    """The sample of `run` (checked by the caller): for each query of the run by id, `inside` passages drawn at
    random from within its top `top` (top_candidates: each report's top when passages name reports) and `outside`
    from the project's passages not in that top, with numpy's default_rng(seed) over sorted ids: the same rows on
    every database. A query with fewer than asked on a side gives all it has there and is counted in `short`."""
    passages = np.fromiter(Passage.objects.filter(project=project).order_by("id").values_list("id", flat=True)
                           .iterator(chunk_size=50_000), dtype=np.int64)
    query_ids = list(RunEntry.objects.filter(run=run).order_by("query_id").values_list("query_id", flat=True)
                     .distinct())
    reports = passage_reports(project)
    tops = top_candidates(run, top, reports)
    rows: list[Row] = []
    inside_drawn = outside_drawn = 0
    short: list[tuple[int, int, int]] = []
    for query_id, drawn, in_top, out_top in draw_rows(passages, query_ids, tops, inside, outside,
                                                       np.random.default_rng(seed)):
        rows += drawn
        n_in = sum(1 for row in drawn if row[2] is not None)
        inside_drawn, outside_drawn = inside_drawn + n_in, outside_drawn + len(drawn) - n_in
        if in_top < inside or out_top < outside:
            short.append((query_id, in_top, out_top))
    names = dict(Query.objects.filter(id__in=[q for q, _, _ in short[:SHOWN_SHORT]]).values_list("id", "external_id"))
    return DirasSample(
        rows=tuple(rows), queries=len(query_ids), inside_drawn=inside_drawn, outside_drawn=outside_drawn,
        short_queries=len(short), report_rule=bool(reports),
        short=tuple(ShortQuery(query=names[q], inside=a, outside=b) for q, a, b in short[:SHOWN_SHORT]),
    )

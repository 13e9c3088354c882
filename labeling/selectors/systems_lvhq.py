"""LVHQ as DisastIR defines it (4.3, App. F; #35): do LLM-generated queries rank the systems as human-written ones
do? Every run is evaluated under one qrels source (the same relevance method for both sets) on each of two query
sets (labeling.selectors.query_sets), and the runs' ranking by their mean over set a is compared with their ranking
over set b: Kendall's tau-b and tau-AP with bootstrap intervals (models_llm.systems.agreement), overall and per
search intent. When every query of both sets has its twin in the other, each draw resamples twin pairs; otherwise
each set's queries are resampled on their own."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from labeling.models import Project
from labeling.selectors.qrels_sources import HUMAN, SystemsError, qrels_source_parse, qrels_sources
from labeling.selectors.query_sets import QuerySetError, QuerySets, query_sets
from labeling.selectors.systems import DRAWS, JUDGED, LEVEL, SystemsReport, systems_report
from models_llm.systems.agreement import Agreement, query_set_agreement
from models_llm.systems.evaluation import MEASURES

DEFAULT_MEASURE = "nDCG@10"
LVHQ_MEASURES = tuple(measure for measure in MEASURES if measure != JUDGED)
# The set LVHQ takes as its reference when the project has one of this name (DisastIR's human-written queries).
REFERENCE_SET = "human"
TWIN_PAIRS = "twin pairs"
EACH_SET = "each set's queries"


@dataclass(frozen=True)
class LvhqRun:
    """A run's mean over the evaluated queries of each set (None: none) and its rank there (1 the best; a tie
    shares the better place)."""

    run: str
    mean_a: float | None
    mean_b: float | None
    rank_a: int | None
    rank_b: int | None


@dataclass(frozen=True)
class LvhqGroup:
    """The two rankings compared on all the queries of the sets (`intent` None) or on one intent's. `resampled`:
    TWIN_PAIRS or EACH_SET; `agreement` None with fewer than three runs or a set without an evaluated query."""

    intent: str | None
    queries_a: int
    queries_b: int
    twin_pairs: int
    resampled: str
    agreement: Agreement | None


@dataclass(frozen=True)
class LvhqReport:
    """`partial`: the source is a judge that lacks the P of some pool pairs the runs retrieve to the depth the
    measure reads, so both rankings rest partly on what it skipped (unjudged counts as not relevant)."""

    source: str
    measure: str
    set_a: str
    set_b: str
    runs: tuple[LvhqRun, ...]
    overall: LvhqGroup
    intents: tuple[LvhqGroup, ...]
    draws: int
    seed: int
    level: float
    partial: bool


def lvhq_sets(sets: QuerySets, set_a: str | None = None, set_b: str | None = None) -> tuple[str, str]:
    """The two sets to compare: those asked; by default `human` (when the project has it) against the other set, or
    the project's two sets in name order. QuerySetError when it has fewer than two or more than two to choose from."""
    if set_a is not None and set_b is not None:
        sets.of(set_a), sets.of(set_b)
        if set_a == set_b:
            raise QuerySetError(f"LVHQ compares two different query sets, got {set_a!r} twice")
        return set_a, set_b
    names = list(sets.sets)
    if len(names) < 2:
        raise QuerySetError("LVHQ needs two query sets (metadata 'query_set' of the queries); the project has "
                            + (f"only {names[0]!r}" if names else "none"))
    given = set_a or set_b
    if given is not None:
        sets.of(given)
        others = [name for name in names if name != given]
    else:
        given = REFERENCE_SET if REFERENCE_SET in names else names[0]
        others = [name for name in names if name != given]
    if len(others) != 1:
        raise QuerySetError(f"choose the two query sets to compare (sets: {', '.join(names)})")
    return (given, others[0]) if set_b is None else (others[0], given)


def _rank(value: float | None, values: Sequence[float | None]) -> int | None:
    if value is None:
        return None
    return 1 + sum(other is not None and other > value for other in values)


def _matrix(report: SystemsReport, source: str, measure: str, queries: Sequence[str]) -> np.ndarray:
    """(runs, queries) values of `measure`; the queries must all be evaluated by the source."""
    rows = []
    for run in report.runs:
        scores = report.per_query[run][source]
        column = {query: i for i, query in enumerate(scores.queries)}
        rows.append(scores.values[measure][[column[query] for query in queries]])
    return np.array(rows, dtype=float).reshape(len(report.runs), len(queries))


def _group(report: SystemsReport, source: str, measure: str, a: Sequence[str], b: Sequence[str],
           sets: QuerySets, intent: str | None, draws: int) -> LvhqGroup:
    pairs = sets.twin_pairs(a, b)
    # Twin pairs are resampled together only when they match the two sets one to one.
    paired = (bool(pairs) and len(pairs) == len(a) == len(b) and len({x for x, _ in pairs}) == len(a)
              and len({y for _, y in pairs}) == len(b))
    if paired:
        a, b = [query for query, _ in pairs], [twin for _, twin in pairs]
    found = query_set_agreement(list(report.runs), _matrix(report, source, measure, a),
                                _matrix(report, source, measure, b), paired=paired, draws=draws,
                                seed=report.seed, level=report.level) if report.runs else None
    return LvhqGroup(intent=intent, queries_a=len(a), queries_b=len(b), twin_pairs=len(pairs),
                     resampled=TWIN_PAIRS if paired else EACH_SET, agreement=found)


def lvhq_from_report(report: SystemsReport, sets: QuerySets, *, source: str, set_a: str, set_b: str,
                     measure: str = DEFAULT_MEASURE, draws: int | None = None) -> LvhqReport:
    """LVHQ of the runs `report` evaluated under `source` (one of its sources) on `measure`, with `draws` bootstrap
    draws (None: the report's). Only the queries of each set the source evaluates count (a query without a graded
    pair is no query of the qrels), and of twins, only pairs whose both queries it evaluates."""
    draws = report.draws if draws is None else draws
    if measure not in report.measures or source not in {each.key for each in report.sources}:
        raise SystemsError(f"the evaluation has no {measure} under {source!r}")
    evaluated = set(report.per_query[report.runs[0]][source].queries) if report.runs else set()
    members = {name: [query for query in sets.of(name) if query in evaluated] for name in (set_a, set_b)}
    overall = _group(report, source, measure, members[set_a], members[set_b], sets, None, draws)
    intents = sorted({sets.intents[query] for name in (set_a, set_b) for query in members[name]
                      if query in sets.intents})
    by_intent = tuple(_group(report, source, measure,
                             [query for query in members[set_a] if sets.intents.get(query) == intent],
                             [query for query in members[set_b] if sets.intents.get(query) == intent], sets, intent,
                             draws)
                      for intent in intents)
    means = {}
    for run in report.runs:
        scores = report.per_query[run][source]
        means[run] = tuple(scores.subset(members[name]).mean(measure) for name in (set_a, set_b))
    runs = tuple(LvhqRun(run=run, mean_a=mean_a, mean_b=mean_b,
                         rank_a=_rank(mean_a, [pair[0] for pair in means.values()]),
                         rank_b=_rank(mean_b, [pair[1] for pair in means.values()]))
                 for run, (mean_a, mean_b) in means.items())
    return LvhqReport(source=source, measure=measure, set_a=set_a, set_b=set_b,
                      runs=tuple(sorted(runs, key=lambda row: (row.rank_a or len(runs) + 1, row.run))),
                      overall=overall, intents=by_intent, draws=draws, seed=report.seed, level=report.level,
                      partial=bool((found := report.measure_coverage.get(source, {}).get(measure)) and found.partial))


def lvhq_source(project: Project, source: str | None) -> str:
    """The qrels source asked for, checked; by default `human` when the project has human grades, else its first
    source (a sample is no source here: it defines its own measures only)."""
    if source is not None:
        parsed = qrels_source_parse(project=project, key=source)
        if parsed.sampled:
            raise SystemsError("LVHQ needs a source that defines nDCG@10 and the other measures; 'sample' does not")
        return parsed.key
    keys = [each.key for each in qrels_sources(project) if not each.sampled]
    if not keys:
        raise SystemsError(f"project {project.slug!r} has no qrels source: no human grade and no judge's P")
    return HUMAN if HUMAN in keys else keys[0]


def lvhq_report(*, project: Project, source: str | None = None, set_a: str | None = None, set_b: str | None = None,
                measure: str = DEFAULT_MEASURE, draws: int = DRAWS, seed: int = 0,
                level: float = LEVEL) -> LvhqReport:
    """Evaluate every run under `source` (lvhq_source) on `measure` and compare its ranking over set a with that
    over set b (lvhq_sets). SystemsError / QuerySetError name what cannot be done."""
    if measure not in LVHQ_MEASURES:
        raise SystemsError(f"measure must be one of {', '.join(LVHQ_MEASURES)}, not {measure!r}")
    sets = query_sets(project)
    chosen_a, chosen_b = lvhq_sets(sets, set_a, set_b)
    key = lvhq_source(project, source)
    # The runs' own intervals are not shown here: no draws for them, only for the agreement.
    report = systems_report(project=project, sources=[key], measures=[measure], draws=0, seed=seed, level=level)
    return lvhq_from_report(report, sets, source=key, set_a=chosen_a, set_b=chosen_b, measure=measure, draws=draws)


def _agreement_json(found: Agreement | None) -> dict | None:
    if found is None:
        return None
    finite = (lambda value: value if np.isfinite(value) else None)
    return {"kendall_tau": finite(found.kendall_tau), "tau_ap": finite(found.tau_ap),
            "kendall_tau_interval": None if found.intervals["kendall_tau"] is None
            else list(found.intervals["kendall_tau"]),
            "tau_ap_interval": None if found.intervals["tau_ap"] is None else list(found.intervals["tau_ap"]),
            "largest_change": None if found.largest_change is None else {
                "run": found.largest_change[0], "rank_a": found.largest_change[1],
                "rank_b": found.largest_change[2]},
            "runs": found.n_systems}


def _group_json(group: LvhqGroup) -> dict:
    return {"queries_a": group.queries_a, "queries_b": group.queries_b, "twin_pairs": group.twin_pairs,
            "resampled": group.resampled, "agreement": _agreement_json(group.agreement)}


def lvhq_json(report: LvhqReport) -> dict:
    """{"source", "measure", "set_a", "set_b", "partial": the source's judge lacks some P the measure reads,
        "draws", "seed", "level",
        "runs": [{"run", "mean_a", "mean_b", "rank_a", "rank_b"}] (by rank on set a),
        "overall": {"queries_a", "queries_b", "twin_pairs", "resampled": "twin pairs" or "each set's queries",
                    "agreement": null (fewer than three runs, or a set without a query) or
                                 {"kendall_tau", "tau_ap", "kendall_tau_interval", "tau_ap_interval",
                                  "largest_change": null or {"run", "rank_a", "rank_b"}, "runs"}},
        "intents": {intent: the same as "overall"}}"""
    return {"source": report.source, "measure": report.measure, "set_a": report.set_a, "set_b": report.set_b,
            "partial": report.partial, "draws": report.draws, "seed": report.seed, "level": report.level,
            "runs": [{"run": row.run, "mean_a": row.mean_a, "mean_b": row.mean_b, "rank_a": row.rank_a,
                      "rank_b": row.rank_b} for row in report.runs],
            "overall": _group_json(report.overall),
            "intents": {group.intent: _group_json(group) for group in report.intents}}

"""System evaluation: every run of a project under each of its qrels sources (labeling.selectors.qrels_sources),
with bootstrap intervals, how much of each run the source judged, per-group breakdowns by a query metadata key,
and the qrels agreement: how far two sources agree on the ranking of the systems (DisastIR's LVHQ, two query sets
under one source, is labeling.selectors.systems_lvhq).

Agreement pairs: with human grades among the sources, human (the reference) against each other source; without,
every pair. Computed per measure on the queries both sources evaluate (every run is scored on all of a source's
queries, a query a run lacks at 0, so the systems share them), for AGREEMENT_MEASURES (nDCG@10, the main one, and
AP) among the measures asked; with neither asked, for the first measure asked. Expected sources have no AP, so
their AP agreement is absent; with fewer than MIN_SYSTEMS runs (models_llm.systems.agreement) there is no
agreement to show.

Coverage (labeling.selectors.coverage), per measure: a source made from a judge needs, for a measure, the judge's
P of every pool pair that a run retrieves within the depth that measure reads (10 for nDCG@10 and P@10, 100 for
nDCG@100 and R@100, the whole ranking for AP). A source whose judge lacks some is partial on that measure, and is
left out of that measure's agreement (and, for the leaderboard's first measure, of the ordering) unless
`include_partial`: a judge that has scored the runs' top 10 compares the runs on nDCG@10 while it scores the
rest."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from labeling.models import Judge, Pair, Project, Query
from labeling.selectors.coverage import Coverage, coverages_of, is_ranked, pool_pairs_retrieved_at
from labeling.selectors.degenerate import sources_degeneracy
from labeling.selectors.qrels_sources import (
    COMBINED,
    HUMAN,
    QrelsSource,
    SystemsError,
    probabilities_for,
    qrels_for,
    qrels_source_parse,
    qrels_sources,
    sample_design,
    thresholded,
)
from labeling.selectors.runs import RunNames, project_runs, rankings_named, run_entry_ids, run_top_ids
from models_llm.metrics import Degeneracy
from models_llm.systems.agreement import Agreement, system_agreement
from models_llm.systems.evaluation import (
    ALL_MEASURES,
    INCOMPLETE_MEASURES,
    MEASURE_DEPTHS,
    MEASURES,
    SAMPLE_MEASURES,
    ExpectedEvaluator,
    QrelsEvaluator,
    QueryScores,
)
from models_llm.systems.sampled import SampledEvaluator

AGREEMENT_MEASURES = ("nDCG@10", "AP")
# The share of a run's top 10 that the source judged: always reported, whichever measures are asked.
JUDGED = "judged@10"
# The group of the queries whose metadata lacks the key.
NO_VALUE = "(none)"
DRAWS = 1000
LEVEL = 0.95


@dataclass(frozen=True)
class Estimate:
    """A mean over queries and its percentile bootstrap interval (None: no queries, or the measure is not
    defined for the source)."""

    mean: float | None
    low: float | None
    high: float | None


@dataclass(frozen=True)
class Table:
    """Every run under every source on one set of queries (all of them, or a metadata group).

    queries: source key -> the number of queries the source evaluates here.
    scores: run name -> source key -> measure -> Estimate.
    agreement: (source a, source b) -> measure -> Agreement (None: fewer than two systems or no shared query)."""

    queries: dict[str, int]
    scores: dict[str, dict[str, dict[str, Estimate]]]
    agreement: dict[tuple[str, str], dict[str, Agreement | None]]


@dataclass(frozen=True)
class SystemsReport:
    """The evaluation of a project's runs. `per_query[run][source]` holds each run's per-query values;
    `judged_entries[run][source]` the share of all of the run's entries that the source grades (or gives a P);
    `groups` maps each value of the `group_by` metadata key to its own Table. `coverage[source]`: the source's
    judge's coverage of the pool pairs the runs retrieve within `depth` (None: human, not a judge's; depth None:
    the whole rankings), what every measure asked needs; `measure_coverage[source][measure]` the same within the
    depth that one measure reads; `include_partial`: whether partial sources are ranked and compared all the
    same. `degenerate[source]` (`degenerate_sources`): for a source graded by a degenerate judge
    (models_llm.metrics.degenerate), why; its ranking of the runs says nothing."""

    project: str
    sources: tuple[QrelsSource, ...]
    runs: tuple[str, ...]
    measures: tuple[str, ...]
    agreement_measures: tuple[str, ...]
    overall: Table
    per_query: dict[str, dict[str, QueryScores]]
    judged_entries: dict[str, dict[str, float | None]]
    group_by: str | None
    groups: dict[str, Table]
    draws: int
    seed: int
    level: float
    coverage: dict[str, Coverage | None]
    depth: int | None
    include_partial: bool
    measure_coverage: dict[str, dict[str, Coverage | None]]
    # A default held by the class: a report a worker pickled before the field existed reads none.
    degenerate_sources: tuple[tuple[str, Degeneracy], ...] = ()

    @property
    def degenerate(self) -> dict[str, Degeneracy]:
        return dict(self.degenerate_sources)

    @property
    def lead_measure(self) -> str:
        """The measure leaderboards order the runs by and the main agreement's: the first asked (nDCG@10 by
        default), judged@10 only when nothing else is asked."""
        return next((measure for measure in self.measures if measure != JUDGED), JUDGED)

    def ranked(self, key: str, measure: str | None = None) -> bool:
        """Whether the source ranks the runs on `measure` (None: lead_measure): complete within the depth the
        measure reads, not a judge's, or included though partial."""
        found = self.measure_coverage.get(key, {}).get(measure or self.lead_measure)
        return is_ranked(found, include_partial=self.include_partial)

    @property
    def left_out(self) -> tuple[str, ...]:
        """The partial sources left out of the main agreement (its first measure, nDCG@10 by default)."""
        main = self.agreement_measures[0] if self.agreement_measures else self.lead_measure
        return tuple(source.key for source in self.sources if not self.ranked(source.key, main))

    @property
    def left_out_by_measure(self) -> dict[str, tuple[str, ...]]:
        """Per agreement measure, the partial sources left out of its agreement."""
        return {measure: tuple(source.key for source in self.sources if not self.ranked(source.key, measure))
                for measure in self.agreement_measures}

    @property
    def scores(self) -> dict[str, dict[str, dict[str, Estimate]]]:
        return self.overall.scores

    @property
    def agreement(self) -> dict[tuple[str, str], dict[str, Agreement | None]]:
        return self.overall.agreement


def _measures(measures: Sequence[str] | None) -> tuple[str, ...]:
    if not measures:
        return MEASURES
    unknown = [measure for measure in measures if measure not in ALL_MEASURES]
    if unknown:
        raise SystemsError(f"unknown measure {unknown[0]!r} (measures: {', '.join(ALL_MEASURES)})")
    chosen = tuple(dict.fromkeys(measures))
    return chosen if JUDGED in chosen else (*chosen, JUDGED)


def _depth(measures: tuple[str, ...]) -> int | None:
    """How deep into the rankings the measures read (None: all of them)."""
    depths = [MEASURE_DEPTHS[measure] for measure in measures]
    return None if None in depths else max(depths)


def _agreement_measures(measures: tuple[str, ...]) -> tuple[str, ...]:
    main = tuple(measure for measure in AGREEMENT_MEASURES if measure in measures)
    return main or tuple(measure for measure in measures if measure != JUDGED)[:1]


def _agreement_pairs(sources: Sequence[QrelsSource]) -> list[tuple[str, str]]:
    # A sample shares no measure with the other sources (statAP and infNDCG@10 are its own): nothing to compare.
    keys = [source.key for source in sources if not source.sampled]
    if HUMAN in keys:
        return [(HUMAN, key) for key in keys if key != HUMAN]
    return list(combinations(keys, 2))


def _query_groups(project: Project, key: str) -> dict[str, list[str]]:
    """Metadata value -> the queries having it; `key` may name several keys, comma-separated, whose values are
    joined with ' x ' (DisastIR's intent x event type)."""
    keys = [part.strip() for part in key.split(",") if part.strip()]
    if not keys:
        raise SystemsError("group_by must name a query metadata key")
    groups: dict[str, list[str]] = {}
    for query, metadata in Query.objects.filter(project=project).values_list("external_id", "metadata"):
        values = [metadata.get(part) if isinstance(metadata, dict) else None for part in keys]
        value = NO_VALUE if all(v is None for v in values) else " x ".join(
            NO_VALUE if v is None else str(v) for v in values)
        groups.setdefault(value, []).append(query)
    return dict(sorted(groups.items()))


def _pool_by_query(project: Project) -> dict[str, list[str]]:
    """query external id -> the passages of its pool pairs (external ids): trec_eval's "pooled" documents."""
    pooled: dict[str, list[str]] = {}
    for query, passage in Pair.objects.filter(project=project).values_list("query__external_id",
                                                                           "passage__external_id").iterator():
        pooled.setdefault(query, []).append(passage)
    return pooled


def _evaluators(project: Project, sources: Sequence[QrelsSource], *, required: bool,
                measures: tuple[str, ...] = ()) -> dict[str, tuple[QrelsEvaluator | ExpectedEvaluator,
                                                                   dict[str, frozenset[str]]]]:
    """source key -> (evaluator, judged doc ids per query), each qrels built once; a source that grades nothing
    is an error when it was asked for, else left out (`sources` as qrels_sources orders them, human first).
    `measures`: those of INCOMPLETE_MEASURES among them are computed too (the pool read once for infAP and bpref:
    a pool pair the source does not grade is pooled but unjudged)."""
    relevant_from = project.label_scale.relevant_from
    extra = tuple(measure for measure in measures if measure in INCOMPLETE_MEASURES)
    pooled = _pool_by_query(project) if {"bpref", "infAP"} & set(extra) else None
    built = {}
    for source in sources:
        if source.kind == COMBINED and not required and HUMAN not in built:
            # No gold grade after all: combined:NAME would grade exactly as judge:NAME.
            continue
        design = sample_design(project=project) if source.sampled else None
        grades: Mapping[str, Mapping[str, float]] = (
            probabilities_for(project=project, source=source) if source.expected
            else {query: sample.grades for query, sample in design.items()} if design is not None
            else qrels_for(project=project, source=source))
        if not any(grades.values()):
            if required:
                raise SystemsError(f"the {source.key} qrels of project {project.slug!r} are empty: "
                                   f"no pair has a grade from {source.label}")
            continue
        evaluator = (ExpectedEvaluator(grades) if source.expected
                     else SampledEvaluator(design, relevant_from=relevant_from) if design is not None
                     else QrelsEvaluator(grades, relevant_from=relevant_from, extra=extra, pooled=pooled))
        built[source.key] = (evaluator, {query: frozenset(docs) for query, docs in grades.items()})
    return built


def _coverage(project: Project, sources: Sequence[QrelsSource],
              needed_at: Mapping[int | None, np.ndarray]) -> dict[int | None, dict[str, Coverage | None]]:
    """Depth -> source key -> its judge's coverage of the pairs needed at that depth, one read per judge (None:
    human)."""
    names = {source.judge for source in sources if source.judge is not None}
    judges = {judge.name: coverages_of(judge=judge, needed_at=needed_at)
              for judge in Judge.objects.filter(project=project, name__in=names)}
    return {depth: {source.key: None if source.judge is None else judges[source.judge][depth] for source in sources}
            for depth in needed_at}


def _judged_share(ranking: Mapping[str, Sequence[str]], judged: Mapping[str, frozenset[str]]) -> float | None:
    entries = sum(len(docs) for docs in ranking.values())
    if not entries:
        return None
    hits = sum(len(judged[query].intersection(docs)) for query, docs in ranking.items() if query in judged)
    return hits / entries


def _estimates(scores: QueryScores, measures: tuple[str, ...], draws: int, seed: int,
               level: float) -> dict[str, Estimate]:
    intervals = scores.intervals(draws=draws, seed=seed, level=level)
    out = {}
    for measure in measures:
        if measure not in scores.values:
            out[measure] = Estimate(None, None, None)
            continue
        low, high = intervals[measure] or (None, None)
        out[measure] = Estimate(scores.mean(measure), low, high)
    return out


def _agreement(per_query: Mapping[str, Mapping[str, QueryScores]], runs: Sequence[str], pair: tuple[str, str],
               measure: str, draws: int, seed: int, level: float) -> Agreement | None:
    a, b = pair
    first = per_query[runs[0]]
    if measure not in first[a].values or measure not in first[b].values:
        return None
    # Every run shares the queries of a source, so the first run's tell which queries both sources evaluate.
    shared = sorted(set(first[a].queries) & set(first[b].queries))
    matrices = [np.array([per_query[run][key].subset(shared).values[measure] for run in runs]) for key in pair]
    return system_agreement(list(runs), matrices[0], matrices[1], draws=draws, seed=seed, level=level)


def _table(per_query: Mapping[str, Mapping[str, QueryScores]], runs: Sequence[str], keys: Sequence[str],
           pairs: Mapping[str, Sequence[tuple[str, str]]], measures: tuple[str, ...],
           agreement_measures: tuple[str, ...], draws: int, seed: int, level: float) -> Table:
    """`pairs`: per agreement measure, the source pairs compared on it (both sources ranked on the measure)."""
    scores = {run: {key: _estimates(per_query[run][key], measures, draws, seed, level) for key in keys}
              for run in runs}
    queries = {key: len(per_query[runs[0]][key].queries) if runs else 0 for key in keys}
    every_pair = dict.fromkeys(pair for measure in agreement_measures for pair in pairs[measure])
    agreement = {pair: {measure: _agreement(per_query, runs, pair, measure, draws, seed, level)
                        for measure in agreement_measures if pair in pairs[measure]} if runs else {}
                 for pair in every_pair}
    return Table(queries=queries, scores=scores, agreement=agreement)


def _subset(per_query: Mapping[str, Mapping[str, QueryScores]],
            queries: Iterable[str]) -> dict[str, dict[str, QueryScores]]:
    members = list(queries)
    return {run: {key: scores.subset(members) for key, scores in by_source.items()}
            for run, by_source in per_query.items()}


def systems_report(*, project: Project, sources: Sequence[str] | None = None, measures: Sequence[str] | None = None,
                   group_by: str | None = None, draws: int = DRAWS, seed: int = 0, level: float = LEVEL,
                   include_partial: bool = False, threshold: float | None = None,
                   progress: Callable[[int], None] | None = None) -> SystemsReport:
    """Evaluate every run of `project` under `sources` (keys; None: all of qrels_sources but `sample`, less any
    that turns out to grade nothing) with `measures` (None: MEASURES, and SAMPLE_MEASURES when `sample` is asked
    for; judged@10 is always added). Each run is read once and
    each qrels built once. A project without runs gets a report without runs. Sources partial on a measure
    (coverage within the depth it reads) are left out of that measure's agreement unless `include_partial`.
    `threshold`: every judge and combined source that names none grades at calibrated P >= threshold
    (qrels_sources.thresholded), as `export_qrels --threshold` does; None: each judge's own relevance rule.
    `progress(runs evaluated)` after each run."""
    if sources:
        chosen = [qrels_source_parse(project=project, key=key) for key in dict.fromkeys(thresholded(sources, threshold))]
    else:
        keys = [source.key for source in qrels_sources(project) if not source.sampled]
        chosen = [qrels_source_parse(project=project, key=key) for key in thresholded(keys, threshold)]
    if not measures and any(source.sampled for source in chosen):
        measures = MEASURES + SAMPLE_MEASURES
    chosen_measures = _measures(measures)
    agreement_measures = _agreement_measures(chosen_measures)
    depth = _depth(chosen_measures)
    run_rows = list(project_runs(project))
    evaluators = _evaluators(project, chosen, required=bool(sources), measures=chosen_measures) if run_rows else {}
    chosen = [source for source in chosen if source.key in evaluators] if run_rows else chosen
    keys = [source.key for source in chosen]
    per_query: dict[str, dict[str, QueryScores]] = {}
    judged_entries: dict[str, dict[str, float | None]] = {}
    depths = list(dict.fromkeys(MEASURE_DEPTHS[measure] for measure in chosen_measures))
    tops: dict[int | None, list[np.ndarray]] = {each: [] for each in depths}
    names = RunNames.of(project) if run_rows else None
    for run in run_rows:
        entries = run_entry_ids(run)
        ranking = rankings_named(entries, names)
        for each in depths:
            tops[each].append(run_top_ids(entries, each))
        per_query[run.name] = {key: evaluators[key][0].evaluate(ranking) for key in keys}
        judged_entries[run.name] = {key: _judged_share(ranking, evaluators[key][1]) for key in keys}
        if progress is not None:
            progress(len(per_query))
    runs = [run.name for run in run_rows]
    coverage_at = _coverage(project, chosen, pool_pairs_retrieved_at(project=project, tops_at=tops))
    measure_coverage = {key: {measure: coverage_at[MEASURE_DEPTHS[measure]][key] for measure in chosen_measures}
                        for key in keys}
    pairs = {measure: _agreement_pairs([source for source in chosen if is_ranked(
        measure_coverage[source.key][measure], include_partial=include_partial)]) for measure in agreement_measures}
    args = (keys, pairs, chosen_measures, agreement_measures, draws, seed, level)
    overall = _table(per_query, runs, *args)
    groups = {}
    if group_by is not None:
        for value, members in _query_groups(project, group_by).items():
            groups[value] = _table(_subset(per_query, members), runs, *args)
    return SystemsReport(
        project=project.slug, sources=tuple(chosen), runs=tuple(runs), measures=chosen_measures,
        agreement_measures=agreement_measures, overall=overall, per_query=per_query, judged_entries=judged_entries,
        group_by=group_by, groups=groups, draws=draws, seed=seed, level=level, coverage=coverage_at[depth],
        depth=depth, include_partial=include_partial, measure_coverage=measure_coverage,
        degenerate_sources=tuple(sources_degeneracy(project=project, sources=chosen).items()),
    )


def _plain(value):
    """A JSON-ready copy: dataclasses as objects, tuples as lists, numpy numbers as Python numbers, nan as None."""
    if hasattr(value, "__dataclass_fields__"):
        return {name: _plain(getattr(value, name)) for name in value.__dataclass_fields__}
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, np.generic):
        value = value.item()
    # An undefined coefficient (every system tied) is nan, which JSON cannot hold.
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def pair_key(pair: tuple[str, str]) -> str:
    """How the JSON names a pair of sources: "human|judge:NAME"."""
    return "|".join(pair)


def _table_json(table: Table, main: str | None) -> dict:
    agreement = {pair_key(pair): by_measure.get(main) for pair, by_measure in table.agreement.items()}
    return {
        "queries": table.queries,
        "runs": {run: {key: {measure: estimate.mean for measure, estimate in by_measure.items()}
                       for key, by_measure in by_source.items()} for run, by_source in table.scores.items()},
        "intervals": {run: {key: {measure: None if estimate.low is None else [estimate.low, estimate.high]
                                  for measure, estimate in by_measure.items()}
                            for key, by_measure in by_source.items()} for run, by_source in table.scores.items()},
        "agreement": {key: None if found is None else {
            "kendall_tau": found.kendall_tau, "tau_ap": found.tau_ap, "spearman": found.spearman,
        } for key, found in agreement.items()},
        "agreement_intervals": {key: None if found is None else _plain(found.intervals)
                                for key, found in agreement.items()},
        "agreement_by_measure": {pair_key(pair): {measure: _plain(found) for measure, found in by_measure.items()}
                                 for pair, by_measure in table.agreement.items()},
    }


def systems_report_json(report: SystemsReport) -> dict:
    """The report as the issue's JSON (runs, agreement), extended with what else the report holds:
    {"project", "measures", "sources": [{"key", "label", "kind", "expected"}], "draws", "seed", "level",
     "agreement_measure": the measure of "agreement" (nDCG@10 unless not asked),
     "queries": {source: queries evaluated},
     "runs": {run: {source: {measure: mean}}}, "intervals": {run: {source: {measure: [low, high]}}},
     "judged_entries": {run: {source: share of the run's entries the source grades}},
     "depth": how deep into each run the measures read (null: all of it),
     "coverage": {source: null (human) or {"needed", "covered", "share", "partial"}}: of the pool pairs the runs
                 retrieve within depth, how many the source's judge has an ok judgment for under the current
                 definition,
     "coverage_by_measure": {source: {measure: null or the same}}: within the depth each measure reads (a
                 judge that has scored the runs' top 10 is complete on nDCG@10 and P@10 before AP),
     "include_partial": whether partial sources are compared all the same, "left_out": the partial sources
                 that are not on agreement_measure (absent from every "agreement"), "left_out_by_measure":
                 {measure: those left out of that measure's agreement},
     "degenerate": {source: {"degenerate", "reason", "n", "n_relevant", "n_gold", "kappa", "one_side", "chance"}}:
                 the sources graded by a degenerate judge (labeling.selectors.degenerate) and why, a warning: their
                 ranking of the runs says nothing,
     "agreement": {"human|judge:X": {"kendall_tau", "tau_ap", "spearman"}},
     "agreement_intervals": {"human|judge:X": {coefficient: [low, high]}},
     "agreement_by_measure": {"human|judge:X": {measure: every field of the Agreement}},
     "groups": null or {"key": KEY, "values": {value: {"queries", "runs", "intervals", "agreement",
                                                       "agreement_intervals", "agreement_by_measure"}}}}
    A mean or interval is null where the source does not define the measure (AP and judged@10 of an expected
    source) or evaluates no query; an agreement is null with fewer than MIN_SYSTEMS (3) runs or no shared
    query."""
    # Only judged@10 asked: no measure ranks the runs, so there is no agreement to give (null, not an error).
    main = report.agreement_measures[0] if report.agreement_measures else None
    return _plain({
        "project": report.project,
        "measures": list(report.measures),
        "sources": [{"key": s.key, "label": s.label, "kind": s.kind, "expected": s.expected} for s in report.sources],
        "draws": report.draws, "seed": report.seed, "level": report.level,
        "agreement_measure": main,
        **_table_json(report.overall, main),
        "judged_entries": report.judged_entries,
        "depth": report.depth,
        "coverage": {key: None if found is None else found.as_json() for key, found in report.coverage.items()},
        "coverage_by_measure": {key: {measure: None if found is None else found.as_json()
                                      for measure, found in by_measure.items()}
                                for key, by_measure in report.measure_coverage.items()},
        "include_partial": report.include_partial,
        "left_out": list(report.left_out),
        "left_out_by_measure": {measure: list(keys) for measure, keys in report.left_out_by_measure.items()},
        "degenerate": {key: found.as_json() for key, found in report.degenerate.items()},
        "groups": None if report.group_by is None else {
            "key": report.group_by,
            "values": {value: _table_json(table, main) for value, table in report.groups.items()},
        },
    })

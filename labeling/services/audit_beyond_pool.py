"""Beyond the pool (#33): the judge's look at what each run found below the pool. A run's entries whose (query,
passage) never entered the pool are what a deeper pool would add; a seeded simple random sample of `sample` of
them per run is scored by the judge (probes of the generic audit service, never stored as pairs or judgments) and
the report estimates, per run, the relevant entries still below the pool with an interval
(models_llm.metrics.completeness.beyond_pool_total, the judge's newest calibrator applied). A user sees whether
pooling deeper would find more, and for which run."""
from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np
from django.conf import settings
from django.db.models import Exists, OuterRef, QuerySet

from labeling.models import Judge, Pair, Project, Run, RunEntry
from labeling.selectors.definitions import current_definitions
from labeling.selectors.export import judge_calibrator
from labeling.services.audit_errors import AuditConflict, AuditError
from labeling.services.audit_perturbation import MAX_SEED, whole_parameter
from models_llm.audit.types import Probe
from models_llm.metrics.completeness import beyond_pool_total
from models_llm.types import PairInput, Verdict

DEFAULT_SAMPLE = 200
LEVEL = 0.9  # the interval's level, as the completeness report's default


def beyond_pool_parameters(raw: Mapping) -> dict:
    """{"sample": entries per run to score (default 200, at most AUDIT_MAX_SAMPLE), "seed": the draw's seed
    (default 0), "runs": run names (default [], every run of the project)}; AuditError on an unknown key or a bad
    value."""
    unknown = sorted(set(raw) - {"sample", "seed", "runs"})
    if unknown:
        raise AuditError(f"unknown parameter(s) {', '.join(map(repr, unknown))} of a beyond-the-pool audit "
                         "(sample, seed, runs)")
    runs = raw.get("runs") or []
    if isinstance(runs, str):
        runs = [part.strip() for part in runs.split(",") if part.strip()]
    if not isinstance(runs, list | tuple) or not all(isinstance(name, str) and name for name in runs):
        raise AuditError("runs must be a list of run names")
    return {"sample": whole_parameter(raw, "sample", DEFAULT_SAMPLE, 1, settings.AUDIT_MAX_SAMPLE),
            "seed": whole_parameter(raw, "seed", 0, 0, MAX_SEED), "runs": sorted(set(runs))}


def _runs(project: Project, names: Sequence[str]) -> list[Run]:
    runs = list(Run.objects.filter(project=project).order_by("name"))
    if not runs:
        raise AuditConflict(f"project {project.slug!r} has no runs: import or retrieve one first")
    if not names:
        return runs
    known = {run.name: run for run in runs}
    missing = [name for name in names if name not in known]
    if missing:
        raise AuditError(f"project {project.slug!r} has no run {', '.join(map(repr, missing))} (its runs: "
                         f"{', '.join(known)})")
    return [known[name] for name in names]


def below_pool(project: Project, run: Run) -> QuerySet[RunEntry]:
    """The run's entries whose (query, passage) is not a pair of the project's pool."""
    pooled = Pair.objects.filter(project=project, query_id=OuterRef("query_id"), passage_id=OuterRef("passage_id"))
    return RunEntry.objects.filter(run=run).exclude(Exists(pooled))


def _drawn(project: Project, run: Run, sample: int, seed: int) -> list[int]:
    """The ids of a simple random sample of `sample` of the run's entries below the pool: random.Random seeded by
    the seed and the run's name draws from the ids in order, so the same pool and seed give the same sample on
    SQLite and PostgreSQL."""
    ids = np.fromiter(below_pool(project, run).order_by("id").values_list("id", flat=True), dtype=np.int64)
    chosen = random.Random(f"{seed}:{run.name}").sample(range(ids.size), min(sample, ids.size))
    return sorted(int(ids[i]) for i in chosen)


def beyond_pool_probes(*, project: Project, judge: Judge, parameters: Mapping) -> list[Probe]:
    """One probe per drawn entry (`item`: the run's name, `role`: "below"), run by run in name order, with its
    query's current definition. AuditConflict when no run has an entry below the pool."""
    drawn = [(run, _drawn(project, run, parameters["sample"], parameters["seed"]))
             for run in _runs(project, parameters["runs"])]
    wanted = [entry_id for _, ids in drawn for entry_id in ids]
    if not wanted:
        raise AuditConflict("every entry of the chosen runs is in the pool: nothing lies beyond it")
    entries = RunEntry.objects.filter(id__in=wanted).select_related("query", "passage").in_bulk()
    definitions = current_definitions({entry.query_id for entry in entries.values()})
    probes = []
    for run, ids in drawn:
        for entry_id in ids:
            entry = entries[entry_id]
            definition = definitions.get(entry.query_id)
            probes.append(Probe(
                pair=PairInput(pair_id=len(probes), query=entry.query.text, passage=entry.passage.text,
                               title=entry.passage.title,
                               definition=definition.text if definition is not None else None),
                role="below", item=run.name, query_key=entry.query.external_id, doc_key=entry.passage.external_id))
    return probes


def beyond_pool_report(*, project: Project, judge: Judge, parameters: Mapping, probes: Sequence[Probe],
                       verdicts: Sequence[Verdict]) -> dict:
    """Per run: its entries, those below the pool (counted now), the sample scored (failed answers left out, never
    read as a label) and the estimate of relevant entries below the pool with its interval at LEVEL, under the
    judge's newest calibrator."""
    calibrator = judge_calibrator(judge)
    p_of: dict[str, list[float]] = defaultdict(list)
    failed: dict[str, int] = defaultdict(int)
    for probe, verdict in zip(probes, verdicts, strict=True):
        if verdict.status == "ok" and verdict.p is not None:
            p_of[probe.item].append(float(verdict.p))
        else:
            failed[probe.item] += 1
    rows = []
    for run in _runs(project, parameters["runs"]):
        below = below_pool(project, run).count()
        p = np.asarray(p_of.get(run.name, []), dtype=float)
        if calibrator is not None and p.size:
            p = np.clip(calibrator.apply(p), 0.0, 1.0)
        estimate = beyond_pool_total(p, max(below, p.size), level=LEVEL)
        rows.append({
            "run": run.name, "entries": run.entries, "below": below, "sampled": int(p.size) + failed[run.name],
            "scored": int(p.size), "failed": failed[run.name],
            "expected": estimate.total if estimate else (0.0 if below == 0 else None),
            "low": estimate.low if estimate else (0.0 if below == 0 else None),
            "high": estimate.high if estimate else (0.0 if below == 0 else None),
            "rate": estimate.total / below if estimate and below else None,
        })
    return {"judge": judge.name, "calibrator": calibrator.method if calibrator is not None else None,
            "level": LEVEL, "sample": parameters["sample"], "seed": parameters["seed"], "runs": rows}

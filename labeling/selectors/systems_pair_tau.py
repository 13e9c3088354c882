"""DIRAS Table 5 on a project: for each run, per query, Kendall's tau-b between the run's retrieval scores and a
judge's P over the pairs the run retrieved and the judge scored, and their mean over the queries
(models_llm.systems.pair_tau). The judge's P is the P its `judge:NAME` qrels threshold (calibrated when it has
a calibrator), read as the Systems page reads it."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from labeling.models import Project, Run, RunEntry
from labeling.selectors.qrels_sources import JUDGE, SystemsError, probabilities_for, qrels_source_parse
from labeling.selectors.runs import project_runs, run_by_name
from labeling.selectors.scoring import judges_with_judgments
from labeling.selectors.streams import external_ids
from models_llm.systems.pair_tau import PairTau, pair_kendall_tau


@dataclass(frozen=True)
class PairTauReport:
    """The judge, and for each run (by name) its per-query tau-b and their mean."""

    project: str
    judge: str
    runs: dict[str, PairTau]


def _run_scores(run: Run, queries: dict[int, str], passages: dict[int, str]) -> dict[str, dict[str, float]]:
    scores: dict[str, dict[str, float]] = {}
    for query_id, passage_id, score in RunEntry.objects.filter(run=run).order_by("query_id", "rank").values_list(
            "query_id", "passage_id", "score").iterator(chunk_size=20_000):
        scores.setdefault(queries[query_id], {})[passages[passage_id]] = score
    return scores


def default_pair_tau_judge(*, project: Project) -> str:
    """The project's first judge with judgments (by name); SystemsError when it has none."""
    name = judges_with_judgments(project=project).order_by("name").values_list("name", flat=True).first()
    if name is None:
        raise SystemsError(f"project {project.slug!r} has no judge with judgments to compare the runs with")
    return name


def pair_tau_report(*, project: Project, judge: str, runs: Sequence[str] | None = None) -> PairTauReport:
    """Each run's (all of the project's, or those named) per-query Kendall tau-b against judge `judge`'s P.
    NotFound for a judge or run the project lacks; SystemsError when it has no runs."""
    source = qrels_source_parse(project=project, key=f"{JUDGE}:{judge}")
    chosen = [run_by_name(project=project, name=name) for name in runs] if runs else list(project_runs(project))
    if not chosen:
        raise SystemsError(f"project {project.slug!r} has no runs to compare with judge {judge!r}")
    p = probabilities_for(project=project, source=source)
    queries, passages = external_ids(project)
    return PairTauReport(project=project.slug, judge=judge, runs={
        run.name: pair_kendall_tau(_run_scores(run, queries, passages), p) for run in chosen})


def pair_tau_json(report: PairTauReport) -> dict:
    """The report as the API and `pair_tau --json` give it."""
    return {
        "project": report.project,
        "judge": report.judge,
        "definition": "DIRAS Table 5: per query, Kendall's tau-b between the run's scores and the judge's P over the "
                      "pairs both scored; mean over the queries that have a tau",
        "runs": {
            name: {
                "mean_tau": found.mean,
                "queries": len(found.queries),
                "queries_without_tau": found.undefined,
                "pairs": found.pairs,
                "per_query": [{"query": row.query, "pairs": row.pairs, "tau": row.tau} for row in found.queries],
            }
            for name, found in report.runs.items()
        },
    }

"""The Systems page's runs table: each run's kind, its parameters on one line and its recorded time per stage."""
from __future__ import annotations

import json

from labeling.models import Run

# Parameters the runs table's summary leaves out: the retriever is the Kind column, the texts say the same as
# use_definition.
SUMMARY_SKIPS = {"retriever", "query_text", "passage_text"}


def _parameters_summary(parameters: dict) -> str:
    """The run's scalar parameters on one line ("depth 1000, k1 0.9, use_definition True"), then its re-rank stages
    ("re-ranked by NAME to 60"); other nested ones (the encoder, BM25's tokenizer) are left to the full listing."""
    scalars = [f"{key} {value}" for key, value in sorted(parameters.items())
               if key not in SUMMARY_SKIPS and isinstance(value, str | int | float | bool)]
    rerank = parameters.get("rerank")
    stages = [f"re-ranked by {stage.get('judge')} to {stage.get('keep')}" for stage in rerank
              if isinstance(stage, dict)] if isinstance(rerank, list) else []
    crisis = parameters.get("crisis")
    if isinstance(crisis, dict) and "filtered_corpus" in crisis:
        stages.append(f"crisis double cascade: BM25 {crisis.get('lexical_depth')}, re-ranked by {crisis.get('judge')} "
                      f"to {crisis.get('lexical_keep')}, filtered corpus {crisis.get('filtered_corpus')}, dense "
                      f"{crisis.get('dense_cut')}, re-ranked to {crisis.get('final_keep')}")
    return ", ".join(scalars + stages)


def _stage_seconds(parameters: dict) -> list[tuple[str, float]]:
    """The run's recorded wall time per stage (a built-in retriever's: each stage, its re-rankings included), in
    order; empty for an imported run or one written before times were recorded."""
    stages = parameters.get("stage_seconds")
    if not isinstance(stages, list):
        return []
    return [(str(stage["stage"]), float(stage["seconds"])) for stage in stages
            if isinstance(stage, dict) and isinstance(stage.get("seconds"), int | float)]


def stage_total(parameters: dict) -> float | None:
    stages = _stage_seconds(parameters)
    return sum(seconds for _, seconds in stages) if stages else None


def _run_kind(run: Run) -> str:
    """The Kind column: the crisis preset is a cascade of four stages, not the plain cascade's two; a run re-ranked
    by judges (retrieval_rerank) says so."""
    if run.kind == Run.Kind.CASCADE and isinstance(run.parameters.get("crisis"), dict):
        return "crisis double cascade (BM25, cross-encoder, dense on the filtered corpus, cross-encoder)"
    if run.kind in (Run.Kind.CASCADE, Run.Kind.BM25, Run.Kind.DENSE) and run.parameters.get("rerank"):
        return f"{run.get_kind_display()}, then re-ranked by judges"
    return run.get_kind_display()


def run_rows(runs: list[Run]) -> list[dict]:
    return [{"run": run, "kind": _run_kind(run), "summary": _parameters_summary(run.parameters),
             "stages": _stage_seconds(run.parameters),
             "seconds": stage_total(run.parameters),
             "parameters": json.dumps(run.parameters, indent=2, sort_keys=True) if run.parameters else ""}
            for run in runs]

"""Dry-run estimate vs actual tokens on the ClimRetrieve sample with the bundled SmolLM2-135M.

Builds a throwaway SQLite project of QUERIES x PASSAGES sample pairs (full passage texts), then for an ensemble
judge: the estimate before any answer, a pilot job on PILOT pairs, the estimate for the rest (learnt from the
pilot), the actual job on the rest; and for a Tok judge: the estimate and the actual job. Prints the ratios.

    DEBUG=1 .venv/bin/python bench/estimate.py [--queries 2] [--passages 8] [--pilot 4]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# bench/queue.py would shadow the standard library's queue module for a script run from bench/.
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=2)
    parser.add_argument("--passages", type=int, default=8)
    parser.add_argument("--pilot", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="estimate-")
    os.environ["DATABASE_URL"] = f"sqlite:///{folder}/db.sqlite3"
    os.environ.setdefault("DEBUG", "1")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "annotator.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from labeling.models import Pair
    from labeling.selectors.scoring import job_progress
    from labeling.services.judges import judge_create
    from labeling.services.scoring import scoring_chunk_run, scoring_job_create, scoring_job_estimate
    from models_llm.bundled import smollm2_folder
    from tests.scoring_fixtures import small_scoring_project

    def run(job):
        for chunk_id in job.chunks.values_list("id", flat=True):
            scoring_chunk_run(chunk_id=chunk_id)
        job.refresh_from_db()
        return job_progress(job)

    def line(label, estimate, actual):
        est = estimate.tokens.total_tokens
        got = actual.prompt_tokens + actual.completion_tokens
        print(f"{label}: estimate {estimate.tokens.calls} calls, {estimate.tokens.prompt_tokens:,} + "
              f"{estimate.tokens.completion_tokens:,} tokens; actual {actual.calls} calls, {actual.prompt_tokens:,} + "
              f"{actual.completion_tokens:,} tokens; estimate/actual = {est / got:.3f}")

    project = small_scoring_project(Path(folder) / "b", queries=args.queries, passages=args.passages, full=True)
    model = str(smollm2_folder(settings.VAR_DIR))
    pairs = list(Pair.objects.filter(project=project).order_by("id").values_list("id", flat=True))
    print(f"{len(pairs)} pairs ({args.queries} queries x {args.passages} ClimRetrieve passages), SmolLM2-135M, "
          f"max_new_tokens {args.max_new_tokens}")

    tok = judge_create(project=project, name="tok", backend="hf", model=model, method="tok")
    estimate = scoring_job_estimate(project=project, judge=tok)
    line("tok", estimate, run(scoring_job_create(project=project, judge=tok)))

    ensemble = judge_create(project=project, name="ensemble", backend="hf", model=model, method="ensemble",
                            max_new_tokens=args.max_new_tokens)
    cold = scoring_job_estimate(project=project, judge=ensemble, scope="selection", pair_ids=pairs[args.pilot:])
    pilot = run(scoring_job_create(project=project, judge=ensemble, scope="selection", pair_ids=pairs[:args.pilot]))
    print(f"pilot on {args.pilot} pairs: {pilot.calls} calls, {pilot.prompt_tokens:,} + {pilot.completion_tokens:,} tokens")
    warm = scoring_job_estimate(project=project, judge=ensemble)
    actual = run(scoring_job_create(project=project, judge=ensemble))
    line("ensemble, typical values (no answers yet)", cold, actual)
    line(f"ensemble, learnt from the {args.pilot}-pair pilot", warm, actual)
    print(f"DisastIR comparison (1.34M pairs at GPT-4o-mini prices, these prompts): ${warm.reference_cost_usd:,.0f}"
          f" learnt / ${cold.reference_cost_usd:,.0f} if every step runs (DisastIR reports about $1,400)")


if __name__ == "__main__":
    main()

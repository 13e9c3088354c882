"""Wall-time estimates vs the time the work then takes, on this machine (#31, "time before money").

Builds a throwaway SQLite project of ClimRetrieve sample pairs, then for the bundled MiniLM (an embedding judge) and
SmolLM2-135M (a Tok judge): the dry run's wall time from a timed probe (no speed measured yet), the scoring of every
pair chunk by chunk as a worker scores them (its model loaded already, as the estimate assumes), and the dry run
again from the speed the chunks measured. Then BM25, dense and cascade runs over the same project (the retrieval
estimate, then the job run in this process, its encoder loaded by it). Then a LoRA fine-tuning of SmolLM2 on the
rule project of the tests: the estimate from a probe of a few micro batches, and the Trainer's own measure of the
run. Prints estimate / actual.

    DEBUG=1 .venv/bin/python bench/estimate_time.py [--queries 2] [--passages 40] [--steps 4] [--skip-scoring]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# bench/queue.py would shadow the standard library's queue module for a script run from bench/.
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=2)
    parser.add_argument("--passages", type=int, default=40)
    parser.add_argument("--steps", type=int, default=4, help="fine-tuning steps (batches of 8 examples)")
    parser.add_argument("--skip-scoring", action="store_true", help="retrieval and fine-tuning only")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="estimate-time-")
    os.environ["DATABASE_URL"] = f"sqlite:///{folder}/db.sqlite3"
    os.environ.setdefault("DEBUG", "1")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "annotator.settings")
    os.environ.setdefault("MEDIA_ROOT", f"{folder}/media")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from labeling.durations import duration_text
    from labeling.models import PassageEmbeddings
    from labeling.services.finetune import finetune_create, finetune_estimate, finetune_run
    from labeling.services.judges import judge_create
    from labeling.services.retrieval import retrieval_create, retrieval_run
    from labeling.services.retrieval_estimate import retrieval_estimate
    from labeling.services.scoring import scoring_chunk_run, scoring_job_create, scoring_job_estimate
    from models_llm.bundled import minilm_folder, smollm2_folder
    from tests.finetune_fixtures import base_folder, rule_project
    from tests.scoring_fixtures import small_scoring_project

    project = small_scoring_project(Path(folder) / "b", queries=args.queries, passages=args.passages, full=True)
    print(f"{args.queries * args.passages} pairs ({args.queries} queries x {args.passages} ClimRetrieve passages, "
          f"full texts), {os.cpu_count()} CPUs")
    judges = [
        judge_create(project=project, name="minilm", backend="embedding", model=str(minilm_folder()),
                     method="embedding"),
        judge_create(project=project, name="smollm2-tok", backend="hf", model=str(smollm2_folder(settings.VAR_DIR)),
                     method="tok"),
    ]
    print("| judge | estimate before (probe) | actual | probe / actual | estimate after (measured) | measured / actual |")
    print("|---|---|---|---|---|---|")
    for judge in [] if args.skip_scoring else judges:
        before = scoring_job_estimate(project=project, judge=judge, scope="all")
        job = scoring_job_create(project=project, judge=judge, scope="all")
        started = time.perf_counter()
        for chunk_id in job.chunks.order_by("id").values_list("id", flat=True):
            scoring_chunk_run(chunk_id=chunk_id)
        actual = time.perf_counter() - started
        after = scoring_job_estimate(project=project, judge=judge, scope="all")
        print(f"| {judge.name} | {duration_text(before.wall_s)} ({before.throughput.per_s:.1f} pairs/s) | "
              f"{duration_text(actual)} ({job.total / actual:.1f} pairs/s) | {before.wall_s / actual:.2f} | "
              f"{duration_text(after.wall_s)} | {after.wall_s / actual:.2f} |")

    print("\n| retriever | estimate | actual | estimate / actual |")
    print("|---|---|---|---|")
    for retriever, options in (("bm25", {"depth": 100}), ("dense", {"depth": 100}),
                               ("cascade", {"first_depth": 20, "keep": 10})):
        estimate = retrieval_estimate(project=project, retriever=retriever, **options)
        started = time.perf_counter()
        retrieval_run(job_id=retrieval_create(project=project, retriever=retriever, name=retriever, **options).id)
        actual = time.perf_counter() - started
        if retriever == "dense":  # the cascade after it finds every passage embedded: a second dense run's case
            PassageEmbeddings.objects.all().delete()
        print(f"| {retriever} ({estimate.to_encode} passages to embed) | {duration_text(estimate.wall_s)} | "
              f"{duration_text(actual)} | {estimate.wall_s / actual:.2f} |")

    distill, teacher, training_set = rule_project(Path(folder) / "rule", slug="rule")
    hyper = {"r": 8, "alpha": 16, "dropout": 0.0, "learning_rate": 5e-4, "batch_size": 8, "micro_batch": 4,
             "max_steps": args.steps, "warmup_ratio": 0.1, "save_steps": 1000}
    estimate = finetune_estimate(project=distill, training_set=training_set, teacher=teacher,
                                 base_model=base_folder(), hyperparameters=hyper)
    job = finetune_create(project=distill, training_set=training_set, teacher=teacher, base_model=base_folder(),
                          student_name="student", hyperparameters=hyper)
    job = finetune_run(job_id=job.id)
    actual = estimate.processed / job.examples_per_s  # the Trainer's train() time, model loading excluded
    print(f"\nfine-tuning SmolLM2-135M (LoRA r 8, {args.steps} steps of 8 examples, micro batches of 4): estimate "
          f"{duration_text(estimate.wall_s)} ({estimate.throughput.per_s:.2f} examples/s, "
          f"{estimate.throughput.text}); actual {duration_text(actual)} ({job.examples_per_s:.2f} examples/s); "
          f"estimate / actual = {estimate.wall_s / actual:.2f}")


if __name__ == "__main__":
    main()

"""What a perturbation audit costs: 200 gold pairs x the 5 perturbations on SmolLM2-135M-Instruct (Tok), on the
ClimRetrieve sample, and what share of the time goes into generating the variants.

A measurement, not a test: it prints a table and always exits 0 once it has run.

    .venv/bin/python bench/audit.py                     # 200 pairs, every test, SmolLM2 Tok on CPU
    .venv/bin/python bench/audit.py --sample 20         # smoke run
    .venv/bin/python bench/audit.py --judge minilm      # the embedding baseline instead

It imports data/climretrieve into its own SQLite file under bench/out/audit/ (once), makes the demo's judge, then:
  (1) builds the audit's probes as the worker does (labeling.services.audit.audit_probes): the variant generation;
  (2) runs the whole audit in this process (audit_request with Celery's eager mode: the worker's own code path, which
      builds the probes again, scores them in AUDIT_BATCH batches and computes the report with its bootstraps).
It prints probes, model calls, tokens, seconds, probes/s and sampled pairs/s, and generation's share of the run.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# bench/queue.py shadows the standard library's `queue`, which Django's imports need.
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
WORKDIR = ROOT / "bench" / "out" / "audit"
SLUG = "bench-audit"


def setup_django() -> None:
    WORKDIR.mkdir(parents=True, exist_ok=True)
    os.environ["DATABASE_URL"] = f"sqlite:///{WORKDIR / 'db.sqlite3'}"
    os.environ.setdefault("DEBUG", "1")
    os.environ["CELERY_TASK_ALWAYS_EAGER"] = "1"  # the audit runs here, through the worker's code path
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "annotator.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def project_and_judge(judge_name: str):
    from django.core.management import call_command

    from labeling.models import Judge, Project

    if not Project.objects.filter(slug=SLUG).exists():
        call_command("import_bundle", str(ROOT / "data" / "climretrieve"), project=SLUG, verbosity=0)
    project = Project.objects.get(slug=SLUG)
    if not Judge.objects.filter(project=project, name=judge_name).exists():
        # The demo's judges, created the demo's way (without queueing any scoring here).
        from django.conf import settings

        from labeling.services.judges import judge_create
        from models_llm.bundled import minilm_folder, smollm2_folder

        backend, folder = {"minilm": (Judge.Backend.EMBEDDING, minilm_folder()),
                           "smollm2-tok": (Judge.Backend.HF, smollm2_folder(settings.VAR_DIR))}[judge_name]
        judge_create(project=project, name=judge_name, backend=backend, model=str(folder),
                     method=Judge.Method.default_for(backend))
    return project, Judge.objects.get(project=project, name=judge_name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sample", type=int, default=200)
    parser.add_argument("--judge", default="smollm2-tok", choices=["smollm2-tok", "minilm"])
    args = parser.parse_args()
    setup_django()
    import torch
    from django.conf import settings

    from labeling.models import AuditJob
    from labeling.services.audit import audit_probes, audit_request
    from models_llm.audit.types import PERTURBATION_TESTS

    project, judge = project_and_judge(args.judge)
    parameters = {"sample": args.sample, "seed": 0, "tests": list(PERTURBATION_TESTS)}
    kind = AuditJob.Kind.PERTURBATION

    started = time.perf_counter()
    probes = audit_probes(project=project, judge=judge, kind=kind, parameters=parameters)
    generation = time.perf_counter() - started

    started = time.perf_counter()
    job = audit_request(project=project, judge=judge, kind=kind, parameters=parameters)
    run = time.perf_counter() - started
    job.refresh_from_db()
    if job.status != AuditJob.Status.DONE:
        print(f"the audit did not finish: {job.status} {job.error}")
        return
    items = job.report.get("items", args.sample)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch "
          f"{torch.__version__} ({torch.get_num_threads()} threads), AUDIT_BATCH={settings.AUDIT_BATCH}")
    print(f"judge {judge.name} ({judge.backend}), {items} sampled gold pairs x {len(PERTURBATION_TESTS)} tests")
    rows = [
        ("probes (prompts asked)", f"{len(probes):,} ({sum(p.sampled for p in probes):,} sampled)"),
        ("model calls", f"{job.calls:,}"),
        ("prompt + completion tokens", f"{job.prompt_tokens or 0:,} + {job.completion_tokens or 0:,}"),
        ("variant generation (s)", f"{generation:.2f}"),
        ("whole audit, worker path (s)", f"{run:.1f}"),
        ("probes/s", f"{len(probes) / run:.1f}"),
        ("sampled pairs/s", f"{items / run:.2f}"),
        ("generation share of the audit", f"{generation / run:.3%}"),
    ]
    width = max(len(label) for label, _ in rows) + 2
    for label, value in rows:
        print(f"{label:<{width}}{value}")
    for row in job.report["rows"]:
        delta, flips = row["mean_delta"], row["decision_flips"]
        print(f"  {row['test']:<12} n={row['n']:<4} mean change in P "
              f"{'-' if delta is None else f'{delta:+.3f}':<8} decision flips "
              f"{'-' if flips is None else f'{flips:.0%}':<6} {row['verdict']}")


if __name__ == "__main__":
    main()

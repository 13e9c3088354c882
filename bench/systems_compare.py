"""The Systems page's evaluation with comparisons at scale (#34): 10 runs x 1M entries under 2 qrels sources, every
pair of runs compared by each of the three paired tests (randomization with 10,000 draws, t, Wilcoxon), and the
cached page's load time.

A measurement, not a test: it prints each step's figures and PASS/MISS per target, and exits 0 once it has run.
Run from the repository root with the project's virtualenv, against PostgreSQL:

    DATABASE_URL=postgres://bench:bench@127.0.0.1:5432/bench .venv/bin/python bench/systems_compare.py

Steps:
1. the project: bench/retrieval.py's synthetic one (1,000 queries, 100,000 passages, 30 pooled passages per query
   with human grades and an imported judge's P) and --runs TREC runs of 1,000 results per query, imported;
2. for each test, in a process of its own (so that its peak memory is its own): what a worker computes for the
   page (labeling.selectors.systems_cache.systems_bundle_compute: the report under human and judge:NAME with
   1,000-draw bootstrap intervals and agreement, every pair of runs compared per source and measure with Holm's
   correction, leave one run out): wall time and peak resident memory (VmHWM), less that of a process that
   only set Django up and read the project;
3. the page: the worker's result stored (systems_request + systems_run, as the task runs it), then the Systems
   page asked for 5 times by a logged-in admin (Django's test client, the whole view and template): its load
   time (target < 1 s), and the status poll's.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# bench/ first on sys.path would let bench/queue.py shadow the standard library's queue: the root takes its place.
sys.path[:] = [str(ROOT)] + [p for p in sys.path[1:] if Path(p or ".").resolve() != ROOT / "bench"]
_spec = importlib.util.spec_from_file_location("bench_retrieval", ROOT / "bench" / "retrieval.py")
_retrieval = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _retrieval
_spec.loader.exec_module(_retrieval)
_import_export = _retrieval._import_export

TESTS = ("randomization", "t", "wilcoxon")
PAGE_TARGET_S = 1.0


def _setup(workdir: Path, allow_sqlite: bool) -> None:
    os.environ["DATABASE_URL"] = _import_export.database_url(allow_sqlite, workdir)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "annotator.settings")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import django

    django.setup()


def _peak_mib() -> float:
    """This process's peak resident memory: VmHWM, the high-water mark of its own address space (ru_maxrss would
    carry the parent's peak over fork and exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024  # kB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _choice(test: str | None):
    from labeling.selectors.systems_cache import SystemsChoice

    sources = ("human", f"judge:{_import_export.JUDGE_NAME}")
    return SystemsChoice(sources=sources) if test is None else SystemsChoice(sources=sources, test=test)


def measure(slug: str, test: str | None) -> dict:
    """In a child process: the computation for one test (None: only read the project, the baseline)."""
    from labeling.models import Project, Run
    from labeling.selectors.systems_cache import systems_bundle_compute

    project = Project.objects.get(slug=slug)
    list(Run.objects.filter(project=project))
    if test is None:
        return {"peak_mib": _peak_mib()}
    start = time.perf_counter()
    bundle = systems_bundle_compute(project=project, choice=_choice(test))
    seconds = time.perf_counter() - start
    pairs = {key: len(by_measure["nDCG@10"].pairs) for key, by_measure in bundle.significance.items()}
    return {"seconds": seconds, "peak_mib": _peak_mib(), "runs": len(bundle.report.runs), "pairs": pairs,
            "measures": len(bundle.report.measures) - 1, "draws": _choice(test).significance.draws}


def build(args, workdir: Path) -> str:
    from labeling.services.runs import run_import

    slug = f"bench-systems-{time.strftime('%Y%m%d-%H%M%S')}"
    print(f"1. project {slug}: {args.queries:,} queries, {args.passages:,} passages, {args.runs} runs x "
          f"{args.depth:,} results per query")
    project, pooled, _ = _retrieval.pooled_project(workdir, slug, passages=args.passages, queries=args.queries,
                                                   pooled=args.pooled, seed=0)
    for i in range(args.runs):
        path = workdir / f"run{i}.trec.gz"
        rows = _retrieval.write_run(path, queries=args.queries, passages=args.passages, pooled=pooled,
                                    depth=args.depth, seed=100 + i, tag=f"sys{i}")
        _retrieval.timed(f"run_import run{i} ({rows:,} rows)", run_import, project=project, path=path, name=f"sys{i}")
    return slug


def _child(slug: str, test: str | None, args) -> dict:
    command = [sys.executable, __file__, "--measure", slug, "--test", test or "none"]
    if args.allow_sqlite:
        command.append("--allow-sqlite")
    out = subprocess.run(command, check=True, capture_output=True, text=True, cwd=ROOT).stdout
    return json.loads(out.strip().splitlines()[-1])


def page(slug: str, loads: int) -> dict:
    """Store the worker's result, then time the page and its status poll."""
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.test.utils import setup_test_environment
    from django.urls import reverse

    from labeling.models import Membership, Project, SystemsResult
    from labeling.selectors.systems_cache import computes_inline
    from labeling.services import systems_cache

    setup_test_environment()  # the test client's response.context, and ALLOWED_HOSTS for "testserver"
    project = Project.objects.get(slug=slug)
    assert not computes_inline(project), "the bench's runs must be above SYSTEMS_INLINE_ENTRIES"
    systems_cache.systems_refresh_task.apply_async = lambda args, countdown: None  # the bench runs it itself
    result = systems_cache.systems_request(project=project, choice=_choice(None))
    start = time.perf_counter()
    systems_cache.systems_run(result_id=result.id)
    worker_s = time.perf_counter() - start
    assert SystemsResult.objects.get(id=result.id).status == "done"
    user, _ = get_user_model().objects.get_or_create(username=f"{slug}-admin")
    Membership.objects.get_or_create(project=project, user=user, defaults={"role": Membership.Role.ADMIN})
    client = Client()
    client.force_login(user)
    url = reverse("labeling:systems", args=[slug])
    params = {"source": list(_choice(None).sources)}
    times = []
    for _ in range(loads):
        start = time.perf_counter()
        response = client.get(url, params)
        times.append(time.perf_counter() - start)
        assert response.status_code == 200 and b"data-leaderboard" in response.content, response.status_code
        assert b"data-evaluation-status" not in response.content, "the stored result was not fresh"
    start = time.perf_counter()
    client.get(url, {**params, "part": "status"}, HTTP_HX_REQUEST="true")
    poll = time.perf_counter() - start
    return {"worker_s": worker_s, "page_s": times, "poll_s": poll}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--depth", type=int, default=1_000)
    parser.add_argument("--pooled", type=int, default=30)
    parser.add_argument("--loads", type=int, default=5, help="page loads timed")
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out" / "systems")
    parser.add_argument("--project", help="measure an existing project (built by an earlier --keep run)")
    parser.add_argument("--keep", action="store_true", help="keep the project in the database afterwards")
    parser.add_argument("--allow-sqlite", action="store_true", help="smoke run on SQLite (figures mean nothing)")
    parser.add_argument("--measure", help=argparse.SUPPRESS)  # a child: measure this project
    parser.add_argument("--test", help=argparse.SUPPRESS)
    args = parser.parse_args()
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    _setup(workdir, args.allow_sqlite)
    if args.measure:
        print(json.dumps(measure(args.measure, None if args.test == "none" else args.test)))
        return
    sys.stdout.reconfigure(line_buffering=True)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    from django.core.management import call_command
    from django.db import connection

    from labeling.models import RunEntry

    call_command("migrate", verbosity=0)
    print(f"machine: nproc {len(os.sched_getaffinity(0))}, database {connection.vendor}")
    slug = args.project or build(args, workdir)
    try:
        base = _child(slug, None, args)
        print(f"2. the worker's computation, one process per test (baseline process: {base['peak_mib']:,.0f} MiB)")
        figures = {}
        for test in TESTS:
            found = _child(slug, test, args)
            figures[test] = found
            draws = f", {found['draws']:,} draws" if test == "randomization" else ""
            print(f"  {test:<13} {found['seconds']:7.1f} s   peak {found['peak_mib'] - base['peak_mib']:8,.0f} MiB "
                  f"above the baseline   ({found['runs']} runs, pairs per source {found['pairs']}, "
                  f"{found['measures']} measures{draws})")
        print(f"3. the page ({args.loads} loads of the stored result)")
        shown = page(slug, args.loads)
        print(f"  worker (systems_run, randomization): {shown['worker_s']:.1f} s")
        print(f"  page load: median {statistics.median(shown['page_s']):.3f} s, max {max(shown['page_s']):.3f} s "
              f"(each: {', '.join(f'{s:.3f}' for s in shown['page_s'])})")
        print(f"  status poll: {shown['poll_s']:.3f} s")
        print("\ntargets")
        worst = max(shown["page_s"])
        print(f"  {'PASS' if worst < PAGE_TARGET_S else 'MISS'}  cached page load (slowest of {args.loads}) "
              f"{worst:.3f} s, target < {PAGE_TARGET_S:.0f} s")
    finally:
        if not args.keep and not args.project:
            RunEntry.objects.filter(run__project__slug=slug).delete()
            exec(_import_export.DELETE_PROJECT_CODE.format(slug=slug))  # noqa: S102 - the bench's own code
            print(f"deleted project {slug}")


if __name__ == "__main__":
    main()

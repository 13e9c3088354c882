"""Time of `validation_report` for one judge on 1.3M gold pairs (target: under 60 s on this machine).

A measurement, not a test: it prints the figures and PASS/MISS, and always exits 0 once it has run.

    DATABASE_URL=postgres://bench:bench@127.0.0.1:5432/bench .venv/bin/python bench/validation_report.py

It writes a synthetic bundle (bench/import_export.py's generator) in which every candidate pair has a
reference grade and a judgment (1,000 queries x 1,300 candidates by default), imports it into a fresh project
(timed, no target), then runs `validation_report --json` twice as its own process: with the full 1,000-draw
bootstrap, and with none, to show what the intervals cost. `--project` reuses a project imported earlier.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from import_export import (
    DELETE_PROJECT_CODE,
    JUDGE_NAME,
    MANAGE,
    ROOT,
    database_url,
    django_shell,
    generate_bundle,
    measure,
)

TARGET_S = 60.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--pairs-per-query", type=int, default=1_300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out" / "validation")
    parser.add_argument("--project", help="an already imported project (skips generating and importing)")
    parser.add_argument("--keep", action="store_true", help="keep the project in the database afterwards")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--allow-sqlite", action="store_true", help="smoke run on SQLite (figures mean nothing)")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    os.environ["DATABASE_URL"] = database_url(args.allow_sqlite, args.workdir)
    subprocess_env_note = "DEBUG=0" if os.environ.get("DEBUG") == "0" else "DEBUG=1"
    print(f"nproc: {os.cpu_count()}; {subprocess_env_note}")
    project = args.project
    if project is None:
        project = f"bench-validation-{time.strftime('%Y%m%d-%H%M%S')}"
        bundle = args.workdir / "bundle"
        started = time.perf_counter()
        counts = generate_bundle(bundle, passages=args.passages, queries=args.queries,
                                 pairs_per_query=args.pairs_per_query, qrels_per_query=args.pairs_per_query,
                                 seed=args.seed)
        print(f"bundle: {counts.pairs:,} pairs, all with a reference grade and a judgment "
              f"({time.perf_counter() - started:.0f} s to write)")
        seconds, peak, code = measure([*MANAGE, "migrate", "--noinput"], args.workdir / "migrate.log", args.timeout)
        seconds, peak, code = measure([*MANAGE, "import_bundle", str(bundle), "--project", project],
                                      args.workdir / "import.log", args.timeout)
        print(f"import: {seconds:.1f} s, peak {peak:.0f} MB, exit {code}")
        if code:
            sys.exit(f"import failed: see {args.workdir / 'import.log'}")
    results = []
    for draws in (1000, 0):
        out = args.workdir / f"report-{draws}.json"
        argv = [*MANAGE, "validation_report", "--project", project, "--judge", JUDGE_NAME, "--json",
                "--bootstrap", str(draws)]
        with open(out, "w"):
            pass
        seconds, peak, code = measure(argv, out, args.timeout)
        results.append((draws, seconds, peak, code))
        if code == 0:
            report = json.loads(out.read_text())
            print(f"report with {draws} bootstrap draws: {seconds:.1f} s, peak {peak:.0f} MB "
                  f"(n={report['judge']['n']:,}, f1={report['judge']['f1']:.3f}, ndcg={report['judge']['ndcg']:.3f})")
        else:
            print(f"report with {draws} bootstrap draws: exit {code} after {seconds:.1f} s; see {out}")
    full = results[0]
    verdict = "PASS" if full[3] == 0 and full[1] < TARGET_S else "MISS"
    print(f"\n{verdict}  validation_report, 1 judge, 1,000 bootstrap draws: {full[1]:.1f} s, target < {TARGET_S:.0f} s")
    if args.project is None and not args.keep:
        django_shell(DELETE_PROJECT_CODE.format(slug=project))


if __name__ == "__main__":
    main()

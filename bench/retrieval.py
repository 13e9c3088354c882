"""Retrieval runs at collection scale: run import, BM25, dense embedding and search, pooling and system evaluation
on a synthetic project (100k passages, 1k queries by default).

A measurement, not a test: it prints each step's figures and PASS/MISS per target, and exits 0 once it has run.
Run from the repository root with the project's virtualenv, against PostgreSQL:

    DATABASE_URL=postgres://bench:bench@127.0.0.1:5432/bench .venv/bin/python bench/retrieval.py

Steps (one process, Django set up in it):
1. the project: bench/import_export.py's synthetic bundle (human reference grades and an imported judge's P for
   30 pooled passages per query), imported with import_bundle;
2. run import: --runs TREC files of 1,000 results per query (each query's pooled passages spread over the ranks,
   the rest drawn at random, scores with ties), each through run_import: rows/s (target >= 100k on PostgreSQL);
3. BM25 (bm25s) over every passage, depth 1,000, for all queries: index + retrieval seconds;
4. dense: all-MiniLM-L6-v2 passages/s on --embed-sample passages (embedding all 100k takes ~10 min on two cores:
   the rate is what scales), then exact and HNSW search of all queries in --passages random unit vectors;
5. pooling: the top 10 of every run into the pool (pool_add), and the same again (writes nothing);
6. evaluation: systems_report of the runs under the human qrels and the judge (target < 30 s for 10 runs), then
   with --more-runs further runs imported, for 30 runs."""
from __future__ import annotations

import argparse
import gzip
import importlib.util
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
# Python puts bench/ first on sys.path when running this file, where bench/queue.py would shadow the standard
# library's queue (which Django imports): the repository root takes its place.
sys.path[:] = [str(ROOT)] + [p for p in sys.path[1:] if Path(p or ".").resolve() != ROOT / "bench"]
_spec = importlib.util.spec_from_file_location("bench_import_export", ROOT / "bench" / "import_export.py")
_import_export = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _import_export  # dataclasses look their module up there
_spec.loader.exec_module(_import_export)
JUDGE_NAME, database_url, generate_bundle = (
    _import_export.JUDGE_NAME, _import_export.database_url, _import_export.generate_bundle)

IMPORT_TARGET_ROWS_PER_S = 100_000
EVALUATION_TARGET_S = 30.0


def write_run(path: Path, *, queries: int, passages: int, pooled: dict[int, list[int]], depth: int, seed: int,
              tag: str) -> int:
    """A TREC run: per query the pooled passages at random ranks among `depth` results, scores rounded to 3
    decimals so that ties occur. Returns the rows written."""
    rng = np.random.default_rng(seed)
    rows = 0
    with gzip.open(path, "wt", compresslevel=1) as f:
        for q in range(queries):
            mine = np.asarray(pooled.get(q, []), dtype=np.int64)
            others = rng.choice(passages, size=depth + len(mine), replace=False)
            others = others[~np.isin(others, mine)][: depth - len(mine)]
            docs = np.concatenate((mine, others))
            rng.shuffle(docs)
            scores = np.round(np.sort(rng.random(len(docs)))[::-1] * 30, 3)
            f.write("".join(f"q{q} Q0 d{d} {r} {s} {tag}\n" for r, (d, s) in enumerate(zip(docs, scores), start=1)))
            rows += len(docs)
    return rows


def pooled_project(workdir: Path, slug: str, *, passages: int, queries: int, pooled: int, seed: int):
    """A generated bundle imported as project `slug` (needs django.setup()): (the project, query number -> the
    numbers of its pooled passages, the import's seconds). Shared by the retrieval and systems benchmarks."""
    from labeling.models import Pair, Passage, Project, Query
    from labeling.services.bundle_import import bundle_import

    bundle = workdir / "bundle"
    generate_bundle(bundle, passages=passages, queries=queries, pairs_per_query=pooled, qrels_per_query=pooled,
                    seed=seed)
    _, seconds = timed("import_bundle", bundle_import, path=bundle, project_slug=slug)
    project = Project.objects.get(slug=slug)
    query_ext = dict(Query.objects.filter(project=project).values_list("id", "external_id"))
    passage_ext = dict(Passage.objects.filter(project=project).values_list("id", "external_id")
                       .iterator(chunk_size=50_000))
    by_query: dict[int, list[int]] = {}
    for query_id, passage_id in Pair.objects.filter(project=project).values_list("query_id", "passage_id"):
        by_query.setdefault(int(query_ext[query_id][1:]), []).append(int(passage_ext[passage_id][1:]))
    return project, by_query, seconds


def timed(label: str, fn, *args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    seconds = time.perf_counter() - start
    print(f"  {label}: {seconds:.2f} s", flush=True)
    return out, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--more-runs", type=int, default=20, help="runs added for the second evaluation (30 in all)")
    parser.add_argument("--depth", type=int, default=1_000)
    parser.add_argument("--pooled", type=int, default=30, help="pooled passages per query with human grades")
    parser.add_argument("--embed-sample", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out" / "retrieval")
    parser.add_argument("--skip-retrievers", action="store_true", help="measure import, pooling and evaluation only")
    parser.add_argument("--keep", action="store_true", help="keep the project in the database afterwards")
    parser.add_argument("--allow-sqlite", action="store_true", help="smoke run on SQLite (figures mean nothing)")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    workdir = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    os.environ["DATABASE_URL"] = database_url(args.allow_sqlite, workdir)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "annotator.settings")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from labeling.models import Passage, Query, RunEntry
    from labeling.selectors.systems import systems_report
    from labeling.services.pooling import pool_add
    from labeling.services.runs import run_import
    from models_llm.bundled import minilm_folder
    from models_llm.retrieval import BM25Params, DenseEncoder, bm25_retrieve, dense_search

    call_command("migrate", verbosity=0)
    print(f"machine: nproc {len(os.sched_getaffinity(0))}, database {connection.vendor}")
    slug = f"bench-retrieval-{time.strftime('%Y%m%d-%H%M%S')}"
    results: dict[str, float] = {}
    try:
        print(f"1. project {slug}: {args.queries:,} queries, {args.passages:,} passages")
        project, pooled, seconds = pooled_project(workdir, slug, passages=args.passages, queries=args.queries,
                                                  pooled=args.pooled, seed=args.seed)

        print(f"2. run import: {args.runs} runs x {args.queries:,} queries x {args.depth:,} results")
        total_rows, total_s, runs = 0, 0.0, []
        for i in range(args.runs + args.more_runs):
            path = workdir / f"run{i}.trec.gz"
            rows = write_run(path, queries=args.queries, passages=args.passages, pooled=pooled, depth=args.depth,
                             seed=args.seed + 100 + i, tag=f"sys{i}")
            run, seconds = timed(f"run_import run{i} ({rows:,} rows)", run_import, project=project, path=path,
                                 name=f"sys{i}")
            runs.append(run)
            if i < args.runs:
                total_rows += rows
                total_s += seconds
            if i + 1 == args.runs:
                results["import rows/s"] = total_rows / total_s
                print(f"  -> {total_rows:,} rows in {total_s:.1f} s: {total_rows / total_s:,.0f} rows/s")

                print("5. pooling the top 10 of each run")
                written, seconds = timed("pool_add", pool_add, project=project, runs=runs, depth=10)
                print(f"  -> {written}")
                results["pooling s"] = seconds
                written, seconds = timed("pool_add again", pool_add, project=project, runs=runs, depth=10)
                print(f"  -> {written}")

                print(f"6. evaluation of {len(runs)} runs under human and judge:{JUDGE_NAME}")
                report, seconds = timed("systems_report", systems_report, project=project,
                                        sources=["human", f"judge:{JUDGE_NAME}"])
                results[f"evaluation {len(runs)} runs s"] = seconds
        if args.more_runs:
            report, seconds = timed(f"systems_report ({len(runs)} runs)", systems_report, project=project,
                                    sources=["human", f"judge:{JUDGE_NAME}"])
            results[f"evaluation {len(runs)} runs s"] = seconds
        agreement = report.agreement[("human", f"judge:{JUDGE_NAME}")]["nDCG@10"]
        print(f"  human vs judge on nDCG@10 over {len(runs)} runs: Kendall's tau {agreement.kendall_tau:.3f} "
              "(the synthetic judge's P is noise: near 0 is right)")

        if not args.skip_retrievers:
            texts = [text for text in Passage.objects.filter(project=project).order_by("id")
                     .values_list("text", flat=True).iterator(chunk_size=50_000)]
            questions = list(Query.objects.filter(project=project).order_by("id").values_list("text", flat=True))
            print(f"3. BM25 over {len(texts):,} passages, {len(questions):,} queries, depth {args.depth}")
            _, seconds = timed("bm25_retrieve (index + retrieval)", bm25_retrieve, texts, questions, depth=args.depth,
                               params=BM25Params())
            results["bm25 s"] = seconds

            print("4. dense")
            encoder = DenseEncoder(minilm_folder())
            encoder.encode(texts[:64])  # model load outside the timing
            sample = texts[: args.embed_sample]
            _, seconds = timed(f"encode {len(sample):,} passages", encoder.encode, sample)
            results["dense passages/s"] = len(sample) / seconds
            print(f"  -> {len(sample) / seconds:,.0f} passages/s; all {len(texts):,} would take "
                  f"{len(texts) / (len(sample) / seconds) / 60:.0f} min")
            query_vectors, _ = timed("encode queries", encoder.encode, questions)
            rng = np.random.default_rng(args.seed)
            vectors = rng.standard_normal((len(texts), encoder.dimension)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            _, seconds = timed("exact search", dense_search, vectors, query_vectors, depth=args.depth, approximate=False)
            results["dense exact s"] = seconds
            _, seconds = timed("HNSW build + search", dense_search, vectors, query_vectors, depth=args.depth,
                               approximate=True)
            results["dense hnsw s"] = seconds
    finally:
        if not args.keep:
            # Run entries by run (their index), then the pool and the rest as bench/import_export.py does it.
            RunEntry.objects.filter(run__project__slug=slug).delete()
            exec(_import_export.DELETE_PROJECT_CODE.format(slug=slug))  # noqa: S102 - the bench's own code
            print(f"deleted project {slug}")

    print("\nfigures")
    for key, value in results.items():
        print(f"  {key:<28} {value:>12,.2f}")
    print("\ntargets")
    rate = results.get("import rows/s", 0.0)
    print(f"  {'PASS' if rate >= IMPORT_TARGET_ROWS_PER_S else 'MISS'}  run import {rate:,.0f} rows/s, "
          f"target >= {IMPORT_TARGET_ROWS_PER_S:,}")
    for key in (k for k in results if k.startswith("evaluation")):
        met = key != f"evaluation {args.runs} runs s" or results[key] < EVALUATION_TARGET_S
        print(f"  {'PASS' if met else 'MISS'}  {key.removesuffix(' s')}: {results[key]:.1f} s"
              + (f", target < {EVALUATION_TARGET_S:.0f} s" if key == f"evaluation {args.runs} runs s" else ""))


if __name__ == "__main__":
    main()

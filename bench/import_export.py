"""Throughput and peak memory of `import_bundle` and `export_qrels` on a synthetic bundle of realistic size.

A measurement, not a test: it prints a table and PASS/MISS per target, and always exits 0 once it has run.
Run from the repository root with the project's virtualenv, against PostgreSQL:

    DATABASE_URL=postgres://bench:bench@127.0.0.1:5432/bench .venv/bin/python bench/import_export.py
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import dj_database_url

ROOT = Path(__file__).resolve().parent.parent
MANAGE = [sys.executable, str(ROOT / "manage.py")]

IMPORT_TARGET_ROWS_PER_S = 50_000
EXPORT_TARGET_ROWS_PER_S = 200_000
PEAK_TARGET_MB = 500

JUDGE_NAME = "bench-judge"
SYSTEMS = ("bm25", "dense", "splade")
GRADE_WEIGHTS = (6, 3, 1)  # grades 0, 1, 2 in the reference qrels: mostly non-relevant, as in real pools


# --- the synthetic bundle -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BundleCounts:
    queries: int
    passages: int
    pairs: int
    qrels: int
    judgments: int

    @property
    def rows(self) -> int:
        return self.queries + self.passages + self.pairs + self.qrels + self.judgments


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    syllables = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"] + ["th", "st", "er", "an", "ing", "ion"]
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choices(syllables, k=rng.choice((1, 2, 2, 3, 3, 4)))))
    ordered = sorted(words)  # sets iterate in hash order, which changes between runs
    rng.shuffle(ordered)  # so the Zipf head is not all one alphabetical prefix
    return ordered


def _zipf_cum_weights(size: int) -> list[float]:
    # Word frequencies in real text follow Zipf's law; cumulative weights make rng.choices draw from it fast.
    total, cum = 0.0, []
    for rank in range(1, size + 1):
        total += 1.0 / rank
        cum.append(total)
    return cum


def _sentence_text(rng: random.Random, vocab: list[str], cum: list[float], n_words: int) -> str:
    words = rng.choices(vocab, cum_weights=cum, k=n_words)
    out, start = [], 0
    while start < n_words:
        end = min(n_words, start + rng.randint(8, 20))
        sentence = " ".join(words[start:end])
        out.append(sentence[:1].upper() + sentence[1:] + ".")
        start = end
    return " ".join(out)


def generate_bundle(path: Path, *, passages: int, queries: int, pairs_per_query: int, qrels_per_query: int,
                    seed: int) -> BundleCounts:
    """Write a bundle folder at `path` (replacing it) and return how many records each file holds."""
    rng = random.Random(seed)
    vocab = _vocabulary(rng, 20_000)
    cum = _zipf_cum_weights(len(vocab))
    pairs_per_query = min(pairs_per_query, passages)
    qrels_per_query = min(qrels_per_query, pairs_per_query)
    shutil.rmtree(path, ignore_errors=True)
    (path / "qrels").mkdir(parents=True)

    (path / "project.json").write_text(json.dumps({
        "name": "Synthetic benchmark bundle",
        "description": f"{queries} queries, {passages} passages, {pairs_per_query} candidates per query (seed {seed})",
        "scale": {"grades": [{"value": 0, "name": "not relevant", "gain": 0},
                             {"value": 1, "name": "partially relevant", "gain": 1},
                             {"value": 2, "name": "relevant", "gain": 3}], "relevant_from": 1},
    }, indent=2) + "\n")

    with open(path / "corpus.jsonl", "w") as f:
        for i in range(passages):
            # ~7 characters per word with its space: 57-100 words gives the 400-700 characters of real passages.
            record = {"_id": f"d{i}", "title": _sentence_text(rng, vocab, cum, rng.randint(3, 8))[:-1],
                      "text": _sentence_text(rng, vocab, cum, rng.randint(57, 100)),
                      "metadata": {"source": rng.choice(("web", "news", "wiki")), "year": rng.randint(1995, 2024)}}
            f.write(json.dumps(record) + "\n")

    with open(path / "queries.jsonl", "w") as f:
        for q in range(queries):
            text = _sentence_text(rng, vocab, cum, rng.randint(3, 9))[:-1]
            definition = f"Relevant passages discuss {text.lower()}. " + _sentence_text(rng, vocab, cum,
                                                                                       rng.randint(25, 60))
            f.write(json.dumps({"_id": f"q{q}", "text": text, "definition": definition,
                                "metadata": {"topic": rng.choice(("health", "law", "tech", "sports"))}}) + "\n")

    with (open(path / "pairs.tsv", "w") as pairs_f, open(path / "judgments.jsonl", "w") as judgments_f,
          open(path / "qrels" / "test.tsv", "w") as qrels_f):
        pairs_f.write("query-id\tcorpus-id\tsystem\trank\n")
        qrels_f.write("query-id\tcorpus-id\tscore\n")
        for q in range(queries):
            docs = rng.sample(range(passages), pairs_per_query)
            pairs_f.write("".join(f"q{q}\td{d}\t{SYSTEMS[i % 3]}\t{i // 3 + 1}\n" for i, d in enumerate(docs)))
            judgments_f.write("".join(
                f'{{"query_id": "q{q}", "doc_id": "d{d}", "judge": "{JUDGE_NAME}", "p_relevant": {rng.random():.4f}}}\n'
                for d in docs))
            grades = rng.choices((0, 1, 2), weights=GRADE_WEIGHTS, k=qrels_per_query)
            qrels_f.write("".join(f"q{q}\td{d}\t{g}\n" for d, g in zip(docs, grades)))

    n_pairs = queries * pairs_per_query
    return BundleCounts(queries=queries, passages=passages, pairs=n_pairs, qrels=queries * qrels_per_query,
                        judgments=n_pairs)


# --- running the commands -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepResult:
    name: str
    kind: str  # "import" or "export"
    rows: int
    seconds: float
    peak_mb: float
    returncode: int

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0


def child_env(**extra: str) -> dict[str, str]:
    # DEBUG=1 lets settings run without a SECRET_KEY; an explicit DEBUG in the environment wins.
    return {**os.environ, "DEBUG": os.environ.get("DEBUG") or "1", **extra}


def measure(argv: list[str], log_path: Path, timeout: float) -> tuple[float, float, int]:
    """Run argv as a child process, killed after `timeout` seconds; return (wall seconds, peak RSS in MB,
    exit code, negative for the signal that ended it)."""
    # libpq reads PGAPPNAME: it names the child's database sessions so they can be ended if the child is killed.
    app_name = f"bench-{os.getpid()}-{log_path.stem}"
    timed_out = threading.Event()
    with open(log_path, "w") as log:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=ROOT, env=child_env(PGAPPNAME=app_name), stdout=log,
                                stderr=subprocess.STDOUT)

        def kill() -> None:
            timed_out.set()
            proc.kill()

        # A hung step (a lock wait, a stuck COPY) must not hang the benchmark: wait4 has no timeout of its own.
        killer = threading.Timer(timeout, kill)
        killer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:  # Ctrl-C or SIGTERM: end the step too, so the cleanup does not race with it
            proc.kill()
            proc.wait()
            end_backends(app_name)
            raise
        finally:
            killer.cancel()
        seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4: tell Popen so it does not wait again
    if timed_out.is_set():
        print(f"{log_path.stem}: killed after {timeout:.0f} s (--step-timeout)", flush=True)
        end_backends(app_name)
    return seconds, usage.ru_maxrss / 1024, proc.returncode  # ru_maxrss is in KiB on Linux


def end_backends(app_name: str) -> None:
    # PostgreSQL does not notice a killed client until it next writes to it: a long statement would run on,
    # holding its locks, and the project cleanup would wait for it.
    django_shell(END_BACKENDS_CODE.format(app_name=app_name))


def django_shell(code: str) -> str:
    argv = [*MANAGE, "shell", "--no-imports", "-c", code]
    done = subprocess.run(argv, cwd=ROOT, env=child_env(), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"manage.py shell failed:\n{done.stderr[-3000:]}")
    return done.stdout.strip()


SERVER_VERSION_CODE = """
from django.db import connection
with connection.cursor() as c:
    c.execute("SELECT version()" if connection.vendor == "postgresql" else "SELECT 'SQLite ' || sqlite_version()")
    print(c.fetchone()[0])
"""

END_BACKENDS_CODE = """
from django.db import connection
if connection.vendor == "postgresql":
    with connection.cursor() as c:
        c.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                  [{app_name!r}])
"""

COUNTS_CODE = """
import json
from labeling.models import Judgment, Pair, PairSource, Passage, Query, RelevanceDefinition
slug = {slug!r}
print(json.dumps({{
    "queries": Query.objects.filter(project__slug=slug).count(),
    "definitions": RelevanceDefinition.objects.filter(query__project__slug=slug).count(),
    "passages": Passage.objects.filter(project__slug=slug).count(),
    "pairs": Pair.objects.filter(project__slug=slug).count(),
    "pair_sources": PairSource.objects.filter(pair__project__slug=slug).count(),
    "reference_grades": Pair.objects.filter(project__slug=slug, reference_grade__isnull=False).count(),
    "judgments": Judgment.objects.filter(pair__project__slug=slug).count(),
}}))
"""

# The ORM's cascade would load a million pair ids into memory: delete the pair-level rows with plain SQL, then
# let the ORM remove the (small) rest of the project. PostgreSQL checks each deleted pair against every table
# that references it; a table with no plain index led by its pair column (labeling_judgment has only partial
# ones) is scanned whole for every pair, so the cleanup builds such an index for the transaction.
DELETE_PROJECT_CODE = """
from django.db import connection, transaction
from labeling.models import Pair, Project
project = Project.objects.filter(slug={slug!r}).first()
if project is not None:
    pairs, pk, project_fk = Pair._meta.db_table, Pair._meta.pk.column, Pair._meta.get_field("project").column
    postgres = connection.vendor == "postgresql"
    with transaction.atomic(), connection.cursor() as c:
        temporary = []
        for rel in Pair._meta.related_objects:
            table, column = rel.related_model._meta.db_table, rel.field.column
            if postgres:
                c.execute("SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
                          "AND a.attnum = i.indkey[0] WHERE i.indrelid = %s::regclass AND a.attname = %s "
                          "AND i.indpred IS NULL", [table, column])
                if c.fetchone() is None:
                    temporary.append(f"bench_cleanup_{{table}}")
                    c.execute(f"CREATE INDEX {{temporary[-1]}} ON {{table}} ({{column}})")
            c.execute(f"DELETE FROM {{table}} WHERE {{column}} IN "
                      f"(SELECT {{pk}} FROM {{pairs}} WHERE {{project_fk}} = %s)", [project.pk])
        c.execute(f"DELETE FROM {{pairs}} WHERE {{project_fk}} = %s", [project.pk])
        if postgres:
            c.execute("SET CONSTRAINTS ALL IMMEDIATE")  # run the deferred checks while the indexes exist
        for name in temporary:
            c.execute(f"DROP INDEX {{name}}")
        project.delete()
"""


def count_lines(path: Path) -> int:
    if not path.exists():
        return 0
    with open(path, "rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


def database_url(allow_sqlite: bool, workdir: Path) -> str:
    url = os.environ.get("DATABASE_URL", "")
    if not url and allow_sqlite:
        return f"sqlite:///{workdir / 'bench.sqlite3'}"  # never the developer's var/annotator.sqlite3
    if not url:
        sys.exit("DATABASE_URL is not set. This benchmark measures PostgreSQL: set DATABASE_URL=postgres://... "
                 "(or pass --allow-sqlite for a smoke run whose figures mean nothing).")
    engine = dj_database_url.parse(url)["ENGINE"]
    if "postgresql" not in engine and "postgis" not in engine:
        if not allow_sqlite or "sqlite" not in engine:
            sys.exit(f"DATABASE_URL uses {engine}; this benchmark measures PostgreSQL "
                     "(pass --allow-sqlite for a SQLite smoke run).")
    return url


# --- report ---------------------------------------------------------------------------------------------------


def print_table(results: list[StepResult], startup: float) -> None:
    # net rows/s leaves out the fixed cost of starting Python and Django, which dominates small runs.
    print(f"\n{'step':<46} {'rows':>10} {'seconds':>9} {'rows/s':>10} {'net rows/s':>10} {'peak MB':>8}  exit")
    for r in results:
        net = r.rows / (r.seconds - startup) if r.seconds > startup else float("nan")
        print(f"{r.name:<46} {r.rows:>10,} {r.seconds:>9.2f} {r.rows_per_s:>10,.0f} {net:>10,.0f} "
              f"{r.peak_mb:>8.0f}  {r.returncode}")


def print_targets(results: list[StepResult]) -> None:
    print("\ntargets")
    for r in results:
        target = IMPORT_TARGET_ROWS_PER_S if r.kind == "import" else EXPORT_TARGET_ROWS_PER_S
        met = r.returncode == 0 and r.rows > 0 and r.rows_per_s >= target
        why = "" if r.returncode == 0 and r.rows > 0 else " (step failed or wrote no rows)"
        print(f"  {'PASS' if met else 'MISS'}  {r.name}: {r.rows_per_s:,.0f} rows/s, target >= {target:,}{why}")
    for r in results:
        met = r.returncode == 0 and r.peak_mb < PEAK_TARGET_MB
        print(f"  {'PASS' if met else 'MISS'}  {r.name}: peak {r.peak_mb:.0f} MB, target < {PEAK_TARGET_MB} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--pairs-per-query", type=int, default=1_000)
    parser.add_argument("--qrels-per-query", type=int, default=20, help="reference grades per query (qrels/test.tsv)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / "out", help="bundle, exports and logs")
    parser.add_argument("--project", help="project slug (default: a fresh bench-<timestamp>)")
    parser.add_argument("--step-timeout", type=float, default=1800, help="seconds before a step is killed")
    parser.add_argument("--keep", action="store_true", help="keep the project in the database afterwards")
    parser.add_argument("--allow-sqlite", action="store_true", help="smoke run on SQLite (figures mean nothing)")
    parser.add_argument("--generate-only", action="store_true", help="write the bundle, measure nothing")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # progress survives a kill when stdout is a file
    # A plain SIGTERM would skip the `finally` that deletes the bench project.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))

    workdir = args.workdir.resolve()
    bundle, exports, logs = workdir / "bundle", workdir / "exports", workdir / "logs"
    for folder in (exports, logs):
        folder.mkdir(parents=True, exist_ok=True)
    if not args.generate_only:
        os.environ["DATABASE_URL"] = database_url(args.allow_sqlite, workdir)

    start = time.perf_counter()
    counts = generate_bundle(bundle, passages=args.passages, queries=args.queries,
                             pairs_per_query=args.pairs_per_query, qrels_per_query=args.qrels_per_query,
                             seed=args.seed)
    size_mb = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file()) / 2**20
    print(f"bundle {bundle}: {counts.queries:,} queries, {counts.passages:,} passages, {counts.pairs:,} pairs, "
          f"{counts.qrels:,} qrels, {counts.judgments:,} judgments = {counts.rows:,} rows, {size_mb:.0f} MB, "
          f"generated in {time.perf_counter() - start:.1f} s")
    if args.generate_only:
        return

    print(f"machine: nproc {len(os.sched_getaffinity(0))}, python {sys.version.split()[0]}")
    subprocess.run([*MANAGE, "migrate", "--no-input", "-v", "0"], cwd=ROOT, env=child_env(), check=True)
    print(f"database: {django_shell(SERVER_VERSION_CODE)}")
    startup, startup_mb, _ = measure([*MANAGE, "shell", "--no-imports", "-c", "pass"], logs / "startup.log",
                                     args.step_timeout)
    print(f"django startup (manage.py shell -c pass): {startup:.2f} s, peak {startup_mb:.0f} MB")
    slug = args.project or f"bench-{time.strftime('%Y%m%d-%H%M%S')}"
    print(f"project: {slug}  (DEBUG={child_env()['DEBUG']}; logs in {logs})")

    import_argv = [*MANAGE, "import_bundle", str(bundle), "--project", slug]
    steps = [
        ("import", "import_bundle", import_argv, None),
        ("import", "import_bundle again (re-import)", import_argv, None),
        ("export", "export_qrels trec --source human", ["--format", "trec", "--source", "human"], "human.trec"),
        ("export", "export_qrels jsonl", ["--format", "jsonl"], "all.jsonl"),
        ("export", f"export_qrels trec --source judge:{JUDGE_NAME}",
         ["--format", "trec", "--source", f"judge:{JUDGE_NAME}"], "judge.trec"),
    ]
    results, db_counts = [], []
    try:
        for index, (kind, name, argv, out_name) in enumerate(steps, start=1):
            log = logs / f"step{index}.log"
            if kind == "import":
                seconds, peak, rc = measure(argv, log, args.step_timeout)
                rows = counts.rows
                db_counts.append(json.loads(django_shell(COUNTS_CODE.format(slug=slug))))
            else:
                out = exports / out_name
                out.unlink(missing_ok=True)
                export_argv = [*MANAGE, "export_qrels", "--project", slug, *argv, "-o", str(out)]
                seconds, peak, rc = measure(export_argv, log, args.step_timeout)
                rows = count_lines(out)
            results.append(StepResult(name=name, kind=kind, rows=rows, seconds=seconds, peak_mb=peak, returncode=rc))
            print(f"step {index}/{len(steps)} {name}: {rows:,} rows in {seconds:.1f} s, peak {peak:.0f} MB, exit {rc}")
            if rc != 0:
                print(f"\n{name} exited {rc}; the end of {log}:\n{log.read_text()[-2000:]}")
    finally:
        if not args.keep:
            start = time.perf_counter()
            django_shell(DELETE_PROJECT_CODE.format(slug=slug))
            print(f"deleted project {slug} in {time.perf_counter() - start:.1f} s")

    print_table(results, startup)
    if db_counts:
        print(f"\nin the database after the import:    {json.dumps(db_counts[0])}")
    if len(db_counts) == 2 and all(r.returncode == 0 for r in results[:2]):
        unchanged = db_counts[0] == db_counts[1]
        print(f"re-import left the row counts {'unchanged' if unchanged else 'CHANGED: ' + json.dumps(db_counts[1])}")
    print_targets(results)


if __name__ == "__main__":
    main()

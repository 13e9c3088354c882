"""`manage.py retrieve --project SLUG --retriever bm25|dense|cascade --name NAME [...] [--rerank JUDGE:KEEP ...]
[--preset crisis-double-cascade --judge JUDGE [--dense-depth N --dense-fraction F --final-fraction F]]
[--wait | --inline | --estimate]`: a built-in retriever, then the judges that re-rank its ranking, writes the run
NAME, on the workers or (--inline) in this process."""
import argparse
import sys
import time

from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.durations import duration_text
from labeling.management.lookup import command_project
from labeling.models import RetrievalJob, Run
from labeling.services.retrieval import (
    DEFAULT_DEPTH,
    DEFAULT_FIRST_DEPTH,
    DEFAULT_KEEP,
    MAX_DEPTH,
    RETRIEVERS,
    RetrievalError,
    retrieval_create,
    retrieval_fail,
    retrieval_request,
    retrieval_run,
)
from labeling.services.retrieval_crisis import PRESET
from labeling.services.retrieval_estimate import retrieval_estimate

CHOICES = ("depth", "use_definition", "k1", "b", "first_depth", "keep", "model", "rerank")
CRISIS = ("dense_depth", "dense_fraction", "final_fraction")


def rerank_stage(value: str) -> dict:
    """JUDGE:KEEP as a re-rank stage (the judge's name may hold colons: the last one separates)."""
    judge, _, keep = value.rpartition(":")
    if not judge or not keep.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{value!r} is not JUDGE:KEEP (a judge's name, a colon, a whole number)")
    return {"judge": judge, "keep": int(keep)}


class Command(BaseCommand):
    help = ("Write a run with a built-in retriever: BM25, dense (the bundled MiniLM unless --model names an "
            "encoder folder under a model root), or cascade (BM25's --first-depth best re-ranked by the encoder, "
            "--keep of them kept); each --rerank JUDGE:KEEP then re-ranks the ranking by a local judge's P, keeping KEEP. Queued for the Celery workers unless --inline runs it here (no worker needed: "
            "a machine without workers).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True)
        parser.add_argument("--retriever", choices=RETRIEVERS, help="required unless --preset names one")
        parser.add_argument("--name", required=True, help="the run's name, new in the project")
        parser.add_argument("--depth", type=int, help=f"bm25, dense: passages per query, 1 to {MAX_DEPTH} "
                                                      f"(default {DEFAULT_DEPTH})")
        parser.add_argument("--use-definition", action="store_true",
                            help="the query text is the question and its current relevance definition")
        parser.add_argument("--k1", type=float, help="BM25's k1 (default 1.5)")
        parser.add_argument("--b", type=float, help="BM25's b (default 0.75)")
        parser.add_argument("--first-depth", type=int,
                            help=f"cascade: BM25 candidates per query (default {DEFAULT_FIRST_DEPTH})")
        parser.add_argument("--keep", type=int,
                            help=f"cascade: passages per query after re-ranking (default {DEFAULT_KEEP})")
        parser.add_argument("--model", help="dense, cascade: an encoder folder under a model root")
        parser.add_argument("--rerank", type=rerank_stage, action="append", default=[], metavar="JUDGE:KEEP",
                            help="after the retriever, re-rank each query's ranking by this judge's P (crossencoder, "
                                 "embedding or hf) and keep the KEEP best; repeat for more stages, in order")
        parser.add_argument("--preset", choices=(PRESET,),
                            help="crisis-double-cascade: the crisis paper's double cascade (a cascade: BM25's "
                                 "--first-depth, re-ranked by --judge keeping --keep, their union searched densely, "
                                 "re-ranked by --judge again)")
        parser.add_argument("--judge", help="crisis-double-cascade: the re-ranking judge (crossencoder, embedding, hf)")
        parser.add_argument("--dense-depth", type=int, help="crisis-double-cascade: the dense depth (default 200)")
        parser.add_argument("--dense-fraction", type=float,
                            help="crisis-double-cascade: or this share of the filtered corpus when smaller (0.1)")
        parser.add_argument("--final-fraction", type=float,
                            help="crisis-double-cascade: the share of the dense ranking kept at the end (0.1)")
        how = parser.add_mutually_exclusive_group()
        how.add_argument("--wait", action="store_true", help="show progress until the job is finished")
        how.add_argument("--inline", action="store_true", help="run the job in this process, not on a worker")
        how.add_argument("--estimate", action="store_true",
                         help="say what the run would take here (timed probes) and start nothing")
        parser.add_argument("--skip-existing", action="store_true",
                            help="a run of that name exists: say so and exit 0 (re-running a setup script)")

    def handle(self, *args, project: str, retriever: str | None, name: str, wait: bool, inline: bool,
               skip_existing: bool, estimate: bool, preset: str | None, **options) -> None:
        found = command_project(project)
        crisis = {"judge": options.pop("judge"), **{key: options.pop(key) for key in CRISIS}}
        if preset:
            retriever = retriever or "cascade"
            if crisis["judge"] is None:
                raise CommandError("--preset crisis-double-cascade needs --judge: the judge of its two re-rankings")
            if estimate:
                raise CommandError("--estimate does not cover the crisis double cascade yet: run it on a sample")
            options["crisis"] = {key: value for key, value in crisis.items() if value is not None}
        elif any(value is not None for value in crisis.values()):
            raise CommandError("--judge, --dense-depth, --dense-fraction and --final-fraction are the crisis "
                               "double cascade's: give --preset crisis-double-cascade")
        if retriever is None:
            raise CommandError("give --retriever (bm25, dense, cascade) or --preset")
        if estimate:
            self._estimate(found, retriever, options)
            return
        if skip_existing and Run.objects.filter(project=found, name=name.strip()).exists():
            self.stdout.write(f"Run {name!r} exists, skipped.")
            return
        choices = {key: options[key] for key in CHOICES} | {"crisis": options.get("crisis")}
        try:
            if inline:
                job = retrieval_create(project=found, retriever=retriever, name=name, **choices)
            else:
                job = retrieval_request(project=found, retriever=retriever, name=name, **choices)
        except RetrievalError as exc:
            raise CommandError(str(exc)) from None
        if inline:
            self.stdout.write(f"Job {job.id}: {retriever} run {job.name!r}, running here.")
            try:
                done = retrieval_run(job_id=job.id)
            except BaseException as exc:
                # No worker will take the job up again: left running, it would hold the name for good.
                retrieval_fail(job_id=job.id, error=f"{type(exc).__name__}: {exc}")
                raise
            self._report(done)
            return
        self.stdout.write(f"Job {job.id}: {retriever} run {job.name!r} queued for the workers.")
        if wait:
            self._wait(job)

    def _estimate(self, project, retriever: str, options: dict) -> None:
        choices = {key: options[key] for key in CHOICES}
        try:
            found = retrieval_estimate(project=project, retriever=retriever, **choices)
        except RetrievalError as exc:
            raise CommandError(str(exc)) from None
        parts = [f"{label} {duration_text(seconds)}" for label, seconds in (
            ("BM25", found.bm25_s), ("loading the encoder", found.load_s), ("encoding", found.encode_s),
            ("re-ranking", found.rerank_s))
            if seconds is not None]
        self.stdout.write(f"{retriever} over {found.passages:,} passages and {found.queries:,} queries: about "
                          f"{duration_text(found.wall_s)} here ({', '.join(parts)}"
                          f"{f'; {found.to_encode:,} passages to embed' if found.to_encode else ''}"
                          f"{f'; {found.rerank_pairs:,} pairs to re-rank' if found.rerank_pairs else ''}). "
                          f"From {found.basis}. Nothing was started.")

    def _wait(self, job: RetrievalJob) -> None:
        while True:
            job.refresh_from_db()
            bar = "#" * int(30 * job.progress)
            sys.stdout.write(f"\r[{bar:<30}] {job.progress:.0%} ({job.status})   ")
            sys.stdout.flush()
            if job.finished_at is not None:
                sys.stdout.write("\n")
                self._report(job)
                return
            time.sleep(1)

    def _report(self, job: RetrievalJob) -> None:
        if job.status != RetrievalJob.Status.DONE or job.run is None:
            raise CommandError(f"Job {job.id} {job.status}" + (f": {job.error}" if job.error else "."))
        run, seconds = job.run, (job.finished_at - job.started_at).total_seconds()
        self.stdout.write(f"Job {job.id} done: run {run.name!r}, {run.queries:,} queries, {run.entries:,} entries, "
                          f"depth {run.depth:,}, {seconds:.1f} s.")
        stages = run.parameters.get("stage_seconds") or []
        if stages:
            self.stdout.write("Stages: " + ", ".join(f"{stage['stage']} {stage['seconds']:.2f} s" for stage in stages))

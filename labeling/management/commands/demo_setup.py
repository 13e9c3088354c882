"""`manage.py demo_setup --project SLUG`: the slow half of `make demo`, which bin/demo runs behind the live server.
The runs bm25 and dense and minilm's scoring of every pair go to the bulk worker in that order (minilm then reuses
the passage embeddings dense stored); once they are done, SmolLM2 is converted and its scoring of what the pages
need is queued (its model would otherwise share this machine's CPU with them). Each step says what it did, and
the progress shows in this terminal and on the Systems and Judges pages. Running it again changes nothing that is
done."""
from __future__ import annotations

import time

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from labeling.management.commands.demo_judges import FAST_JUDGE, QUEUE_JUDGE
from labeling.management.lookup import command_project
from labeling.models import Job, Project, RetrievalJob, ScoringJob
from labeling.selectors.lookups import JudgeNotFound, judge_by_name
from labeling.selectors.retrieval_jobs import retrieval_job_writing
from labeling.selectors.runs import project_runs
from labeling.selectors.scoring import scoring_job_running
from labeling.services.retrieval import RetrievalError, retrieval_request

RUNS = (("bm25", "bm25"), ("dense", "dense"))
# Seconds between two progress lines while it waits: the workers' logs share the terminal.
SAY_EVERY_S = 30.0


class Command(BaseCommand):
    help = ("Queue the demo's runs (bm25, dense) and minilm's scoring, wait for them, then set up SmolLM2 and queue "
            "its scoring (what bin/demo runs once the web server answers).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True)
        parser.add_argument("--poll", type=float, default=1.0, help="seconds between two looks at the jobs")

    def handle(self, *args, project: str, poll: float, **options) -> None:
        found = command_project(project)
        try:
            self._setup(found, poll=poll)
        except KeyboardInterrupt:
            # bin/demo's Ctrl-C: what is queued stays queued, and the next run goes on from there.
            self.stdout.write("demo: set-up stopped; the next `make demo` goes on from where it is")
            raise SystemExit(130) from None

    def _setup(self, found: Project, *, poll: float) -> None:
        jobs: list[Job] = [job for name, retriever in RUNS if (job := self._run(found, name, retriever))]
        call_command("demo_judges", project=found.slug, judges=[FAST_JUDGE], stdout=self.stdout)
        fast = self._running_job(found, FAST_JUDGE)
        if fast is not None:
            jobs.append(fast)
        if jobs:
            self.stdout.write(f"demo: waiting for {', '.join(map(self._what, jobs))} before setting up SmolLM2 "
                              "(progress on the Systems and Judges pages)")
            self._wait(jobs, poll=poll)
        call_command("setup_models", stdout=self.stdout)
        call_command("demo_judges", project=found.slug, judges=[QUEUE_JUDGE], stdout=self.stdout)
        self.stdout.write("demo: set-up done")

    def _run(self, project: Project, name: str, retriever: str) -> RetrievalJob | None:
        """Queue the run `name` unless it exists; the job writing it (None: the run exists, or was refused: said)."""
        if project_runs(project).filter(name=name).exists():
            self.stdout.write(f"Run {name!r} exists.")
            return None
        writing = retrieval_job_writing(project=project, name=name)
        if writing is not None:
            self.stdout.write(f"Job {writing.id} is writing run {name!r} already.")
            return writing
        try:
            job = retrieval_request(project=project, retriever=retriever, name=name)
        except RetrievalError as exc:
            self.stdout.write(f"Run {name!r} not queued: {exc}")
            return None
        self.stdout.write(f"Job {job.id}: {retriever} run {name!r} queued for the workers.")
        return job

    @staticmethod
    def _running_job(project: Project, judge_name: str) -> ScoringJob | None:
        try:
            judge = judge_by_name(project=project, name=judge_name)
        except JudgeNotFound:
            return None
        return scoring_job_running(judge=judge)

    @staticmethod
    def _what(job: Job) -> str:
        return f"run {job.name!r}" if isinstance(job, RetrievalJob) else f"{job.judge.name}'s scoring"

    @staticmethod
    def _progress(job: Job) -> str:
        if isinstance(job, RetrievalJob):
            return f"run {job.name!r} {job.progress:.0%}"
        return f"{job.judge.name} {job.done:,} / {job.total:,} pairs"

    def _wait(self, jobs: list[Job], *, poll: float) -> None:
        """Until every job has finished, saying each end and, every SAY_EVERY_S, where the others are."""
        started = said = time.monotonic()
        waiting = list(jobs)
        while waiting:
            time.sleep(poll)
            for job in waiting:
                job.refresh_from_db()
            for job in [job for job in waiting if job.finished_at is not None]:
                waiting.remove(job)
                error = f": {job.error}" if job.error else ""
                took = time.monotonic() - started
                self.stdout.write(f"demo: {self._what(job)} {job.status} after {took:.0f} s{error}")
            if waiting and time.monotonic() - said >= SAY_EVERY_S:
                said = time.monotonic()
                self.stdout.write("demo: " + ", ".join(self._progress(job) for job in waiting))

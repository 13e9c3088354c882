"""`manage.py score --project SLUG --judge NAME [--scope missing|all] [--wait]`: score pairs on the workers."""
import sys
import time

from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.durations import duration_text
from labeling.management.lookup import command_judge, command_project
from labeling.models import Judge, Project, ScoringJob
from labeling.selectors.scoring import job_progress
from labeling.services.scoring import ScoringError, scoring_job_estimate, scoring_request


class Command(BaseCommand):
    help = ("Queue a scoring job for Celery workers. Running it again resumes the judge's unfinished job "
            "(chunks a killed worker never wrote) or scores only what is still missing.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True)
        parser.add_argument("--judge", required=True)
        parser.add_argument("--scope", choices=[ScoringJob.Scope.MISSING.value, ScoringJob.Scope.ALL.value],
                            default=ScoringJob.Scope.MISSING.value,
                            help="missing (default): pairs not yet judged under the current definition")
        parser.add_argument("--wait", action="store_true", help="show progress until the job is finished")
        parser.add_argument("--dry-run", action="store_true",
                            help="estimate calls, tokens and cost without scoring anything")

    def handle(self, *args, project: str, judge: str, scope: str, wait: bool, dry_run: bool, **options) -> None:
        found = command_project(project)
        item = command_judge(found, judge)
        if dry_run:
            self._estimate(found, item, scope)
            return
        try:
            job, created = scoring_request(project=found, judge=item, scope=scope)
        except ScoringError as exc:
            raise CommandError(str(exc)) from None
        if created:
            self.stdout.write(f"Job {job.id}: {job.total:,} pair(s) to score with {judge!r}.")
        else:
            unwritten = job.chunks.filter(finished_at__isnull=True).count()
            self.stdout.write(f"Resumed job {job.id}: {unwritten} unfinished chunk(s) queued again.")
        if wait:
            self._wait(job)

    def _estimate(self, project: Project, judge: Judge, scope: str) -> None:
        try:
            estimate = scoring_job_estimate(project=project, judge=judge, scope=scope)
        except ScoringError as exc:
            raise CommandError(str(exc)) from None
        t = estimate.tokens
        if estimate.wall_s is not None:
            speed = estimate.throughput
            self.stdout.write(f"Time on one worker process: about {duration_text(estimate.wall_s)} for {t.pairs:,} "
                              f"pair(s) ({speed.per_s:.1f} pairs/s, {speed.text}; n processes take about 1/n).")
        else:
            self.stdout.write("Time: unknown until its first chunks are scored (a remote model is not asked by a dry "
                              "run).")
        if not estimate.sends_prompts:
            self.stdout.write(f"Dry run of {judge.name!r} over {t.pairs:,} pair(s) ({scope}): an embedding judge "
                              "sends no prompts and costs no tokens.")
            return
        how = "counted with the model's tokenizer" if t.exact_prompt_tokens else "guessed from characters"
        if estimate.observed_pairs:
            how += f"; step reach and answer lengths from the judge's {estimate.observed_pairs} answered pair(s)"
        self.stdout.write(
            f"Dry run of {judge.name!r} over {t.pairs:,} pair(s) ({scope}): about {t.calls:,} model calls, "
            f"{t.prompt_tokens:,} prompt + {t.completion_tokens:,} completion tokens "
            f"(prompts of {t.sampled} sampled pairs {how})."
        )
        if estimate.cost_usd is not None:
            self.stdout.write(f"Estimated cost at the judge's prices: ${estimate.cost_usd:,.2f}")
        else:
            self.stdout.write("No prices on this judge (add_judge --price-in/--price-out): no cost figure.")
        if estimate.reference_cost_usd is not None:
            self.stdout.write(
                f"At GPT-4o-mini's prices, these prompts for DisastIR's 1,340,000 pairs: "
                f"${estimate.reference_cost_usd:,.0f} (DisastIR reports about $1,400)."
            )

    def _wait(self, job: ScoringJob) -> None:
        while True:
            job.refresh_from_db()
            progress = job_progress(job, show_errors=True)
            bar = "#" * int(30 * progress.fraction)
            eta = f", ETA {duration_text(progress.eta_s)}" if progress.eta_s is not None else ""
            rate = f", {progress.pairs_per_s:.1f} pairs/s" if progress.pairs_per_s else ""
            usage = f", {progress.prompt_tokens + progress.completion_tokens:,} tokens" if progress.calls else ""
            cost = f", ${progress.cost_usd:,.4f}" if progress.cost_usd is not None else ""
            sys.stdout.write(
                f"\r[{bar:<30}] {job.done:,}/{job.total:,} ({job.failed:,} failed){rate}{eta}{usage}{cost}   "
            )
            sys.stdout.flush()
            if job.status != ScoringJob.Status.RUNNING:
                sys.stdout.write("\n")
                self.stdout.write(f"Job {job.id} {job.status}.")
                return
            time.sleep(1)

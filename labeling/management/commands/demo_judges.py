"""`manage.py demo_judges --project SLUG`: the demo's two judges (MiniLM embedding baseline, SmolLM2 Tok),
created once, their scoring queued for whatever is not judged yet (gold pairs and the runs' top 10 first), and
SmolLM2 made the queue judge when the project has none. A judge that would take more than --full-limit seconds
here (SmolLM2 on a CPU: hours) scores only what the Validation and Systems pages need, and says how to score the
rest. Running it again changes nothing that is done."""
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.durations import duration_text
from labeling.management.lookup import command_project
from labeling.models import Judge
from labeling.selectors.lookups import JudgeNotFound, judge_by_name
from labeling.services.judges import judge_create
from labeling.services.projects import queue_judge_default
from labeling.services.scoring import (
    RUNS_TOP_DEPTH,
    ScoringError,
    chunk_size_for,
    missing_pair_ids,
    scoring_job_estimate,
    scoring_job_start,
    scoring_tiers,
)
from models_llm.bundled import BundledModelError, minilm_folder, smollm2_folder

QUEUE_JUDGE = "smollm2-tok"
# A judge that would take longer than this to score every pair here scores what the pages need first (30 min).
FULL_LIMIT_S = 1800.0
# A job done within FAST_S seconds here gets FAST_PRIORITY times a slow one's share of the bulk worker.
FAST_S, FAST_PRIORITY = 600.0, 4


class Command(BaseCommand):
    help = "Create the demo judges (minilm, smollm2-tok) and queue scoring of every unjudged pair."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True)
        parser.add_argument("--full-limit", type=float, default=FULL_LIMIT_S, metavar="SECONDS",
                            help="a judge whose scoring of every pair would take longer than this here scores only "
                                 f"what the pages need (default {FULL_LIMIT_S:.0f} s)")

    def _score(self, project, judge: Judge, *, limit_s: float) -> None:
        """Queue the judge's missing pairs, or, when that would take longer than `limit_s` here, the ones the pages
        need first (gold pairs, the runs' top 10) and say how to score the rest."""
        try:
            estimate = scoring_job_estimate(project=project, judge=judge)
        except ScoringError as exc:
            raise CommandError(str(exc)) from None
        pairs = estimate.tokens.pairs
        if estimate.wall_s is not None and estimate.wall_s > limit_s and pairs:
            missing = missing_pair_ids(project=project, judge=judge)
            tiers = scoring_tiers(project=project, pair_ids=missing)
            needed = sorted(tiers)
            self.stdout.write(
                f"{judge.name}: scoring all {pairs:,} pairs would take about {duration_text(estimate.wall_s)} here "
                f"({estimate.throughput.text}); scoring the {len(needed):,} the pages need now (gold pairs, the "
                f"runs' top {RUNS_TOP_DEPTH}), about {duration_text(estimate.throughput.seconds(len(needed)))}. "
                f"The rest: manage.py score --project {project.slug} --judge {judge.name}")
            if not needed:
                return
            job, created = scoring_job_start(project=project, judge=judge, scope="selection", pair_ids=needed,
                                             chunk_pairs=chunk_size_for(estimate.throughput, backend=judge.backend),
                                             priority=self._priority(estimate, len(needed)))
        else:
            job, created = scoring_job_start(project=project, judge=judge,
                                             chunk_pairs=chunk_size_for(estimate.throughput, backend=judge.backend),
                                             priority=self._priority(estimate, pairs))
        if created:
            self.stdout.write(f"{judge.name}: job {job.id} queued for {job.total:,} pairs"
                              + (f" (about {duration_text(estimate.throughput.seconds(job.total))} here)."
                                 if estimate.throughput else "."))
        else:
            self.stdout.write(f"{judge.name}: job {job.id} resumed (its unfinished chunks queued again).")

    @staticmethod
    def _priority(estimate, pairs: int) -> int:
        """A job done within FAST_S here goes first (the pages wait for it, not for the slow judge beside it)."""
        if estimate.throughput is not None and estimate.throughput.seconds(pairs) <= FAST_S:
            return FAST_PRIORITY
        return 1

    def handle(self, *args, project: str, full_limit: float, **options) -> None:
        found = command_project(project)
        limit_s = full_limit
        try:
            folders = {"minilm": (Judge.Backend.EMBEDDING, minilm_folder()),
                       "smollm2-tok": (Judge.Backend.HF, smollm2_folder(settings.VAR_DIR))}
        except BundledModelError as exc:
            raise CommandError(str(exc)) from None
        for name, (backend, folder) in folders.items():
            try:
                judge = judge_by_name(project=found, name=name)
            except JudgeNotFound:
                method = Judge.Method.default_for(backend)
                # Stored relative to the checkout when it lies inside it: every worker resolves it in its own.
                model = folder.relative_to(settings.BASE_DIR) if folder.is_relative_to(settings.BASE_DIR) else folder
                judge = judge_create(project=found, name=name, backend=backend, model=str(model), method=method)
                self.stdout.write(f"Created judge {name!r}.")
            self._score(found, judge, limit_s=limit_s)
            # The LLM judge ranks the uncertain queue (DIRAS: the pairs it is least sure of go to experts first);
            # a queue judge an admin chose stays.
            if name == QUEUE_JUDGE and queue_judge_default(project=found, judge=judge):
                self.stdout.write(f"Queue judge set to {name!r}: the uncertain queue ranks pairs by its P.")

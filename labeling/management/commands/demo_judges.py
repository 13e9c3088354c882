"""`manage.py demo_judges --project SLUG [--judge NAME ...]`: the demo's two judges (MiniLM embedding baseline,
SmolLM2 Tok), created once, their scoring queued for whatever is not judged yet, and SmolLM2 made the queue judge
when the project has none. MiniLM scores every pair, ahead of SmolLM2 (the pages' first numbers are its). SmolLM2,
when every pair would take more than --full-limit seconds here (on a CPU: hours), scores only what the Validation
and Systems pages need (gold pairs and the runs' top 10) and says how to score the rest. Running it again changes
nothing that is done."""
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
    scoring_request,
    scoring_tiers,
)
from models_llm.bundled import BundledModelError, minilm_folder, smollm2_folder

FAST_JUDGE, QUEUE_JUDGE = "minilm", "smollm2-tok"
# A judge that would take longer than this to score every pair here scores what the pages need first (30 min).
FULL_LIMIT_S = 1800.0
# The fast judge's job gets this many times a slow one's share of the bulk worker: the pages wait for its numbers.
FAST_PRIORITY = 4


class Command(BaseCommand):
    help = "Create the demo judges (minilm, smollm2-tok) and queue scoring of every unjudged pair."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True)
        parser.add_argument("--judge", action="append", choices=(FAST_JUDGE, QUEUE_JUDGE), dest="judges",
                            help="only this one of the demo's judges (repeat for both; default: both, minilm first)")
        parser.add_argument("--full-limit", type=float, default=FULL_LIMIT_S, metavar="SECONDS",
                            help="SmolLM2, when its scoring of every pair would take longer than this here, scores "
                                 f"only what the pages need (default {FULL_LIMIT_S:.0f} s)")

    def _score_fast(self, project, judge: Judge) -> None:
        """Queue every missing pair at FAST_PRIORITY, without a timed probe: the embedding judge embeds each
        distinct text once (16 queries and 446 passages for the sample's 7,136 pairs), which a probe of a few pairs,
        each with texts of its own, cannot see (it said 22 min for a job of a few)."""
        try:
            job, created = scoring_request(project=project, judge=judge, priority=FAST_PRIORITY)
        except ScoringError as exc:
            raise CommandError(str(exc)) from None
        self._say_queued(judge, job, created, f", ahead of the others (priority {FAST_PRIORITY})")

    def _score(self, project, judge: Judge, missing: list[int], *, limit_s: float) -> None:
        """Queue the judge's `missing` pairs, or, when that would take longer than `limit_s` here, the ones the pages
        need first (gold pairs, the runs' top 10) and say how to score the rest."""
        try:
            estimate = scoring_job_estimate(project=project, judge=judge)
        except ScoringError as exc:
            raise CommandError(str(exc)) from None
        pairs = estimate.tokens.pairs
        if estimate.wall_s is not None and estimate.wall_s > limit_s:
            tiers = scoring_tiers(project=project, pair_ids=missing)
            needed = sorted(tiers)
            self.stdout.write(
                f"{judge.name}: scoring all {pairs:,} pairs would take about {duration_text(estimate.wall_s)} here "
                f"({estimate.throughput.text}); scoring the {len(needed):,} the pages need now (gold pairs, the "
                f"runs' top {RUNS_TOP_DEPTH}), about {duration_text(estimate.throughput.seconds(len(needed)))}. "
                f"The rest: manage.py score --project {project.slug} --judge {judge.name}")
            if not needed:
                return
            job, created = scoring_request(project=project, judge=judge, scope="selection", pair_ids=needed,
                                           chunk_pairs=chunk_size_for(estimate.throughput, backend=judge.backend))
        else:
            job, created = scoring_request(project=project, judge=judge,
                                           chunk_pairs=chunk_size_for(estimate.throughput, backend=judge.backend))
        self._say_queued(judge, job, created, f" (about {duration_text(estimate.throughput.seconds(job.total))} "
                                              "here)" if estimate.throughput else "")

    def _say_queued(self, judge: Judge, job, created: bool, detail: str) -> None:
        if created:
            self.stdout.write(f"{judge.name}: job {job.id} queued for {job.total:,} pairs{detail}.")
        else:
            self.stdout.write(f"{judge.name}: job {job.id} resumed (its unfinished chunks queued again).")

    def handle(self, *args, project: str, judges: list[str] | None, full_limit: float, **options) -> None:
        found = command_project(project)
        try:
            folders = {FAST_JUDGE: (Judge.Backend.EMBEDDING, minilm_folder),
                       QUEUE_JUDGE: (Judge.Backend.HF, lambda: smollm2_folder(settings.VAR_DIR))}
            for name in dict.fromkeys(judges or folders):
                backend, folder_of = folders[name]
                self._judge(found, name, backend, folder_of(), limit_s=full_limit)
        except BundledModelError as exc:
            raise CommandError(str(exc)) from None

    def _judge(self, project, name: str, backend: str, folder, *, limit_s: float) -> None:
        try:
            judge = judge_by_name(project=project, name=name)
        except JudgeNotFound:
            method = Judge.Method.default_for(backend)
            # Stored relative to the checkout when it lies inside it: every worker resolves it in its own.
            model = folder.relative_to(settings.BASE_DIR) if folder.is_relative_to(settings.BASE_DIR) else folder
            judge = judge_create(project=project, name=name, backend=backend, model=str(model), method=method)
            self.stdout.write(f"Created judge {name!r}.")
        # Checked before any estimate: a re-run finds nothing to do without loading the judge's model for a probe.
        missing = missing_pair_ids(project=project, judge=judge)
        if not missing:
            self.stdout.write(f"{judge.name}: every pair is scored.")
        elif name == FAST_JUDGE:
            self._score_fast(project, judge)
        else:
            self._score(project, judge, missing, limit_s=limit_s)
        # The LLM judge ranks the uncertain queue (DIRAS: the pairs it is least sure of go to experts first);
        # a queue judge an admin chose stays.
        if name == QUEUE_JUDGE and queue_judge_default(project=project, judge=judge):
            self.stdout.write(f"Queue judge set to {name!r}: the uncertain queue ranks pairs by its P.")

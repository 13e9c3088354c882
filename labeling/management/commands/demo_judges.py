"""`manage.py demo_judges --project SLUG`: the demo's two judges (MiniLM embedding baseline, SmolLM2 Tok),
created once, their scoring queued for whatever is not judged yet, and SmolLM2 made the queue judge when the
project has none. Running it again changes nothing that is done."""
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.management.lookup import command_project
from labeling.models import Judge
from labeling.selectors.lookups import JudgeNotFound, judge_by_name
from labeling.services.judges import judge_create
from labeling.services.projects import queue_judge_default
from labeling.services.scoring import scoring_job_start
from models_llm.bundled import BundledModelError, minilm_folder, smollm2_folder

QUEUE_JUDGE = "smollm2-tok"


class Command(BaseCommand):
    help = "Create the demo judges (minilm, smollm2-tok) and queue scoring of every unjudged pair."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True)

    def handle(self, *args, project: str, **options) -> None:
        found = command_project(project)
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
            job, created = scoring_job_start(project=found, judge=judge)
            if created:
                self.stdout.write(f"{name}: job {job.id} queued for {job.total:,} pairs.")
            else:
                self.stdout.write(f"{name}: job {job.id} resumed (its unfinished chunks queued again).")
            # The LLM judge ranks the uncertain queue (DIRAS: the pairs it is least sure of go to experts first);
            # a queue judge an admin chose stays.
            if name == QUEUE_JUDGE and queue_judge_default(project=found, judge=judge):
                self.stdout.write(f"Queue judge set to {name!r}: the uncertain queue ranks pairs by its P.")

"""`manage.py generate_queries --project SLUG --judge NAME --set NAME (--sample N [--seed S] | --where KEY=VALUE |
--passage ID ...) [--intent QA ...] [--prompts FILE] [--positive-grade G] [--dry-run]`: DisastIR's query generation
(3.4) here, in this process (no workers): one query per passage and intent, stored as a new query set."""
import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.exceptions import DomainError
from labeling.management.lookup import command_judge, command_project
from labeling.models import QueryGenerationJob
from labeling.services.query_generation import (
    GenerationEstimate,
    query_generation_create,
    query_generation_estimate,
    query_generation_fail,
    query_generation_plan,
    query_generation_run,
)
from models_llm.query_generation import INTENTS


def _where(raw: str | None) -> tuple[str, str] | None:
    if raw is None:
        return None
    key, sep, value = raw.partition("=")
    if not sep or not key.strip():
        raise CommandError(f"--where: KEY=VALUE (a passage metadata key and its value), got {raw!r}")
    return key.strip(), value


def _prompts(path: Path | None) -> dict | None:
    if path is None:
        return None
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CommandError(f"--prompts {path}: {exc}") from None
    if not isinstance(found, dict) or not all(isinstance(edit, dict) for edit in found.values()):
        raise CommandError(f'--prompts {path}: a JSON object {{intent: {{"need": text, "query": text}}}}')
    return found


def estimate_text(estimate: GenerationEstimate) -> str:
    tokens = estimate.tokens
    cost = "no prices set for the judge" if estimate.cost_usd is None else f"about ${estimate.cost_usd:,.2f}"
    how = "counted by the judge's tokenizer" if tokens.exact_prompt_tokens else "guessed from characters"
    return (f"{estimate.units:,} passage x intent units: {tokens.calls:,} calls, about {tokens.prompt_tokens:,} "
            f"prompt tokens ({how}) and {tokens.completion_tokens:,} completion tokens; {cost}")


class Command(BaseCommand):
    help = ("Generate a query set with a judge's LLM as DisastIR does (3.4): per passage and search intent, an "
            "information need, then a query and its generated positive. --dry-run estimates calls and cost.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--judge", required=True, help="a generative judge (backend hf or openai)")
        parser.add_argument("--set", dest="query_set", required=True, help="the new query set's name (llm, ...)")
        parser.add_argument("--intent", nargs="+", default=None, choices=INTENTS,
                            help="search intents, one query each per passage (default: all six)")
        parser.add_argument("--sample", type=int, default=None, help="draw this many passages at random")
        parser.add_argument("--seed", type=int, default=0, help="seed of the sample and of the draws (default 0)")
        parser.add_argument("--where", default=None, metavar="KEY=VALUE", help="the passages with this metadata value")
        parser.add_argument("--passage", nargs="+", default=None, metavar="ID", help="these passages")
        parser.add_argument("--prompts", type=Path, default=None, metavar="FILE",
                            help='edited prompts, JSON {intent: {"need": text, "query": text}} (default: the paper\'s)')
        parser.add_argument("--positive-grade", type=int, default=None,
                            help="give the generated positives this reference grade (default: none, they are pool "
                                 "pairs for judges and experts to grade)")
        parser.add_argument("--dry-run", action="store_true", help="estimate calls, tokens and cost; ask nothing")

    def handle(self, *args, project: str, judge: str, query_set: str, intent: list[str] | None, sample: int | None,
               seed: int, where: str | None, passage: list[str] | None, prompts: Path | None,
               positive_grade: int | None, dry_run: bool, **options) -> None:
        found = command_project(project)
        item = command_judge(found, judge)
        try:
            plan = query_generation_plan(project=found, judge=item, query_set=query_set, intents=intent,
                                         prompts=_prompts(prompts), sample=sample, seed=seed, where=_where(where),
                                         passages=passage, positive_grade=positive_grade)
            estimate = query_generation_estimate(project=found, plan=plan)
        except DomainError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{plan.selection}, intents {', '.join(plan.intents)}: {estimate_text(estimate)}.")
        if dry_run:
            self.stdout.write("Dry run: nothing was asked.")
            return
        job = query_generation_create(project=found, plan=plan, user=None)
        try:
            query_generation_run(job_id=job.id)
        except Exception as exc:  # noqa: BLE001 - no worker retries here: record the error and report it
            query_generation_fail(job_id=job.id, error=f"{type(exc).__name__}: {exc}")
        self._report(QueryGenerationJob.objects.get(id=job.id))

    def _report(self, job: QueryGenerationJob) -> None:
        for problem in job.problems:
            self.stdout.write(f"{problem['passage']} / {problem['intent']}: no query ({problem['stage']} stage): "
                              f"{problem['error']}")
        line = (f"Query set {job.query_set!r}: {job.created} of {job.total} queries written, "
                f"{len(job.problems)} answers could not be read ({job.calls} calls).")
        if job.status == QueryGenerationJob.Status.FAILED:
            raise CommandError(f"{line} {job.error}")
        self.stdout.write(line)

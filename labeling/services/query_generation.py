"""LLM query generation (DisastIR 3.4, #35): for chosen passages (a seeded sample, those with a metadata value, or
named ones) a generative judge writes one query per search intent, stored as a new query set (metadata `query_set`,
labeling.selectors.query_sets) with its generated positive in the pool (PairSource `generated-positive`; a new
passage, or for QAdoc the seed passage itself) and the seed passage too (PairSource `seed-passage`). A query written
from the same passage for the same intent in another set becomes its twin. An answer that is not what the prompt
asks for is kept in the job (`problems`), never turned into a query. Dry run: query_generation_estimate."""
from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import F, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from labeling.exceptions import Conflict, DomainError
from labeling.llm_adapter import JudgeConfigError, judge_config, prompt_token_counter, scorer_for
from labeling.models import MAX_ERROR_CHARS, Judge, Pair, PairSource, Passage, Project, Query, QueryGenerationJob
from labeling.models.query_generation import (
    GENERATED_FOR_KEY,
    GENERATED_KEY,
    GENERATED_POSITIVE,
    SEED_KEY,
    SEED_PASSAGE,
)
from labeling.names import NameRefused
from labeling.selectors.query_sets import INTENT_KEY, SET_KEY, TWIN_KEY, query_set_name
from labeling.services.jobs import job_cancel, job_fail, job_heartbeat, job_take
from labeling.services.validation import validation_request
from labeling.tasks import query_generation_task
from models_llm.backends import ScorerConfigError
from models_llm.cost import TokenEstimate, approximate_token_count, scaled
from models_llm.query_generation import (
    INTENTS,
    MAX_NEW_TOKENS,
    Generate,
    GeneratedQuery,
    GenerationParseError,
    IntentPrompts,
    estimate_messages,
    generate_query,
    prompts_for,
)

ESTIMATE_SAMPLE = 50
# Kept of a model's answer in a problem entry.
MAX_RAW_CHARS = 2000


class QueryGenerationError(DomainError):
    """A generation that cannot be asked for as given (names the field)."""


@dataclass(frozen=True)
class GenerationPlan:
    """What a job will do: `passages` (external ids, in the order they are worked) x `intents`."""

    judge: Judge
    query_set: str
    intents: tuple[str, ...]
    prompts: dict[str, dict[str, str]]
    passages: tuple[str, ...]
    seed: int
    positive_grade: int | None
    selection: str

    @property
    def units(self) -> int:
        return len(self.passages) * len(self.intents)

    def parameters(self) -> dict:
        return {"intents": list(self.intents), "prompts": self.prompts, "passages": list(self.passages),
                "seed": self.seed, "positive_grade": self.positive_grade, "selection": self.selection}


def _judge_check(judge: Judge) -> None:
    if not judge.is_generative:
        raise QueryGenerationError(
            f"judge {judge.name!r} cannot write queries: its backend is {judge.backend!r}; generation needs a "
            f"generative judge (backend {' or '.join(Judge.Backend.generative())})")
    try:
        judge_config(judge)
    except JudgeConfigError as exc:
        raise QueryGenerationError(str(exc)) from None


def _seed_passages(project: Project) -> list[tuple[str, dict]]:
    """(external id, metadata) of the passages a query may be written from, in id order: not generated ones."""
    rows = Passage.objects.filter(project=project).order_by("id").values_list("external_id", "metadata")
    return [(ext, metadata) for ext, metadata in rows.iterator()
            if not (isinstance(metadata, dict) and metadata.get(GENERATED_KEY))]


def _choose(project: Project, *, sample: int | None, seed: int, where: tuple[str, str] | None,
            passages: Sequence[str] | None) -> tuple[list[str], str]:
    given = [name for name, value in (("sample", sample), ("where", where), ("passages", passages))
             if value is not None]
    if len(given) != 1:
        raise QueryGenerationError("choose the passages one way: a seeded sample (sample), those with a metadata "
                                   f"value (where) or named ones (passages); got {', '.join(given) or 'none'}")
    candidates = _seed_passages(project)
    if passages is not None:
        known = {ext for ext, _ in candidates}
        missing = [ext for ext in passages if ext not in known]
        if missing:
            raise QueryGenerationError(f"passages: project {project.slug!r} has no passage {missing[0]!r} to write "
                                       "from (generated positives are not seed passages)")
        chosen = list(dict.fromkeys(passages))
        return chosen, f"{len(chosen)} named passages"
    if where is not None:
        key, value = where
        chosen = [ext for ext, metadata in candidates
                  if isinstance(metadata, dict) and key in metadata and str(metadata[key]) == value]
        if not chosen:
            raise QueryGenerationError(f"where: no passage of project {project.slug!r} has metadata {key}={value}")
        return chosen, f"passages with metadata {key}={value}"
    if sample < 1:
        raise QueryGenerationError(f"sample: at least 1 passage, got {sample}")
    if sample > len(candidates):
        raise QueryGenerationError(f"sample: {sample} passages asked, project {project.slug!r} has {len(candidates)}")
    drawn = random.Random(seed).sample([ext for ext, _ in candidates], sample)
    return drawn, f"{sample} passages drawn at random (seed {seed})"


def query_generation_plan(*, project: Project, judge: Judge, query_set: str, intents: Sequence[str] | None = None,
                          prompts: Mapping[str, Mapping[str, str]] | None = None, sample: int | None = None,
                          seed: int = 0, where: tuple[str, str] | None = None, passages: Sequence[str] | None = None,
                          positive_grade: int | None = None) -> GenerationPlan:
    """Check what is asked and resolve the passages (QueryGenerationError naming the field; Conflict when the query
    set exists already: generation makes a new one)."""
    if judge.project_id != project.id:
        raise QueryGenerationError(f"judge {judge.name!r} belongs to another project")
    _judge_check(judge)
    try:
        name = query_set_name(query_set or "")
    except NameRefused as exc:
        raise QueryGenerationError(f"query_set: {exc}") from None
    if Query.objects.filter(project=project, **{f"metadata__{SET_KEY}": name}).exists():
        raise Conflict(f"query set {name!r} exists already in project {project.slug!r}: generation makes a new set")
    chosen_intents = tuple(dict.fromkeys(intents or INTENTS))
    try:
        prompts_for(chosen_intents, prompts)
    except ValueError as exc:
        raise QueryGenerationError(f"intents/prompts: {exc}") from None
    if positive_grade is not None and positive_grade not in project.label_scale.values:
        raise QueryGenerationError(f"positive_grade: one of the project's grades {list(project.label_scale.values)}, "
                                   f"got {positive_grade}")
    chosen, selection = _choose(project, sample=sample, seed=seed, where=where, passages=passages)
    plan = GenerationPlan(judge=judge, query_set=name, intents=chosen_intents,
                          prompts={intent: dict(edit) for intent, edit in (prompts or {}).items()},
                          passages=tuple(chosen), seed=seed, positive_grade=positive_grade, selection=selection)
    if plan.units > settings.QUERY_GENERATION_MAX_UNITS:
        raise QueryGenerationError(f"{plan.units:,} passage x intent units asked; at most "
                                   f"{settings.QUERY_GENERATION_MAX_UNITS:,} (QUERY_GENERATION_MAX_UNITS)")
    return plan


@dataclass(frozen=True)
class GenerationEstimate:
    """A dry run: the units, the calls (two each) and their tokens, priced with the judge's prices (None without)."""

    units: int
    tokens: TokenEstimate
    cost_usd: float | None


def query_generation_estimate(*, project: Project, plan: GenerationPlan) -> GenerationEstimate:
    """What the plan would send, before anything is sent: the prompts of a seeded sample of its units counted with
    the judge's tokenizer (hf) or from their characters, typical answer lengths (models_llm.query_generation)."""
    try:
        count = prompt_token_counter(judge_config(plan.judge)) or approximate_token_count
    except JudgeConfigError as exc:
        raise QueryGenerationError(str(exc)) from None
    units = [(passage, intent) for passage in plan.passages for intent in plan.intents]
    sample = random.Random(0).sample(units, min(ESTIMATE_SAMPLE, len(units)))
    texts = dict(Passage.objects.filter(project=project, external_id__in={p for p, _ in sample}).values_list(
        "external_id", "text"))
    by_intent = {prompts.intent: prompts for prompts in prompts_for(plan.intents, plan.prompts)}
    prompt_tokens = completion_tokens = 0
    for passage, intent in sample:
        need, query, completion = estimate_messages(by_intent[intent], texts[passage])
        prompt_tokens += count(need) + count(query)
        completion_tokens += completion
    tokens = scaled(total_pairs=len(units), sampled=len(sample), calls=2 * len(sample), prompt_tokens=prompt_tokens,
                    completion_tokens=completion_tokens, exact=count is not approximate_token_count)
    return GenerationEstimate(units=len(units), tokens=tokens,
                              cost_usd=tokens.cost(plan.judge.price_in, plan.judge.price_out))


@transaction.atomic
def query_generation_create(*, project: Project, plan: GenerationPlan,
                            user: AbstractBaseUser | None) -> QueryGenerationJob:
    """Record the job (pending) without running it: query_generation_run does."""
    return QueryGenerationJob.objects.create(project=project, judge=plan.judge, query_set=plan.query_set,
                                             parameters=plan.parameters(), total=plan.units, requested_by=user)


@transaction.atomic
def query_generation_request(*, project: Project, plan: GenerationPlan,
                             user: AbstractBaseUser | None) -> QueryGenerationJob:
    """query_generation_create, then a worker runs the job once this commits."""
    job = query_generation_create(project=project, plan=plan, user=user)
    transaction.on_commit(lambda: query_generation_task.delay(job.id))
    return job


def query_generation_fail(*, job_id: int, error: str) -> None:
    """Give up on a job (its retries are spent, or the sweep found it lost): what it wrote stays."""
    job_fail(QueryGenerationJob.objects.filter(id=job_id), error=error)


def query_generation_cancel(*, job: QueryGenerationJob) -> QueryGenerationJob:
    """Stop a queued or running job: cancelled and finished. A running worker stops before its next unit; the queries
    it wrote stay (each unit is its own transaction). A finished job is returned as it is."""
    return job_cancel(job)


def query_generation_run(*, job_id: int, generate: Generate | None = None) -> QueryGenerationJob | None:
    """Work the job's units in order from the first not done (a retry goes on where its last attempt stopped):
    two calls of the judge's model (`generate`: its scorer's generate_chat unless given) per unit, each unit's
    query, passages, pairs and progress written in one transaction. A finished job, or one a live worker holds (a
    task delivered twice), is returned as it is (None: gone). Transient errors propagate for the task to retry."""
    owned = QueryGenerationJob.objects.filter(id=job_id, finished_at__isnull=True)
    if not job_take(owned):
        return QueryGenerationJob.objects.filter(id=job_id).first()
    job = QueryGenerationJob.objects.select_related("project", "judge").get(id=job_id)
    parameters = job.parameters
    by_intent = {prompts.intent: prompts for prompts in prompts_for(parameters["intents"], parameters["prompts"])}
    units = [(passage, intent) for passage in parameters["passages"] for intent in parameters["intents"]]
    if generate is None:
        try:
            generate = scorer_for(job.judge).generate_chat
        except (JudgeConfigError, ScorerConfigError) as exc:
            query_generation_fail(job_id=job.id, error=f"judge {job.judge.name!r} cannot be loaded: {exc}")
            return QueryGenerationJob.objects.get(id=job.id)
    with job_heartbeat(QueryGenerationJob.objects.filter(id=job.id)):
        for index in range(job.done, len(units)):
            if not QueryGenerationJob.objects.filter(id=job.id, status=QueryGenerationJob.Status.RUNNING).exists():
                return _stopped(job.id)  # cancelled or given up meanwhile
            _unit(job, index, *units[index], by_intent[units[index][1]], generate)
        return _finish(job.id)


def _unit(job: QueryGenerationJob, index: int, passage_ext: str, intent: str, prompts: IntentPrompts,
          generate: Callable[..., object]) -> None:
    passage = Passage.objects.filter(project=job.project, external_id=passage_ext).first()
    problem = calls = None
    found: GeneratedQuery | None = None
    tokens: tuple[int | None, int | None] = (None, None)
    if passage is None:
        problem = {"stage": "passage", "error": "the passage is gone from the project", "raw": ""}
    else:
        # One random stream per unit: a retried unit draws the same need and placeholder values.
        rng = random.Random(f"{job.parameters['seed']}:{passage_ext}:{intent}")
        try:
            found = generate_query(prompts, passage.text, generate, rng, max_new_tokens=MAX_NEW_TOKENS)
            calls, tokens = 2, (found.prompt_tokens, found.completion_tokens)
        except GenerationParseError as exc:
            calls, tokens = (1 if exc.stage == "need" else 2), exc.tokens
            problem = {"stage": exc.stage, "error": str(exc), "raw": exc.raw[:MAX_RAW_CHARS]}
    with transaction.atomic():
        if found is not None:
            problem = _write(job, index, passage, found, prompts)
        progress = {"done": index + 1, "calls": F("calls") + (calls or 0), "heartbeat_at": timezone.now()}
        if found is not None and problem is None:
            progress["created"] = F("created") + 1
        for field, value in zip(("prompt_tokens", "completion_tokens"), tokens):
            if value is not None:
                progress[field] = Coalesce(F(field), Value(0)) + value
        updated = QueryGenerationJob.objects.filter(id=job.id, done=index)
        if problem is not None:
            current = QueryGenerationJob.objects.filter(id=job.id).values_list("problems", flat=True).first()
            progress["problems"] = [*current, {"passage": passage_ext, "intent": intent, **problem}]
        if not updated.update(**progress):
            transaction.set_rollback(True)  # another attempt wrote this unit meanwhile


def _external_id(job: QueryGenerationJob, index: int) -> str:
    return f"{job.query_set}-{index + 1}"


def _generated_passage_id() -> str:
    # Random, so that nothing in it names the query it answers (the metadata does, for those who may see it): an
    # expert reading the id would know the pair is the generated positive, which may hold a reference grade. A
    # retried unit draws another, as its first attempt wrote nothing.
    return uuid.uuid4().hex


def _write(job: QueryGenerationJob, index: int, passage: Passage, found: GeneratedQuery,
           prompts: IntentPrompts) -> dict | None:
    """The unit's query, its positive and their pairs; a problem entry instead when the query's external id is
    taken."""
    project, external_id = job.project, _external_id(job, index)
    if Query.objects.filter(project=project, external_id=external_id).exists():
        return {"stage": "store", "error": f"query id {external_id!r} is taken in the project", "raw": ""}
    metadata = {SET_KEY: job.query_set, INTENT_KEY: found.intent, SEED_KEY: passage.external_id,
                "information_need": found.need,
                "generated_by": {"job": job.id, "judge": job.judge.name, "choices": found.choices}}
    twin = _twin_of(project, job.query_set, passage.external_id, found.intent)
    if twin is not None:
        metadata[TWIN_KEY] = twin
    query = Query.objects.create(project=project, external_id=external_id, text=found.query, metadata=metadata)
    if found.positive is None:
        positive = passage
    else:
        positive = Passage.objects.create(
            project=project, external_id=_generated_passage_id(), text=found.positive,
            metadata={GENERATED_KEY: True, GENERATED_FOR_KEY: external_id, SEED_KEY: passage.external_id,
                      INTENT_KEY: found.intent})
        seed_pair = Pair.objects.create(project=project, query=query, passage=passage)
        PairSource.objects.create(pair=seed_pair, system=SEED_PASSAGE)
    grade = job.parameters.get("positive_grade")
    pair = Pair.objects.create(project=project, query=query, passage=positive, reference_grade=grade,
                               reference_source=GENERATED_POSITIVE if grade is not None else "")
    PairSource.objects.create(pair=pair, system=GENERATED_POSITIVE, rank=1)
    return None


def _twin_of(project: Project, query_set: str, passage: str, intent: str) -> str | None:
    """The query of another set written from the same passage for the same intent, when it names no other twin."""
    for external_id, metadata in Query.objects.filter(
            project=project, **{f"metadata__{SEED_KEY}": passage, f"metadata__{INTENT_KEY}": intent}).order_by(
            "id").values_list("external_id", "metadata"):
        if metadata.get(SET_KEY) not in (None, query_set) and metadata.get(TWIN_KEY) is None:
            return external_id
    return None


def _stopped(job_id: int) -> QueryGenerationJob:
    """A job cancelled or given up while it ran: the queries it wrote stay, so the pages that count them refresh."""
    job = QueryGenerationJob.objects.select_related("project").get(id=job_id)
    if job.created:
        validation_request(project=job.project)
    return job


@transaction.atomic
def _finish(job_id: int) -> QueryGenerationJob:
    job = QueryGenerationJob.objects.select_for_update().get(id=job_id)
    if job.finished_at is not None:
        return job
    if job.total and not job.created:
        job.status, job.error = QueryGenerationJob.Status.FAILED, (
            f"no query written: every one of the {job.total} units gave an answer that could not be read (see "
            "its problems)")[:MAX_ERROR_CHARS]
    else:
        job.status = QueryGenerationJob.Status.DONE
    job.finished_at = timezone.now()
    job.save(update_fields=["status", "error", "finished_at"])
    if job.created:
        validation_request(project=job.project)
    return job

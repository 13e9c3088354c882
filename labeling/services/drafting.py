"""LLM-drafted relevance definitions (DIRAS): asking a generative judge to draft a query's definition, or to
refine it from the passages experts labelled relevant, and writing its answer as a draft version. A draft is
never current: an admin makes it current by saving it (edited or not) with definition_save(based_on=draft)."""
from __future__ import annotations

from collections.abc import Callable

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from labeling.exceptions import DomainError
from labeling.llm_adapter import JudgeConfigError, judge_config, scorer_for
from labeling.models import MAX_ERROR_CHARS, DefinitionDraft, Judge, Query, RelevanceDefinition
from labeling.selectors.definitions import current_definition
from labeling.selectors.drafting import relevant_example_passages
from labeling.services.jobs import job_fail, job_heartbeat, job_take
from labeling.tasks import definition_draft_task
from models_llm.backends import ScorerConfigError
from models_llm.drafting import DraftParseError, draft_messages, draft_parse
from models_llm.types import Generation

DRAFT_MAX_NEW_TOKENS = 400

# A scorer's generate_chat: (messages, max_new_tokens=...) -> Generation.
Generate = Callable[..., Generation]


class DraftingError(DomainError):
    """A draft that cannot be asked for as given (a judge that cannot write, nothing to refine from)."""


def definition_draft_judge_check(*, judge: Judge) -> None:
    """Raise DraftingError unless the judge's model writes text and its configuration can be loaded."""
    if not judge.is_generative:
        raise DraftingError(
            f"judge {judge.name!r} cannot write a definition: its backend is {judge.backend!r}; drafting needs a "
            f"generative judge (backend {' or '.join(Judge.Backend.generative())})"
        )
    try:
        judge_config(judge)
    except JudgeConfigError as exc:
        raise DraftingError(str(exc)) from None


@transaction.atomic
def definition_draft_create(
    *, query: Query, judge: Judge, refine: bool, user: AbstractBaseUser | None
) -> DefinitionDraft:
    """Record a request for `judge` to draft the query's definition (`refine`: improve the current one from the
    passages experts labelled relevant), without running it: definition_draft_run does."""
    if judge.project_id != query.project_id:
        raise DraftingError(f"judge {judge.name!r} belongs to another project")
    definition_draft_judge_check(judge=judge)
    if refine and not relevant_example_passages(query=query, limit=1):
        raise DraftingError(
            f"no passage of query {query.external_id!r} is labelled relevant by the experts yet: there is nothing to "
            "refine the definition from"
        )
    return DefinitionDraft.objects.create(query=query, judge=judge, refine=refine, requested_by=user)


@transaction.atomic
def definition_draft_request(
    *, query: Query, judge: Judge, refine: bool, user: AbstractBaseUser | None
) -> DefinitionDraft:
    """definition_draft_create, then a worker runs the draft once this commits."""
    draft = definition_draft_create(query=query, judge=judge, refine=refine, user=user)
    transaction.on_commit(lambda: definition_draft_task.delay(draft.id))
    return draft


def definition_draft_run(*, draft_id: int, generate: Generate | None = None) -> DefinitionDraft | None:
    """Ask the draft's judge (`generate`: its scorer's generate_chat unless given) and write the answer as the
    query's next version, a draft drafted by the judge. An answer without both parts of a definition, or a judge
    that cannot be loaded, is stored as the draft's error (failed) and writes no version. A finished draft is
    returned as it is (None: the draft is gone). Other errors (a server that is briefly down) propagate for the
    caller to retry or to record with definition_draft_fail."""
    draft = DefinitionDraft.objects.select_related("query__project", "judge").filter(id=draft_id).first()
    if draft is None or not job_take(DefinitionDraft.objects.filter(id=draft.id, finished_at__isnull=True)):
        return draft
    with job_heartbeat(DefinitionDraft.objects.filter(id=draft.id)):
        return _draft(draft, generate)


def _draft(draft: DefinitionDraft, generate: Generate | None) -> DefinitionDraft | None:
    query, current, examples = draft.query, None, []
    if draft.refine:
        examples = relevant_example_passages(query=query)
        if not examples:
            return _finish(draft_id=draft.id, error="no passage of the query is labelled relevant any more: "
                                                    "there is nothing to refine the definition from")
        found = current_definition(query=query)
        current = found.text if found is not None else None
    messages = draft_messages(query.text, current=current, examples=examples)
    try:
        generation = (generate or scorer_for(draft.judge).generate_chat)(messages, max_new_tokens=DRAFT_MAX_NEW_TOKENS)
    except (JudgeConfigError, ScorerConfigError) as exc:
        return _finish(draft_id=draft.id, error=f"judge {draft.judge.name!r} cannot be loaded: {exc}")
    tokens = {"prompt_tokens": generation.prompt_tokens, "completion_tokens": generation.completion_tokens}
    try:
        drafted = draft_parse(generation.text)
    except DraftParseError as exc:
        return _finish(draft_id=draft.id, error=f"the model's answer is not a definition: {exc}",
                       raw_output=generation.text, **tokens)
    return _finish(draft_id=draft.id, text=drafted.text, raw_output=generation.text, **tokens)


def definition_draft_fail(*, draft_id: int, error: str) -> DefinitionDraft | None:
    """Give up on a draft (its retries are spent): store the error and finish it, failed, writing no version. A
    finished draft is returned as it is (None: the draft is gone)."""
    job_fail(DefinitionDraft.objects.filter(id=draft_id), error=error)
    return DefinitionDraft.objects.filter(id=draft_id).first()


@transaction.atomic
def _finish(
    *, draft_id: int, text: str | None = None, error: str = "", raw_output: str = "",
    prompt_tokens: int | None = None, completion_tokens: int | None = None,
) -> DefinitionDraft | None:
    draft = DefinitionDraft.objects.select_for_update().select_related("judge").filter(id=draft_id).first()
    if draft is None or draft.finished_at is not None:
        return draft  # gone, or another worker finished it while this one asked the model
    if text is not None:
        # The same lock as definition_save: a draft and a saved version never get the same number.
        Query.objects.select_for_update().only("id").get(id=draft.query_id)
        newest = RelevanceDefinition.objects.filter(query_id=draft.query_id).aggregate(v=Max("version"))["v"] or 0
        origin = RelevanceDefinition.Origin.LLM_REFINED if draft.refine else RelevanceDefinition.Origin.LLM_DRAFT
        draft.definition = RelevanceDefinition.objects.create(
            query_id=draft.query_id, version=newest + 1, text=text, author=None, is_draft=True, origin=origin,
            drafted_by=draft.judge,
        )
    draft.status = DefinitionDraft.Status.DONE if text is not None else DefinitionDraft.Status.FAILED
    draft.error = error[:MAX_ERROR_CHARS]
    draft.raw_output = raw_output
    draft.prompt_tokens, draft.completion_tokens = prompt_tokens, completion_tokens
    draft.finished_at = timezone.now()
    draft.save(update_fields=["definition", "status", "error", "raw_output", "prompt_tokens", "completion_tokens",
                              "finished_at"])
    return draft

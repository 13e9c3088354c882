"""Judge writes: creating an LLM judging configuration, checked before it is stored."""
from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings
from django.db import transaction

from labeling.exceptions import DomainError
from labeling.llm_adapter import PARAMETER_FIELDS, JudgeConfigError, judge_check, judge_config
from labeling.models import Judge, Project
from labeling.names import NameRefused, clean_name
from models_llm.backends.crossencoder import head_problem
from models_llm.ensembles import DEFAULT_INTENT, DEFAULT_PROMPTS, EnsembleConfigError, strategies_for


class JudgeError(DomainError):
    """A judge that cannot be created as asked (the message names the field)."""


NAME_MAX_LENGTH = Judge._meta.get_field("name").max_length


def _clean(name: str, *, what: str) -> str:
    """`name` as a judge is stored under and found by (labeling.names); JudgeError saying what is wrong."""
    try:
        return clean_name(name, what=what, max_length=NAME_MAX_LENGTH)
    except NameRefused as exc:
        raise JudgeError(str(exc)) from None


# What each backend's scorer never reads (models_llm.backends), and why: given to it, a field would be stored with the
# judge and silently ignored. An endpoint off openai is judge_config's to refuse, for stored judges too; an embedding
# judge's method is the embedding method, whatever is asked.
UNUSED_BY_BACKEND: dict[str, tuple[frozenset[str], str]] = {
    Judge.Backend.HF: (frozenset({"timeout_s", "max_retries", "concurrency"}),
                       "an hf judge runs its model here: it takes no endpoint settings"),
    Judge.Backend.OPENAI: (frozenset({"adapter", "adapter_storage", "device", "dtype", "batch_size"}),
                           "an openai judge's model runs at its endpoint: it takes no local model settings"),
    Judge.Backend.EMBEDDING: (
        frozenset({"method", "cot", "template", "max_new_tokens", "strategies", "prompts", "adapter",
                   "adapter_storage",
                   "timeout_s", "max_retries", "concurrency", "price_in", "price_out"}),
        "an embedding judge compares embeddings: it sends no prompt, writes no text and costs no tokens"),
    Judge.Backend.CROSSENCODER: (
        frozenset({"method", "cot", "template", "max_new_tokens", "strategies", "prompts", "adapter",
                   "timeout_s", "max_retries", "concurrency", "price_in", "price_out"}),
        "a crossencoder judge reads query and passage with its own head: it sends no prompt, writes no text and "
        "costs no tokens"),
}
# Settings of the crossencoder backend only.
CROSSENCODER_ONLY = frozenset({"max_length", "separator"})


def _unused_refused(backend: str, given: dict[str, object]) -> None:
    """JudgeError naming the fields given (not None) that `backend` has no use for."""
    if backend != Judge.Backend.CROSSENCODER:
        only = sorted(field for field, value in given.items() if value is not None and field in CROSSENCODER_ONLY)
        if only:
            raise JudgeError(f"{', '.join(only)}: a crossencoder judge's settings, which a {backend} judge has no "
                             "use for; leave them out")
    fields, why = UNUSED_BY_BACKEND.get(backend, (frozenset(), ""))
    unused = sorted(field for field, value in given.items() if value is not None and field in fields)
    if backend in Judge.Backend.promptless() and given.get("method") == backend:
        unused.remove("method")  # its own method, as add_judge names it
    if unused:
        raise JudgeError(f"{why}; leave out {', '.join(unused)}")


def _price(label: str, value: float | None) -> float | None:
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value < 10_000:
        raise JudgeError(f"{label} must be a price in USD per million tokens, from 0 to 10,000; got {value!r}")
    return float(value)


@transaction.atomic
def judge_create(
    *, project: Project, name: str, backend: str, model: str = "", template: dict[str, str] | None = None,
    members: list[str] | None = None, price_in: float | None = None, price_out: float | None = None,
    **parameters,
) -> Judge:
    """Create judge `name` in `project`. `parameters` are JudgeConfig fields (method, cot, use_definition,
    adapter, device, dtype, batch_size, strategies, prompts...) and, for an openai judge, the `endpoint` the operator
    declared (settings.LLM_ENDPOINTS); local model folders must be under a model root and hold a model. Backend
    `ensemble` makes a judges ensemble of the `members` (judge names; no model of its own).
    `price_in` / `price_out` (USD per million prompt / completion tokens) price the judge's jobs. A field the
    backend has no use for is refused (UNUSED_BY_BACKEND), not stored to be ignored."""
    name = _clean(name, what="judge name")
    if Judge.objects.filter(project=project, name=name).exists():
        raise JudgeError(f"project {project.slug!r} already has a judge {name!r}")
    if {"base_url", "api_key_env"} & set(parameters):
        raise JudgeError("a judge takes no base_url or api_key_env: name an endpoint the operator declared "
                         f"(LLM_ENDPOINTS: {', '.join(sorted(settings.LLM_ENDPOINTS)) or 'none declared'})")
    unknown = sorted(set(parameters) - set(PARAMETER_FIELDS))
    if unknown:
        raise JudgeError(f"unknown judge parameters {unknown}")
    params = {key: value for key, value in parameters.items() if value is not None}
    prices = {"price_in": _price("price_in", price_in), "price_out": _price("price_out", price_out)}
    if backend == Judge.Backend.ENSEMBLE:
        if params or model or template:
            raise JudgeError("a judges ensemble takes only members (and prices): no model, method or template")
        members = [_clean(member, what="ensemble member name") for member in members or []]
        judge = Judge(project=project, name=name, backend=backend, parameters={"members": members}, **prices)
        try:
            judge_check(judge)
        except JudgeConfigError as exc:
            raise JudgeError(str(exc).removeprefix(f"judge {name!r}: ")) from None
        judge.save()
        return judge
    if members:
        raise JudgeError("members are for a judges ensemble (backend ensemble)")
    _unused_refused(backend, {**params, "template": template or None, "price_in": price_in, "price_out": price_out})
    if backend in Judge.Backend.promptless():
        params["method"] = Judge.Method(backend).value
    if params.get("method") == Judge.Method.ENSEMBLE and "prompts" not in params:
        # A new ensemble judge asks the paper's prompts (App. C as printed); a judge stored without the key keeps
        # the legacy ones, so its stored judgments stay reproducible.
        params["prompts"] = DEFAULT_PROMPTS
    judge = Judge(project=project, name=name, backend=backend, model=model,
                  prompt=json.dumps(template, indent=2) if template else "", parameters=params, **prices)
    try:
        config = judge_config(judge)
    except JudgeConfigError as exc:
        raise JudgeError(str(exc).removeprefix(f"judge {name!r}: ")) from None
    if config.method == Judge.Method.ENSEMBLE:
        try:
            strategies_for(DEFAULT_INTENT, config.strategies)  # known strategies, none twice
        except EnsembleConfigError as exc:
            raise JudgeError(str(exc)) from None
        if config.template or config.cot or not config.use_definition:
            raise JudgeError("an ensemble judge writes its own prompts: no template, cot or no-definition")
    given = {"model": model, "adapter": parameters.get("adapter")}
    local_folder = config.model if backend in Judge.Backend.local_model() else None
    for label, folder, marker in (("model", local_folder, "config.json"),
                                  ("adapter", config.adapter, "adapter_config.json")):
        if not folder:
            continue
        if not Path(folder).is_dir():
            raise JudgeError(f"{label} folder {given[label]} does not exist "
                             "(run `manage.py setup_models` for the bundled ones)")
        if not (Path(folder) / marker).is_file():
            raise JudgeError(f"{label} folder {given[label]} holds no {marker}: not a model folder that can load")
    if backend == Judge.Backend.CROSSENCODER:
        problem = head_problem(Path(config.model))
        if problem:
            raise JudgeError(problem.replace(str(config.model), f"model folder {model}"))
    judge.save()
    return judge

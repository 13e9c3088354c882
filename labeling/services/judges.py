"""Judge writes: creating an LLM judging configuration, checked before it is stored."""
from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings
from django.db import transaction

from labeling.exceptions import DomainError
from labeling.models import Judge, Project
from labeling.llm_adapter import PARAMETER_FIELDS, JudgeConfigError, judge_check, judge_config
from models_llm.ensembles import DEFAULT_INTENT, EnsembleConfigError, strategies_for


class JudgeError(DomainError):
    """A judge that cannot be created as asked (the message names the field)."""


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
    adapter, device, dtype, batch_size, strategies...) and, for an openai judge, the `endpoint` the operator
    declared (settings.LLM_ENDPOINTS); local model folders must be under a model root and hold a model. Backend
    `ensemble` makes a judges ensemble of the `members` (judge names; no model of its own).
    `price_in` / `price_out` (USD per million prompt / completion tokens) price the judge's jobs."""
    name = name.strip()
    if not name or len(name) > 200:
        raise JudgeError("a judge name must be 1 to 200 characters")
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
        judge = Judge(project=project, name=name, backend=backend, parameters={"members": list(members or [])},
                      **prices)
        try:
            judge_check(judge)
        except JudgeConfigError as exc:
            raise JudgeError(str(exc).removeprefix(f"judge {name!r}: ")) from None
        judge.save()
        return judge
    if members:
        raise JudgeError("members are for a judges ensemble (backend ensemble)")
    if backend == Judge.Backend.EMBEDDING:
        params["method"] = Judge.Method.EMBEDDING.value
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
    judge.save()
    return judge

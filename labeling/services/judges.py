"""Judge writes: creating an LLM judging configuration, checked before it is stored."""
from __future__ import annotations

import json
from pathlib import Path

from django.db import transaction

from labeling.models import Judge, Project
from labeling.scoring import PARAMETER_FIELDS, JudgeConfigError, judge_config


class JudgeError(ValueError):
    """A judge that cannot be created as asked (the message names the field)."""


@transaction.atomic
def judge_create(
    *, project: Project, name: str, backend: str, model: str, template: dict[str, str] | None = None,
    **parameters,
) -> Judge:
    """Create judge `name` in `project`. `parameters` are JudgeConfig fields (method, cot, use_definition,
    adapter, device, dtype, batch_size, base_url, api_key_env...); local model folders must exist here."""
    name = name.strip()
    if not name or len(name) > 200:
        raise JudgeError("a judge name must be 1 to 200 characters")
    if Judge.objects.filter(project=project, name=name).exists():
        raise JudgeError(f"project {project.slug!r} already has a judge {name!r}")
    unknown = sorted(set(parameters) - set(PARAMETER_FIELDS))
    if unknown:
        raise JudgeError(f"unknown judge parameters {unknown}")
    params = {key: value for key, value in parameters.items() if value is not None}
    if backend == "embedding":
        params["method"] = "embedding"
    judge = Judge(project=project, name=name, backend=backend, model=model,
                  prompt=json.dumps(template, indent=2) if template else "", parameters=params)
    try:
        config = judge_config(judge)
    except JudgeConfigError as exc:
        raise JudgeError(str(exc).removeprefix(f"judge {name!r}: ")) from None
    for label, folder in (("model", config.model if backend != "openai" else None), ("adapter", config.adapter)):
        if folder and not Path(folder).is_dir():
            raise JudgeError(f"{label} folder {folder} does not exist (run `manage.py setup_models` for the bundled ones)")
    if backend == "openai" and not config.base_url:
        raise JudgeError("an openai judge needs a base URL (e.g. http://127.0.0.1:8000/v1)")
    judge.save()
    return judge

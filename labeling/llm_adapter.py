"""The one adapter between Django rows and models_llm: a Judge row as a JudgeConfig, pairs as PairInputs,
a Verdict as Judgment fields, and the loaded scorer each worker process keeps per judge configuration."""
from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from pathlib import Path

from django.conf import settings

from labeling.exceptions import DomainError
from labeling.models import Judge, Judgment, Pair
from labeling.storage_folders import ADAPTER_PREFIX, StorageFolderError, adapter_local
from models_llm.backends import Scorer, ScorerConfigError, load_scorer
from models_llm.bundled import BundledModelError, minilm_folder
from models_llm.cost import CountTokens
from models_llm.prompts import TemplateError, template_validate
from models_llm.relevance_rule import POINTWISE, SCORE_ABOVE_ZERO, RelevanceRule
from models_llm.tokenizers import chat_token_counter
from models_llm.types import JudgeConfig, PairInput, Verdict

# JudgeConfig fields a Judge keeps in its `parameters` JSON (backend, model and the template have columns).
# `adapter_storage` names an adapter in Django's storage (a fine-tuned student's; a cross-encoder student's whole
# model folder, which replaces `model`): each worker fetches it once.
# An openai judge names an `endpoint` the operator declared in settings.LLM_ENDPOINTS; its URL and the variable
# holding its key come from there, never from the judge.
PARAMETER_FIELDS = (
    "method", "cot", "use_definition", "adapter", "device", "dtype", "batch_size", "max_new_tokens", "endpoint",
    "timeout_s", "max_retries", "concurrency", "strategies", "prompts", "adapter_storage", "max_length", "separator",
)


class JudgeConfigError(DomainError):
    """A judge whose stored configuration cannot be used (the message names the field)."""


def model_roots() -> list[Path]:
    """The folders model folders must lie in: settings.MODEL_ROOTS and the bundled MiniLM package's folder."""
    roots = [Path(root).resolve() for root in settings.MODEL_ROOTS]
    try:
        roots.append(minilm_folder().resolve())
    except BundledModelError:
        pass
    return roots


def model_folder(value: str, *, label: str = "model") -> str:
    """The resolved folder of a model or adapter; JudgeConfigError when it lies outside every model root.
    Relative folders (var/models/...) are resolved against the checkout, so every worker finds the same
    judge's model in its own. Nothing is said about a folder outside the roots, not even whether it exists."""
    path = Path(value)
    resolved = (path if path.is_absolute() else Path(settings.BASE_DIR) / path).resolve()
    roots = model_roots()
    if not any(resolved == root or resolved.is_relative_to(root) for root in roots):
        raise JudgeConfigError(
            f"the {label} folder {value!r} is not under a model root (MODEL_ROOTS: "
            f"{', '.join(str(root) for root in settings.MODEL_ROOTS)})"
        )
    return str(resolved)


def llm_endpoint(name: str) -> dict:
    """The operator's declared endpoint `name` (base_url, api_key_env, allow_local, prefill, label_token_ids);
    JudgeConfigError if none."""
    endpoints = settings.LLM_ENDPOINTS
    declared = ", ".join(sorted(endpoints)) or "none"
    if not name:
        raise JudgeConfigError(f"an openai judge needs an endpoint (declared: {declared})")
    if name not in endpoints:
        raise JudgeConfigError(f"endpoint {name!r} is not declared by the operator (LLM_ENDPOINTS declares: {declared})")
    return endpoints[name]


def judge_template(judge: Judge) -> dict[str, str]:
    if not judge.prompt.strip():
        return {}
    try:
        template = json.loads(judge.prompt)
    except ValueError as exc:
        raise JudgeConfigError(f"judge {judge.name!r}: prompt is not a JSON template ({exc})") from None
    if not isinstance(template, dict):
        raise JudgeConfigError(f"judge {judge.name!r}: prompt must be a JSON object of template blocks")
    try:
        template_validate(template)
    except TemplateError as exc:
        raise JudgeConfigError(f"judge {judge.name!r}: {exc}") from None
    return template


# A judge of judges (Judge.is_ensemble) has at most this many members.
MAX_MEMBERS = 20


def ensemble_members(judge: Judge) -> list[Judge]:
    """The member judges of a judges ensemble, in the order listed; JudgeConfigError names a member that is
    missing, listed twice, itself a judges ensemble, or the ensemble itself."""
    names = (judge.parameters or {}).get("members")
    if set(judge.parameters or {}) - {"members"}:
        raise JudgeConfigError(f"judge {judge.name!r}: a judges ensemble takes only 'members'")
    if not isinstance(names, list) or not all(isinstance(name, str) and name for name in names):
        raise JudgeConfigError(f"judge {judge.name!r}: members must be a list of judge names")
    if not 1 <= len(names) <= MAX_MEMBERS or len(set(names)) != len(names):
        raise JudgeConfigError(f"judge {judge.name!r}: members must be 1 to {MAX_MEMBERS} different judges")
    found = {member.name: member for member in Judge.objects.filter(project_id=judge.project_id, name__in=names)}
    for name in names:
        member = found.get(name)
        if member is None:
            raise JudgeConfigError(f"judge {judge.name!r}: member {name!r} is not a judge of this project")
        if name == judge.name or member.is_ensemble:
            raise JudgeConfigError(f"judge {judge.name!r}: member {name!r} is a judges ensemble itself")
    return [found[name] for name in names]


def judge_check(judge: Judge) -> None:
    """Raise JudgeConfigError if the judge cannot score (a judges ensemble: its members must be usable)."""
    if judge.is_ensemble:
        for member in ensemble_members(judge):
            if not member.is_imported:
                judge_config(member)
        return
    judge_config(judge)


def judge_method(judge: Judge) -> str:
    """The method recorded on the judge's judgments, read from the row without loading its configuration:
    giving up on a chunk must not fail in turn when that configuration no longer loads (an endpoint the
    operator withdrew, a model folder outside the roots)."""
    if judge.is_ensemble:
        return Judge.Method.ENSEMBLE
    return (judge.parameters or {}).get("method") or Judge.Method.default_for(judge.backend)


def judge_relevance_rule(judge: Judge) -> RelevanceRule:
    """The judge's one rule for when its P makes a pair relevant (models_llm.relevance_rule), read from the row:
    P > 0 on its own P (DisastIR's "relevant (score > 0)") for a DisastIR prompt-strategy ensemble and for a judges
    ensemble whose members all are; P >= 0.5 (calibrated where it has a calibrator) for every other judge."""
    if judge.is_ensemble:
        names = (judge.parameters or {}).get("members")
        members = list(Judge.objects.filter(project_id=judge.project_id, name__in=names)) if isinstance(names, list) \
            else []
        strategy = bool(members) and all(judge_method(member) == Judge.Method.ENSEMBLE for member in members)
    else:
        strategy = judge_method(judge) == Judge.Method.ENSEMBLE
    return SCORE_ABOVE_ZERO if strategy else POINTWISE


def judge_gives_scores(judge: Judge) -> bool:
    """Whether the judge's P is a score, not a probability (JudgeBackend.scoring): its own backend's, or for a judges
    ensemble, which averages its members' P, any member's."""
    if judge.is_ensemble:
        names = (judge.parameters or {}).get("members")
        return isinstance(names, list) and Judge.objects.filter(
            project_id=judge.project_id, name__in=names, backend__in=Judge.Backend.scoring()).exists()
    return judge.backend in Judge.Backend.scoring()


def judge_config(judge: Judge) -> JudgeConfig:
    """The judge's JudgeConfig; JudgeConfigError names what is wrong."""
    if judge.is_ensemble:
        raise JudgeConfigError(f"judge {judge.name!r} is a judges ensemble: it has no model of its own")
    params = dict(judge.parameters or {})
    unknown = sorted(set(params) - set(PARAMETER_FIELDS))
    if unknown:
        raise JudgeConfigError(f"judge {judge.name!r}: unknown parameters {unknown}")
    model = judge.model
    try:
        if judge.backend in Judge.Backend.local_model() and model:
            model = model_folder(model)
        if params.get("adapter"):
            params["adapter"] = model_folder(params["adapter"], label="adapter")
        stored = params.pop("adapter_storage", "")
        if stored:
            if params.get("adapter"):
                raise JudgeConfigError("a judge takes an adapter folder or a stored adapter, not both")
            if not str(stored).startswith(f"{ADAPTER_PREFIX}{judge.project_id}/"):
                raise JudgeConfigError(f"the stored adapter {stored!r} is not one of this project's")
            try:
                if judge.backend == Judge.Backend.CROSSENCODER:
                    model = adapter_local(stored, marker="config.json")  # a student: the whole model is stored
                else:
                    params["adapter"] = adapter_local(stored)
            except StorageFolderError as exc:
                raise JudgeConfigError(str(exc)) from None
        endpoint_name = params.pop("endpoint", "")
        if judge.backend == Judge.Backend.OPENAI:
            endpoint = llm_endpoint(endpoint_name)
            labels = endpoint.get("label_token_ids") or {"Yes": (), "No": ()}
            params.update(base_url=endpoint["base_url"], api_key_env=endpoint["api_key_env"],
                          allow_local=endpoint["allow_local"], prefill=endpoint.get("prefill", False),
                          yes_token_ids=tuple(labels["Yes"]), no_token_ids=tuple(labels["No"]))
        elif endpoint_name:
            raise JudgeConfigError("an endpoint is for openai judges")
    except JudgeConfigError as exc:
        raise JudgeConfigError(f"judge {judge.name!r}: {exc}") from None
    try:
        return JudgeConfig(backend=judge.backend, model=model, template=judge_template(judge), **params)
    except (TypeError, ValueError) as exc:
        raise JudgeConfigError(f"judge {judge.name!r}: {exc}") from None


_scorers: dict[tuple[int, str], Scorer] = {}
_scorers_lock = threading.Lock()


def judge_device(judge: Judge) -> str:
    """Where a judge's model runs, as its measured throughput is kept: the local device (cpu, cuda, cuda:1...) of a
    model the workers load, or the declared endpoint a remote model answers from."""
    parameters = judge.parameters or {}
    if judge.backend == Judge.Backend.OPENAI:
        return f"endpoint:{parameters.get('endpoint', '')}"[:64]
    return str(parameters.get("device") or "cpu")[:64]


def scorer_for(judge: Judge) -> Scorer:
    """The loaded scorer for the judge's current configuration, kept for the life of the worker process
    (loading a model costs far more than scoring a chunk). A changed configuration loads afresh."""
    config = judge_config(judge)
    key = (judge.id, repr(config))
    with _scorers_lock:
        scorer = _scorers.get(key)
        if scorer is None:
            for old in [k for k in _scorers if k[0] == judge.id]:
                _scorers.pop(old).close()
            scorer = _scorers[key] = load_scorer(config)
    return scorer


def prompt_token_counter(config: JudgeConfig) -> CountTokens | None:
    """How a dry run counts a judge's prompt tokens: with an hf judge's own tokenizer; None for the others (their
    tokens are guessed from characters). JudgeConfigError when the tokenizer does not load."""
    if config.backend != Judge.Backend.HF:
        return None
    try:
        return chat_token_counter(config.model)
    except ScorerConfigError as exc:
        raise JudgeConfigError(str(exc)) from None


def pair_inputs(pairs: Iterable[Pair], definitions: dict[int, str | None]) -> list[PairInput]:
    """PairInputs for pairs with `query` and `passage` loaded; `definitions` maps query id to the text of
    its current definition."""
    return [
        PairInput(
            pair_id=pair.id,
            query=pair.query.text,
            passage=pair.passage.text,
            title=pair.passage.title,
            definition=definitions.get(pair.query_id),
        )
        for pair in pairs
    ]


def judgment_fields(verdict: Verdict) -> dict:
    """The Judgment columns a verdict sets (the status decides whether there is a P at all)."""
    ok = verdict.status == Judgment.Status.OK
    return {
        "status": verdict.status,
        "p_relevant": verdict.p if ok else None,
        "guess": verdict.guess if ok else None,
        "confidence": verdict.confidence if ok else None,
        "raw_output": verdict.raw_output,
        "error": verdict.error,
        "method": verdict.method,
        "yes_no_mass": verdict.yes_no_mass,
        "prompt_tokens": verdict.prompt_tokens,
        "completion_tokens": verdict.completion_tokens,
        "score": verdict.score if ok else None,
        "spread": verdict.spread if ok else None,
    }

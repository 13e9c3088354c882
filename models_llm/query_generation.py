"""LLM query generation as DisastIR does it (3.4, Eq. 1): from a domain passage P_seed, an LLM first brainstorms
information needs (LLM_info(P_IN, P_seed)); one of them, drawn at random, goes with the passage into the query
prompt (LLM_query(need, P_QG, P_seed)), which writes the user query q and a directly relevant passage psg (the
generated positive). One prompt pair per search intent (models_llm.query_generation_prompts, editable); an answer
that is not the JSON asked for is a GenerationParseError, never a query made up from it."""
from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from models_llm.query_generation_prompts import PAPER_PRESETS
from models_llm.types import Generation

INTENTS = tuple(PAPER_PRESETS)
PLACEHOLDERS = ("task", "query_length", "clarity", "difficulty", "num_words")
# The passage goes in the user message after this, the stage's prompt in the system message: the released code's
# layout (the paper prints the prompts only).
PASSAGE_PREFIX = "Paragraph: "
MAX_NEW_TOKENS = 1024

Messages = list[dict[str, str]]
# (messages, max_new_tokens=...) -> Generation: a judge's scorer's generate_chat.
Generate = Callable[..., Generation]


class GenerationParseError(ValueError):
    """The model's answer at `stage` ("need" or "query") is not what the prompt asks for; `raw` is the answer,
    `tokens` (prompt, completion) what the calls up to it used (None: not counted)."""

    def __init__(self, stage: str, message: str, raw: str) -> None:
        super().__init__(message)
        self.stage, self.raw = stage, raw
        self.tokens: tuple[int | None, int | None] = (None, None)


@dataclass(frozen=True)
class IntentPrompts:
    """One search intent's two prompts, the keys of the query stage's JSON answer (positive_key None: the seed
    passage itself is the positive, as for QAdoc's documents) and the values each placeholder is drawn from."""

    intent: str
    need_prompt: str
    query_prompt: str
    query_key: str
    positive_key: str | None
    values: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def preset(intent: str, *, need_prompt: str | None = None, query_prompt: str | None = None) -> IntentPrompts:
    """The paper's prompts of `intent` (one of INTENTS), either of them replaced by an edited text."""
    if intent not in PAPER_PRESETS:
        raise ValueError(f"unknown search intent {intent!r}: one of {', '.join(INTENTS)}")
    need, query, query_key, positive_key, values = PAPER_PRESETS[intent]
    return IntentPrompts(intent=intent, need_prompt=need_prompt or need, query_prompt=query_prompt or query,
                         query_key=query_key, positive_key=positive_key, values=values)


@dataclass(frozen=True)
class GeneratedQuery:
    """What one passage gave for one intent: the query, its positive (None: the seed passage), the information
    need it was written for, the placeholder values drawn, both answers and the tokens both calls used."""

    intent: str
    query: str
    positive: str | None
    need: str
    choices: dict[str, str]
    raw: tuple[str, str]
    prompt_tokens: int | None
    completion_tokens: int | None


def _fill(template: str, values: Mapping[str, str]) -> str:
    # Only the paper's placeholders are filled: an edited prompt may hold other braces (a JSON example).
    for name in PLACEHOLDERS:
        if name in values:
            template = template.replace("{" + name + "}", values[name])
    return template


def need_messages(prompts: IntentPrompts, passage: str) -> Messages:
    return [{"role": "system", "content": prompts.need_prompt},
            {"role": "user", "content": PASSAGE_PREFIX + passage}]


def query_messages(prompts: IntentPrompts, passage: str, need: str, choices: Mapping[str, str]) -> Messages:
    return [{"role": "system", "content": _fill(prompts.query_prompt, {**choices, "task": need})},
            {"role": "user", "content": PASSAGE_PREFIX + passage}]


def draw_choices(prompts: IntentPrompts, rng: random.Random) -> dict[str, str]:
    """One value per placeholder the query prompt uses, each drawn uniformly from the caption's values."""
    return {name: rng.choice(options) for name, options in prompts.values.items()
            if "{" + name + "}" in prompts.query_prompt}


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def _json_in(text: str, opening: str, closing: str) -> object:
    """The first JSON value in `text` that starts with `opening` (a fenced block first, as the released code reads
    answers), or ValueError."""
    fenced = _FENCE.search(text)
    body = fenced.group(1) if fenced else text
    start = body.find(opening)
    if start < 0:
        raise ValueError(f"no JSON {'list' if opening == '[' else 'object'} in the answer")
    try:
        return json.JSONDecoder().raw_decode(body[start:])[0]
    except json.JSONDecodeError:
        end = body.rfind(closing)
        try:
            return json.loads(body[start:end + 1])
        except json.JSONDecodeError as exc:
            raise ValueError(f"the JSON in the answer does not parse: {exc.msg} (at character {exc.pos})") from None


def parse_needs(text: str) -> list[str]:
    """The information needs of a stage-1 answer: a JSON list of non-empty strings."""
    try:
        found = _json_in(text, "[", "]")
    except ValueError as exc:
        raise GenerationParseError("need", str(exc), text) from None
    if not isinstance(found, list):
        raise GenerationParseError("need", "the answer is not a JSON list", text)
    needs = [item.strip() for item in found if isinstance(item, str) and item.strip()]
    if not needs:
        raise GenerationParseError("need", "the JSON list holds no information need (no non-empty string)", text)
    return needs


def parse_query(prompts: IntentPrompts, text: str) -> tuple[str, str | None]:
    """The query and the positive of a stage-2 answer: a JSON object with the intent's keys, each a non-empty
    string."""
    try:
        found = _json_in(text, "{", "}")
    except ValueError as exc:
        raise GenerationParseError("query", str(exc), text) from None
    if not isinstance(found, dict):
        raise GenerationParseError("query", "the answer is not a JSON object", text)
    keys = [prompts.query_key] + ([prompts.positive_key] if prompts.positive_key else [])
    values = []
    for key in keys:
        value = found.get(key)
        if not isinstance(value, str) or not value.strip():
            raise GenerationParseError("query", f"the JSON object has no non-empty text under {key!r}", text)
        values.append(value.strip())
    return values[0], values[1] if len(values) > 1 else None


def _tokens(*generations: Generation) -> tuple[int | None, int | None]:
    prompt = [g.prompt_tokens for g in generations]
    completion = [g.completion_tokens for g in generations]
    return (None if None in prompt else sum(prompt), None if None in completion else sum(completion))


def generate_query(prompts: IntentPrompts, passage: str, generate: Generate, rng: random.Random, *,
                   max_new_tokens: int = MAX_NEW_TOKENS) -> GeneratedQuery:
    """Eq. 1 for one passage and intent: two calls of `generate`. The need is drawn with `rng` among those the
    model listed (the paper's "randomly selected information need"), then the placeholders. GenerationParseError
    when an answer is not what its prompt asks for (with what the calls before it cost in `tokens`)."""
    first = generate(need_messages(prompts, passage), max_new_tokens=max_new_tokens)
    try:
        needs = parse_needs(first.text)
    except GenerationParseError as exc:
        exc.tokens = _tokens(first)
        raise
    need = rng.choice(needs)
    choices = draw_choices(prompts, rng)
    second = generate(query_messages(prompts, passage, need, choices), max_new_tokens=max_new_tokens)
    try:
        query, positive = parse_query(prompts, second.text)
    except GenerationParseError as exc:
        exc.tokens = _tokens(first, second)
        raise
    return GeneratedQuery(intent=prompts.intent, query=query, positive=positive, need=need, choices=choices,
                          raw=(first.text, second.text), prompt_tokens=_tokens(first, second)[0],
                          completion_tokens=_tokens(first, second)[1])


# Typical answer lengths for a dry run's estimate: a list of needs (QAdoc's prompt asks for 20, the others for
# about 3) and a query with its positive passage (up to "at least 200 words").
TYPICAL_NEED_TOKENS = {"QAdoc": 600}
TYPICAL_NEED_DEFAULT = 100
TYPICAL_QUERY_TOKENS = 250


def estimate_messages(prompts: IntentPrompts, passage: str) -> tuple[Messages, Messages, int]:
    """The two calls' messages for a dry run (the query stage with a typical need and the first placeholder values)
    and the completion tokens both answers typically take."""
    choices = {name: options[0] for name, options in prompts.values.items()}
    need = "Given a question about the passage's topic, retrieve a passage that answers it."
    completion = TYPICAL_NEED_TOKENS.get(prompts.intent, TYPICAL_NEED_DEFAULT) + TYPICAL_QUERY_TOKENS
    return need_messages(prompts, passage), query_messages(prompts, passage, need, choices), completion


def prompts_for(intents: Sequence[str], edits: Mapping[str, Mapping[str, str]] | None = None) -> list[IntentPrompts]:
    """The presets of `intents` with `edits` ({intent: {"need": text, "query": text}}) applied; ValueError naming an
    unknown intent or key."""
    edits = edits or {}
    unknown = [name for name in edits if name not in INTENTS]
    if unknown:
        raise ValueError(f"prompts for unknown search intent {unknown[0]!r}: one of {', '.join(INTENTS)}")
    out = []
    for intent in intents:
        edit = edits.get(intent, {})
        bad = [key for key in edit if key not in ("need", "query")]
        if bad:
            raise ValueError(f"prompts of {intent}: unknown key {bad[0]!r} (need, query)")
        for key, text in edit.items():
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"prompts of {intent}: {key!r} must be a non-empty text")
        if "query" in edit and "{task}" not in edit["query"]:
            raise ValueError(f"prompts of {intent}: the query prompt must hold {{task}}, where the information "
                             "need goes")
        out.append(preset(intent, need_prompt=edit.get("need"), query_prompt=edit.get("query")))
    return out

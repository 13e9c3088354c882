"""Reading the JSON answers of the ensemble prompts: the first JSON object in the model's text (bare, fenced
or among other words), then its keys, checked for type and range. Anything else is an AnswerParseError
whose message names what was wrong."""
from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from models_llm.parsing import AnswerParseError

_DECODER = json.JSONDecoder()


def json_object(text: str) -> dict[str, Any]:
    """The first `{...}` in `text` that parses as a JSON object; a ```json fence or words around it do
    not matter."""
    start = text.find("{")
    if start < 0:
        raise AnswerParseError("no JSON object in the answer")
    first_error = ""
    while start >= 0:
        try:
            value, _ = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError as exc:
            first_error = first_error or f"malformed JSON: {exc.msg} at character {exc.pos}"
        else:
            if isinstance(value, dict):
                return value
        start = text.find("{", start + 1)
    raise AnswerParseError(first_error)


def _key(answer: dict[str, Any], key: str) -> Any:
    if key not in answer:
        raise AnswerParseError(f"the JSON answer has no {key!r} key (keys: {sorted(answer)})")
    return answer[key]


def score_read(answer: dict[str, Any], key: str, allowed: Collection[int]) -> int:
    """`answer[key]` as an integer among `allowed`. 2.0 or "2" is not an integer answer: the prompt asks
    for one, and a model that writes something else did not follow the format."""
    value = _key(answer, key)
    # bool is an int in Python, but true is not a score.
    if not isinstance(value, int) or isinstance(value, bool):
        raise AnswerParseError(f"{key!r} must be an integer, got {json.dumps(value)}")
    if value not in allowed:
        raise AnswerParseError(f"{key!r} is {value}, outside the allowed {sorted(allowed)}")
    return value


def yes_no_read(answer: dict[str, Any], key: str) -> bool:
    """`answer[key]` as a bool: "yes"/"no" in any letter case, or JSON true/false."""
    value = _key(answer, key)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("yes", "no"):
        return value.strip().lower() == "yes"
    raise AnswerParseError(f"{key!r} must be \"yes\" or \"no\", got {json.dumps(value)}")

"""The three prompt strategies of the DisastIR ensemble (App. C), each a short sequence of steps. A step's
`build` makes the chat messages from the intent, the pair and the parsed answers of the earlier steps; its
`parse` turns the model's raw text into a typed value or raises AnswerParseError. The last step's value is
the strategy's final score.

- direct: one call, a score on the intent's scale (0-3; STS 0-5).
- cot: does the passage hold what the query asks for (yes/no) -> two criteria 0-3, Exactness and Coverage
  after a yes, Topicality and Contextual fit after a no (DisastIR's rate_cot) -> a final score that must be
  2 or 3 after a yes, 0 or 1 after a no.
- multi: Exactness, Coverage, Topicality and Contextual fit 0-3 -> one call weighing them into a final 0-3.

Every prompt puts the passage last, after the parts that all passages of a query share. The query fills the
intent's query slot and the passage its passage slot in every step, as DisastIR's App. C prompts do."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from models_llm.ensembles import paper
from models_llm.ensembles.answers import json_object, score_read, yes_no_read
from models_llm.ensembles.intents import EnsembleConfigError, Intent
from models_llm.types import PairInput

Messages = list[dict[str, str]]
CRITERION_SCALE = range(4)
ALLOWED_AFTER_YES = (2, 3)
ALLOWED_AFTER_NO = (0, 1)


CRITERIA_AFTER_YES = ("exactness", "coverage")
CRITERIA_AFTER_NO = ("topicality", "contextual_fit")


@dataclass(frozen=True)
class Criteria:
    """The cot strategy's phase 2 answer: exactness and coverage after a yes, topicality and contextual fit
    after a no; the two criteria not asked are None."""

    exactness: int | None = None
    coverage: int | None = None
    topicality: int | None = None
    contextual_fit: int | None = None


@dataclass(frozen=True)
class Attributes:
    """The multi strategy's first answer."""

    exactness: int
    coverage: int
    topicality: int
    contextual_fit: int


@dataclass(frozen=True)
class Step:
    """One model call of a strategy: `build(intent, pair, earlier)` -> messages, `parse(intent, raw,
    earlier)` -> value, where `earlier` holds the parsed values of the strategy's steps before this one."""

    name: str
    build: Callable[[Intent, PairInput, tuple[Any, ...]], Messages]
    parse: Callable[[Intent, str, tuple[Any, ...]], Any]


# -- prompt text ---------------------------------------------------------------------------------------

def _criterion_meanings(intent: Intent) -> dict[str, str]:
    if intent.criteria is None:
        raise ValueError(f"intent {intent.name} has no criteria: it uses {list(intent.strategies)} only")
    return {field.name: getattr(intent.criteria, field.name) for field in fields(intent.criteria)}


def _scale(intent: Intent, scores: tuple[int, ...] | range) -> str:
    return "".join(f"{score}: {intent.grades[score]}\n" for score in scores)


def _messages(intent: Intent, pair: PairInput, instructions: str, shape: str) -> Messages:
    system = (
        f"You are an expert relevance assessor. Your task is to {intent.task}. "
        "You answer with one JSON object and nothing else."
    )
    user = ""
    if pair.definition and pair.definition.strip():
        user += f"What counts as relevant for this query:\n{pair.definition.strip()}\n\n"
    user += f"{intent.query_label}: {pair.query.strip()}\n\n"
    user += f"{instructions}\nAnswer with a JSON object of this shape:\n{shape}\n\n"
    passage = f"{pair.title.strip()}\n{pair.passage.strip()}" if pair.title.strip() else pair.passage.strip()
    user += f"{intent.passage_label}:\n{passage}"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _score_shape(scores: tuple[int, ...] | range) -> str:
    return '{"score": ' + " or ".join(str(score) for score in scores) + "}"


def _criteria_lines(intent: Intent, names: tuple[str, ...]) -> str:
    meanings = _criterion_meanings(intent)
    return "".join(f"- {name}: {meanings[name]}\n" for name in names)


def _criteria_shape(names: tuple[str, ...]) -> str:
    return "{" + ", ".join(f'"{name}": 0-3' for name in names) + "}"


def _criteria_values(value: Criteria | Attributes) -> str:
    given = [(field.name, getattr(value, field.name)) for field in fields(value)]
    return ", ".join(f"{name} {score}" for name, score in given if score is not None)


_ATTRIBUTES = tuple(field.name for field in fields(Attributes))


# -- direct --------------------------------------------------------------------------------------------

def _direct_build(intent: Intent, pair: PairInput, earlier: tuple[Any, ...]) -> Messages:
    scores = range(intent.max_score + 1)
    instructions = (
        f"Rate the {intent.passage_label.lower()} below on this scale:\n{_scale(intent, scores)}"
    )
    return _messages(intent, pair, instructions, _score_shape(scores))


def _final_score_parse(intent: Intent, raw: str, earlier: tuple[Any, ...]) -> int:
    return score_read(json_object(raw), "score", range(intent.max_score + 1))


# -- cot -----------------------------------------------------------------------------------------------

def _holds_build(intent: Intent, pair: PairInput, earlier: tuple[Any, ...]) -> Messages:
    instructions = (
        f"Step 1 of 3. {intent.holds_question} First give your reasoning in one or two sentences, "
        "then answer yes or no.\n"
    )
    return _messages(intent, pair, instructions, '{"reason": "...", "holds": "yes" or "no"}')


def _holds_parse(intent: Intent, raw: str, earlier: tuple[Any, ...]) -> bool:
    return yes_no_read(json_object(raw), "holds")


def criteria_after(holds: bool) -> tuple[str, ...]:
    """The two criteria cot rates after its phase 1 answer (DisastIR's phase2_criteria and
    phase2_criteria_alt)."""
    return CRITERIA_AFTER_YES if holds else CRITERIA_AFTER_NO


def _criteria_build(intent: Intent, pair: PairInput, earlier: tuple[Any, ...]) -> Messages:
    (holds,) = earlier
    names = criteria_after(holds)
    instructions = (
        f"Step 2 of 3. Asked \"{intent.holds_question}\" you answered {'yes' if holds else 'no'}. "
        f"Now rate two criteria, each from 0 (not at all) to 3 (fully):\n{_criteria_lines(intent, names)}"
    )
    return _messages(intent, pair, instructions, _criteria_shape(names))


def _criteria_parse(intent: Intent, raw: str, earlier: tuple[Any, ...]) -> Criteria:
    answer = json_object(raw)
    return Criteria(**{name: score_read(answer, name, CRITERION_SCALE) for name in criteria_after(earlier[0])})


def allowed_final_scores(holds: bool) -> tuple[int, ...]:
    """The final scores cot accepts after its phase 1 answer: a passage that holds the target is a 2 or a
    3, one that does not is a 0 or a 1."""
    return ALLOWED_AFTER_YES if holds else ALLOWED_AFTER_NO


def _decided_build(intent: Intent, pair: PairInput, earlier: tuple[Any, ...]) -> Messages:
    holds, criteria = earlier
    allowed = allowed_final_scores(holds)
    instructions = (
        f"Step 3 of 3. Your earlier answers: \"{intent.holds_question}\" {'yes' if holds else 'no'}; "
        f"{_criteria_values(criteria)}. Since you answered {'yes' if holds else 'no'}, the final score is "
        f"{allowed[0]} or {allowed[1]}:\n{_scale(intent, allowed)}"
    )
    return _messages(intent, pair, instructions, _score_shape(allowed))


def _decided_parse(intent: Intent, raw: str, earlier: tuple[Any, ...]) -> int:
    holds = earlier[0]
    return score_read(json_object(raw), "score", allowed_final_scores(holds))


# -- multi ---------------------------------------------------------------------------------------------

def _attributes_build(intent: Intent, pair: PairInput, earlier: tuple[Any, ...]) -> Messages:
    instructions = (
        f"Rate the {intent.passage_label.lower()} below on four attributes, each from 0 (not at all) to "
        f"3 (fully):\n{_criteria_lines(intent, _ATTRIBUTES)}"
    )
    return _messages(intent, pair, instructions, _criteria_shape(_ATTRIBUTES))


def _attributes_parse(intent: Intent, raw: str, earlier: tuple[Any, ...]) -> Attributes:
    answer = json_object(raw)
    return Attributes(*(score_read(answer, name, CRITERION_SCALE) for name in _ATTRIBUTES))


def _aggregate_build(intent: Intent, pair: PairInput, earlier: tuple[Any, ...]) -> Messages:
    (attributes,) = earlier
    scores = range(intent.max_score + 1)
    instructions = (
        f"The {intent.passage_label.lower()} below was rated 0-3 on four attributes: "
        f"{_criteria_values(attributes)}.\n{_criteria_lines(intent, _ATTRIBUTES)}"
        f"Weigh these ratings into one final score on this scale:\n{_scale(intent, scores)}"
    )
    return _messages(intent, pair, instructions, _score_shape(scores))


STEPS: dict[str, tuple[Step, ...]] = {
    "direct": (Step("score", _direct_build, _final_score_parse),),
    "cot": (
        Step("holds", _holds_build, _holds_parse),
        Step("criteria", _criteria_build, _criteria_parse),
        Step("score", _decided_build, _decided_parse),
    ),
    "multi": (
        Step("attributes", _attributes_build, _attributes_parse),
        Step("score", _aggregate_build, _final_score_parse),
    ),
}


# -- presets -------------------------------------------------------------------------------------------
# `paper`: App. C's templates as printed (models_llm.ensembles.paper), the default of new judges. `legacy`: the
# steps above, this product's first prompts (a judge stored without a `prompts` key keeps them, so its stored
# judgments stay reproducible). docs/ensembles.md compares both with the paper and DisastIR's released code.
PAPER = "paper"
# `released-code`: the paper's words with the one step of DisastIR's released code that differs in structure: cot
# rates Contextual Fit then Topicality after a No (phase2_criteria_alt); its steps are criterion_1, criterion_2.
RELEASED = "released-code"
LEGACY = "legacy"
PROMPT_PRESETS = (PAPER, RELEASED, LEGACY)
DEFAULT_PROMPTS = PAPER


def _paper_steps() -> dict[str, tuple[Step, ...]]:
    return {
        "direct": (Step("score", paper.direct_build, paper.direct_parse),),
        "cot": (
            Step("has_answer", paper.has_answer_build, paper.has_answer_parse),
            *(Step(name, paper.cot_criterion_step(name), paper.criterion_parse) for name in paper.CRITERIA_COT),
            Step("score", paper.cot_final_build, paper.cot_final_parse),
        ),
        "multi": (
            *(Step(name, paper.multi_criterion_step(name), paper.criterion_parse) for name in paper.CRITERIA_MULTI),
            Step("score", paper.aggregate_build, paper.aggregate_parse),
        ),
    }


PAPER_STEPS: dict[str, tuple[Step, ...]] = _paper_steps()
RELEASED_STEPS: dict[str, tuple[Step, ...]] = {
    **PAPER_STEPS,
    "cot": (
        PAPER_STEPS["cot"][0],
        Step("criterion_1", paper.released_criterion_step(0), paper.criterion_parse),
        Step("criterion_2", paper.released_criterion_step(1), paper.criterion_parse),
        PAPER_STEPS["cot"][-1],
    ),
}
_PRESET_STEPS = {PAPER: PAPER_STEPS, RELEASED: RELEASED_STEPS, LEGACY: STEPS}


def prompts_check(prompts: str) -> str:
    """`prompts` if it names a preset, else EnsembleConfigError naming the presets."""
    if prompts not in PROMPT_PRESETS:
        raise EnsembleConfigError(f"unknown prompt preset {prompts!r}; the presets are {list(PROMPT_PRESETS)}")
    return prompts


def steps_for(strategy: str, prompts: str = DEFAULT_PROMPTS) -> tuple[Step, ...]:
    """The steps of `strategy` under the prompt preset `prompts` (paper, released-code or legacy)."""
    return _PRESET_STEPS[prompts_check(prompts)][strategy]

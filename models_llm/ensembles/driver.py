"""Running the ensemble on one pair: each strategy's steps through a `generate` callable, then the mean final
score, P = mean / max score, the binary label and the spread between the strategies."""
from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from models_llm.ensembles.intents import DEFAULT_INTENT, EnsembleConfigError, Intent, intent_get, strategies_check
from models_llm.ensembles.strategies import DEFAULT_PROMPTS, Messages, steps_for
from models_llm.parsing import AnswerParseError
from models_llm.relevance_rule import SCORE_ABOVE_ZERO
from models_llm.types import Generation, PairInput, Status

# A chat completion: the messages in, the text out (bare, or with its token counts), e.g. a scorer's generate_chat.
Generate = Callable[[Messages], str | Generation]


@dataclass(frozen=True)
class StepOutput:
    """One model call: its raw text, and its parsed value (None when the text did not parse)."""

    step: str
    raw: str
    value: Any = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


@dataclass(frozen=True)
class StrategyOutcome:
    """One strategy on one pair: the steps it ran, and its final score or the parse error that stopped it
    (the steps after a failed one are not run: their prompts need its answer)."""

    strategy: str
    steps: tuple[StepOutput, ...]
    max_score: int
    score: int | None = None
    parse_error: str = ""

    @property
    def p(self) -> float | None:
        return None if self.score is None else self.score / self.max_score

    @property
    def raw_texts(self) -> tuple[str, ...]:
        return tuple(step.raw for step in self.steps)


@dataclass(frozen=True)
class EnsembleResult:
    """The ensemble's judgment of one pair. With status ok: `mean` final score over the strategies that
    parsed, `p` = mean / max_score, `relevant` = P > 0 (relevance_rule.SCORE_ABOVE_ZERO: the mean score above 0), `spread` = max - min of those strategies' P.
    With status parse_error no strategy parsed: these are None, and the outcomes keep every raw text."""

    pair_id: int
    intent: str
    outcomes: tuple[StrategyOutcome, ...]
    max_score: int
    status: Status
    mean: float | None = None
    p: float | None = None
    relevant: bool | None = None
    spread: float | None = None
    parse_error: str = ""

    def outcome(self, strategy: str) -> StrategyOutcome:
        return next(outcome for outcome in self.outcomes if outcome.strategy == strategy)


def _generation(answer: str | Generation) -> Generation:
    return answer if isinstance(answer, Generation) else Generation(text=answer)


def strategy_run(
    intent: Intent, strategy: str, pair: PairInput, generate: Generate, *, prompts: str = DEFAULT_PROMPTS,
) -> StrategyOutcome:
    """Run `strategy`'s steps under the prompt preset `prompts` (paper, legacy) on `pair` in order, each prompt
    built from the answers parsed before it."""
    outputs: list[StepOutput] = []
    values: list[Any] = []
    for step in steps_for(strategy, prompts):
        earlier = tuple(values)
        answer = _generation(generate(step.build(intent, pair, earlier)))
        counts = {"prompt_tokens": answer.prompt_tokens, "completion_tokens": answer.completion_tokens}
        try:
            value = step.parse(intent, answer.text, earlier)
        except AnswerParseError as exc:
            outputs.append(StepOutput(step=step.name, raw=answer.text, **counts))
            return StrategyOutcome(
                strategy=strategy, steps=tuple(outputs), max_score=intent.max_score,
                parse_error=f"{strategy}, step {step.name}: {exc}",
            )
        outputs.append(StepOutput(step=step.name, raw=answer.text, value=value, **counts))
        values.append(value)
    return StrategyOutcome(strategy=strategy, steps=tuple(outputs), max_score=intent.max_score, score=values[-1])


def ensemble_score(
    pair: PairInput,
    *,
    generate: Generate,
    intent: str = DEFAULT_INTENT,
    strategies: Sequence[str] | None = None,
    prompts: str = DEFAULT_PROMPTS,
) -> EnsembleResult:
    """Judge `pair` under `intent` with each of `strategies` (default: all the intent uses; STS uses direct
    only) through `generate`, and combine the final scores of the strategies that parsed. A strategy whose
    answer does not parse counts for nothing; if none parses, the result is a parse error, never a label.
    `prompts` is the prompt preset: paper (App. C as printed, the default),
    released-code or legacy (models_llm.ensembles.strategies)."""
    chosen = intent_get(intent)
    names = strategies_check(chosen, tuple(strategies) if strategies is not None else chosen.strategies)
    outcomes = tuple(strategy_run(chosen, name, pair, generate, prompts=prompts) for name in names)
    return ensemble_combine(pair.pair_id, chosen.name, outcomes)


def strategies_for(intent: str, strategies: Sequence[str] | None = None) -> tuple[str, ...]:
    """The strategies a judge configured with `strategies` (empty: all) runs on a query of `intent`: those of
    them the intent uses, in the given order (a judge of direct, cot and multi runs direct only on STS
    queries). Unknown or repeated names, or none left for the intent, raise EnsembleConfigError."""
    chosen = intent_get(intent)
    if not strategies:
        return chosen.strategies
    strategies_check(intent_get(DEFAULT_INTENT), tuple(strategies))  # known names, none twice
    used = tuple(name for name in strategies if name in chosen.strategies)
    if not used:
        raise EnsembleConfigError(
            f"intent {chosen.name} uses only {list(chosen.strategies)}, none of {list(strategies)}"
        )
    return used


def ensemble_combine(pair_id: int, intent: str, outcomes: Sequence[StrategyOutcome]) -> EnsembleResult:
    """Combine the strategies' outcomes on one pair (freshly run or read back from storage)."""
    chosen = intent_get(intent)
    outcomes = tuple(outcomes)
    common = dict(pair_id=pair_id, intent=chosen.name, outcomes=outcomes, max_score=chosen.max_score)
    parsed = [outcome for outcome in outcomes if outcome.score is not None]
    if not parsed:
        error = "no strategy gave a usable answer: " + "; ".join(outcome.parse_error for outcome in outcomes)
        return EnsembleResult(status="parse_error", parse_error=error, **common)
    mean = statistics.fmean(outcome.score for outcome in parsed)
    ps = [outcome.p for outcome in parsed]
    return EnsembleResult(
        status="ok", mean=mean, p=mean / chosen.max_score, relevant=SCORE_ABOVE_ZERO.relevant(mean / chosen.max_score), spread=max(ps) - min(ps), **common
    )

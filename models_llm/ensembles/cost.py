"""Dry-run token estimates for an ensemble judge: every model call its strategies would make on a pair, the
prompt tokens counted exactly by the judge's own tokenizer (or approximately without one), the completion
tokens from typical answer lengths, capped by the judge's generation budget. Nothing is sent to a model.

Later steps quote the answers of earlier ones ("you answered yes; exactness 2, coverage 2"): their prompts are
built with typical answers, which changes a few tokens, not the estimate."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from models_llm.cost import CountTokens, TokenEstimate, approximate_token_count, scaled
from models_llm.ensembles.driver import strategies_for
from models_llm.ensembles.intents import EnsembleConfigError, intent_get
from models_llm.ensembles.strategies import LEGACY, PAPER, RELEASED, Attributes, Criteria, steps_for
from models_llm.types import PairInput

# The earlier answers a later step's prompt quotes, for building it without having run the step before.
TYPICAL_EARLIER: dict[str, dict[str, tuple]] = {
    LEGACY: {
        "cot": (True, Criteria(exactness=2, coverage=2)),
        "multi": (Attributes(exactness=2, coverage=2, topicality=2, contextual_fit=2),),
    },
    PAPER: {"cot": (True, 2, 2), "multi": (2, 2, 2, 2)},
    RELEASED: {"cot": (True, 2, 2), "multi": (2, 2, 2, 2)},
}
# Completion tokens of a typical JSON answer per (strategy, step): a score object is about 8 tokens, the cot
# reason one or two sentences. Replaced by a judge's observed means when it has answered before.
TYPICAL_COMPLETION: dict[tuple[str, str], float] = {
    ("direct", "score"): 8, ("cot", "holds"): 48, ("cot", "criteria"): 16, ("cot", "score"): 8,
    ("multi", "attributes"): 28, ("multi", "score"): 8,
    # the paper preset: every answer is a one-key JSON object ({"has_answer": "Yes"}, {"criterion_score": 2}...)
    ("cot", "has_answer"): 8, ("cot", "exactness"): 8, ("cot", "coverage"): 8,
    ("cot", "criterion_1"): 8, ("cot", "criterion_2"): 8,
    ("multi", "exactness"): 8, ("multi", "coverage"): 8, ("multi", "topicality"): 8, ("multi", "contextual_fit"): 8,
}


def ensemble_token_estimate(
    sample: Iterable[tuple[PairInput, str]],
    *,
    total_pairs: int,
    strategies: Sequence[str] = (),
    count_tokens: CountTokens | None = None,
    max_new_tokens: int,
    completion: Mapping[tuple[str, str], float] | None = None,
    reach: Mapping[tuple[str, str], float] | None = None,
    prompts: str = PAPER,
) -> TokenEstimate:
    """Estimate the calls and tokens of scoring `total_pairs` pairs from `sample`, (pair, intent) tuples drawn
    from them: each strategy step's prompt is built and counted with `count_tokens` (None: from characters),
    and each answer takes the typical length for its step (`completion` overrides per step), at most
    `max_new_tokens`. `reach` is the share of pairs whose strategy gets to each step (a strategy stops at an
    answer that does not parse; default 1: every step runs). Pairs whose intent or strategies are not usable
    count nothing (the job fails them). `prompts` is the judge's prompt preset (paper: cot 1 + 2 + 1 calls,
    multi 4 + 1; legacy: cot 3, multi 2)."""
    count = count_tokens or approximate_token_count
    lengths = {**TYPICAL_COMPLETION, **(completion or {})}
    shares = reach or {}
    sampled = 0
    calls = prompt_tokens = completion_tokens = 0.0
    for pair, intent_name in sample:
        sampled += 1
        try:
            intent = intent_get(intent_name)
            chosen = strategies_for(intent.name, strategies)
        except EnsembleConfigError:
            continue
        for strategy in chosen:
            earlier = TYPICAL_EARLIER[prompts].get(strategy, ())
            for index, step in enumerate(steps_for(strategy, prompts)):
                share = shares.get((strategy, step.name), 1.0)
                if share <= 0:
                    continue
                calls += share
                prompt_tokens += share * count(step.build(intent, pair, earlier[:index]))
                completion_tokens += share * min(float(max_new_tokens), lengths[(strategy, step.name)])
    return scaled(total_pairs=total_pairs, sampled=sampled, calls=calls, prompt_tokens=prompt_tokens,
                  completion_tokens=completion_tokens, exact=count_tokens is not None)

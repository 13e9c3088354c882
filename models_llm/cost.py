"""Dry-run token estimates: what scoring pairs would send to a judge's model, before anything is sent. Prompt
tokens are counted by the judge's own tokenizer where it is at hand, else guessed from characters; answers take
typical lengths, capped by the judge's generation budget."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from models_llm.prompts import build_prompt
from models_llm.types import JudgeConfig, PairInput

Messages = list[dict[str, str]]
CountTokens = Callable[[Messages], int]
# One token is about four characters of English text, for judges whose tokenizer is not at hand.
CHARS_PER_TOKEN = 4.0
# A DIRAS Ask answer: "[Guess]: Yes\n[Confidence]: 0.8" is about 16 tokens; with a [Reason] about 60.
TYPICAL_ASK_ANSWER = 16
TYPICAL_COT_ANSWER = 60


def usd_cost(prompt_tokens: float, completion_tokens: float, price_in: float | None,
             price_out: float | None) -> float | None:
    """USD for these tokens at `price_in` / `price_out` per million prompt / completion tokens; None without
    both prices."""
    if price_in is None or price_out is None:
        return None
    return (prompt_tokens * price_in + completion_tokens * price_out) / 1_000_000


def approximate_token_count(messages: Messages) -> int:
    """Prompt tokens guessed from the characters (plus a few per message for the chat format)."""
    return sum(round(len(message["content"]) / CHARS_PER_TOKEN) + 4 for message in messages)


@dataclass(frozen=True)
class TokenEstimate:
    """Estimated calls and tokens over `pairs` pairs (measured on `sampled` of them and scaled up)."""

    pairs: int
    sampled: int
    calls: int
    prompt_tokens: int
    completion_tokens: int
    exact_prompt_tokens: bool  # counted by the judge's tokenizer, not guessed from characters

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def per_pair(self) -> tuple[float, float]:
        """Prompt and completion tokens per pair."""
        if not self.pairs:
            return 0.0, 0.0
        return self.prompt_tokens / self.pairs, self.completion_tokens / self.pairs

    def cost(self, price_in: float | None, price_out: float | None, pairs: int | None = None) -> float | None:
        """USD at `price_in` / `price_out` per million tokens, for this estimate's pairs or for `pairs` pairs
        at the same tokens per pair. None without prices."""
        prompt, completion = self.per_pair()
        count = self.pairs if pairs is None else pairs
        return usd_cost(count * prompt, count * completion, price_in, price_out)


def scaled(*, total_pairs: int, sampled: int, calls: float, prompt_tokens: float, completion_tokens: float,
           exact: bool) -> TokenEstimate:
    scale = total_pairs / sampled if sampled else 0.0
    return TokenEstimate(
        pairs=total_pairs, sampled=sampled, calls=round(calls * scale), prompt_tokens=round(prompt_tokens * scale),
        completion_tokens=round(completion_tokens * scale), exact_prompt_tokens=exact,
    )


def diras_token_estimate(
    sample: Sequence[PairInput], *, config: JudgeConfig, total_pairs: int, count_tokens: CountTokens | None = None
) -> TokenEstimate:
    """Estimate a DIRAS Tok or Ask judge over `total_pairs` pairs from `sample`: one call per pair; Tok reads
    one next token, Ask generates a typical answer (longer with cot), at most config.max_new_tokens. Tok with
    cot makes two calls per pair: the reason is generated first, then P is read after prompt + reason."""
    count = count_tokens or approximate_token_count
    prompt_tokens = 0
    for pair in sample:
        prompt = build_prompt(pair, config)
        # Tok's answer prefix ("[Guess]:") follows the chat template: about one token per four characters.
        prompt_tokens += count(prompt.messages()) + round(len(prompt.answer_prefix) / CHARS_PER_TOKEN)
    calls = len(sample)
    if config.method == "tok" and config.cot:
        reason = min(config.max_new_tokens, TYPICAL_COT_ANSWER)
        calls, prompt_tokens, answer = 2 * calls, 2 * prompt_tokens + reason * calls, reason + 1
    elif config.method == "tok":
        answer = 1
    else:
        answer = min(config.max_new_tokens, TYPICAL_COT_ANSWER if config.cot else TYPICAL_ASK_ANSWER)
    return scaled(total_pairs=total_pairs, sampled=len(sample), calls=calls, prompt_tokens=prompt_tokens,
                  completion_tokens=answer * len(sample), exact=count_tokens is not None)

"""Dry-run token estimates by hand: a counter that gives every prompt the same length makes each judge kind's
calls and tokens a sum one can write down."""
from models_llm.cost import CHARS_PER_TOKEN, TYPICAL_ASK_ANSWER, TYPICAL_COT_ANSWER, diras_token_estimate
from models_llm.prompts import build_prompt
from models_llm.types import JudgeConfig, PairInput

PAIRS = [PairInput(pair_id=i, query=f"Question {i}?", definition="Helpful when it names a target.", title="",
                   passage=f"Paragraph {i}.") for i in range(4)]


def estimate(config: JudgeConfig, total: int = 40):
    return diras_token_estimate(PAIRS, config=config, total_pairs=total, count_tokens=lambda messages: 100)


def test_each_method_counts_calls_and_tokens_as_it_runs():
    tok = JudgeConfig(backend="hf", model="m", method="tok")
    prefix = round(len(build_prompt(PAIRS[0], tok).answer_prefix) / CHARS_PER_TOKEN)
    # Tok: one call per pair, the prompt and the prefix in, one token read; scaled from 4 pairs to 40.
    tok_estimate = estimate(tok)
    assert (tok_estimate.calls, tok_estimate.prompt_tokens, tok_estimate.completion_tokens) == (
        40, 40 * (100 + prefix), 40)
    ask = estimate(JudgeConfig(backend="hf", model="m", method="ask", max_new_tokens=256))
    assert (ask.calls, ask.completion_tokens) == (40, 40 * TYPICAL_ASK_ANSWER)
    # Tok with a reason (DIRAS): the reason is generated, then P read after prompt + reason: two calls a pair.
    cot = JudgeConfig(backend="hf", model="m", method="tok", cot=True, max_new_tokens=256)
    prefix = round(len(build_prompt(PAIRS[0], cot).answer_prefix) / CHARS_PER_TOKEN)
    cot_estimate = estimate(cot)
    assert cot_estimate.calls == 80
    assert cot_estimate.prompt_tokens == 40 * (2 * (100 + prefix) + TYPICAL_COT_ANSWER)
    assert cot_estimate.completion_tokens == 40 * (TYPICAL_COT_ANSWER + 1)
    # The generation budget caps the reason.
    short = estimate(JudgeConfig(backend="hf", model="m", method="tok", cot=True, max_new_tokens=20))
    assert short.completion_tokens == 40 * 21

"""Tok with CoT as DIRAS ran it: the judge writes its [Reason] first, and P(Yes) / (P(Yes) + P(No)) is read at
"[Guess]:" after that reason. On the real SmolLM2-135M the reason and the P are recomputed independently with
plain transformers (greedy `generate()` without stop strings, then one float64 forward pass over prompt +
reason + "[Guess]:"); over HTTP the two calls a prefill endpoint gets are checked, and an endpoint without
prefill is refused."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from models_llm.backends import ScorerConfigError
from models_llm.backends.hf import HFScorer
from models_llm.backends.openai import OpenAIScorer
from models_llm.bundled import smollm2_folder
from models_llm.prompts import PRESETS, build_prompt
from models_llm.types import JudgeConfig, PairInput
from tests.models_llm.fake_openai import FakeOpenAI, Reply, completion

VAR_DIR = Path(__file__).resolve().parents[2] / "var"
# SmolLM2's single-token spellings of yes and no, read off its vocabulary (as in test_hf_backend).
SMOLLM2_YES = [9230, 9805, 10407, 10539]
SMOLLM2_NO = [787, 2838, 4607, 5230, 10921, 13465]
MARKER = "[Guess]:"

PAIRS = [
    PairInput(1, "Does the company report its greenhouse gas emissions?", "Emissions fell 12% to 3.1 Mt CO2e.",
              "Scope 1, 2 and 3 emissions in tonnes of CO2 equivalent, with the year they refer to."),
    PairInput(2, "Does the company assess physical climate risks such as floods?",
              "The board met four times in 2023 and approved the final dividend."),
]


@pytest.fixture(scope="module")
def folder() -> Path:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield smollm2_folder(VAR_DIR)
    torch.set_num_threads(threads)


def _scorer(folder: Path, **overrides) -> HFScorer:
    values = dict(backend="hf", model=str(folder), method="tok", cot=True, max_new_tokens=40)
    values.update(overrides)
    return HFScorer(JudgeConfig(**values))


def _reference(scorer: HFScorer, pair: PairInput, max_new_tokens: int) -> tuple[str, bool, float]:
    """(reason up to and including "[Guess]:", whether the model wrote the marker itself, P) with plain
    transformers: the chat text rendered from the prompt messages, greedy generate(), one forward pass."""
    model, tokenizer = scorer.model, scorer.tokenizer
    chat = tokenizer.apply_chat_template(build_prompt(pair, scorer.config).messages(), add_generation_prompt=True,
                                         tokenize=False)
    ids = tokenizer(chat, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                             do_sample=False)
    generated = tokenizer.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
    wrote = MARKER in generated
    reason = generated[: generated.index(MARKER) + len(MARKER)] if wrote else generated.rstrip() + "\n" + MARKER
    full = tokenizer(chat + reason, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        probs = torch.softmax(model(input_ids=full).logits[0, -1].double(), dim=-1)
    p_yes, p_no = probs[SMOLLM2_YES].sum().item(), probs[SMOLLM2_NO].sum().item()
    return reason, wrote, p_yes / (p_yes + p_no)


@pytest.mark.parametrize("template", [{}, PRESETS["diras-definition"].template], ids=["default", "diras-fig9"])
def test_the_reason_is_generated_before_p_is_read_at_guess(folder, template):
    scorer = _scorer(folder, template=template)
    try:
        verdicts = scorer.score(PAIRS)
        for pair, verdict in zip(PAIRS, verdicts):
            reason, wrote, p = _reference(scorer, pair, 40)
            assert verdict.status == "ok" and verdict.method == "tok"
            # The raw output holds the generated reason, then the P read after it.
            assert verdict.raw_output.startswith(reason)
            assert verdict.raw_output.index(reason) < verdict.raw_output.index("P(yes)=")
            assert len(reason) > len(MARKER) + 1 and verdict.completion_tokens > 0
            assert ("was appended after its reason" in verdict.raw_output) is not wrote
            assert verdict.p == pytest.approx(p, abs=1e-4)
            assert verdict.guess == (verdict.p >= 0.5)
    finally:
        scorer.close()


def test_a_reason_cut_off_before_guess_gets_guess_appended_and_says_so(folder):
    # Two tokens cannot hold a reason and "[Guess]:".
    scorer = _scorer(folder, max_new_tokens=2)
    try:
        (verdict,) = scorer.score(PAIRS[:1])
        reason, wrote, p = _reference(scorer, PAIRS[0], 2)
    finally:
        scorer.close()
    assert not wrote and reason.endswith("\n" + MARKER)
    assert verdict.raw_output.startswith(reason)
    assert f"the judge wrote no {MARKER} in its 2 answer tokens" in verdict.raw_output
    assert verdict.completion_tokens == 2 and verdict.p == pytest.approx(p, abs=1e-4)


def test_tok_without_cot_still_reads_p_right_after_the_prompt(folder):
    scorer = _scorer(folder, cot=False)
    try:
        (verdict,) = scorer.score(PAIRS[:1])
        (plain,) = scorer.score_tok_plain(PAIRS[:1])
    finally:
        scorer.close()
    assert verdict.raw_output.startswith("P(yes)=") and verdict.completion_tokens is None
    assert verdict.p == pytest.approx(plain.p, abs=1e-4)


def test_the_plain_tok_path_refuses_cot(folder):
    scorer = _scorer(folder)
    try:
        with pytest.raises(ScorerConfigError, match="Tok with CoT runs through score"):
            scorer.score_tok_plain(PAIRS[:1])
    finally:
        scorer.close()


# ----- openai backend -----

def _openai(server: FakeOpenAI, **overrides) -> JudgeConfig:
    values = dict(backend="openai", model="judge", method="tok", cot=True, prefill=True, base_url=server.base_url,
                  allow_local=True, timeout_s=5.0, max_retries=0, max_new_tokens=64)
    values.update(overrides)
    return JudgeConfig(**values)


def _logprobs_reply(body: dict) -> Reply:
    top = [{"token": " Yes", "logprob": -0.2, "bytes": []}, {"token": " No", "logprob": -1.8, "bytes": []}]
    logprobs = {"content": [{"token": " Yes", "logprob": -0.2, "bytes": [], "top_logprobs": top}]}
    return Reply(body=completion(" Yes", prompt_tokens=400, completion_tokens=1, logprobs=logprobs))


@pytest.mark.parametrize("stop_reason", [MARKER, None])
def test_a_prefill_endpoint_generates_the_reason_then_reads_p_after_it(stop_reason):
    reason = "[Reason]: The paragraph gives the year's emissions in Mt CO2e.\n"
    first = completion(reason, prompt_tokens=300, completion_tokens=15)
    first["choices"][0]["stop_reason"] = stop_reason
    with FakeOpenAI(script=[Reply(body=first)], default=_logprobs_reply) as server:
        config = _openai(server)
        scorer = OpenAIScorer(config, backoff_s=0.01)
        try:
            (verdict,) = scorer.score(PAIRS[:1])
        finally:
            scorer.close()
    generate, read = server.bodies
    prompt = build_prompt(PAIRS[0], config)
    assert generate["messages"] == prompt.messages() and generate["stop"] == [MARKER]
    assert "logprobs" not in generate and generate["max_tokens"] == 64
    answer = reason + MARKER if stop_reason else reason.rstrip() + "\n" + MARKER
    assert read["messages"] == [*prompt.messages(), {"role": "assistant", "content": answer}]
    assert read["continue_final_message"] is True and read["max_tokens"] == 1 and read["logprobs"] is True
    # By hand: P = e^-0.2 / (e^-0.2 + e^-1.8).
    assert verdict.p == pytest.approx(math.exp(-0.2) / (math.exp(-0.2) + math.exp(-1.8)), abs=1e-9)
    assert verdict.raw_output.startswith(answer) and verdict.raw_output.index(answer) < verdict.raw_output.index("P(yes)")
    assert ("was appended after the reason" in verdict.raw_output) is (stop_reason is None)
    assert (verdict.prompt_tokens, verdict.completion_tokens) == (700, 16)


def test_tok_with_cot_is_refused_for_an_endpoint_without_prefill():
    with pytest.raises(ValueError, match="tok with cot needs an endpoint declared with prefill"):
        JudgeConfig(backend="openai", model="judge", method="tok", cot=True, base_url="http://127.0.0.1:1/v1")

"""The openai backend over real HTTP: a scripted local server for the wire protocol (retries, timeouts,
errors, concurrency, the API key, logprobs, assistant prefill, fixed label token ids), SmolLM2 behind a
server that answers a prefill request as vLLM does against the hf backend, and `transformers serve` with
SmolLM2 end to end."""
from __future__ import annotations

import math
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from models_llm.backends import ScorerConfigError, TransientScoringError
from models_llm.backends.hf import HFScorer
from models_llm.backends.openai import (
    NO_LOGPROBS_NOTE,
    OpenAIScorer,
    first_token_logprobs,
    label_token_logprobs,
    yes_no_mass,
)
from models_llm.bundled import smollm2_folder
from models_llm.parsing import parse_ask_answer
from models_llm.prompts import build_prompt
from models_llm.types import JudgeConfig, PairInput
from tests.models_llm.fake_openai import FakeOpenAI, Reply, completion, next_token_server

PAIRS = [
    PairInput(pair_id=11, query="What are the company's scope 1 emissions?", definition="Direct GHG emissions.",
              passage="Our scope 1 emissions were 1.2 million tonnes of CO2e in 2022.", title="Climate report"),
    PairInput(pair_id=7, query="Does the company have a net zero target?",
              passage="The cafeteria now serves vegetarian lunches on Fridays."),
    PairInput(pair_id=3, query="How does the company manage water risk?",
              passage="Water withdrawal in stressed basins fell by 12% after new recycling plants opened."),
]


def _utf8(text: str) -> list[int]:
    return list(text.encode())


def _top(token: str, logprob: float) -> dict:
    return {"token": token, "logprob": logprob, "bytes": _utf8(token)}


# A chat completion with logprobs exactly as OpenAI documents it: choices[0].logprobs.content[i] holds the
# chosen token and its top_logprobs, each {"token", "logprob", "bytes"}.
DOCUMENTED_TOK_RESPONSE = {
    "id": "chatcmpl-9xYz",
    "object": "chat.completion",
    "created": 1718000000,
    "model": "gpt-4o-mini-2024-07-18",
    "choices": [{
        "index": 0,
        "message": {"role": "assistant", "content": " Yes", "refusal": None},
        "logprobs": {
            "content": [{
                "token": " Yes", "logprob": -0.4, "bytes": _utf8(" Yes"),
                "top_logprobs": [
                    _top(" Yes", -0.4), _top("No", -1.6), _top("yes", -2.3), _top(" Maybe", -3.0),
                    _top(" no", -4.1), _top("Yesterday", -5.0), _top(" Not", -6.2),
                ],
            }],
            "refusal": None,
        },
        "finish_reason": "length",
    }],
    "usage": {"prompt_tokens": 312, "completion_tokens": 1, "total_tokens": 313},
}
# By hand: P(Yes) = e^-0.4 + e^-2.3, P(No) = e^-1.6 + e^-4.1.
DOCUMENTED_YES = 0.7705789
DOCUMENTED_NO = 0.2184692
DOCUMENTED_P = 0.7791117


def _config(server: FakeOpenAI | str, **overrides) -> JudgeConfig:
    base_url = server if isinstance(server, str) else server.base_url
    values = dict(backend="openai", model="test-model", method="ask", base_url=base_url, allow_local=True, timeout_s=5.0,
                  max_retries=3, concurrency=2, max_new_tokens=32)
    values.update(overrides)
    return JudgeConfig(**values)


def _score(config: JudgeConfig, pairs: list[PairInput] = PAIRS[:1]) -> tuple[list, OpenAIScorer]:
    scorer = OpenAIScorer(config, backoff_s=0.01)
    try:
        return scorer.score(pairs), scorer
    finally:
        scorer.close()


# ----- top_logprobs parsing and Tok -----

def test_documented_top_logprobs_sum_every_spelling_of_yes_and_no():
    top = first_token_logprobs(DOCUMENTED_TOK_RESPONSE)
    assert [entry["token"] for entry in top][:3] == [" Yes", "No", "yes"]
    yes, no = yes_no_mass(top)
    assert yes == pytest.approx(DOCUMENTED_YES, abs=1e-6)  # " Yes" + "yes", not "Yesterday"
    assert no == pytest.approx(DOCUMENTED_NO, abs=1e-6)  # "No" + " no", not " Not"


def test_a_response_without_logprobs_has_no_top_logprobs():
    assert first_token_logprobs(completion("Yes")) is None
    assert first_token_logprobs(completion("Yes", logprobs={"content": None})) is None


def test_tok_over_http_reads_the_first_tokens_top_logprobs():
    with FakeOpenAI(default=lambda body: Reply(body=DOCUMENTED_TOK_RESPONSE)) as server:
        config = _config(server, method="tok")
        (verdict,), _ = _score(config)
    assert verdict.status == "ok" and verdict.method == "tok"
    assert verdict.p == pytest.approx(DOCUMENTED_P, abs=1e-6)
    assert verdict.yes_no_mass == pytest.approx(DOCUMENTED_YES + DOCUMENTED_NO, abs=1e-6)
    assert verdict.guess is True and verdict.confidence == pytest.approx(DOCUMENTED_P, abs=1e-6)
    assert (verdict.prompt_tokens, verdict.completion_tokens) == (312, 1)
    assert "' Yes': -0.4000" in verdict.raw_output
    (body,) = server.bodies
    assert body["logprobs"] is True and body["top_logprobs"] == 20 and body["max_tokens"] == 1
    assert body["model"] == "test-model"
    prompt = build_prompt(PAIRS[0], config)
    assert body["messages"][0] == {"role": "system", "content": prompt.system}
    user = body["messages"][1]["content"]
    assert user.startswith(prompt.user) and "[Guess]:" in user[len(prompt.user):]
    assert len(body["messages"]) == 2  # no assistant turn and no prefill fields unless the endpoint declares it
    assert "add_generation_prompt" not in body and "continue_final_message" not in body
    assert "logprob_token_ids" not in body and "return_tokens_as_token_ids" not in body


def test_tok_without_yes_or_no_among_the_top_tokens_is_a_parse_error():
    logprobs = {"content": [{"token": "The", "logprob": -0.1, "bytes": _utf8("The"),
                             "top_logprobs": [_top("The", -0.1), _top("I", -2.5)]}]}
    with FakeOpenAI(default=lambda body: Reply(body=completion("The", logprobs=logprobs))) as server:
        (verdict,), _ = _score(_config(server, method="tok"))
    assert verdict.status == "parse_error" and verdict.method == "tok"
    assert verdict.p is None and verdict.guess is None
    assert verdict.yes_no_mass == 0.0


def test_top_logprobs_not_in_the_documented_shape_give_a_failed_verdict():
    logprobs = {"content": [{"token": "Yes", "logprob": -0.1, "top_logprobs": [{"token": "Yes", "p": 0.9}]}]}
    with FakeOpenAI(default=lambda body: Reply(body=completion("Yes", logprobs=logprobs))) as server:
        (verdict,), _ = _score(_config(server, method="tok"))
    assert verdict.status == "failed" and verdict.method == "tok" and verdict.p is None
    assert "top_logprobs entry" in verdict.error


def test_tok_falls_back_to_ask_when_the_server_returns_no_logprobs():
    def reply(body: dict) -> Reply:
        if body.get("logprobs"):
            return Reply(body=completion("Yes", prompt_tokens=40, completion_tokens=1))
        return Reply(body=completion("[Guess]: No\n[Confidence]: 0.7", prompt_tokens=50, completion_tokens=9))

    with FakeOpenAI(default=reply) as server:
        verdicts, _ = _score(_config(server, method="tok", concurrency=1), PAIRS[:2])
    first, second = verdicts
    assert first.method == "ask" and first.status == "ok"
    assert first.p == pytest.approx(0.3) and first.guess is False and first.confidence == pytest.approx(0.7)
    assert "no logprobs" in first.error and first.error == NO_LOGPROBS_NOTE
    assert (first.prompt_tokens, first.completion_tokens) == (90, 10)  # the Tok try and the Ask
    # Once the server is known to give no logprobs, later pairs are asked directly.
    assert second.method == "ask" and (second.prompt_tokens, second.completion_tokens) == (50, 9)
    assert [bool(body.get("logprobs")) for body in server.bodies] == [True, False, False]
    assert "logprobs" not in server.bodies[1] and server.bodies[1]["max_tokens"] == 32


# ----- assistant prefill (an endpoint declared prefill: vLLM's continue_final_message) -----

def test_a_prefill_endpoint_gets_the_answer_prefix_as_an_open_assistant_turn():
    # A student fine-tuned to answer "[Guess]: Yes..." continuing "[Guess]:": its first token is the word.
    top = [_top(" Yes", -0.3), _top(" No", -1.5), _top(" yes", -4.0), _top(" Maybe", -4.5), _top("\n", -6.0)]
    logprobs = {"content": [{"token": " Yes", "logprob": -0.3, "bytes": _utf8(" Yes"), "top_logprobs": top}]}
    reply = Reply(body=completion(" Yes", prompt_tokens=300, completion_tokens=1, logprobs=logprobs))
    with FakeOpenAI(default=lambda body: reply) as server:
        config = _config(server, method="tok", prefill=True)
        (verdict,), _ = _score(config)
    yes, no = math.exp(-0.3) + math.exp(-4.0), math.exp(-1.5)
    assert verdict.status == "ok" and verdict.method == "tok" and not verdict.low_mass
    assert verdict.p == pytest.approx(yes / (yes + no), abs=1e-9)
    assert verdict.yes_no_mass == pytest.approx(yes + no, abs=1e-9)
    (body,) = server.bodies
    prompt = build_prompt(PAIRS[0], config)
    # The user turn is the prompt's own, without the non-prefill instruction to answer with one word.
    assert body["messages"] == [*prompt.messages(), {"role": "assistant", "content": "[Guess]:"}]
    assert body["add_generation_prompt"] is False and body["continue_final_message"] is True
    assert (body["max_tokens"], body["logprobs"], body["top_logprobs"], body["temperature"]) == (1, True, 20, 0)


def test_a_prefill_endpoint_judged_by_ask_gets_the_ask_request_unchanged():
    with FakeOpenAI() as server:
        config = _config(server, prefill=True)
        (verdict,), _ = _score(config)
    assert verdict.status == "ok" and verdict.p == pytest.approx(0.9)
    (body,) = server.bodies
    assert body["messages"] == build_prompt(PAIRS[0], config).messages()
    assert "add_generation_prompt" not in body and "continue_final_message" not in body


def test_a_server_rejecting_prefill_is_a_configuration_error_naming_the_flag():
    error = {"error": {"message": "Unrecognized request argument supplied: add_generation_prompt",
                       "type": "invalid_request_error"}}
    with FakeOpenAI(default=lambda body: Reply(status=400, body=error)) as server:
        scorer = OpenAIScorer(_config(server, method="tok", prefill=True), backoff_s=0.01)
        with pytest.raises(ScorerConfigError) as caught:
            scorer.score(PAIRS[:1])
        scorer.close()
    message = str(caught.value)
    assert "HTTP 400: Unrecognized request argument supplied: add_generation_prompt" in message
    assert "prefill: true" in message and "LLM_ENDPOINTS" in message
    assert len(server.bodies) == 1 and scorer.retry_count == 0  # no retry, and no Ask in its place


def test_prefill_is_an_openai_endpoint_capability():
    with pytest.raises(ValueError, match="prefill"):
        JudgeConfig(backend="hf", model="some/folder", prefill=True)


# ----- fixed label token ids (an endpoint declared with label_token_ids: vLLM's logprob_token_ids) -----

# A next-token distribution whose 25 most likely tokens are neither Yes nor No: the model's spellings of Yes
# (" Yes" 9642, "Yes" 7566) and No (" No" 2822, "No" 912) are all outside the top 20.
OTHER_TOKENS = {100 + i: (f" word{i}", -0.5 - 0.1 * i) for i in range(25)}
LABEL_TOKENS = {9642: (" Yes", -4.2), 7566: ("Yes", -5.0), 2822: (" No", -3.9), 912: ("No", -6.1)}
VOCABULARY = {**OTHER_TOKENS, **LABEL_TOKENS}
# By hand: P(Yes) = e^-4.2 + e^-5.0, P(No) = e^-3.9 + e^-6.1.
LABEL_YES = 0.0217335
LABEL_NO = 0.0224848
LABEL_P = 0.4915052


def test_declared_label_tokens_give_p_from_exactly_their_logprobs():
    with FakeOpenAI(default=next_token_server(VOCABULARY)) as server:
        config = _config(server, method="tok", yes_token_ids=[9642, 7566], no_token_ids=[2822, 912])
        (verdict,), _ = _score(config)
    yes, no = math.exp(-4.2) + math.exp(-5.0), math.exp(-3.9) + math.exp(-6.1)
    assert (yes, no) == (pytest.approx(LABEL_YES, abs=1e-7), pytest.approx(LABEL_NO, abs=1e-7))
    assert verdict.status == "ok" and verdict.method == "tok"
    assert verdict.p == pytest.approx(LABEL_P, abs=1e-7) and verdict.guess is False
    assert verdict.yes_no_mass == pytest.approx(yes + no, abs=1e-9) and verdict.low_mass
    assert (verdict.prompt_tokens, verdict.completion_tokens) == (300, 1)
    assert "9642: -4.2000" in verdict.raw_output and "912: -6.1000" in verdict.raw_output
    (body,) = server.bodies
    assert body["logprob_token_ids"] == [9642, 7566, 2822, 912] and body["return_tokens_as_token_ids"] is True
    assert body["logprobs"] is True and body["max_tokens"] == 1 and "top_logprobs" not in body


def test_without_label_tokens_the_same_server_is_asked_for_the_top_20_which_miss_yes_and_no():
    with FakeOpenAI(default=next_token_server(VOCABULARY)) as server:
        (verdict,), _ = _score(_config(server, method="tok"))
    assert verdict.status == "parse_error" and verdict.p is None and verdict.yes_no_mass == 0.0
    (body,) = server.bodies
    assert body["top_logprobs"] == 20
    assert "logprob_token_ids" not in body and "return_tokens_as_token_ids" not in body


def test_label_tokens_count_once_when_one_is_also_the_sampled_token():
    # " Yes" is the most likely token: vLLM lists it as the sampled token and once among the named ids.
    vocabulary = {**VOCABULARY, 9642: (" Yes", -0.2)}
    with FakeOpenAI(default=next_token_server(vocabulary)) as server:
        config = _config(server, method="tok", yes_token_ids=[9642, 7566], no_token_ids=[2822, 912])
        (verdict,), _ = _score(config)
    yes, no = math.exp(-0.2) + math.exp(-5.0), math.exp(-3.9) + math.exp(-6.1)
    assert verdict.status == "ok" and verdict.p == pytest.approx(yes / (yes + no), abs=1e-9)
    assert verdict.guess is True and not verdict.low_mass


def test_label_token_logprobs_are_read_by_id_and_a_missing_id_is_named():
    top = [_top("token_id:104", -0.9), _top("token_id:2822", -3.9), _top(" Yes", -4.2), _top("token_id:9642x", -1.0)]
    assert label_token_logprobs(top, [2822]) == {2822: -3.9}
    # " Yes" is a spelling, not an id: a server that writes tokens as text does not say which id it is.
    with pytest.raises(ValueError, match=r"lack the declared label token ids \[9642\]"):
        label_token_logprobs(top, [9642, 2822])


def test_a_server_that_ignores_logprob_token_ids_gives_a_failed_verdict_naming_the_missing_ids():
    with FakeOpenAI(default=next_token_server(VOCABULARY, honour_token_ids=False)) as server:
        config = _config(server, method="tok", yes_token_ids=[9642, 7566], no_token_ids=[2822, 912])
        verdicts, _ = _score(config, PAIRS[:2])
    for verdict in verdicts:
        assert verdict.status == "failed" and verdict.method == "tok" and verdict.p is None and verdict.guess is None
        assert "label token ids [9642, 7566, 2822, 912]" in verdict.error and "logprob_token_ids" in verdict.error
    assert len(server.bodies) == 2  # one Tok request per pair, and no Ask in its place


def test_declared_label_tokens_and_an_answer_without_logprobs_is_a_failed_verdict_not_an_ask():
    with FakeOpenAI(default=lambda body: Reply(body=completion("Yes"))) as server:
        config = _config(server, method="tok", yes_token_ids=[9642], no_token_ids=[2822], concurrency=1)
        verdicts, _ = _score(config, PAIRS[:2])
    for verdict in verdicts:
        assert verdict.status == "failed" and verdict.method == "tok" and verdict.p is None
        assert "no logprobs at the first generated token" in verdict.error and "label_token_ids" in verdict.error
    assert [bool(body.get("logprob_token_ids")) for body in server.bodies] == [True, True]


def test_a_server_rejecting_logprob_token_ids_is_a_configuration_error_naming_label_token_ids():
    with FakeOpenAI(default=next_token_server(VOCABULARY)) as server:
        # 50000 is outside the stub's vocabulary: the declared ids belong to another model's tokenizer.
        scorer = OpenAIScorer(_config(server, method="tok", yes_token_ids=[50000], no_token_ids=[2822]),
                              backoff_s=0.01)
        with pytest.raises(ScorerConfigError) as caught:
            scorer.score(PAIRS[:1])
        scorer.close()
    message = str(caught.value)
    assert "HTTP 400: token ids [50000] are out of vocabulary" in message
    assert "label_token_ids" in message and "LLM_ENDPOINTS" in message
    assert len(server.bodies) == 1 and scorer.retry_count == 0


def test_label_token_ids_are_checked_in_the_judge_config():
    with pytest.raises(ValueError, match="both the Yes and the No"):
        JudgeConfig(backend="openai", model="m", base_url="http://x/v1", yes_token_ids=[9642])
    with pytest.raises(ValueError, match="both Yes and No"):
        JudgeConfig(backend="openai", model="m", base_url="http://x/v1", yes_token_ids=[1, 2], no_token_ids=[2])
    with pytest.raises(ValueError, match="openai endpoint"):
        JudgeConfig(backend="hf", model="some/folder", yes_token_ids=[1], no_token_ids=[2])
    with pytest.raises(ValueError, match="token ids"):
        JudgeConfig(backend="openai", model="m", base_url="http://x/v1", yes_token_ids=[True], no_token_ids=[2])


def _vllm_prefill_reply(model: torch.nn.Module, tokenizer, rendered: list[list[int]]):
    """A chat completion of one token with top_logprobs computed as vLLM computes it: the chat template applied
    with the request's add_generation_prompt and continue_final_message (vLLM's apply_hf_chat_template), the
    text tokenized without added special tokens, the next token's log-softmax. Records the prompt ids."""

    def reply(body: dict) -> Reply:
        text = tokenizer.apply_chat_template(
            body["messages"], tokenize=False, add_generation_prompt=body.get("add_generation_prompt", True),
            continue_final_message=body.get("continue_final_message", False))
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        rendered.append(ids)
        with torch.inference_mode():
            logits = model(input_ids=torch.tensor([ids]), logits_to_keep=1).logits[0, -1].double()
        values, indices = torch.log_softmax(logits, dim=-1).topk(body["top_logprobs"])
        top = [_top(tokenizer.decode([i]), v) for v, i in zip(values.tolist(), indices.tolist())]
        logprobs = {"content": [{**top[0], "top_logprobs": top}]}
        return Reply(body=completion(top[0]["token"], prompt_tokens=len(ids), completion_tokens=1, logprobs=logprobs))

    return reply


def test_smollm2_through_a_prefill_endpoint_gives_the_hf_backends_tok_p():
    folder = smollm2_folder(Path(__file__).resolve().parents[2] / "var")
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, local_files_only=True).eval()
    hf = HFScorer(JudgeConfig(backend="hf", model=str(folder), method="tok"), model=model, tokenizer=tokenizer)
    rendered: list[list[int]] = []
    try:
        local = hf.score(PAIRS)
        with FakeOpenAI(default=_vllm_prefill_reply(model, tokenizer, rendered)) as server:
            config = _config(server, model=str(folder), method="tok", prefill=True, concurrency=1)
            served, _ = _score(config, PAIRS)
        # The prompt the server renders from the prefill request is, token for token, the hf backend's.
        assert rendered == [hf.encode(pair).ids for pair in PAIRS]
    finally:
        hf.close()
    for here, there in zip(local, served):
        assert there.status == "ok" and there.method == "tok" and not there.low_mass
        # hf sums every Yes/No spelling of the vocabulary, the endpoint only those among the top 20 tokens: the
        # rest (" NO", "NO"...) hold under 1e-3 of the mass after "[Guess]:" (about 5e-4 on these pairs).
        assert there.p == pytest.approx(here.p, abs=1e-3)
        assert there.yes_no_mass == pytest.approx(here.yes_no_mass, abs=1e-3)


# ----- Ask -----

def test_ask_verdicts_come_back_in_input_order_with_usage_and_parse_errors():
    answers = {  # the first pair answers last
        PAIRS[0].passage: ("[Guess]: Yes\n[Confidence]: 85%", 0.4),
        PAIRS[1].passage: ("I would say it is relevant.", 0.2),
        PAIRS[2].passage: ("[Guess]: No\n[Confidence]: 0.9", 0.0),
    }

    def reply(body: dict) -> Reply:
        text, delay = next(v for passage, v in answers.items() if passage in body["messages"][1]["content"])
        return Reply(body=completion(text, prompt_tokens=len(body["messages"][1]["content"]), completion_tokens=5),
                     delay=delay)

    with FakeOpenAI(default=reply) as server:
        config = _config(server, concurrency=3, max_new_tokens=48)
        verdicts, _ = _score(config, PAIRS)
    assert [v.pair_id for v in verdicts] == [11, 7, 3]
    yes, unparsed, no = verdicts
    assert (yes.status, yes.method, yes.guess, yes.confidence) == ("ok", "ask", True, pytest.approx(0.85))
    assert yes.p == pytest.approx(0.85)
    assert (no.status, no.guess) == ("ok", False) and no.p == pytest.approx(0.1)
    assert unparsed.status == "parse_error" and unparsed.p is None and unparsed.guess is None
    assert unparsed.raw_output == "I would say it is relevant." and "[Guess]" in unparsed.error
    for pair, verdict in zip(PAIRS, verdicts):
        assert verdict.prompt_tokens == len(build_prompt(pair, config).user) and verdict.completion_tokens == 5
    for body in server.bodies:
        assert body["temperature"] == 0 and body["max_tokens"] == 48 and "logprobs" not in body
    sent = {body["messages"][1]["content"]: body["messages"] for body in server.bodies}
    for pair in PAIRS:
        prompt = build_prompt(pair, config)
        assert sent[prompt.user] == prompt.messages()


# ----- retries, timeouts, errors -----

def test_429_with_retry_after_is_retried_after_the_asked_wait():
    script = [Reply(status=429, body={"error": {"message": "Rate limit reached"}}, headers={"Retry-After": "1"})]
    with FakeOpenAI(script=script) as server:
        started = time.monotonic()
        (verdict,), scorer = _score(_config(server))
        elapsed = time.monotonic() - started
    assert verdict.status == "ok" and verdict.p == pytest.approx(0.9)
    assert scorer.retry_count == 1 and len(server.bodies) == 2
    assert elapsed >= 1.0  # the backoff alone is ~0.01 s


def test_500_twice_then_success():
    script = [Reply(status=500, body={"error": {"message": "boom"}}), Reply(status=503, body="busy")]
    with FakeOpenAI(script=script) as server:
        (verdict,), scorer = _score(_config(server))
    assert verdict.status == "ok" and scorer.retry_count == 2 and len(server.bodies) == 3


def test_persistent_500_raises_transient_error_after_max_retries():
    with FakeOpenAI(default=lambda body: Reply(status=500, body={"error": {"message": "engine down"}})) as server:
        scorer = OpenAIScorer(_config(server, max_retries=2), backoff_s=0.01)
        with pytest.raises(TransientScoringError) as caught:
            scorer.score(PAIRS[:1])
        scorer.close()
    message = str(caught.value)
    assert "HTTP 500" in message and "engine down" in message and f"{server.base_url}/chat/completions" in message
    assert len(server.bodies) == 3 and scorer.retry_count == 2


def test_a_slow_answer_times_out_and_is_retried():
    late = Reply(body=completion("[Guess]: Yes\n[Confidence]: 0.6"), delay=1.5)
    with FakeOpenAI(script=[late]) as server:  # then the default, at once: Yes, 0.9
        (verdict,), scorer = _score(_config(server, timeout_s=0.4))
    assert verdict.status == "ok" and verdict.p == pytest.approx(0.9)
    assert scorer.retry_count == 1 and len(server.bodies) == 2


def test_answers_that_stay_slow_end_in_a_transient_error():
    with FakeOpenAI(default=lambda body: Reply(body=completion("late"), delay=1.5)) as server:
        scorer = OpenAIScorer(_config(server, timeout_s=0.3, max_retries=1), backoff_s=0.01)
        with pytest.raises(TransientScoringError, match="timeout_s=0.3"):
            scorer.score(PAIRS[:1])
        scorer.close()
    assert len(server.bodies) == 2


def test_connection_refused_is_transient():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    scorer = OpenAIScorer(_config(f"http://127.0.0.1:{port}/v1", max_retries=2), backoff_s=0.01)
    with pytest.raises(TransientScoringError, match="connection error") as caught:
        scorer.score(PAIRS[:1])
    scorer.close()
    assert f"127.0.0.1:{port}/v1/chat/completions" in str(caught.value) and scorer.retry_count == 2


def test_400_is_a_configuration_error_with_the_servers_message_and_no_retry():
    body = {"error": {"message": "The model `gpt-9` does not exist", "type": "invalid_request_error"}}
    with FakeOpenAI(default=lambda b: Reply(status=400, body=body)) as server:
        scorer = OpenAIScorer(_config(server), backoff_s=0.01)
        with pytest.raises(ScorerConfigError, match="The model `gpt-9` does not exist"):
            scorer.score(PAIRS[:1])
        scorer.close()
    assert len(server.bodies) == 1 and scorer.retry_count == 0


def test_a_2xx_that_is_not_a_chat_completion_is_a_failed_verdict():
    with FakeOpenAI(default=lambda body: Reply(body="<html>proxy login</html>")) as server:
        (verdict,), _ = _score(_config(server))
    assert verdict.status == "failed" and verdict.p is None and "not a chat completion" in verdict.error


def test_at_most_concurrency_requests_are_in_flight():
    pairs = [PairInput(pair_id=i, query="q", passage=f"passage {i}") for i in range(9)]
    with FakeOpenAI(default=lambda body: Reply(body=completion("[Guess]: Yes\n[Confidence]: 0.5"),
                                               delay=0.2)) as server:
        verdicts, _ = _score(_config(server, concurrency=3), pairs)
    assert [v.pair_id for v in verdicts] == list(range(9))
    assert server.max_in_flight == 3 and len(server.bodies) == 9


# ----- the API key -----

def test_the_api_key_is_sent_from_the_named_variable_and_kept_out_of_verdicts(monkeypatch):
    secret = "sk-test-5f2a9c0e"
    monkeypatch.setenv("JUDGE_TEST_API_KEY", secret)
    echo = f"Your key {secret} works. [Guess]: Yes\n[Confidence]: 0.8"
    with FakeOpenAI(default=lambda body: Reply(body=completion(echo))) as server:
        config = _config(server, api_key_env="JUDGE_TEST_API_KEY")
        (verdict,), scorer = _score(config)
    assert server.headers[0]["authorization"] == f"Bearer {secret}"
    assert verdict.status == "ok"
    assert secret not in repr(verdict) and secret not in repr(config) and secret not in repr(scorer)


def test_a_rejected_key_echoed_by_the_server_is_not_repeated(monkeypatch):
    secret = "sk-test-0b7d"
    monkeypatch.setenv("JUDGE_TEST_API_KEY", secret)
    body = {"error": {"message": f"Incorrect API key provided: {secret}", "code": "invalid_api_key"}}
    with FakeOpenAI(default=lambda b: Reply(status=401, body=body)) as server:
        scorer = OpenAIScorer(_config(server, api_key_env="JUDGE_TEST_API_KEY"))
        with pytest.raises(ScorerConfigError, match="HTTP 401: Incorrect API key provided") as caught:
            scorer.score(PAIRS[:1])
        scorer.close()
    assert secret not in str(caught.value)


def test_no_key_configured_sends_no_authorization_header():
    with FakeOpenAI() as server:
        _score(_config(server))
    assert "authorization" not in server.headers[0]


def test_a_missing_key_variable_is_named(monkeypatch):
    monkeypatch.delenv("JUDGE_TEST_MISSING_KEY", raising=False)
    with pytest.raises(ScorerConfigError, match="JUDGE_TEST_MISSING_KEY"):
        OpenAIScorer(_config("http://127.0.0.1:9/v1", api_key_env="JUDGE_TEST_MISSING_KEY"))


# ----- transformers serve -----

@pytest.fixture(scope="module")
def served_smollm2():
    """`transformers serve` pinned to the converted SmolLM2 folder on 127.0.0.1, offline; (base_url, folder)."""
    from transformers.utils.import_utils import is_serve_available

    if not is_serve_available():
        pytest.skip("transformers serve needs its [serving] extra: pip install fastapi==0.165.0 "
                    "uvicorn==0.54.0 openai==3.54.0")
    folder = smollm2_folder(Path(__file__).resolve().parents[2] / "var")  # converted once, git-ignored
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-c", "import sys; from transformers.cli.transformers import main; sys.exit(main())",
               "serve", str(folder), "--host", "127.0.0.1", "--port", str(port), "--device", "cpu",
               "--dtype", "float32"]
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 180
            while True:
                if process.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    pytest.fail(f"transformers serve did not start:\n{log.read().decode()[-3000:]}")
                try:
                    if httpx2.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                        break
                except httpx2.TransportError:
                    pass
                time.sleep(0.5)
            yield f"http://127.0.0.1:{port}/v1", folder
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _served_config(served: tuple[str, Path], **overrides) -> JudgeConfig:
    base_url, folder = served
    values = dict(backend="openai", model=str(folder), method="ask", base_url=base_url, allow_local=True, timeout_s=120.0,
                  max_retries=1, concurrency=1, max_new_tokens=20)
    values.update(overrides)
    return JudgeConfig(**values)


def test_transformers_serve_ask_end_to_end(served_smollm2):
    from transformers import AutoTokenizer

    config = _served_config(served_smollm2)
    scorer = OpenAIScorer(config)
    try:
        verdicts = scorer.score(PAIRS)
    finally:
        scorer.close()
    tokenizer = AutoTokenizer.from_pretrained(served_smollm2[1])
    assert [v.pair_id for v in verdicts] == [p.pair_id for p in PAIRS]
    for pair, verdict in zip(PAIRS, verdicts):
        assert verdict.method == "ask" and verdict.status in ("ok", "parse_error"), verdict
        if verdict.status == "ok":  # the verdict is what the raw text says, nothing invented
            answer = parse_ask_answer(verdict.raw_output)
            assert (verdict.guess, verdict.p) == (answer.guess, pytest.approx(answer.p_relevant))
        else:
            assert verdict.guess is None and verdict.p is None and verdict.error
        chat = tokenizer.apply_chat_template(build_prompt(pair, config).messages(), add_generation_prompt=True,
                                             tokenize=True, return_dict=True)
        assert verdict.prompt_tokens == len(chat["input_ids"])
        assert 1 <= verdict.completion_tokens <= config.max_new_tokens


def test_transformers_serve_gives_no_logprobs_so_tok_falls_back_to_ask(served_smollm2):
    scorer = OpenAIScorer(_served_config(served_smollm2, method="tok", max_new_tokens=16))
    try:
        (verdict,) = scorer.score(PAIRS[:1])
    finally:
        scorer.close()
    assert verdict.method == "ask" and verdict.status in ("ok", "parse_error")
    assert NO_LOGPROBS_NOTE in verdict.error and verdict.prompt_tokens > 0


def test_transformers_serve_has_no_assistant_prefill_so_a_prefill_endpoint_is_refused(served_smollm2):
    scorer = OpenAIScorer(_served_config(served_smollm2, method="tok", prefill=True))
    try:
        with pytest.raises(ScorerConfigError, match=r"HTTP 422: Unexpected fields.*prefill: true") as caught:
            scorer.score(PAIRS[:1])
    finally:
        scorer.close()
    assert "continue_final_message" in str(caught.value) and scorer.retry_count == 0


def test_transformers_serve_rejecting_the_model_name_is_a_configuration_error(served_smollm2):
    scorer = OpenAIScorer(_served_config(served_smollm2, model="some/other-model"))
    try:
        with pytest.raises(ScorerConfigError, match="HTTP 400: Server is pinned to"):
            scorer.score(PAIRS[:1])
    finally:
        scorer.close()
    assert scorer.retry_count == 0

"""The `openai` backend: judge pairs through any OpenAI-compatible `POST {base_url}/chat/completions`
(OpenAI, vLLM, `transformers serve`...).

Tok asks for one token with `logprobs`/`top_logprobs` and reads P(Yes) / (P(Yes) + P(No)) from the first
generated token's alternatives. An endpoint the operator declares with `label_token_ids` (the token ids of
the model's spellings of Yes and of No) is asked for the logprobs of exactly those ids instead (vLLM's
`logprob_token_ids`, with `return_tokens_as_token_ids` so each entry is named "token_id:<id>"), so a Yes or
No outside the top 20 still counts; an answer without them is a failed verdict, never a fallback to the top 20
or to Ask, and never an invented label. OpenAI's chat completions have no assistant prefill, so the user message ends
with an instruction to answer with the word that follows the prompt's `[Guess]:` only. An endpoint the
operator declares `prefill` (config.prefill: vLLM's `continue_final_message`) is sent the prompt unchanged
and an open assistant turn holding `[Guess]:`, as the hf backend runs it: a model fine-tuned to answer
"[Guess]: Yes..." then puts its first token on the word, not on "[". A server that rejects that request is a
ScorerConfigError naming the flag, never a silent change of method. Tok with CoT (prefill endpoints only;
JudgeConfig refuses it elsewhere) runs as DIRAS ran it: one call generates the reason, stopping at
`[Guess]:`, and a prefilled call holding that reason and `[Guess]:` reads P(Yes) after it. A server that returns no logprobs gets
the pair asked again in the Ask format (the verdict's method is then "ask" and its error says why), and every
later Tok pair of this scorer goes straight to Ask.

Ask generates greedily (temperature 0) and parses `[Guess]` and `[Confidence]`; an answer that does not
parse is a `parse_error` verdict with the raw text, never a guess.

Requests run on a thread pool of `config.concurrency` workers, so at most that many are in flight. 429, 5xx,
timeouts and connection errors are retried with exponential backoff and jitter (a Retry-After header is
obeyed) up to `config.max_retries` times, then TransientScoringError; any other 4xx is a configuration
problem (ScorerConfigError with the server's message, no retry).

`generate_chat` sends prompts built elsewhere (the ensemble strategies) and returns the answer text."""
from __future__ import annotations

import math
import os
import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from email.utils import parsedate_to_datetime
from typing import Any

import httpx2

from models_llm.backends import ScorerConfigError, TransientScoringError
from models_llm.backends.outbound import AddressGuard
from models_llm.parsing import AnswerParseError, parse_answer
from models_llm.prompts import TOK_ANSWER_PREFIX, build_prompt
from models_llm.types import Generation, JudgeConfig, PairInput, Verdict

TOP_LOGPROBS = 20  # the most OpenAI allows
TOK_INSTRUCTION = '\n\nReply with only the word that follows "{prefix}": Yes or No.'
# vLLM's chat completion extra parameters: render the last (assistant) message open, with no new turn after it.
PREFILL_FIELDS = {"add_generation_prompt": False, "continue_final_message": True}
PREFILL_REJECTED = ("; the endpoint is declared with prefill: true, which sends add_generation_prompt and "
                    "continue_final_message (vLLM's assistant prefill): if this server has no assistant prefill, "
                    "remove prefill from its LLM_ENDPOINTS entry")
# vLLM's chat completion extra parameters for fixed label tokens: the logprobs of the named ids at each
# generated position (beside the sampled token's), each entry's token written "token_id:<id>".
LABEL_TOKEN_PREFIX = "token_id:"
LABEL_IDS_REJECTED = ("; the endpoint is declared with label_token_ids, which sends logprob_token_ids and "
                      "return_tokens_as_token_ids (vLLM's logprobs of named token ids): if this server has no such "
                      "parameters, remove label_token_ids from its LLM_ENDPOINTS entry")
LABEL_IDS_HINT = "does the server implement logprob_token_ids and return_tokens_as_token_ids?"
NO_LOGPROBS_NOTE = "tok fallback: the server returned no logprobs, so this pair was scored by ask"
BACKOFF_BASE_S = 0.5
BACKOFF_MAX_S = 30.0
RETRY_AFTER_MAX_S = 120.0
# Whitespace, and the space marks of byte-level BPE (Ġ) and SentencePiece (▁) should a server leave them in.
_SPACE_MARKS = " \t\r\n\u0120\u2581"


class _MalformedResponse(ValueError):
    """A 2xx answer that is not a chat completion."""


class _MissingLabelTokens(_MalformedResponse):
    """A chat completion without the logprobs of the label token ids its endpoint declares."""


def yes_no_mass(top_logprobs: list[dict[str, Any]]) -> tuple[float, float]:
    """P(Yes) and P(No) at one position: exp(logprob) summed over every spelling of each word (" Yes",
    "yes", "YES"...) among the position's `top_logprobs` entries ({"token", "logprob", "bytes"})."""
    yes = no = 0.0
    for entry in top_logprobs:
        word = entry["token"].strip(_SPACE_MARKS).lower()
        if word in ("yes", "no"):
            probability = math.exp(float(entry["logprob"]))
            if word == "yes":
                yes += probability
            else:
                no += probability
    return yes, no


def first_token_logprobs(response: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The first generated token's `top_logprobs` as OpenAI documents them
    (`choices[0].logprobs.content[0].top_logprobs`), or None when the response carries no logprobs."""
    logprobs = _choice(response).get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not content:
        return None
    top = content[0].get("top_logprobs") if isinstance(content[0], dict) else None
    if not isinstance(top, list) or not top:
        return None
    for entry in top:
        if not (isinstance(entry, dict) and isinstance(entry.get("token"), str)
                and isinstance(entry.get("logprob"), (int, float))):
            raise _MalformedResponse(f"a top_logprobs entry is not {{token, logprob, bytes}}: {entry!r:.200}")
    return top


def label_token_logprobs(top_logprobs: list[dict[str, Any]], wanted: Sequence[int]) -> dict[int, float]:
    """The logprob of each token id in `wanted` among one position's `top_logprobs` entries, read from the
    entries whose token is "token_id:<id>" (vLLM's return_tokens_as_token_ids; other entries, such as the sampled
    token's, are ignored). _MissingLabelTokens names the ids that are not there."""
    found: dict[int, float] = {}
    for entry in top_logprobs:
        token = entry["token"]
        if token.startswith(LABEL_TOKEN_PREFIX) and token[len(LABEL_TOKEN_PREFIX):].isdigit():
            found[int(token[len(LABEL_TOKEN_PREFIX):])] = float(entry["logprob"])
    missing = [token_id for token_id in wanted if token_id not in found]
    if missing:
        shown = ", ".join(repr(entry["token"]) for entry in top_logprobs[:8])
        raise _MissingLabelTokens(f"the first token's top_logprobs lack the declared label token ids {missing} "
                                  f"(entries: {shown}); {LABEL_IDS_HINT}")
    return {token_id: found[token_id] for token_id in wanted}


def _decode(response: httpx2.Response) -> dict[str, Any]:
    try:
        decoded = response.json()
    except ValueError:
        raise _MalformedResponse(f"not JSON: {response.text[:200]!r}") from None
    if not isinstance(decoded, dict):
        raise _MalformedResponse("not a JSON object")
    return decoded


def _choice(response: dict[str, Any]) -> dict[str, Any]:
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise _MalformedResponse("the response has no choices")
    return choices[0]


def _content(response: dict[str, Any]) -> str:
    message = _choice(response).get("message")
    if not isinstance(message, dict):
        raise _MalformedResponse("the response's first choice has no message")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise _MalformedResponse("the message content is not text")
    return content or ""


def _usage(response: dict[str, Any]) -> tuple[int | None, int | None]:
    usage = response.get("usage")
    if not isinstance(usage, dict):
        return None, None
    return usage.get("prompt_tokens"), usage.get("completion_tokens")


def _add(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else a + b


def _retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date), capped."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    return min(max(seconds, 0.0), RETRY_AFTER_MAX_S)


def _server_message(response: httpx2.Response) -> str:
    """The error message of an OpenAI-style ({"error": {"message"}}) or FastAPI-style ({"detail"}) body."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:500] or response.reason_phrase
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if error:
            return str(error)
        if body.get("detail"):
            return str(body["detail"])
    return str(body)[:500]


def _api_key(variable: str) -> str | None:
    if not variable:
        return None
    key = os.environ.get(variable, "").strip()
    if not key:
        raise ScorerConfigError(f"the API key environment variable {variable} (api_key_env) is not set")
    return key


class OpenAIScorer:
    """Scores pairs against an OpenAI-compatible chat completions endpoint; see the module docstring.

    `retry_count` counts the retries made so far (all threads); `backoff_s` is the first backoff delay."""

    def __init__(self, config: JudgeConfig, *, backoff_s: float = BACKOFF_BASE_S) -> None:
        if config.backend != "openai":
            raise ScorerConfigError(f"OpenAIScorer needs the openai backend, got {config.backend!r}")
        if not config.base_url.startswith(("http://", "https://")):
            raise ScorerConfigError(f"base_url must be an http(s) URL such as http://127.0.0.1:8000/v1, "
                                    f"got {config.base_url!r}")
        if config.concurrency < 1 or config.max_retries < 0 or config.timeout_s <= 0:
            raise ScorerConfigError("concurrency must be >= 1, max_retries >= 0 and timeout_s > 0")
        self.config = config
        self.url = config.base_url.rstrip("/") + "/chat/completions"
        # Checked before the key is read and before every request (re-resolved every RECHECK_S seconds).
        self._guard = AddressGuard(self.url, allow_local=config.allow_local)
        self._guard.check()
        self.retry_count = 0
        self._backoff_s = backoff_s
        self._lock = threading.Lock()
        self._logprobs_missing = False
        key = _api_key(config.api_key_env)
        # Kept only to redact it from error text: a server may echo a rejected key back.
        self._secrets = [key] if key else []
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        limits = httpx2.Limits(max_connections=config.concurrency, max_keepalive_connections=config.concurrency)
        # No redirects: a declared endpoint must not send the key, or the request, anywhere else.
        self._client = httpx2.Client(headers=headers, timeout=config.timeout_s, limits=limits, follow_redirects=False)
        self._pool = ThreadPoolExecutor(max_workers=config.concurrency, thread_name_prefix="openai-judge")

    def __repr__(self) -> str:
        return f"OpenAIScorer(url={self.url!r}, model={self.config.model!r}, method={self.config.method!r})"

    def score(self, pairs: Sequence[PairInput]) -> list[Verdict]:
        """One verdict per pair, in input order. Raises TransientScoringError or ScorerConfigError when a
        request fails for good (the pairs not yet sent are then not sent)."""
        if self.config.method == "ensemble":
            raise ScorerConfigError("an ensemble judge runs its prompt strategies through generate_chat")
        futures = [self._pool.submit(self._score_one, pair) for pair in pairs]
        try:
            return [future.result() for future in futures]
        except BaseException:
            for future in futures:
                future.cancel()
            raise

    def generate_chat(self, messages: Sequence[dict[str, str]], max_new_tokens: int | None = None) -> Generation:
        """The greedy answer (at most `max_new_tokens`, default config.max_new_tokens) to chat `messages`, with
        the server's token counts. Transient failures are retried as for `score`; an answer that is not a chat
        completion is a ScorerConfigError (the URL points at something else)."""
        body = {"model": self.config.model, "messages": list(messages),
                "max_tokens": max_new_tokens or self.config.max_new_tokens, "temperature": self.config.temperature}
        response = self._post(body)
        try:
            text = _content(response)
        except _MalformedResponse as exc:
            problem = f"{self.url} answered 2xx with something that is not a chat completion: {exc}"
            raise ScorerConfigError(problem) from None
        prompt_tokens, completion_tokens = _usage(response)
        return Generation(text=self._redact(text), prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)

    def close(self) -> None:
        """Stop the worker threads and close the HTTP connections."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._client.close()

    # ----- one pair -----

    def _score_one(self, pair: PairInput) -> Verdict:
        try:
            return self._judge(pair)
        except _MalformedResponse as exc:
            method = "tok" if self.config.method == "tok" and not self._logprobs_missing else "ask"
            what = ("a chat completion without its declared label_token_ids' logprobs"
                    if isinstance(exc, _MissingLabelTokens) else "something that is not a chat completion")
            error = f"{self.url} answered 2xx with {what}: {exc}"
            return Verdict(pair_id=pair.pair_id, status="failed", method=method, error=error)

    def _judge(self, pair: PairInput) -> Verdict:
        if self.config.method != "tok":
            return self._ask(pair, note="", spent=(None, None))
        if self._logprobs_missing:
            return self._ask(pair, note=NO_LOGPROBS_NOTE, spent=(None, None))
        prompt = build_prompt(pair, self.config)
        messages = prompt.messages()
        answer_start, before, spent = prompt.answer_prefix, "", (None, None)
        if prompt.reason_first:
            answer_start, before, spent = self._reason(messages)
        if self.config.prefill:
            messages.append({"role": "assistant", "content": answer_start})
        else:
            messages[-1]["content"] += TOK_INSTRUCTION.format(prefix=prompt.answer_prefix)
        body = {
            "model": self.config.model,
            "messages": messages,
            "max_tokens": 1,
            "temperature": self.config.temperature,
            "logprobs": True,
        }
        label_ids = self.config.yes_token_ids + self.config.no_token_ids
        if label_ids:
            body.update(logprob_token_ids=list(label_ids), return_tokens_as_token_ids=True)
        else:
            body["top_logprobs"] = TOP_LOGPROBS
        if self.config.prefill:
            body.update(PREFILL_FIELDS)
        rejected_note = (PREFILL_REJECTED if self.config.prefill else "") + (LABEL_IDS_REJECTED if label_ids else "")
        response = self._post(body, rejected_note=rejected_note)
        top = first_token_logprobs(response)
        if label_ids:
            if top is None:
                raise _MissingLabelTokens(f"no logprobs at the first generated token, so none for the declared label "
                                          f"token ids {list(label_ids)}; {LABEL_IDS_HINT}")
            verdict = self._label_verdict(pair, response, label_token_logprobs(top, label_ids))
        elif top is None:
            self._logprobs_missing = True
            used = _usage(response)
            return self._ask(pair, note=NO_LOGPROBS_NOTE, spent=(_add(spent[0], used[0]), _add(spent[1], used[1])))
        else:
            verdict = self._tok_verdict(pair, response, top)
        if not prompt.reason_first:
            return verdict
        return replace(verdict, raw_output=before + verdict.raw_output,
                       prompt_tokens=_add(spent[0], verdict.prompt_tokens),
                       completion_tokens=_add(spent[1], verdict.completion_tokens))

    def _reason(self, messages: list[dict[str, str]]) -> tuple[str, str, tuple[int | None, int | None]]:
        """Tok with CoT, first call: the judge's reason, generated greedily up to "[Guess]:". Returns the
        assistant's answer up to and including "[Guess]:", the raw-output text that goes before the P (the
        reason, and a note when "[Guess]:" had to be appended), and the call's token counts."""
        marker = TOK_ANSWER_PREFIX
        body = {"model": self.config.model, "messages": messages, "max_tokens": self.config.max_new_tokens,
                "temperature": self.config.temperature, "stop": [marker]}
        response = self._post(body)
        text = self._redact(_content(response))
        # vLLM names the stop string that ended the answer; without it, the marker is appended after the reason.
        if _choice(response).get("stop_reason") == marker:
            answer, note = text + marker, ""
        else:
            answer = text.rstrip() + "\n" + marker
            note = f"[the endpoint reported no stop at {marker}: {marker} was appended after the reason]\n"
        return answer, f"{answer}\n{note}", _usage(response)

    def _tok_verdict(self, pair: PairInput, response: dict[str, Any], top: list[dict[str, Any]]) -> Verdict:
        yes, no = yes_no_mass(top)
        listing = ", ".join(f"{entry['token']!r}: {entry['logprob']:.4f}" for entry in top)
        return self._p_verdict(pair, response, yes, no, f"top_logprobs {{{listing}}}",
                               empty=f"no spelling of Yes or No among the first token's {len(top)} top_logprobs")

    def _label_verdict(self, pair: PairInput, response: dict[str, Any], logprobs: dict[int, float]) -> Verdict:
        """P(Yes) from the declared label token ids' logprobs: exp(logprob) summed over each word's ids."""
        yes = sum(math.exp(logprobs[token_id]) for token_id in self.config.yes_token_ids)
        no = sum(math.exp(logprobs[token_id]) for token_id in self.config.no_token_ids)
        listing = ", ".join(f"{token_id}: {logprob:.4f}" for token_id, logprob in logprobs.items())
        return self._p_verdict(pair, response, yes, no, f"label token logprobs {{{listing}}}",
                               empty="the declared label token ids all have probability 0")

    def _p_verdict(self, pair: PairInput, response: dict[str, Any], yes: float, no: float, listing: str,
                   empty: str) -> Verdict:
        prompt_tokens, completion_tokens = _usage(response)
        raw = self._redact(f"P(yes)={yes:.4f} P(no)={no:.4f}; first token {_content(response)!r}; {listing}")
        common = dict(pair_id=pair.pair_id, method="tok", raw_output=raw, yes_no_mass=yes + no,
                      prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
        if yes + no <= 0.0:
            return Verdict(status="parse_error", error=empty, **common)
        p = yes / (yes + no)
        return Verdict(status="ok", p=p, guess=p >= 0.5, confidence=max(p, 1.0 - p), **common)

    def _ask(self, pair: PairInput, note: str, spent: tuple[int | None, int | None]) -> Verdict:
        config = replace(self.config, method="ask") if self.config.method != "ask" else self.config
        body = {
            "model": config.model,
            "messages": build_prompt(pair, config).messages(),
            "max_tokens": config.max_new_tokens,
            "temperature": self.config.temperature,
        }
        response = self._post(body)
        text = self._redact(_content(response))
        prompt_tokens, completion_tokens = _usage(response)
        common = dict(pair_id=pair.pair_id, method="ask", raw_output=text,
                      prompt_tokens=_add(spent[0], prompt_tokens), completion_tokens=_add(spent[1], completion_tokens))
        try:
            answer = parse_answer(text, build_prompt(pair, config).answer)
        except AnswerParseError as exc:
            return Verdict(status="parse_error", error="; ".join(filter(None, [note, str(exc)])), **common)
        return Verdict(status="ok", p=answer.p_relevant, guess=answer.guess, confidence=answer.confidence,
                       error=note, **common)

    # ----- HTTP -----

    def _post(self, body: dict[str, Any], rejected_note: str = "") -> dict[str, Any]:
        """POST `body`, retrying transient failures; the decoded JSON answer. `rejected_note` ends the error
        of a request the server refuses as malformed (HTTP 400 or 422)."""
        attempts = self.config.max_retries + 1
        for attempt in range(attempts):
            wait: float | None = None
            self._guard.check()
            try:
                response = self._client.post(self.url, json=body)
            except httpx2.TimeoutException:
                problem = f"no answer within timeout_s={self.config.timeout_s:g}"
            except httpx2.TransportError as exc:
                problem = f"connection error ({type(exc).__name__}: {exc})"
            else:
                status = response.status_code
                if 200 <= status < 300:
                    return _decode(response)
                message = self._redact(_server_message(response))
                if status != 429 and status < 500:
                    note = rejected_note if status in (400, 422) else ""
                    raise ScorerConfigError(f"POST {self.url} was rejected with HTTP {status}: {message}{note}")
                problem = f"HTTP {status}: {message}"
                wait = _retry_after(response.headers.get("Retry-After"))
            if attempt + 1 == attempts:
                break
            with self._lock:
                self.retry_count += 1
            time.sleep(wait if wait is not None else self._backoff(attempt))
        raise TransientScoringError(f"POST {self.url} failed after {attempts} attempt(s); last: {problem}")

    def _backoff(self, attempt: int) -> float:
        """Exponential backoff with equal jitter: half the delay fixed, half random."""
        delay = min(BACKOFF_MAX_S, self._backoff_s * 2**attempt)
        return delay / 2 + random.uniform(0.0, delay / 2)

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "[api key]")
        return text

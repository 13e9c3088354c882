"""A scripted OpenAI-compatible server on 127.0.0.1 (http.server in a thread) for backend tests: it answers
from a script of replies (then from a default), sleeps where told, and records every request body, its
headers (names lower-cased) and the most requests it had in flight at once. `next_token_server` answers Tok
requests from a fixed distribution, implementing vLLM's `logprob_token_ids`."""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One HTTP answer: a JSON body (dict) or raw text (str), after `delay` seconds."""

    status: int = 200
    body: dict[str, Any] | str = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


def completion(content: str, prompt_tokens: int = 11, completion_tokens: int = 7,
               logprobs: dict[str, Any] | None = None) -> dict[str, Any]:
    """A chat completion body in OpenAI's format."""
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": content},
        "finish_reason": "stop",
        "logprobs": logprobs,
    }
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "test-model",
        "choices": [choice],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


def next_token_server(vocabulary: dict[int, tuple[str, float]], *, honour_token_ids: bool = True,
                      prompt_tokens: int = 300) -> Callable[[dict[str, Any]], Reply]:
    """A `default` for Tok requests from one fixed next-token distribution, `vocabulary` (token id -> (text,
    logprob)), answered as vLLM's OpenAI-compatible server answers: the sampled token is the most likely one;
    with `logprobs`, its alternatives are the sampled token and then every id in the request's
    `logprob_token_ids` (an id outside the vocabulary is a 400), or else the `top_logprobs` most likely tokens;
    an entry's token is "token_id:<id>" when the request sets `return_tokens_as_token_ids`, its text otherwise.
    honour_token_ids=False answers as a server without the parameter that ignores unknown fields."""
    ranked = sorted(vocabulary, key=lambda token_id: -vocabulary[token_id][1])
    sampled = ranked[0]

    def reply(body: dict[str, Any]) -> Reply:
        def entry(token_id: int) -> dict[str, Any]:
            text, logprob = vocabulary[token_id]
            token = f"token_id:{token_id}" if body.get("return_tokens_as_token_ids") else text
            return {"token": token, "logprob": logprob, "bytes": list(token.encode())}

        named = body.get("logprob_token_ids") if honour_token_ids else None
        if named:
            unknown = [token_id for token_id in named if token_id not in vocabulary]
            if unknown:
                return Reply(status=400, body={"error": {"message": f"token ids {unknown} are out of vocabulary"}})
            alternatives = [sampled, *(token_id for token_id in named if token_id != sampled)]
        else:
            alternatives = ranked[:body.get("top_logprobs") or 0]
        logprobs = {"content": [{**entry(sampled), "top_logprobs": [entry(i) for i in alternatives]}]}
        return Reply(body=completion(vocabulary[sampled][0], prompt_tokens=prompt_tokens, completion_tokens=1,
                                     logprobs=logprobs if body.get("logprobs") else None))

    return reply


class FakeOpenAI:
    """Serves POST /v1/chat/completions. `script` replies are used first, in order; then `default(body)`."""

    def __init__(self, script: list[Reply] | None = None,
                 default: Callable[[dict[str, Any]], Reply] | None = None) -> None:
        self.script = list(script or [])
        self.default = default or (lambda body: Reply(body=completion("[Guess]: Yes\n[Confidence]: 0.9")))
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _begin(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> Reply:
        with self._lock:
            self.headers.append(headers)
            self.bodies.append(body)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            if path != "/v1/chat/completions":
                return Reply(status=404, body={"error": {"message": f"no route {path}"}})
            scripted = self.script.pop(0) if self.script else None
        return scripted or self.default(body)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
                return

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                headers = {name.lower(): value for name, value in self.headers.items()}
                reply = fake._begin(self.path, headers, json.loads(raw or b"{}"))
                try:
                    time.sleep(reply.delay)
                    data = (json.dumps(reply.body) if isinstance(reply.body, dict) else reply.body).encode()
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)
                finally:
                    with fake._lock:
                        fake.in_flight -= 1

        return Handler

"""The users bench/load.py drives with locust: experts (token from /api/token/, then next -> read -> submit)
and viewers (login form, then the validation page every few seconds). Configured by bench/load.py through
LOAD_* environment variables; every request's time and every acknowledged label go to files in LOAD_OUT."""
from __future__ import annotations

import itertools
import json
import os
import random
import time
from pathlib import Path

from locust import HttpUser, between, constant, events, task
from locust.exception import StopUser

PROJECT = os.environ["LOAD_PROJECT"]
PASSWORD = os.environ["LOAD_PASSWORD"]
OUT = Path(os.environ["LOAD_OUT"])
THINK = (float(os.environ.get("LOAD_THINK_MIN", "2")), float(os.environ.get("LOAD_THINK_MAX", "8")))
SUBMIT_ATTEMPTS = 3  # a submit that fails (5xx, connection) is sent again with the same idempotency key

NEXT, SUBMIT, TOKEN = "GET queue/next/", "POST labels/", "POST /api/token/"
LOGIN_PAGE, LOGIN, VALIDATION = "GET /accounts/login/", "POST /accounts/login/", "GET validation/"

_samples: list[tuple[float, str, float, bool]] = []  # (start, name, ms, ok) of every request
_failures: list[tuple[str, str]] = []
_submitted = open(OUT / "submitted.tsv", "a", buffering=1)  # line by line: a killed locust keeps what it wrote
_expert_numbers = itertools.count()
_viewer_numbers = itertools.count()


@events.request.add_listener
def _record(request_type, name, response_time, response_length, exception=None, start_time=None, **kwargs):
    _samples.append((start_time or time.time(), name, response_time, exception is None))
    if exception is not None:
        _failures.append((name, str(exception)[:300]))


@events.quitting.add_listener
def _write(environment, **kwargs):
    (OUT / "samples.json").write_text(json.dumps({"samples": _samples, "failures": _failures}))
    _submitted.close()


class Expert(HttpUser):
    fixed_count = int(os.environ.get("LOAD_EXPERTS", "50"))
    wait_time = constant(0)  # the reading time sits between next and submit

    def on_start(self) -> None:
        self.username = f"load-expert-{next(_expert_numbers)}"
        self.rounds = itertools.count()
        with self.client.post("/api/token/", data={"username": self.username, "password": PASSWORD}, name=TOKEN,
                              catch_response=True) as response:
            if response.status_code != 200:
                response.failure(f"{response.status_code}: {response.text[:200]}")
                raise StopUser()  # without a token every call would fail
            self.client.headers["Authorization"] = f"Token {response.json()['token']}"

    @task
    def label_one(self) -> None:
        base = f"/api/projects/{PROJECT}"
        with self.client.get(f"{base}/queue/next/", name=NEXT, catch_response=True) as response:
            if response.status_code == 204:  # nothing left for this expert: come back later
                time.sleep(THINK[1])
                return
            if response.status_code != 200:
                response.failure(f"{response.status_code}: {response.text[:200]}")
                return
            item = response.json()
        reading = random.uniform(*THINK)
        time.sleep(reading)  # gevent's: other users run meanwhile
        key = f"{self.username}-{next(self.rounds)}"
        body = {"pair_id": item["pair_id"], "grade": random.choice((0, 0, 1, 2)), "client_key": key,
                "time_spent_seconds": round(reading, 2)}
        for attempt in range(SUBMIT_ATTEMPTS):
            with self.client.post(f"{base}/labels/", json=body, name=SUBMIT, catch_response=True) as response:
                if response.status_code in (200, 201):  # 200: a retry found the label the first try stored
                    _submitted.write(f"{self.username}\t{item['pair_id']}\t{key}\t{response.status_code}\n")
                    return
                response.failure(f"{response.status_code}: {response.text[:200]}")
                if 400 <= response.status_code < 500:
                    return  # refused: sending it again changes nothing
            time.sleep(1.0)


class Viewer(HttpUser):
    fixed_count = int(os.environ.get("LOAD_VIEWERS", "5"))
    wait_time = between(3, 6)

    def on_start(self) -> None:
        username = f"load-viewer-{next(_viewer_numbers)}"
        self.client.get("/accounts/login/", name=LOGIN_PAGE)
        form = {"username": username, "password": PASSWORD,
                "csrfmiddlewaretoken": self.client.cookies.get("csrftoken", "")}
        with self.client.post("/accounts/login/", data=form, name=LOGIN, allow_redirects=False,
                              catch_response=True) as response:
            if response.status_code != 302:
                response.failure(f"{response.status_code}: login refused")
                raise StopUser()

    @task
    def refresh(self) -> None:
        with self.client.get(f"/projects/{PROJECT}/validation/", name=VALIDATION, allow_redirects=False,
                             catch_response=True) as response:
            if response.status_code != 200:
                response.failure(f"{response.status_code}: {response.headers.get('Location', response.text[:200])}")

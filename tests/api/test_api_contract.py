"""The API keeps the promise its OpenAPI document makes: schemathesis reads /api/schema/ and calls every operation
with generated requests, valid and invalid, against the live app on a seeded project, with every check on
(server errors, statuses, content types and bodies against the schema, invalid data refused, valid data accepted,
auth enforced...). Seeded and bounded: the same cases every run, well under a minute. The repository's
schemathesis.toml is the configuration, as for the longer release run (docs/operations.md)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import schemathesis
from rest_framework.authtoken.models import Token
from schemathesis import engine
from schemathesis.config import SchemathesisConfig
from schemathesis.engine import events

from tests.url_matrix import ADMIN, build_world

REPO = Path(__file__).resolve().parents[2]
# Examples per operation and phase; SCHEMATHESIS_MAX_EXAMPLES raises it for a longer run.
MAX_EXAMPLES = int(os.environ.get("SCHEMATHESIS_MAX_EXAMPLES", "5"))
# The coverage phase sends every boundary value and every missing or malformed part the schema defines, whatever
# max-examples says: about 2,700 requests, three quarters of the run. The suite's run calls every operation with
# its explicit examples, generated valid and invalid requests (fuzzing) and the links between operations
# (stateful); the release run adds coverage (SCHEMATHESIS_PHASES=examples,coverage,fuzzing,stateful).
PHASES = os.environ.get("SCHEMATHESIS_PHASES", "examples,fuzzing,stateful").split(",")
SEED = 20


def contract_config(*, token: str, world) -> SchemathesisConfig:
    """schemathesis.toml, seeded and bounded, logged in as the project's admin, with the path names of the seeded
    project (ids stay generated: most name no row, which must be a documented 404)."""
    # A request gets a minute, not schemathesis's 10 s: on a busy machine (two test processes on two cores) a
    # slow answer is not a broken contract.
    head = f"seed = {SEED}\nworkers = 1\ncontinue-on-failure = true\nrequest-timeout = 60\n"
    tail = f"""
[generation]
max-examples = {MAX_EXAMPLES}

[auth.openapi.tokenAuth]
api_key = "Token {token}"

[parameters]
slug = "{world.project.slug}"
judge = "{world.judge.name}"
training_set = "{world.training_set.name}"
query_external_id = "{world.query.external_id}"
"""
    config = SchemathesisConfig.from_str(head + (REPO / "schemathesis.toml").read_text() + tail)
    config.projects.default.phases.update(phases=PHASES)
    return config


def _answer(recorder, case_id: str) -> str:
    interaction = recorder.interactions.get(case_id)
    if interaction is None or interaction.response is None:
        return ""
    body = (interaction.response.content or b"")[:500].decode("utf-8", "replace")
    return f"-> {interaction.response.status_code} {body}"


def _failures(event) -> list[tuple[str, object]]:
    """(curl and answer, failure) of each failed check of a finished scenario."""
    found = []
    if isinstance(event, (events.ScenarioFinished, events.FuzzScenarioFinished)):
        for case_id, nodes in event.recorder.checks.items():
            found += [(f"{node.failure_info.code_sample}\n{_answer(event.recorder, case_id)}",
                       node.failure_info.failure) for node in nodes if node.failure_info is not None]
    elif isinstance(event, events.EngineFinished):
        found += [("", failure) for failure in event.failures]
    return found


@pytest.mark.django_db(transaction=True)
def test_schemathesis_finds_nothing_on_any_operation(live_server, private_broker):
    world = build_world(with_report=True)
    token = Token.objects.create(user=world.users[ADMIN]).key
    schema = schemathesis.openapi.from_url(f"{live_server.url}/api/schema/?format=json",
                                           config=contract_config(token=token, world=world),
                                           headers={"Authorization": f"Token {token}"})
    operations = {operation.ok().label for operation in schema.get_all_operations()}
    tested: set[str] = set()
    failures: dict[tuple[str, str], tuple[int, str]] = {}
    errors = []
    for event in engine.from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished) and event.recorder.cases:
            tested.add(event.recorder.label)
        if isinstance(event, (events.NonFatalError, events.FatalError)):
            errors.append(str(getattr(event, "info", None) or getattr(event, "exception", event)))
        for curl, failure in _failures(event):
            key = (str(failure.operation), failure.title)
            count, example = failures.get(key, (0, f"{failure.message}\n{curl}"))
            failures[key] = (count + 1, example)
    report = "\n\n".join(f"{operation}: {title} ({count}x)\n{example}"
                         for (operation, title), (count, example) in sorted(failures.items()))
    assert not failures, f"schemathesis found {sum(c for c, _ in failures.values())} failure(s):\n\n{report}"
    assert not errors, errors
    assert len(operations) >= 45 and operations <= tested, f"operations never called: {sorted(operations - tested)}"

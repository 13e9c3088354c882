"""The replays API (#50) through DRF's test client, with a token as a script would use it: a replay asked for
through the API and run by the worker's service shows the summary the engine gives on the same inputs; the
service's refusals come back with their status and reason and store nothing; a malformed body is a 400 naming the
field; experts and viewers are refused on every route (a replay reads the truth); cancelling and deleting."""
from __future__ import annotations

import json

import numpy as np
import pytest
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from labeling.models import Membership, Pair, ReplayJob, Run, RunEntry
from labeling.selectors.replay import replay_inputs
from labeling.services.replay import replay_run
from models_llm.replay.engine import ReplaySettings, replay
from models_llm.replay.summary import arm_to_dict, summarise
from tests.factories import (
    JudgeFactory,
    JudgmentFactory,
    MembershipFactory,
    PairFactory,
    ProjectFactory,
    QueryFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db
ADMIN, EXPERT, VIEWER = Membership.Role.ADMIN, Membership.Role.EXPERT, Membership.Role.VIEWER
ASKED = {"judges": ["informed"], "batch": 5, "rounds": 3, "seeds": 2}


def token_client(project, role, user=None) -> APIClient:
    user = user or UserFactory()
    MembershipFactory(project=project, user=user, role=role)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return api


@pytest.fixture
def graded():
    """Two queries x 15 pairs, every one with a reference grade (about a third relevant); `informed` scored every
    pair, its P leaning towards the truth, `silent` scored none; two runs rank each query's passages."""
    rng = np.random.default_rng(5)
    project = ProjectFactory(slug="graded")
    informed = JudgeFactory(project=project, name="informed")
    JudgeFactory(project=project, name="silent")
    runs = [Run.objects.create(project=project, name=name, kind=Run.Kind.IMPORTED) for name in ("run-a", "run-b")]
    for q in range(2):
        query = QueryFactory(project=project, external_id=f"q{q}")
        pairs = [PairFactory(project=project, query=query) for _ in range(15)]
        for pair in pairs:
            relevant = rng.random() < 0.35
            Pair.objects.filter(id=pair.id).update(sample_key=float(rng.random()), reference_grade=int(relevant) * 2)
            JudgmentFactory(pair=pair, judge=informed, p_relevant=float(np.clip(0.3 + 0.4 * relevant
                                                                                + rng.normal(0, 0.2), 0, 1)))
        for run in runs:
            RunEntry.objects.bulk_create(RunEntry(run=run, query=query, passage=pair.passage, rank=rank, score=-rank)
                                         for rank, pair in enumerate(rng.permutation(pairs), 1))
    return project


def replays_url(project) -> str:
    return reverse("api:replay-list", args=[project.slug])


def replay_url(project, replay_id: int, action: str = "") -> str:
    return reverse(f"api:replay-{action or 'detail'}", args=[project.slug, replay_id])


def as_json(value):
    return json.loads(json.dumps(value))


def test_a_replay_asked_through_the_api_shows_the_engines_summary_once_the_worker_ran_it(graded):
    api = token_client(graded, ADMIN)
    asked = api.post(replays_url(graded), ASKED, format="json")
    assert asked.status_code == 201, asked.json()
    body = asked.json()
    # The service's defaults fill in what was not asked, as `manage.py replay` runs it.
    assert body["parameters"] == {**ASKED, "mixes": [{"uncertain": 80.0, "random": 20.0}, {"random": 100.0}],
                                  "truth": "reference", "refit": True, "target": 0.9, "alpha": 0.1}
    assert (body["status"], body["total"], body["done"], body["progress"]) == ("pending", 4, 0, 0.0)
    assert (body["arms"], body["runs_compared"], body["notes"]) == (None, None, [])
    assert body["url"].endswith(replay_url(graded, body["id"]))
    listed = api.get(replays_url(graded)).json()
    assert [row["id"] for row in listed] == [body["id"]] and "arms" not in listed[0]

    replay_run(job_id=body["id"])  # the worker's part

    done = api.get(replay_url(graded, body["id"])).json()
    inputs = replay_inputs(project=graded, judges=["informed"])
    settings = ReplaySettings(mixes=[{"uncertain": 80, "random": 20}, {"random": 100}], batch=5, rounds=3,
                              seeds=(0, 1))
    runs = replay(inputs.pool, inputs.judges, settings, compare=inputs.compare, runs=inputs.runs)
    assert (done["status"], done["done"], done["progress"], done["error"]) == ("done", 4, 1.0, "")
    assert done["arms"] == as_json([arm_to_dict(arm) for arm in summarise(runs, 30)])
    assert [arm["mix"] for arm in done["arms"]] == [{"uncertain": 80.0, "random": 20.0}, {"random": 100.0}]
    assert done["runs_compared"] == ["run-a", "run-b"] and done["pool"] == 30
    assert done["notes"] == inputs.notes and done["runs"] is None
    # The stored states come only when asked for (they can be large).
    with_runs = api.get(replay_url(graded, body["id"]), {"runs": "true"}).json()
    assert with_runs["runs"] == as_json([run.to_dict() for run in runs])
    assert api.get(replay_url(graded, body["id"]), {"runs": "yes"}).status_code == 400


@pytest.mark.parametrize(("change", "status", "message"), [
    ({"judges": ["nope"]}, 404, "project 'graded' has no judge 'nope' (its judges: informed, silent)"),
    ({"judges": ["silent"]}, 409, "judge 'silent' has scored none of the pool's pairs"),
    ({"truth": "reference", "ungraded": 1}, 409, "the truth is incomplete: 1 of the 30 pairs have no reference grade"),
    ({"truth": "release:nope"}, 409, "project 'graded' has no release 'nope'"),
    ({"mixes": [{"uncertain": 0, "random": 0}]}, 422, "mixes: a mix's shares are all 0"),
    ({"mixes": [{"random": 1}, {"random": 100}]}, 422, "mixes: the same mix twice"),
])
def test_what_the_service_refuses_comes_back_with_its_status_and_reason_and_nothing_is_stored(graded, change,
                                                                                             status, message):
    if change.pop("ungraded", 0):
        Pair.objects.filter(id=Pair.objects.filter(project=graded).order_by("id")[0].id).update(reference_grade=None)
    response = token_client(graded, ADMIN).post(replays_url(graded), {**ASKED, **change}, format="json")
    assert response.status_code == status, response.json()
    assert message in response.json()["message"]
    assert not ReplayJob.objects.exists()


def test_trec_truth_replays_a_project_with_ungraded_pairs(graded):
    Pair.objects.filter(id=Pair.objects.filter(project=graded).order_by("id")[0].id).update(reference_grade=None)
    api = token_client(graded, ADMIN)
    asked = api.post(replays_url(graded), {**ASKED, "truth": "trec", "mixes": [{"random": 1}], "seeds": 1},
                     format="json")
    assert asked.status_code == 201, asked.json()
    replay_run(job_id=asked.json()["id"])
    done = api.get(replay_url(graded, asked.json()["id"])).json()
    assert done["status"] == "done"
    assert "1 of the 30 pairs have no reference grade and count as irrelevant" in " ".join(done["notes"])


@pytest.mark.parametrize(("change", "field"), [
    ({"seeds": 0}, "seeds"),
    ({"mixes": [{"uncertain": 80, "gold": 20}]}, "mixes.0.gold"),
    ({"mixes": [{"random": -1}]}, "mixes.0.random"),
    ({"truth": "gold"}, "truth"),
    ({"batch": "25"}, "batch"),
    ({"judges": []}, "judges"),
    ({"seed": 3}, "seed"),
])
def test_a_malformed_body_is_a_400_naming_the_field(graded, change, field):
    response = token_client(graded, ADMIN).post(replays_url(graded), {**ASKED, **change}, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["code"] == "invalid" and list(response.json()["errors"]) == [field]
    assert not ReplayJob.objects.exists()


@pytest.mark.parametrize("role", [EXPERT, VIEWER])
def test_experts_and_viewers_are_refused_on_every_route(graded, role):
    job = ReplayJob.objects.create(project=graded, parameters=ASKED, total=1)
    api = token_client(graded, role)
    answers = [api.get(replays_url(graded)), api.post(replays_url(graded), ASKED, format="json"),
               api.get(replay_url(graded, job.id)), api.post(replay_url(graded, job.id, "cancel")),
               api.delete(replay_url(graded, job.id))]
    assert [answer.status_code for answer in answers] == [403] * 5
    assert answers[0].json()["message"] == ("Only a project admin can replay the labelling loop (a replay reads the "
                                            "truth).")
    assert list(ReplayJob.objects.values_list("id", "status")) == [(job.id, "pending")]


def test_a_replay_is_cancelled_and_deleted_and_another_projects_is_not_found(graded):
    admin = UserFactory()
    api = token_client(graded, ADMIN, admin)
    replay_id = api.post(replays_url(graded), ASKED, format="json").json()["id"]
    cancelled = api.post(replay_url(graded, replay_id, "cancel"))
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert cancelled.json()["finished_at"] is not None
    replay_run(job_id=replay_id)  # a worker that takes it after the cancel runs nothing
    assert api.get(replay_url(graded, replay_id)).json()["done"] == 0

    other = ProjectFactory(slug="other")
    MembershipFactory(project=other, user=admin, role=ADMIN)
    assert api.get(replay_url(other, replay_id)).status_code == 404
    assert api.delete(replay_url(other, replay_id)).status_code == 404

    assert api.delete(replay_url(graded, replay_id)).status_code == 204
    assert api.get(replay_url(graded, replay_id)).status_code == 404
    assert not ReplayJob.objects.exists()

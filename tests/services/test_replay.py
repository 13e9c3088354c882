"""Replays as jobs (#50): asked for by a project admin only, refused at once with the reason, run by the worker into
the same summary as the engine gives directly, resumed from the next run after a lost worker, cancelled at the next
run, and deleted without a trace in the project's tables."""
from __future__ import annotations

import pytest
from django.apps import apps
from django.core.serializers import serialize

from labeling.models import Membership, Pair, ReplayJob
from labeling.selectors.replay import replay_inputs
from labeling.services import replay as replay_service
from labeling.services.replay import (
    ReplayForbidden,
    ReplayJudgeNotFound,
    ReplayRequestError,
    ReplayUnavailable,
    replay_cancel,
    replay_delete,
    replay_request,
    replay_resume,
    replay_run,
    replay_settings,
)
from labeling.tasks import replay_task
from models_llm.replay.engine import ReplayRun, replay
from models_llm.replay.summary import arm_to_dict, summarise
from tests.factories import MembershipFactory, UserFactory
from tests.selectors.test_replay import graded_world  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db
ASK = {"judges": ["full"], "mixes": [{"uncertain": 80, "random": 20}, {"random": 100}], "batch": 5, "rounds": 3,
       "seeds": 2}


def member(project, role):
    user = UserFactory()
    MembershipFactory(project=project, user=user, role=role)
    return user


def _tables() -> str:
    return serialize("json", [row for model in apps.get_app_config("labeling").get_models()
                              if model is not ReplayJob for row in model.objects.order_by("pk")])


def test_a_replay_runs_into_the_engines_summary_and_leaves_the_project_as_it_was(graded_world, monkeypatch):  # noqa: F811
    project, _ = graded_world
    admin = member(project, Membership.Role.ADMIN)
    monkeypatch.setattr(replay_task, "delay", lambda *args: None)
    before = _tables()
    job = replay_request(project=project, by=admin, **ASK)
    assert job.total == 4 and job.status == "pending"
    replay_run(job_id=job.id)
    job.refresh_from_db()
    assert job.status == "done" and job.done == 4 and job.progress == 1.0
    inputs = replay_inputs(project=project, judges=["full"])
    direct = replay(inputs.pool, inputs.judges, replay_settings(job.parameters), compare=inputs.compare)
    assert [ReplayRun.from_dict(run) for run in job.result["runs"]] == direct
    assert job.result["arms"] == [arm_to_dict(arm) for arm in summarise(direct, 40)]
    assert job.result["notes"] == inputs.notes
    assert _tables() == before  # nothing of the project was written
    replay_delete(job=job, by=admin)
    assert not ReplayJob.objects.exists() and _tables() == before


def test_only_an_admin_may_replay_and_what_cannot_be_replayed_is_refused_with_the_reason(
        graded_world, monkeypatch):  # noqa: F811
    project, pairs = graded_world
    admin = member(project, Membership.Role.ADMIN)
    for role in (Membership.Role.EXPERT, Membership.Role.VIEWER):
        with pytest.raises(ReplayForbidden, match="only a project admin"):
            replay_request(project=project, by=member(project, role), **ASK)
    refusals = [
        ({"judges": ["nope"]}, ReplayJudgeNotFound, "no judge 'nope'"),
        ({"judges": ["none"]}, ReplayUnavailable, "scored none"),
        ({"mixes": [{"conflict": 1}]}, ReplayRequestError, "unknown strategy 'conflict'"),
        ({"seeds": 0}, ReplayRequestError, "seeds must be a whole number from 1"),
        ({"batch": "5"}, ReplayRequestError, "batch must be"),
        ({"truth": "gold"}, ReplayRequestError, "truth must be one of"),
        ({"mixes": [{"random": 1}, {"random": 2}]}, ReplayRequestError, "the same mix twice"),
    ]
    for change, error, message in refusals:
        with pytest.raises(error, match=message):
            replay_request(project=project, by=admin, **{**ASK, **change})
    with monkeypatch.context() as patched:  # 40 pairs x 4 states x 2 seeds x 2 mixes = 640
        patched.setattr(replay_service, "REPLAY_MAX_PAIR_ROUNDS", 639)
        with pytest.raises(ReplayRequestError, match="measures 640 pair-rounds"):
            replay_request(project=project, by=admin, **ASK)
    Pair.objects.filter(id=pairs[0].id).update(reference_grade=None)
    with pytest.raises(ReplayUnavailable, match="1 of the 40 pairs have no reference grade"):
        replay_request(project=project, by=admin, **ASK)
    assert not ReplayJob.objects.exists()


def test_a_lost_workers_replay_goes_on_from_the_next_run_and_ends_as_one_run_straight_through(
        graded_world, monkeypatch):  # noqa: F811
    project, _ = graded_world
    admin = member(project, Membership.Role.ADMIN)
    monkeypatch.setattr(replay_task, "delay", lambda *args: None)
    whole = replay_request(project=project, by=admin, **ASK)
    replay_run(job_id=whole.id)
    whole.refresh_from_db()

    lost = replay_request(project=project, by=admin, **ASK)
    calls = []
    real_one = replay_service.replay_one

    def dies_after_two(*args, **kwargs):
        calls.append(args[3])
        if len(calls) == 3:
            raise SystemExit("the worker was killed")
        return real_one(*args, **kwargs)

    monkeypatch.setattr(replay_service, "replay_one", dies_after_two)
    with pytest.raises(SystemExit):
        replay_run(job_id=lost.id)
    lost.refresh_from_db()
    assert lost.status == "running" and lost.done == 2 and len(lost.result["runs"]) == 2
    requeued = []
    monkeypatch.setattr(replay_task, "delay", lambda *args: requeued.append(args))
    assert replay_resume(job=lost) and requeued == [(lost.id,)]
    calls.clear()
    monkeypatch.setattr(replay_service, "replay_one", lambda *a, **k: calls.append(a[3]) or real_one(*a, **k))
    replay_run(job_id=lost.id)
    lost.refresh_from_db()
    assert len(calls) == 2  # only the two runs not stored
    assert lost.status == "done" and lost.result["arms"] == whole.result["arms"]
    assert lost.result["runs"] == whole.result["runs"]
    ReplayJob.objects.filter(id=lost.id).update(attempts=3)
    lost.refresh_from_db()
    assert not replay_resume(job=lost)


def test_a_cancelled_replay_stops_at_its_next_run_with_no_summary(graded_world, monkeypatch):  # noqa: F811
    project, _ = graded_world
    admin = member(project, Membership.Role.ADMIN)
    monkeypatch.setattr(replay_task, "delay", lambda *args: None)
    job = replay_request(project=project, by=admin, **ASK)
    real_one = replay_service.replay_one

    def cancelled_during_the_first(*args, **kwargs):
        replay_cancel(job=ReplayJob.objects.get(id=job.id))
        return real_one(*args, **kwargs)

    monkeypatch.setattr(replay_service, "replay_one", cancelled_during_the_first)
    replay_run(job_id=job.id)
    job.refresh_from_db()
    assert job.status == "cancelled" and "arms" not in job.result and job.done == 0
    replay_run(job_id=job.id)  # a late message does nothing
    job.refresh_from_db()
    assert job.status == "cancelled"
    with pytest.raises(ReplayForbidden):
        replay_delete(job=job, by=member(project, Membership.Role.EXPERT))

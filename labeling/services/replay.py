"""Replays as background work (#50): a project admin asks for one (which judges, mixes, batch, rounds, seeds, truth,
the calibrator rule, the stopping target); a bulk worker reads the project's arrays (labeling.selectors.replay) and
runs the engine (models_llm.replay) one (mix, judge, seed) at a time, storing each run on the row as it ends, so a
replay whose worker was lost goes on from the next run. Nothing of the project is written: a replay's state is its
row, and deleting it leaves the project as it was."""
from __future__ import annotations

from collections.abc import Mapping

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from labeling.exceptions import Conflict, DomainError, Forbidden, NotFound
from labeling.models import Judge, Judgment, Membership, Pair, Project, QrelsRelease, ReplayJob
from labeling.selectors.projects import project_role
from labeling.selectors.replay import ReplayInputError, replay_inputs, replay_truth
from labeling.services.jobs import job_cancel, job_fail, job_heartbeat, job_take
from labeling.tasks import replay_task
from models_llm.replay.engine import (
    REPLAY_MAX_PAIR_ROUNDS,
    ReplayError,
    ReplayRun,
    ReplaySettings,
    replay_one,
    replay_prepared,
)
from models_llm.replay.selection import SELECTION_STRATEGIES
from models_llm.replay.summary import arm_to_dict, summarise

# What a replay runs when not told otherwise (the page, the API and the command alike), and its bounds.
REPLAY_DEFAULT_MIXES = ({"uncertain": 80.0, "random": 20.0}, {"random": 100.0})
REPLAY_DEFAULT_BATCH, REPLAY_DEFAULT_ROUNDS, REPLAY_DEFAULT_SEEDS = 25, 20, 10
REPLAY_SHARE_MAX = 1_000_000
REPLAY_TARGET_BOUNDS = (0.01, 1.0)
REPLAY_ALPHA_BOUNDS = (0.001, 0.5)
REPLAY_SEEDS_MAX = 100
REPLAY_ROUNDS_MAX = 1000
REPLAY_BATCH_MAX = 100_000
REPLAY_MIXES_MAX = 8
REPLAY_MAX_ATTEMPTS = 3


class ReplayRequestError(DomainError):
    """A replay that cannot be asked for as given (the message names the field)."""


class ReplayForbidden(ReplayRequestError, Forbidden):
    """Someone other than a project admin asked: a replay reads the truth, which experts never see."""


class ReplayJudgeNotFound(ReplayRequestError, NotFound):
    """A judge named is not the project's."""


class ReplayUnavailable(ReplayRequestError, Conflict):
    """The project cannot be replayed as asked (its truth, its judges): the message says why and what to do."""


def _number(value: object, name: str, low: float, high: float, *, whole: bool) -> float:
    ok = not isinstance(value, bool) and isinstance(value, int | float) and (not whole or float(value).is_integer())
    if not ok or not low <= value <= high:
        kind = "a whole number" if whole else "a number"
        raise ReplayRequestError(f"{name} must be {kind} from {low:g} to {high:,g}, not {value!r}")
    return value


def replay_parameters(*, judges: object, mixes: object, batch: object, rounds: object, seeds: object,
                      truth: object = "reference", refit: object = True, target: object = 0.9,
                      alpha: object = 0.1) -> dict:
    """The request's parameters checked and made plain (ReplayRequestError names the first bad one)."""
    if not isinstance(judges, list | tuple) or not judges or not all(isinstance(j, str) and j for j in judges):
        raise ReplayRequestError("judges: give the names of one or more judges that scored the pool")
    if not isinstance(mixes, list | tuple) or not 1 <= len(mixes) <= REPLAY_MIXES_MAX:
        raise ReplayRequestError(f"mixes: give 1 to {REPLAY_MIXES_MAX} queue mixes, e.g. "
                                 "[{'uncertain': 80, 'random': 20}, {'random': 100}]")
    clean_mixes = []
    for mix in mixes:
        if not isinstance(mix, Mapping) or not mix:
            raise ReplayRequestError(f"mixes: each mix is {{strategy: share}}, not {mix!r}")
        unknown = sorted(str(name) for name in mix if name not in SELECTION_STRATEGIES)
        if unknown:
            raise ReplayRequestError(f"mixes: unknown strategy {', '.join(map(repr, unknown))}; the strategies are "
                                     f"{', '.join(SELECTION_STRATEGIES)}")
        shares = {name: float(_number(share, f"the share of {name!r}", 0, REPLAY_SHARE_MAX, whole=False))
                  for name, share in mix.items()}
        if sum(shares.values()) <= 0:
            raise ReplayRequestError("mixes: a mix's shares are all 0")
        total = sum(shares.values())
        if any({k: v / total for k, v in shares.items() if v} == {k: v / sum(m.values()) for k, v in m.items() if v}
               for m in clean_mixes):
            raise ReplayRequestError(f"mixes: the same mix twice ({mix!r}); shares are relative")
        clean_mixes.append(shares)
    try:
        replay_truth(truth)
    except ReplayInputError as exc:
        raise ReplayRequestError(str(exc)) from None
    if not isinstance(refit, bool):
        raise ReplayRequestError(f"refit must be true or false, not {refit!r}")
    return {
        "judges": list(dict.fromkeys(judges)), "mixes": clean_mixes,
        "batch": int(_number(batch, "batch", 1, REPLAY_BATCH_MAX, whole=True)),
        "rounds": int(_number(rounds, "rounds", 1, REPLAY_ROUNDS_MAX, whole=True)),
        "seeds": int(_number(seeds, "seeds", 1, REPLAY_SEEDS_MAX, whole=True)),
        "truth": truth, "refit": refit,
        "target": float(_number(target, "target", *REPLAY_TARGET_BOUNDS, whole=False)),
        "alpha": float(_number(alpha, "alpha", *REPLAY_ALPHA_BOUNDS, whole=False)),
    }


def replay_settings(parameters: Mapping) -> ReplaySettings:
    return ReplaySettings(mixes=parameters["mixes"], batch=parameters["batch"], rounds=parameters["rounds"],
                          refit=parameters["refit"], target=parameters["target"], alpha=parameters["alpha"],
                          seeds=tuple(range(parameters["seeds"])))


@transaction.atomic
def replay_request(*, project: Project, by: AbstractBaseUser, **asked: object) -> ReplayJob:
    """Queue a replay of `project` (replay_parameters' fields). Project admins only (ReplayForbidden). Refused at once,
    with the reason, when a judge is not the project's or scored none of its pairs, when the truth is incomplete
    (truth 'reference' with ungraded pairs), or when the replay would be too large; the worker reads the arrays."""
    if project_role(user=by, project=project) != Membership.Role.ADMIN:
        raise ReplayForbidden("only a project admin can replay the loop: a replay reads the truth")
    parameters = replay_parameters(**asked)
    known = dict(Judge.objects.filter(project=project).values_list("name", "id"))
    for name in parameters["judges"]:
        if name not in known:
            raise ReplayJudgeNotFound(f"project {project.slug!r} has no judge {name!r} (its judges: "
                                      f"{', '.join(sorted(known)) or 'none'})")
        if not Judgment.objects.filter(judge_id=known[name], status=Judgment.Status.OK).exists():
            raise ReplayUnavailable(f"judge {name!r} has scored none of the pool's pairs: score the pool with it first "
                                    "(a replay reads judgments, it never calls a judge)")
    pairs = Pair.objects.filter(project=project)
    size = pairs.count()
    if not size:
        raise ReplayUnavailable(f"project {project.slug!r} has no pairs to replay")
    release, _ = replay_truth(parameters["truth"])
    if release is not None and not QrelsRelease.objects.filter(project=project, name=release).exists():
        raise ReplayUnavailable(f"project {project.slug!r} has no release {release!r}")
    # A release's grades are read by the worker (a large file is no work for a web request); the reference grades
    # are counted here.
    ungraded = pairs.filter(reference_grade__isnull=True).count() if release is None else 0
    if ungraded and parameters["truth"] == "reference":
        raise ReplayUnavailable(f"the truth is incomplete: {ungraded:,} of the {size:,} pairs have no reference grade. "
                                "Grade them, or replay with truth 'trec' (pairs without a grade counted irrelevant)")
    total = len(parameters["mixes"]) * len(parameters["judges"]) * parameters["seeds"]
    measured = size * (parameters["rounds"] + 1) * total
    if measured > REPLAY_MAX_PAIR_ROUNDS:
        raise ReplayRequestError(f"this replay measures {measured:,} pair-rounds (pool x (rounds + 1) x seeds x mixes "
                                 f"x judges); the limit is {REPLAY_MAX_PAIR_ROUNDS:,}: fewer seeds, rounds or mixes")
    job = ReplayJob.objects.create(project=project, parameters=parameters, total=total, requested_by=by)
    transaction.on_commit(lambda: replay_task.delay(job.id))
    return job


def replay_run(*, job_id: int) -> None:
    """The worker's part: read the project's arrays and replay each (mix, judge, seed) not stored yet, in order,
    storing each as it ends; then the summary, and done. A replay cancelled (or taken by another worker) stops at
    its next run; one whose inputs cannot be read any more fails with the reason."""
    if not job_take(ReplayJob.objects.filter(id=job_id, finished_at__isnull=True)):
        return
    job = ReplayJob.objects.select_related("project").get(id=job_id)
    owned = ReplayJob.objects.filter(id=job_id, status=ReplayJob.Status.RUNNING, attempts=job.attempts)
    with job_heartbeat(owned):
        try:
            inputs = replay_inputs(project=job.project, judges=job.parameters["judges"],
                                   truth=job.parameters["truth"])
            settings = replay_settings(job.parameters)
            prepared = replay_prepared(inputs.pool, inputs.judges, settings, compare=inputs.compare,
                                       runs=inputs.runs)
        except (ReplayInputError, ReplayError) as exc:
            replay_fail(job_id=job_id, error=str(exc))
            return
        stored = list(job.result.get("runs", []))
        plan = [(mix, judge, seed) for mix in settings.mixes for judge in inputs.judges for seed in settings.seeds]
        for mix, judge, seed in plan[len(stored):]:
            states = replay_one(inputs.pool, judge, mix, settings, seed, prepared.spread, prepared.systems)
            stored.append(ReplayRun(dict(mix), judge.name, seed, states).to_dict())
            if not owned.update(result={"notes": inputs.notes, "runs": stored}, done=len(stored),
                                heartbeat_at=timezone.now()):
                return  # cancelled, or taken over
        runs = [ReplayRun.from_dict(run) for run in stored]
        arms = [arm_to_dict(arm) for arm in summarise(runs, int(inputs.pool.pair_ids.size))]
        compared = inputs.runs.names if inputs.runs is not None else []
        owned.update(result={"notes": inputs.notes, "runs": stored, "arms": arms, "runs_compared": compared,
                             "pool": int(inputs.pool.pair_ids.size)},
                     status=ReplayJob.Status.DONE, finished_at=timezone.now(), heartbeat_at=timezone.now())


def replay_fail(*, job_id: int, error: str) -> None:
    """Give up on the replay: failed, with the error; the runs it stored stay readable."""
    job_fail(ReplayJob.objects.filter(id=job_id), error=error)


@transaction.atomic
def replay_cancel(*, job: ReplayJob) -> ReplayJob:
    """Stop an unfinished replay: its worker stops after the run it is on; the runs stored stay, no summary."""
    return job_cancel(job)


def replay_resume(*, job: ReplayJob) -> bool:
    """The sweep's way on for a replay whose worker was lost: queued again (it goes on from the next run), at most
    REPLAY_MAX_ATTEMPTS times in all; False: give up."""
    if job.attempts >= REPLAY_MAX_ATTEMPTS:
        return False
    ReplayJob.objects.filter(id=job.id).update(heartbeat_at=None)
    replay_task.delay(job.id)
    return True


def replay_delete(*, job: ReplayJob, by: AbstractBaseUser) -> None:
    """Delete a replay; a worker still running it stops at its next write, which finds no row. Project admins
    only."""
    if project_role(user=by, project=job.project) != Membership.Role.ADMIN:
        raise ReplayForbidden("only a project admin can delete a replay")
    ReplayJob.objects.filter(id=job.id).delete()

"""Labelling rounds (#33, #48): an admin starts a round (a judge, a batch of N expert labels, a queue mix whose random
share never falls below ROUND_RANDOM_FLOOR); the round sets the project's queue judge and mix; when experts have given
its N labels a worker measures the numbers (the completeness estimates, the stopping state, the judge's accuracy on the
random validation sample), refits the judge's calibrator on its gold pairs (calibration_basis), or (`after` student)
retrains the judge's cross-encoder student from its stored model with the experts' labels and has the new student score
the pool, and measures them again: what the round bought. Re-scoring only what changed: after a calibrator refit nothing
(every read of the judge's P applies its newest calibrator); after a retrain every pair's P is the new student's, so it
scores the pool once, and the round waits for that (services/rounds_wake.py) before measuring."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from labeling.exceptions import Conflict, DomainError, Forbidden, NotFound
from labeling.models import (
    FineTuneJob,
    Judge,
    LabellingRound,
    Membership,
    Pair,
    Project,
    TrainingExample,
    TrainingSet,
)
from labeling.models.project import QUEUE_STRATEGIES
from labeling.selectors.completeness import (
    completeness_compute,
    completeness_options,
    current_label_count,
    random_sample_pair_ids,
)
from labeling.selectors.completeness_report import RoundCalibration, RoundMeasure, RoundNumbers, RoundRetrain
from labeling.selectors.finetune import STUDENT_NAME_MAX_LENGTH, base_judge_name, expert_answers
from labeling.selectors.projects import project_role
from labeling.selectors.validation import GoldSet, gold_set
from labeling.services.finetune import finetune_request
from labeling.services.jobs import job_fail, job_heartbeat, job_take
from labeling.services.validation import ValidationReportError, judge_calibrate
from labeling.tasks import round_finish_task

ROUND_RANDOM_FLOOR = 0.2  # the random validation share of a round's labels is never below this
ROUND_BUDGET_MAX = 1_000_000
# Shares are relative weights; the bound keeps their sum and the scaling below finite (1e308 overflowed to NaN).
ROUND_SHARE_MAX = 1_000_000
ROUND_STRATEGIES = ("uncertain", "disagreement", "random")


class RoundError(DomainError):
    """A round that cannot be started as asked (the message names the field)."""


class RoundForbidden(RoundError, Forbidden):
    """Someone other than a project admin tried to start a round."""


class RoundOpen(RoundError, Conflict):
    """The project has a round whose batch is not in yet."""


class RoundJudgeNotFound(RoundError, NotFound):
    """The judge named is not one of the project's."""


def _mix(mix: Mapping[str, object], random_share: object) -> dict[str, float]:
    """The round's queue mix: the targeted strategies' shares scaled to 1 - random_share, plus the random share."""
    if not isinstance(mix, Mapping) or not mix:
        raise RoundError("mix: give a share for each targeted strategy, e.g. {'uncertain': 1}")
    unknown = sorted(str(name) for name in mix if name not in ROUND_STRATEGIES or name == "random")
    if unknown:
        raise RoundError(f"mix: unknown strategy {', '.join(map(repr, unknown))}; a round mixes "
                         f"{', '.join(s for s in ROUND_STRATEGIES if s != 'random')} (random is its own share)")
    shares = {}
    for name, share in mix.items():
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share <= ROUND_SHARE_MAX:
            raise RoundError(f"mix: the share of {name!r} must be a number from 0 to {ROUND_SHARE_MAX:,}, "
                             f"not {share!r}")
        shares[name] = float(share)
    if sum(shares.values()) <= 0:
        raise RoundError("mix: the shares are all 0")
    if isinstance(random_share, bool) or not isinstance(random_share, int | float) or not (
            ROUND_RANDOM_FLOOR <= random_share < 1):
        raise RoundError(f"random_share must be at least {ROUND_RANDOM_FLOOR:g} (the validation floor) and below 1, "
                         f"not {random_share!r}")
    total = sum(shares.values())
    out = {name: round(100 * (1 - random_share) * (share / total), 4) for name, share in shares.items() if share}
    out["random"] = round(100 * random_share, 4)
    assert set(out) <= set(QUEUE_STRATEGIES)
    return out


def round_student_job(judge: Judge) -> FineTuneJob | None:
    """The done cross-encoder fine-tuning job whose student `judge` is (a round may retrain it), if any."""
    return (FineTuneJob.objects.select_related("training_set", "teacher")
            .filter(student=judge, student_kind=FineTuneJob.StudentKind.CROSSENCODER, status=FineTuneJob.Status.DONE)
            .exclude(adapter="").order_by("-finished_at", "-id").first())


@transaction.atomic
def round_request(*, project: Project, by: AbstractBaseUser, judge: str, budget: object,
                  mix: Mapping[str, object] | None = None, random_share: object = ROUND_RANDOM_FLOOR,
                  after: str = LabellingRound.After.CALIBRATE, graded: object = False) -> LabellingRound:
    """Start the project's next round: `judge` (a name) becomes the queue judge, the queue mix becomes `mix`
    (targeted strategies, default all uncertain) scaled to 1 - random_share plus random_share of the random
    validation sample (at least ROUND_RANDOM_FLOOR), and the round waits for `budget` expert labels. `after`:
    what the worker does with the batch: `calibrate` (refit the judge's calibrator) or `student` (the judge must
    be a cross-encoder student: retrain it from its last state with the experts' labels, then score the pool with
    the new student). `graded`: its uncertain, disagreement and random queues may serve pairs whose gold grade is
    known already (re-annotation, an explicit choice); by default they serve only pairs whose gold is unknown.
    Project admins only (RoundForbidden); RoundOpen while a round's batch is not in; RoundError names a bad
    field."""
    if project_role(user=by, project=project) != Membership.Role.ADMIN:
        raise RoundForbidden("only a project admin can start a labelling round")
    locked = Project.objects.select_for_update().get(pk=project.pk)
    found = Judge.objects.filter(project=locked, name=judge).first()
    if found is None:
        names = ", ".join(Judge.objects.filter(project=locked).values_list("name", flat=True)) or "none"
        raise RoundJudgeNotFound(f"project {locked.slug!r} has no judge {judge!r} (its judges: {names})")
    if isinstance(budget, bool) or not isinstance(budget, int) or not 1 <= budget <= ROUND_BUDGET_MAX:
        raise RoundError(f"budget must be a whole number of labels from 1 to {ROUND_BUDGET_MAX:,}, not {budget!r}")
    queue_mix = _mix(mix or {"uncertain": 1}, random_share)
    if not isinstance(graded, bool):
        raise RoundError(f"graded must be true or false, not {graded!r}")
    if after not in LabellingRound.After.values:
        raise RoundError(f"after must be one of {', '.join(LabellingRound.After.values)}, not {after!r}")
    if after == LabellingRound.After.STUDENT and round_student_job(found) is None:
        raise RoundError(f"after 'student': judge {found.name!r} is not a stored cross-encoder student (fine-tune one "
                         "with the cross-encoder student kind, or choose after 'calibrate')")
    open_round = LabellingRound.objects.filter(project=locked, status__in=[LabellingRound.Status.PENDING,
                                                                            LabellingRound.Status.RUNNING]).first()
    if open_round is not None:
        doing = "labelling" if open_round.status == LabellingRound.Status.PENDING else "measuring or retraining"
        raise RoundOpen(f"round {open_round.number} is still {doing}; start the next one when it is done")
    number = (LabellingRound.objects.filter(project=locked).aggregate(top=Max("number"))["top"] or 0) + 1
    locked.queue_judge, locked.queue_mix, locked.queue_graded = found, queue_mix, graded
    locked.save(update_fields=["queue_judge", "queue_mix", "queue_graded"])
    return LabellingRound.objects.create(project=locked, number=number, judge=found, budget=budget,
                                         queue_mix=queue_mix, labels_at_start=current_label_count(locked),
                                         requested_by=by, after=after, graded=graded)


def round_check(*, project_id: int) -> LabellingRound | None:
    """After a label: when the open round's batch is in (budget labels since it started), hand it to a worker
    once (the status moves from pending to running in one update, so two labels at once queue it once)."""
    pending = LabellingRound.objects.filter(project_id=project_id, status=LabellingRound.Status.PENDING).first()
    if pending is None:
        return None
    if current_label_count(pending.project) - pending.labels_at_start < pending.budget:
        return None
    now = timezone.now()
    # Running, and held by no worker yet (no heartbeat): round_run's take is the worker's.
    if not job_take(LabellingRound.objects.filter(id=pending.id, status=LabellingRound.Status.PENDING), now=now,
                    heartbeat_at=None):
        return None
    transaction.on_commit(lambda: round_finish_task.delay(pending.id))
    return pending


def _measure(project: Project, judge: Judge, gold: GoldSet) -> RoundMeasure:
    """What the numbers of a round are at one moment, under `judge` (its newest calibrator): the completeness
    report's pool estimates, the stopping state, and the judge's accuracy on the random validation sample."""
    return RoundMeasure.of(completeness_compute(
        project=project, options=completeness_options(project=project, judge=judge.name), gold=gold))


def round_run(*, round_id: int) -> LabellingRound | None:
    """The worker's part. First pass: measure the round's numbers under its judge as it was ("before"), then
    refit the judge's calibrator on its gold pairs and measure again ("after": every read of P applies the newest
    calibrator, so nothing needs scoring again), or (after 'student') start the retrain and leave the round
    waiting (`waiting_since`) until the new student has scored the pool; round_wake then hands it back and this
    measures "after" under the new student. A refit that cannot be made (too few relevant or non-relevant gold
    pairs) leaves the round done with its numbers and the reason; a retrain that cannot start or that failed fails
    the round with why. A round that is not running (or waits) gives None; one a live worker measures (the task
    delivered again) is returned as it is."""
    running = LabellingRound.objects.filter(id=round_id, status=LabellingRound.Status.RUNNING,
                                            waiting_since__isnull=True)
    found = running.select_related("project", "judge", "finetune__student").first()
    if found is None:
        return None
    if not job_take(running):
        return LabellingRound.objects.get(id=round_id)
    with job_heartbeat(LabellingRound.objects.filter(id=round_id)):
        project, numbers = found.project, RoundNumbers.from_dict(found.numbers)
        # Built once: the measures before and after and the refit all read the same gold pairs.
        gold = gold_set(project)
        if numbers.before is None:
            numbers = RoundNumbers(labels=current_label_count(project) - found.labels_at_start,
                                   before=_measure(project, found.judge, gold))
            _store(round_id, numbers)
        if found.after == LabellingRound.After.STUDENT:
            return _student_step(found, numbers, gold)
        try:
            calibration = judge_calibrate(judge=found.judge, user=found.requested_by, gold=gold)
        except ValidationReportError as exc:
            numbers = replace(numbers, reason=(
                f"the calibrator was not refitted: {exc}. The round's numbers are the judge's as it was; label pairs "
                "of the missing kind (the uncertain queue finds them) and start another round"))
        else:
            numbers = replace(numbers, calibration=RoundCalibration(
                method=calibration.method, n=calibration.n, n_relevant=calibration.n_relevant),
                after=_measure(project, found.judge, gold))
        _done(round_id, numbers)
    return LabellingRound.objects.get(id=round_id)


def _store(round_id: int, numbers: RoundNumbers) -> None:
    LabellingRound.objects.filter(id=round_id).update(numbers=numbers.to_dict())


def _done(round_id: int, numbers: RoundNumbers) -> None:
    LabellingRound.objects.filter(id=round_id).update(numbers=numbers.to_dict(), status=LabellingRound.Status.DONE,
                                                      finished_at=timezone.now())


def _student_step(found: LabellingRound, numbers: RoundNumbers, gold: GoldSet) -> LabellingRound:
    """After 'student': start the retrain (the round then waits), or, handed back by round_wake, measure the new
    student or fail with why its retrain did not finish."""
    job = found.finetune
    if job is None:
        try:
            job = _retrain(found)
        except DomainError as exc:
            round_fail(round_id=found.id, error=f"the student could not be retrained: {exc}")
            return LabellingRound.objects.get(id=found.id)
        _store(found.id, replace(numbers, student=RoundRetrain(job=job.id, name=job.student_name,
                                                               training_set=job.training_set.name,
                                                               examples=job.examples)))
        return LabellingRound.objects.get(id=found.id)
    if job.status != FineTuneJob.Status.DONE or job.student is None:
        round_fail(round_id=found.id, error=f"the student's retrain (fine-tuning job {job.id}) {job.status}"
                                            f"{': ' + job.error if job.error else ''}; the numbers before it are kept")
        return LabellingRound.objects.get(id=found.id)
    _done(found.id, replace(numbers, after=_measure(found.project, job.student, gold)))
    return LabellingRound.objects.get(id=found.id)


def _free(taken, name: str, max_length: int) -> str:
    """`name` (cut to max_length), or with " (2)", " (3)"... when `taken(name)` says it is in use."""
    candidate, n = name[:max_length], 1
    while taken(candidate):
        n += 1
        suffix = f" ({n})"
        candidate = name[:max_length - len(suffix)] + suffix
    return candidate


def _round_training_set(found: LabellingRound, parent: FineTuneJob) -> TrainingSet:
    """The parent's training set, copied, plus every pair with an expert's gold grade it lacks as a train example
    (origin `expert`): not those of the random validation sample (the design-based figures stay unbiased), and not
    those of a query on the held-out side (the split stays by query)."""
    source = parent.training_set
    examples = list(TrainingExample.objects.filter(training_set=source).order_by("id"))
    name = _free(lambda n: TrainingSet.objects.filter(project=found.project, name=n).exists(),
                 f"{source.name} + round {found.number}", TrainingSet._meta.get_field("name").max_length)
    made = TrainingSet.objects.create(
        project=found.project, name=name, source=f"round {found.number}: {source.name} and the experts' labels",
        parameters={"round": found.number, "from": source.name}, created_by=found.requested_by)
    fields = ("split", "origin", "group", "pair_id", "rank", "system", "user", "answer", "teacher_p")
    TrainingExample.objects.bulk_create([TrainingExample(training_set=made, **{f: getattr(e, f) for f in fields})
                                         for e in examples])
    have = {e.pair_id for e in examples if e.pair_id is not None}
    held_out = {e.group for e in examples if e.split == TrainingExample.Split.HELD_OUT}
    left_out = have | random_sample_pair_ids(found.project)
    wanted = [pair_id for pair_id in expert_answers(found.project) if pair_id not in left_out]
    groups = dict(Pair.objects.filter(id__in=wanted).values_list("id", "query__external_id"))
    TrainingExample.objects.bulk_create([
        TrainingExample(training_set=made, split=TrainingExample.Split.TRAIN, origin=TrainingExample.Origin.EXPERT,
                        group=groups[pair_id], pair_id=pair_id)
        for pair_id in sorted(wanted) if groups[pair_id] not in held_out])
    return made


@transaction.atomic
def _retrain(found: LabellingRound) -> FineTuneJob:
    """After 'student': the round's fine-tuning job, made once (a round taken again returns the one it made): the
    judge's student goes on from its stored model on its training set plus the experts' new labels, with the
    parent's settings, and once trained scores the whole pool."""
    # No select_related here: PostgreSQL refuses FOR UPDATE on the nullable side of the outer join it would make.
    locked = LabellingRound.objects.select_for_update().get(id=found.id)
    if locked.finetune_id is not None:
        return FineTuneJob.objects.select_related("training_set").get(id=locked.finetune_id)
    parent = round_student_job(found.judge)
    if parent is None:
        raise RoundError(f"judge {found.judge.name!r} is no longer a stored cross-encoder student")
    settings = dict(parent.hyperparameters)
    device = settings.pop("device", "cpu")
    name = _free(lambda n: Judge.objects.filter(project=found.project, name__in=[n, base_judge_name(n)]).exists()
                 or FineTuneJob.objects.filter(project=found.project, student_name=n, finished_at__isnull=True)
                 .exists(), f"{parent.student_name}-r{found.number}", STUDENT_NAME_MAX_LENGTH)
    job = finetune_request(
        project=found.project, training_set=_round_training_set(locked, parent), teacher=parent.teacher,
        base_model="", student_name=name, hyperparameters=settings, device=device, user=found.requested_by,
        student=FineTuneJob.StudentKind.CROSSENCODER, parent=parent, score_pool=True)
    # In the transaction that queues the retrain: the round waits before the retrain can end and wake it.
    LabellingRound.objects.filter(id=found.id).update(finetune=job, waiting_since=timezone.now())
    return job


def round_fail(*, round_id: int, error: str) -> LabellingRound | None:
    """Give up on a round's refit: failed, with the error (its numbers, if measured, stay)."""
    job_fail(LabellingRound.objects.filter(id=round_id), error=error)
    return LabellingRound.objects.filter(id=round_id).first()


ROUND_MAX_ATTEMPTS = 3


def round_resume(*, job: LabellingRound) -> bool:
    """The sweep's way on for a round whose worker was lost (or whose message waited past the stall time): queued
    again, at most ROUND_MAX_ATTEMPTS times in all; False: give up."""
    if job.attempts >= ROUND_MAX_ATTEMPTS:
        return False
    # Released (no heartbeat), as a worker leaving it would: the task queued takes it (and counts the attempt); the
    # sweep does not queue it again meanwhile, and the time limit bounds it.
    LabellingRound.objects.filter(id=job.id).update(heartbeat_at=None)
    round_finish_task.delay(job.id)
    return True

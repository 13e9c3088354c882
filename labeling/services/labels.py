"""Experts' writes: claiming the next item (a lease), submitting, undoing and skipping labels. Claims lock one
candidate pair row at a time with SKIP LOCKED in a short transaction, so concurrent experts never get the same
leased item and nobody holds a transaction while a person reads."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from labeling.exceptions import Conflict, DomainError, Forbidden, NotFound
from labeling.models import Label, Lease, Membership, Pair, Project, RelevanceDefinition
from labeling.models.project import QUEUE_STRATEGIES
from labeling.selectors.completeness import has_stopping_target, project_target_met
from labeling.selectors.definitions import current_definition
from labeling.selectors.projects import project_role
from labeling.selectors.queues import eligible_pairs, queue_candidates, strategy_order
from labeling.services.rounds import round_check
from labeling.services.validation import validation_request_soon

CANDIDATES_PER_TRY = 20
MAX_NOTE_CHARS = 10_000
MAX_TIME_SPENT_SECONDS = 24 * 3600
MAX_CLIENT_KEY_CHARS = 64


class LabelError(DomainError):
    """A label or claim that cannot be made as asked (bad grade, unknown item, reused key...)."""


class LabelItemNotFound(LabelError, NotFound):
    """The item (or the definition version) named is not one of the project's (404 in the API)."""


class LabelConflict(LabelError, Conflict):
    """Well formed, but refused by the project's state: a grade off its scale, a key used for another item, an item
    an expert was not given (409)."""


class QueueForbidden(LabelError, Forbidden):
    """An expert asked for one queue by name: experts get the project's mix (403 in the API)."""


@dataclass(frozen=True)
class Claim:
    """An item leased to an expert: the pair (with query and passage loaded), its current definition and the
    queue that served it."""

    lease: Lease
    pair: Pair
    definition: RelevanceDefinition | None

    @property
    def queue(self) -> str:
        return self.lease.queue


@dataclass(frozen=True)
class SubmitResult:
    label: Label
    created: bool


def _claim_for(lease: Lease) -> Claim:
    pair = Pair.objects.select_related("query", "passage").get(id=lease.pair_id)
    return Claim(lease=lease, pair=pair, definition=current_definition(query=pair.query_id))


def _held(*, project: Project, annotator: AbstractBaseUser, strategy: str | None, now: datetime) -> QuerySet[Lease]:
    """The expert's unexpired, unskipped leases in the project (of one queue when `strategy` is given), oldest
    claim first."""
    held = Lease.objects.filter(annotator=annotator, pair__project=project, skipped=False, expires_at__gt=now)
    if strategy is not None:
        held = held.filter(queue=strategy)
    return held.order_by("claimed_at", "id")


def _held_lease(*, project: Project, annotator: AbstractBaseUser, strategy: str | None, now: datetime) -> Lease | None:
    return _held(project=project, annotator=annotator, strategy=strategy, now=now).first()


def _try_claim(*, project: Project, annotator: AbstractBaseUser, strategy: str, pair_id: int,
               eligible: QuerySet[Pair], now: datetime) -> Lease | None:
    """Lease `pair_id` if nobody holds its row lock and it is still eligible once locked (checked by a new
    statement, which sees what a claim that held the lock committed)."""
    with transaction.atomic():
        locked = Pair.objects.select_for_update(skip_locked=True).filter(id=pair_id, project=project)
        if not locked.values_list("id", flat=True).first():
            return None
        if not eligible.filter(id=pair_id).exists():
            return None
        expires = now + timedelta(minutes=project.lease_minutes)
        lease, _ = Lease.objects.update_or_create(
            pair_id=pair_id, annotator=annotator,
            defaults={"queue": strategy, "claimed_at": now, "expires_at": expires, "skipped": False},
        )
        return lease


def _is_expert(project: Project, user: AbstractBaseUser) -> bool:
    return project_role(user=user, project=project) == Membership.Role.EXPERT


def _strategy_check(project: Project, annotator: AbstractBaseUser, strategy: str | None) -> None:
    """A queue named by `strategy` is for admins previewing it. An expert is refused: the conflict queue would hand
    them exactly the items where another expert contradicted the judge, and the uncertain and stratified ones the
    order of the judge's P, before they label them."""
    if strategy is None:
        return
    if strategy not in QUEUE_STRATEGIES:
        raise LabelError(f"unknown strategy {strategy!r}; one of {', '.join(QUEUE_STRATEGIES)}")
    if _is_expert(project, annotator):
        raise QueueForbidden(f"experts label the project's mix of queues; only a project admin may ask for the "
                             f"{strategy!r} queue alone")


def _claim_new(*, project: Project, annotator: AbstractBaseUser, strategy: str | None, now: datetime) -> Claim | None:
    """Lease one more item: the first claimable candidate of the asked strategy, or of the project's mix in the
    order of the strategies furthest below their share. An item the expert already holds is not eligible."""
    if has_stopping_target(project) and _is_expert(project, annotator) and project_target_met(project=project):
        return None  # the project's stopping target is met: experts are done, admins may go on
    strategies = [strategy] if strategy is not None else strategy_order(project=project, annotator=annotator,
                                                                         now=now)
    for name in strategies:
        eligible = eligible_pairs(project=project, annotator=annotator, now=now, for_review=name == "conflict")
        # Candidates another expert claims meanwhile are skipped (row locked) or found ineligible once locked;
        # a second round fetches fresh candidates in case all of the first were taken.
        for _ in range(2):
            candidates = queue_candidates(
                project=project, annotator=annotator, strategy=name, now=now, limit=CANDIDATES_PER_TRY,
                eligible=eligible,
            )
            if not candidates:
                break
            for pair_id in candidates:
                lease = _try_claim(project=project, annotator=annotator, strategy=name, pair_id=pair_id,
                                   eligible=eligible, now=now)
                if lease is not None:
                    return _claim_for(lease)
    return None


def queue_next_for_annotator(*, project: Project, annotator: AbstractBaseUser, strategy: str | None = None,
                             now: datetime | None = None) -> Claim | None:
    """The item the expert should label next, leased to them: an unexpired lease they already hold (a reload,
    an undo) first, else the first claimable candidate of the asked strategy, or of the project's mix in the
    order of the strategies furthest below their share. None when every queue is empty for them."""
    now = now or timezone.now()
    _strategy_check(project, annotator, strategy)
    held = _held_lease(project=project, annotator=annotator, strategy=strategy, now=now)
    if held is not None:
        return _claim_for(held)
    return _claim_new(project=project, annotator=annotator, strategy=strategy, now=now)


def queue_prefetch_for_annotator(*, project: Project, annotator: AbstractBaseUser, shown: int,
                                 strategy: str | None = None, now: datetime | None = None) -> Claim | None:
    """The item after `shown` (the pair on the expert's screen), leased now so that the workspace can show it
    the moment the expert labels `shown`: the next lease they hold besides `shown` (a reload keeps the same
    next item), else one more claimed. At most two items are held this way. None when the queues are empty."""
    now = now or timezone.now()
    _strategy_check(project, annotator, strategy)
    other = _held(project=project, annotator=annotator, strategy=strategy, now=now).exclude(pair_id=shown).first()
    if other is not None:
        return _claim_for(other)
    return _claim_new(project=project, annotator=annotator, strategy=strategy, now=now)


@transaction.atomic
def lease_restart(*, project: Project, annotator: AbstractBaseUser, pair_id: int,
                  now: datetime | None = None) -> bool:
    """The expert now looks at `pair_id`, which was leased to them ahead of time (prefetched): its lease runs
    from now, so the time spent on it and its expiry count from when they saw it. False when they no longer
    hold it (it expired and went to someone else, or was never theirs): the screen must be refreshed."""
    now = now or timezone.now()
    shown = _held(project=project, annotator=annotator, strategy=None, now=now).filter(pair_id=pair_id)
    return bool(shown.update(claimed_at=now, expires_at=now + timedelta(minutes=project.lease_minutes)))


def _time_spent_check(seconds: float | None) -> None:
    if seconds is not None and not 0 <= seconds <= MAX_TIME_SPENT_SECONDS:
        raise LabelError(f"time spent must be between 0 and {MAX_TIME_SPENT_SECONDS} seconds, got {seconds!r}")


def _validated(project: Project, grade: object, note: str, time_spent_seconds: float | None,
               client_key: str) -> int:
    scale = project.label_scale
    if isinstance(grade, bool) or not isinstance(grade, int) or grade not in scale.values:
        raise LabelConflict(f"grade {grade!r} is not on this project's scale; the grades are {list(scale.values)}")
    if len(note) > MAX_NOTE_CHARS:
        raise LabelError(f"the note has {len(note):,} characters; the limit is {MAX_NOTE_CHARS:,}")
    _time_spent_check(time_spent_seconds)
    if len(client_key) > MAX_CLIENT_KEY_CHARS:
        raise LabelError(f"the idempotency key is longer than {MAX_CLIENT_KEY_CHARS} characters")
    return grade


def _by_key(annotator: AbstractBaseUser, client_key: str, pair_id: int) -> Label | None:
    existing = Label.objects.filter(annotator=annotator, client_key=client_key).first()
    if existing is not None and existing.pair_id != pair_id:
        raise LabelConflict(f"idempotency key {client_key!r} was already used for another item")
    return existing


def _given_check(*, project: Project, annotator: AbstractBaseUser, pair: Pair, lease: Lease | None) -> None:
    """An expert labels only what the queue gave them (a lease they did not pass on, expired or not) or what they
    labelled before: choosing items by id would let them pick the items the queues keep for review. Admins, who
    adjudicate, label any item."""
    if lease is not None and not lease.skipped:
        return
    if not _is_expert(project, annotator) or Label.objects.filter(pair=pair, annotator=annotator).exists():
        return
    raise LabelConflict(f"item {pair.id} was not given to you: experts label the items their queue hands them "
                        "(GET .../queue/next/) and may change their own labels")


def label_submit(*, project: Project, annotator: AbstractBaseUser, pair_id: int, grade: int, note: str = "",
                 unsure: bool = False, time_spent_seconds: float | None = None, time_spent_from_lease: bool = False,
                 client_key: str = "", definition_id: int | None = None, now: datetime | None = None) -> SubmitResult:
    """Store the expert's label on a pair of the project and release their lease on it. A label they gave the
    pair before is superseded (history is kept). An expert may label only a pair leased to them or one they
    labelled before (LabelConflict otherwise); admins any pair. With a `client_key`, submitting the same key again
    returns the stored label and writes nothing. `definition_id` is the definition version the expert was shown
    (default: the current one). `time_spent_from_lease`: the time spent is the time since the expert's lease on
    the item was claimed (none without a lease), for a client that does not measure it (the workspace page)."""
    now = now or timezone.now()
    grade = _validated(project, grade, note, time_spent_seconds, client_key)
    try:
        with transaction.atomic():
            # The pair row lock serializes submissions of one item, so a repeated key is seen, not raced.
            pair = Pair.objects.select_for_update().filter(id=pair_id, project=project).first()
            if pair is None:
                raise LabelItemNotFound(f"item {pair_id!r} is not in project {project.slug!r}")
            if client_key:
                existing = _by_key(annotator, client_key, pair_id)
                if existing is not None:
                    return SubmitResult(label=existing, created=False)
            if definition_id is None:
                definition = current_definition(query=pair.query_id)
            else:
                definition = RelevanceDefinition.objects.filter(id=definition_id, query_id=pair.query_id).first()
                if definition is None:
                    raise LabelItemNotFound(f"definition {definition_id!r} is not a version of this item's query")
            lease = Lease.objects.filter(pair=pair, annotator=annotator).first()
            _given_check(project=project, annotator=annotator, pair=pair, lease=lease)
            if time_spent_from_lease and lease is not None and not lease.skipped:
                time_spent_seconds = (now - lease.claimed_at).total_seconds()
                _time_spent_check(time_spent_seconds)
            Label.objects.filter(pair=pair, annotator=annotator, superseded_at__isnull=True).update(superseded_at=now)
            label = Label.objects.create(
                pair=pair, annotator=annotator, grade=grade, role=Label.Role.ANNOTATOR, definition=definition,
                note=note, unsure=unsure, time_spent_seconds=time_spent_seconds, client_key=client_key,
                queue=lease.queue if lease is not None else "", created_at=now,
            )
            if lease is not None:
                lease.delete()
            validation_request_soon(project=project)
            round_check(project_id=project.id)
    except IntegrityError:
        # Two submissions with one key on a backend without row locks: the loser returns the winner's label.
        existing = _by_key(annotator, client_key, pair_id) if client_key else None
        if existing is None:
            raise
        return SubmitResult(label=existing, created=False)
    return SubmitResult(label=label, created=True)


@transaction.atomic
def label_undo(*, project: Project, annotator: AbstractBaseUser, now: datetime | None = None) -> Label | None:
    """Withdraw the expert's most recent label in the project (kept in the history, marked undone) and lease
    its item back to them, so it is the next one they see. Items they were holding go back to the pool.
    None when there is nothing to undo."""
    now = now or timezone.now()
    last = (
        Label.objects.select_for_update()
        .filter(pair__project=project, annotator=annotator, role=Label.Role.ANNOTATOR, superseded_at__isnull=True)
        .order_by("-created_at", "-id")
        .first()
    )
    if last is None:
        return None
    Label.objects.filter(id=last.id).update(superseded_at=now, undone=True)
    Lease.objects.filter(annotator=annotator, pair__project=project, skipped=False).exclude(pair_id=last.pair_id).delete()
    Lease.objects.update_or_create(
        pair_id=last.pair_id, annotator=annotator,
        defaults={"queue": last.queue, "claimed_at": now,
                  "expires_at": now + timedelta(minutes=project.lease_minutes), "skipped": False},
    )
    validation_request_soon(project=project)
    last.refresh_from_db()
    return last


@transaction.atomic
def item_skip(*, project: Project, annotator: AbstractBaseUser, pair_id: int, now: datetime | None = None) -> None:
    """The expert passes on an item: it is not given to them again and goes back to the others."""
    now = now or timezone.now()
    if not Pair.objects.filter(id=pair_id, project=project).exists():
        raise LabelItemNotFound(f"item {pair_id!r} is not in project {project.slug!r}")
    Lease.objects.update_or_create(
        pair_id=pair_id, annotator=annotator,
        defaults={"queue": "", "claimed_at": now, "expires_at": now, "skipped": True},
    )

"""Experts' queues: which pairs an expert may get next (eligibility: overlap, leases, skips) and, per strategy,
in which order. Each ordering is one indexed query that stops after `limit` rows, so it stays fast on projects
with millions of pairs."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import (
    Case,
    Count,
    Exists,
    ExpressionWrapper,
    F,
    FloatField,
    IntegerField,
    Max,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Abs, Coalesce, Floor, Greatest
from django.utils import timezone

from labeling.exceptions import DomainError
from labeling.llm_adapter import judge_relevance_rule
from labeling.models import Judgment, Label, LabellingRound, Lease, Membership, Pair, Project
from labeling.models.project import QUEUE_STRATEGIES
from labeling.selectors.completeness import has_stopping_target, project_target_met
from labeling.selectors.projects import project_role
from models_llm.replay.selection import DECILES, mix_order

# The overlap draw uses digits of sample_key that the random order does not: frac(sample_key * 1024) is
# uniform and, for all practical purposes, independent of the random order.
OVERLAP_DIGITS = 1024
# Counting what is left stops here: an exact count of a million-pair pool on every page would cost more
# than the page.
LEFT_COUNT_CAP = 10_000


class QueueError(DomainError):
    """A queue asked for that does not exist."""


@dataclass(frozen=True)
class QueueProgress:
    done_today: int
    left: int
    left_capped: bool

    @property
    def left_display(self) -> str:
        return f"{self.left:,}+" if self.left_capped else f"{self.left:,}"


def _count(queryset: QuerySet) -> Subquery:
    return Coalesce(
        Subquery(queryset.order_by().values("pair").annotate(n=Count("*")).values("n")[:1]),
        Value(0),
        output_field=IntegerField(),
    )


def eligible_pairs(*, project: Project, annotator: AbstractBaseUser, now: datetime,
                   for_review: bool = False) -> QuerySet[Pair]:
    """Pairs of the project the expert may be handed now: they have no current label on it, did not skip it
    and hold no lease on it; unless `for_review`, the item still wants labels: the current labels of other
    experts plus their unexpired leases are fewer than k (`labels_per_item` on the `overlap_share` of items,
    1 on the others)."""
    mine = Q(annotator=annotator)
    pairs = Pair.objects.filter(project=project).exclude(
        Exists(Label.objects.filter(mine, pair=OuterRef("pk"), superseded_at__isnull=True))
    ).exclude(
        Exists(Lease.objects.filter(mine, Q(skipped=True) | Q(expires_at__gt=now), pair=OuterRef("pk")))
    )
    if for_review:
        return pairs
    taken = _count(
        Label.objects.filter(pair=OuterRef("pk"), role=Label.Role.ANNOTATOR, superseded_at__isnull=True).exclude(mine)
    ) + _count(Lease.objects.filter(pair=OuterRef("pk"), skipped=False, expires_at__gt=now).exclude(mine))
    if project.labels_per_item <= 1 or project.overlap_share <= 0:
        return pairs.alias(taken=taken).filter(taken__lt=1)
    scaled = F("sample_key") * OVERLAP_DIGITS
    wanted = Case(
        When(overlap_draw__lt=project.overlap_share, then=Value(project.labels_per_item)),
        default=Value(1),
        output_field=IntegerField(),
    )
    return (
        pairs.alias(overlap_draw=ExpressionWrapper(scaled - Floor(scaled), output_field=FloatField()))
        .alias(taken=taken, wanted=wanted)
        .filter(taken__lt=F("wanted"))
    )


def _gold_unknown(project: Project, eligible: QuerySet[Pair]) -> QuerySet[Pair]:
    """The eligible pairs whose gold grade is not known yet (no reference grade, no adjudication), unless the project
    re-annotates graded pairs (`queue_graded`). Pairs experts agreed on are out already: eligible_pairs leaves a
    pair with another expert's label out unless the overlap wants more labels on it."""
    if project.queue_graded:
        return eligible
    adjudicated = Label.objects.filter(pair=OuterRef("pk"), role=Label.Role.ADJUDICATOR, superseded_at__isnull=True)
    return eligible.filter(reference_grade__isnull=True).exclude(Exists(adjudicated))


def _judged_candidates(judgments: QuerySet[Judgment], eligible: QuerySet[Pair], limit: int) -> list[int]:
    """Pair ids in the judgments' order, eligible ones only, each once (a pair may have a judgment per
    definition version)."""
    rows = judgments.filter(pair__in=eligible.values("id")).values_list("pair_id", flat=True)[: limit * 2]
    return list(dict.fromkeys(rows))[:limit]


def _ok_judgments(project: Project) -> QuerySet[Judgment]:
    return Judgment.objects.filter(judge_id=project.queue_judge_id, status=Judgment.Status.OK)


def _uncertain(project: Project, eligible: QuerySet[Pair], limit: int) -> list[int]:
    if project.queue_judge_id is None:
        return []
    ordered = _ok_judgments(project).order_by(Abs(F("p_relevant") - Value(0.5)), "pair_id")
    return _judged_candidates(ordered, _gold_unknown(project, eligible), limit)


def _disagreement(project: Project, eligible: QuerySet[Pair], limit: int) -> list[int]:
    # The spread of P over the project's judges (pairs with fewer than two judgments have none), or the spread
    # among an ensemble judge's own members when that is larger.
    spread = (
        Judgment.objects.filter(judge__project=project, status=Judgment.Status.OK,
                                pair__in=_gold_unknown(project, eligible).values("id"))
        .values("pair_id")
        .annotate(
            n=Count("judge", distinct=True),
            across=Max("p_relevant") - Min("p_relevant"),
            within=Coalesce(Max("spread"), Value(0.0)),
        )
        .annotate(disagreement=Case(When(n__gte=2, then=Greatest("across", "within")), default=F("within")))
        .filter(disagreement__gt=0)
        .order_by("-disagreement", "pair_id")
        .values_list("pair_id", flat=True)
    )
    return list(spread[:limit])


def _conflict(project: Project, eligible: QuerySet[Pair], limit: int) -> list[int]:
    """Pairs where another expert's current label and the queue judge's P fall on opposite sides (relevant
    from the scale's `relevant_from`; the judge's P relevant under its relevance rule, on its own P as the queues
    read it), the most confident contradictions first (P furthest from the rule's threshold)."""
    if project.queue_judge_id is None:
        return []
    relevant_from = project.label_scale.relevant_from
    labels = Label.objects.filter(pair=OuterRef("pair_id"), role=Label.Role.ANNOTATOR, superseded_at__isnull=True)
    rule = judge_relevance_rule(project.queue_judge)
    called = Q(p_relevant__gt=rule.threshold) if rule.strict else Q(p_relevant__gte=rule.threshold)
    contradicted = (called & Q(has_irrelevant_label=True)) | (~called & Q(has_relevant_label=True))
    ordered = (
        _ok_judgments(project)
        .alias(
            has_relevant_label=Exists(labels.filter(grade__gte=relevant_from)),
            has_irrelevant_label=Exists(labels.filter(grade__lt=relevant_from)),
        )
        .filter(contradicted)
        .order_by(Abs(F("p_relevant") - Value(rule.threshold)).desc(), "pair_id")
    )
    return _judged_candidates(ordered, eligible, limit)


def _random(project: Project, eligible: QuerySet[Pair], limit: int) -> list[int]:
    # A graded pair is in the random validation sample already (its gold counts): labelling it adds nothing there.
    return list(_gold_unknown(project, eligible).order_by("sample_key", "id").values_list("id", flat=True)[:limit])


def _sequential(project: Project, eligible: QuerySet[Pair], limit: int) -> list[int]:
    return list(eligible.order_by("query_id", "id").values_list("id", flat=True)[:limit])


def decile_bounds(decile: int) -> tuple[float, float]:
    return decile / DECILES, (decile + 1) / DECILES


def _in_decile(decile: int, field: str = "p_relevant") -> Q:
    low, high = decile_bounds(decile)
    upper = Q(**{f"{field}__lte": high}) if decile == DECILES - 1 else Q(**{f"{field}__lt": high})
    return Q(**{f"{field}__gte": low}) & upper


def stratified_counts(*, project: Project) -> list[int]:
    """Current labels served by the stratified queue, per decile of the queue judge's P."""
    if project.queue_judge_id is None:
        return [0] * DECILES
    served = Label.objects.filter(
        pair__project=project, queue="stratified", role=Label.Role.ANNOTATOR, superseded_at__isnull=True
    )
    p = Subquery(_ok_judgments(project).filter(pair=OuterRef("pair_id")).order_by("-id").values("p_relevant")[:1])
    labelled = served.annotate(p=p).values_list("p", flat=True)
    counts = [0] * DECILES
    for value in labelled:
        if value is not None:
            counts[min(int(value * DECILES), DECILES - 1)] += 1
    return counts


def _stratified(project: Project, eligible: QuerySet[Pair], limit: int) -> list[int]:
    """Candidates from the decile of P with the fewest stratified labels so far (the emptiest first; within a
    decile in random order), so each decile gets the same number of labels."""
    if project.queue_judge_id is None:
        return []
    counts = stratified_counts(project=project)
    for decile in sorted(range(DECILES), key=lambda d: (counts[d], d)):
        ordered = (
            _ok_judgments(project).filter(_in_decile(decile)).order_by("pair__sample_key", "pair_id")
        )
        found = _judged_candidates(ordered, eligible, limit)
        if found:
            return found
    return []


_ORDERINGS = {
    "uncertain": _uncertain,
    "disagreement": _disagreement,
    "conflict": _conflict,
    "random": _random,
    "stratified": _stratified,
    "sequential": _sequential,
}


def queue_candidates(*, project: Project, annotator: AbstractBaseUser, strategy: str, now: datetime,
                     limit: int = 20, eligible: QuerySet[Pair] | None = None) -> list[int]:
    """Up to `limit` ids of pairs the expert may get now, first to last in the strategy's order:
    `uncertain` P of the queue judge closest to 0.5; `disagreement` largest spread of P across the project's
    judges; `conflict` another expert's label contradicts the queue judge (review: k does not apply);
    `random` the pool in its random order (a uniform sample); `stratified` evenly over deciles of P;
    `sequential` query by query. Pairs without judgments only come from `random` and `sequential`. The uncertain,
    disagreement and random queues serve only pairs whose gold grade is unknown, unless the project re-annotates
    graded pairs (`queue_graded`).
    `eligible` is `eligible_pairs(...)` for this strategy when the caller has built it already."""
    if strategy not in _ORDERINGS:
        raise QueueError(f"unknown strategy {strategy!r}; one of {', '.join(QUEUE_STRATEGIES)}")
    if eligible is None:
        eligible = eligible_pairs(project=project, annotator=annotator, now=now, for_review=strategy == "conflict")
    return _ORDERINGS[strategy](project, eligible, limit)


def _shares(project: Project) -> dict[str, float]:
    shares = {name: float(share) for name, share in (project.queue_mix or {}).items()
              if name in _ORDERINGS and share > 0}
    return shares or {"random": 1.0}


def _served(project: Project, annotator: AbstractBaseUser, strategies: list[str], now: datetime) -> dict[str, int]:
    """Items each strategy served: while a round labels its batch, the round's (every expert's current labels
    since it started, and the items leased and not labelled yet, so that an item fetched ahead counts when it is
    handed out), so that the round keeps its own quotas; else the expert's current labels."""
    labels = Label.objects.filter(pair__project=project, role=Label.Role.ANNOTATOR, superseded_at__isnull=True,
                                  queue__in=strategies)
    labelling = (LabellingRound.objects.filter(project=project, status=LabellingRound.Status.PENDING)
                 .values_list("created_at", flat=True).first())
    if labelling is None:
        counted = [labels.filter(annotator=annotator)]
    else:
        counted = [labels.filter(created_at__gte=labelling),
                   Lease.objects.filter(pair__project=project, skipped=False, expires_at__gt=now,
                                        claimed_at__gte=labelling, queue__in=strategies)]
    served: dict[str, int] = {}
    for rows in counted:
        for name, n in rows.values("queue").annotate(n=Count("id")).values_list("queue", "n"):
            served[name] = served.get(name, 0) + n
    return served


def strategy_order(*, project: Project, annotator: AbstractBaseUser, now: datetime | None = None) -> list[str]:
    """The project's mixed strategies, the one furthest below its share of the items served first: with
    80 uncertain / 20 random, every fifth label comes from the random queue. Ties go to the larger share. While a
    round labels its batch the shares hold within the round (over all its experts), else over the expert's own
    labels."""
    shares = _shares(project)
    return mix_order(shares, _served(project, annotator, list(shares), now or timezone.now()))


def _target_met_for(project: Project, annotator: AbstractBaseUser) -> bool:
    if not has_stopping_target(project):
        return False
    return project_role(user=annotator, project=project) == Membership.Role.EXPERT and project_target_met(
        project=project)


def queue_progress(*, project: Project, annotator: AbstractBaseUser, now: datetime,
                   shown: int | None = None) -> QueueProgress:
    """Labels the expert gave in the project today (local time, undone ones not counted) and the items still
    open to them (counted up to LEFT_COUNT_CAP): those they may be handed and those leased to them but not
    labelled (the workspace prefetches one), except `shown`, the item on their screen."""
    midnight = timezone.make_aware(datetime.combine(timezone.localtime(now).date(), time.min))
    # Current labels only: an undone label is withdrawn, and a changed one counts once.
    done_today = Label.objects.filter(
        pair__project=project, annotator=annotator, role=Label.Role.ANNOTATOR, superseded_at__isnull=True,
        created_at__gte=midnight,
    ).count()
    open_ids = eligible_pairs(project=project, annotator=annotator, now=now).values("id")[: LEFT_COUNT_CAP + 1]
    if _target_met_for(project, annotator):
        open_ids = Pair.objects.none().values("id")  # the stopping target is met: experts get only what they hold
    held_ids = (Lease.objects.filter(annotator=annotator, pair__project=project, skipped=False, expires_at__gt=now)
                .exclude(pair_id=shown).values("pair_id"))
    left = Pair.objects.filter(Q(id__in=open_ids) | Q(id__in=held_ids)).count()
    return QueueProgress(done_today=done_today, left=min(left, LEFT_COUNT_CAP), left_capped=left > LEFT_COUNT_CAP)

"""The project overview's "what to do next": the steps of a first hour for the reader's role (an admin sets the
project up, an expert annotates, a viewer reads), each with its state, the counts that decide it and the page that
does it; and the number of gold grades, shown beside the labels."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Sum

from labeling.models import Invitation, Judge, Judgment, Label, Membership, Pair, Project, Run, ScoringJob
from labeling.selectors.adjudication import adjudication_counts
from labeling.selectors.browse import gold_grade_sql
from labeling.selectors.completeness import has_stopping_target, project_target_met
from labeling.selectors.projects import ProjectCounts
from labeling.selectors.queues import queue_progress


class StepState(StrEnum):
    DONE = "done"
    TO_DO = "to do"
    RUNNING = "running"  # a worker is doing it now
    READY = "ready"  # there is something to read or take away
    WAITING = "waiting"  # nothing to read yet: another step comes first


@dataclass(frozen=True)
class StepCount:
    """One number a step shows: `value` `label` ("3 judges"), or `value` of `of` `label` ("700 of 900 pairs
    judged"); `capped`: the value is a lower bound (a queue counted up to its cap)."""

    value: int
    singular: str
    plural: str
    of: int | None = None
    capped: bool = False

    @property
    def label(self) -> str:
        """The noun for the number it follows: `of` when there is one ("1 of 1 pair"), else `value`."""
        counted = self.value if self.of is None else self.of
        return self.singular if counted == 1 and not self.capped else self.plural


@dataclass(frozen=True)
class Step:
    """A thing to do next, and the page (`url_name` of the project, then `anchor`) where it is done; `target` says
    when a step with no natural end counts as done."""

    key: str
    title: str
    state: StepState
    counts: tuple[StepCount, ...]
    url_name: str
    action: str
    anchor: str = ""
    target: str = ""


@dataclass(frozen=True)
class Overview:
    """`gold_grades` is None for an expert: labelling blind, they must not see it move when their label agrees with
    another expert's (labeling.selectors.disclosure)."""

    steps: tuple[Step, ...]
    gold_grades: int | None


def gold_grade_count(*, project: Project) -> int:
    """The project's pairs that have a gold grade (labeling.gold: a reference grade, else an adjudicator's label,
    else agreeing annotators), by the rule's SQL (labeling.selectors.browse.gold_grade_sql). Reference grades are
    counted as they are; the rule runs only on the other pairs with a current label, few beside a pool of millions."""
    referenced = Pair.objects.filter(project=project, reference_grade__isnull=False).count()
    labelled = Label.objects.filter(pair__project=project, superseded_at__isnull=True).values("pair_id")
    by_labels = (Pair.objects.filter(project=project, reference_grade__isnull=True, id__in=labelled)
                 .alias(gold=gold_grade_sql()).filter(gold__isnull=False).count())
    return referenced + by_labels


def _judged_pairs(project: Project) -> int:
    """Pairs with an ok judgment by at least one judge (a failed call gives no P)."""
    return (Judgment.objects.filter(pair__project=project, status=Judgment.Status.OK).order_by()
            .values("pair_id").distinct().count())


@dataclass(frozen=True)
class _Scoring:
    """The project's unfinished scoring jobs: how many, and the pairs they have scored of those they queued."""

    jobs: int
    done: int
    total: int


def _scoring_now(project: Project) -> _Scoring:
    sums = ScoringJob.objects.filter(project=project, finished_at__isnull=True).aggregate(
        jobs=Count("id"), done=Sum("done"), total=Sum("total"))
    return _Scoring(jobs=sums["jobs"], done=sums["done"] or 0, total=sums["total"] or 0)


def _score_step(counts: ProjectCounts, judged: int, scoring: _Scoring) -> Step:
    """Running while a scoring job is unfinished (whatever the pool's coverage: a job may be re-scoring), else done
    once every pair has a judgment."""
    shown = [StepCount(judged, "pair judged by a judge", "pairs judged by a judge", of=counts.pairs)]
    if scoring.jobs:
        state = StepState.RUNNING
        shown += [StepCount(scoring.jobs, "job running", "jobs running"),
                  StepCount(scoring.done, "pair scored", "pairs scored", of=scoring.total)]
    else:
        state = _done(counts.pairs > 0 and judged == counts.pairs)
    return Step("score", "Score the pool", state, tuple(shown), "labeling:judges", "Start scoring")


def _label_done(project: Project, counts: ProjectCounts, gold: int, conflicts: int) -> tuple[bool, str]:
    """Whether labelling is done, and the target that decides it: the project's stopping target where its admin set
    one, else a gold grade for every pair of the pool. Open conflicts keep it to do either way."""
    if has_stopping_target(project):
        met = project_target_met(project=project)
        target = "Done when the project's stopping target is met" + (" (met)." if met else " (not yet).")
    else:
        met = counts.pairs > 0 and gold == counts.pairs
        target = "Done when every pair has a gold grade, or set a stopping target in Settings."
    return met and conflicts == 0, target


def _ready(available: bool) -> StepState:
    return StepState.READY if available else StepState.WAITING


def _done(done: bool) -> StepState:
    return StepState.DONE if done else StepState.TO_DO


def _admin_steps(project: Project, counts: ProjectCounts, gold: int, now: datetime) -> list[Step]:
    judges = Judge.objects.filter(project=project).count()
    judged = _judged_pairs(project)
    scoring = _scoring_now(project)
    experts = Membership.objects.filter(project=project, role=Membership.Role.EXPERT).count()
    pending = Invitation.objects.filter(project=project, used_at__isnull=True, revoked_at__isnull=True,
                                        expires_at__gt=now).count()
    conflicts = adjudication_counts(project=project)["conflict"]
    data = (StepCount(counts.queries, "query", "queries"), StepCount(counts.passages, "passage", "passages"),
            StepCount(counts.pairs, "pair", "pairs"))
    people = (StepCount(experts, "expert", "experts"), StepCount(pending, "invitation pending", "invitations pending"))
    labels = (StepCount(counts.labels, "label", "labels"),
              StepCount(gold, "pair with a gold grade", "pairs with a gold grade", of=counts.pairs),
              StepCount(conflicts, "conflict to adjudicate", "conflicts to adjudicate"))
    # Conflicts wait for an admin's grade; without them, labelling goes on in the workspace.
    review = ("labeling:adjudication", "Adjudicate") if conflicts else ("labeling:workspace", "Label")
    exportable = (StepCount(gold, "gold grade", "gold grades"), StepCount(judged, "pair judged", "pairs judged"))
    labelled, target = _label_done(project, counts, gold, conflicts)
    return [
        Step("import", "Import the data", _done(counts.pairs > 0), data, "labeling:bundles", "Import a bundle"),
        Step("judge", "Add an LLM judge", _done(judges > 0), (StepCount(judges, "judge", "judges"),),
             "labeling:judges", "Add a judge"),
        _score_step(counts, judged, scoring),
        Step("invite", "Invite experts", _done(experts > 0), people, "labeling:members", "Invite experts"),
        Step("label", "Label and review", _done(labelled), labels, *review, target=target),
        Step("export", "Export the qrels", _ready(gold > 0 or judged > 0), exportable, "labeling:project_detail",
             "Export", anchor="#export"),
    ]


def _expert_steps(project: Project, user: AbstractBaseUser, now: datetime) -> list[Step]:
    progress = queue_progress(project=project, annotator=user, now=now)
    mine = Label.objects.filter(pair__project=project, annotator=user, superseded_at__isnull=True).count()
    waiting = StepCount(progress.left, "item waiting for you", "items waiting for you", capped=progress.left_capped)
    given = (StepCount(mine, "label", "labels"), StepCount(progress.done_today, "today", "today"))
    return [
        Step("annotate", "Start annotating", _done(not progress.left and mine > 0), (waiting,), "labeling:workspace",
             "Start annotating"),
        Step("my-labels", "Your labels so far", _done(mine > 0), given, "labeling:workspace_summary",
             "See your session"),
    ]


def _viewer_steps(project: Project, gold: int) -> list[Step]:
    judges = Judge.objects.filter(project=project).count()
    judged = _judged_pairs(project)
    runs = Run.objects.filter(project=project).count()
    report = (StepCount(gold, "gold grade", "gold grades"), StepCount(judges, "judge", "judges"),
              StepCount(judged, "pair judged", "pairs judged"))
    return [
        Step("validation", "Read how the judges agree with gold", _ready(gold > 0 and judged > 0), report,
             "labeling:validation", "Open the validation report"),
        Step("systems", "Compare retrieval systems", _ready(runs > 0), (StepCount(runs, "run", "runs"),),
             "labeling:systems", "Open the systems"),
    ]


def project_overview(*, project: Project, user: AbstractBaseUser, role: str | None, counts: ProjectCounts,
                     now: datetime) -> Overview:
    """What the overview shows `user` (a member with `role`; `counts` the project's row counts): the next steps of
    their role, and the number of gold grades where the role may see it."""
    if role == Membership.Role.EXPERT:
        return Overview(steps=tuple(_expert_steps(project, user, now)), gold_grades=None)
    gold = gold_grade_count(project=project)
    if role == Membership.Role.ADMIN:
        steps = _admin_steps(project, counts, gold, now)
    else:
        steps = _viewer_steps(project, gold)
    return Overview(steps=tuple(steps), gold_grades=gold)

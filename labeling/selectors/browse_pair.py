"""Everything known about one pair, as a member may see it (labeling.selectors.disclosure): its query and passage,
reference and gold grade, every label with its history, every judgment with its raw output (and an ensemble's
prompt strategies), stale flags and pool sources."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import F

from labeling.gold import LabelView, gold_grade
from labeling.models import Judge, Judgment, Label, MemberOutput, Pair, PairSource, Project, RelevanceDefinition
from labeling.selectors.browse import OFF_SCALE, grade_names
from labeling.selectors.definitions import current_definition
from labeling.selectors.disclosure import Disclosure, item_disclosure, labels_visible_to
from labeling.selectors.export import calibrators
from labeling.selectors.lookups import pair_of_project


@dataclass(frozen=True)
class LabelEntry:
    """A label, current or one it replaced (`label.superseded_at`), with its grade's name."""

    label: Label
    grade_name: str

    @property
    def current(self) -> bool:
        return self.label.superseded_at is None


@dataclass(frozen=True)
class JudgmentEntry:
    """A judgment with its calibrated P (the judge's calibrator in use applied to its raw P; None: no P or no
    calibrator), whether it is stale (its judge has not judged the pair under the current definition) and, for
    an ensemble judge, what each prompt strategy answered under the same definition."""

    judgment: Judgment
    p_calibrated: float | None
    stale: bool
    members: tuple[MemberOutput, ...]


@dataclass(frozen=True)
class PairDetail:
    pair: Pair
    disclosure: Disclosure
    labelled: bool  # the member has a current label on the pair
    gold: int | None  # None: no gold grade, or not disclosed
    gold_from: str  # how the gold grade was decided ("" when there is none or it is not disclosed)
    current_definition: RelevanceDefinition | None
    labels: tuple[LabelEntry, ...]  # by annotator, each one's history oldest first
    judgments: tuple[JudgmentEntry, ...]  # () when the judges' P is not disclosed
    unjudged: tuple[str, ...]  # the judges (by name) that have not judged the pair; () when P is not disclosed
    sources: tuple[PairSource, ...]  # those the member may see
    passage_metadata: object  # as the member may see it


def _gold_from(reference: int | None, labels: list[Label]) -> str:
    if any(label.role == Label.Role.ADJUDICATOR for label in labels):
        return "adjudication"
    if reference is not None:
        return "reference qrels"
    return "the experts agree" if labels else ""


def _judgments(pair: Pair, current: RelevanceDefinition | None) -> tuple[JudgmentEntry, ...]:
    judgments = list(Judgment.objects.filter(pair=pair).select_related("judge", "definition")
                     .order_by("judge__name", F("definition__version").desc(nulls_last=True), "-id"))
    found = calibrators(list({judgment.judge_id: judgment.judge for judgment in judgments}.values()))
    members: dict[tuple[int, int | None], list[MemberOutput]] = defaultdict(list)
    for output in MemberOutput.objects.filter(pair=pair).order_by("judge_id", "member"):
        members[(output.judge_id, output.definition_id)].append(output)
    under_current = {j.judge_id for j in judgments if current is not None and j.definition_id == current.id}
    entries = []
    for judgment in judgments:
        calibrator = found.get(judgment.judge_id)
        calibrated = (float(calibrator.apply(np.asarray([judgment.p_relevant]))[0])
                      if calibrator is not None and judgment.p_relevant is not None else None)
        entries.append(JudgmentEntry(
            judgment=judgment, p_calibrated=calibrated,
            stale=current is not None and judgment.judge_id not in under_current,
            members=tuple(members[(judgment.judge_id, judgment.definition_id)]),
        ))
    return tuple(entries)


def pair_detail(*, project: Project, pair_id: int, user: AbstractBaseUser, role: str | None) -> PairDetail:
    """The pair `pair_id` of the project (NotFound otherwise) with all that `role` may see of it."""
    pair = pair_of_project(project=project, pair_id=pair_id)
    pair = Pair.objects.select_related("query", "passage").get(id=pair.id)
    labels = list(labels_visible_to(project=project, user=user, role=role).filter(pair=pair)
                  .select_related("annotator", "definition").order_by("annotator__username", "id"))
    current_labels = [label for label in labels if label.superseded_at is None]
    labelled = any(label.annotator_id == user.pk for label in current_labels)
    disclosure = item_disclosure(project=project, role=role, labelled=labelled)
    labels = [label for label in labels if label.annotator_id == user.pk or disclosure.others_labels]
    gold, gold_from = None, ""
    if disclosure.reference_grade and disclosure.others_labels:
        gold = gold_grade(pair.reference_grade, [LabelView(grade=label.grade, role=label.role, label_id=label.id)
                                                 for label in current_labels])
        gold_from = _gold_from(pair.reference_grade, current_labels) if gold is not None else ""
    current = current_definition(query=pair.query)
    judgments, unjudged = (), ()
    if disclosure.judge_p:
        judgments = _judgments(pair, current)
        judged = {entry.judgment.judge_id for entry in judgments}
        unjudged = tuple(Judge.objects.filter(project=project).exclude(id__in=judged).order_by("name")
                         .values_list("name", flat=True))
    names = grade_names(project)
    return PairDetail(
        pair=pair, disclosure=disclosure, labelled=labelled, gold=gold, gold_from=gold_from,
        current_definition=current,
        labels=tuple(LabelEntry(label=label, grade_name=names.get(label.grade, OFF_SCALE)) for label in labels),
        judgments=judgments, unjudged=unjudged,
        sources=disclosure.sources(PairSource.objects.filter(pair=pair).order_by("rank", "id")),
        passage_metadata=disclosure.metadata(pair.passage.metadata),
    )


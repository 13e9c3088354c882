"""Blind first, the one rule: what a project member may see of an item beyond its query and passage (its
reference grade, other experts' labels, the judges' P, and what tells them: where a pair came from, the queue that
served it). Every page and endpoint that could show them asks here."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from labeling.job_kinds import kind_of
from labeling.models import Job, Judgment, Label, Membership, PairSource, Project
from labeling.models.query_generation import (
    GENERATED_FOR_KEY,
    GENERATED_KEY,
    GENERATED_POSITIVE,
    SEED_KEY,
    SEED_PASSAGE,
)
from labeling.scale import Grade
from labeling.selectors.query_sets import INTENT_KEY

# Query generation gives its generated positive the job's positive_grade as reference grade, and marks which pair
# that is: by the pool sources of the positive and of the seed passage beside it (one names the other), by the
# query's seed passage (in QAdoc the positive itself) and the generated passage's metadata, and by the job's
# parameters (the grade, and the passages it wrote from). Whoever may not see reference grades sees none of these.
GRADE_TELLING_SOURCES = frozenset({GENERATED_POSITIVE, SEED_PASSAGE})
GRADE_TELLING_KEYS = frozenset({SEED_KEY, GENERATED_KEY, GENERATED_FOR_KEY})
GRADE_TELLING_PARAMETERS = frozenset({"positive_grade", "passages"})


@dataclass(frozen=True)
class Disclosure:
    reference_grade: bool
    others_labels: bool
    judge_p: bool

    @property
    def everything(self) -> bool:
        return self.reference_grade and self.others_labels and self.judge_p

    @property
    def queue(self) -> bool:
        """Whether the queue that served the item may be shown: the conflict queue serves items by other experts'
        labels, the uncertain, disagreement and stratified ones by the judges' P, and the random queue is told
        from them by elimination (80 % uncertain, 20 % random by default)."""
        return self.others_labels and self.judge_p

    def sources(self, sources: Iterable[PairSource]) -> tuple[PairSource, ...]:
        """The item's pool sources as shown: without those that tell its reference grade when that is hidden."""
        if self.reference_grade:
            return tuple(sources)
        return tuple(source for source in sources if source.system not in GRADE_TELLING_SOURCES)

    def metadata(self, metadata: object) -> object:
        """A query's or passage's metadata as shown: without the marks that tell which pair holds a reference grade
        when that is hidden. A generated passage shows none of what generation wrote on it (its intent too: no
        other passage has one)."""
        if self.reference_grade or not isinstance(metadata, dict):
            return metadata
        hidden = GRADE_TELLING_KEYS | ({INTENT_KEY} if metadata.get(GENERATED_KEY) else set())
        return {key: value for key, value in metadata.items() if key not in hidden}

    def generation_parameters(self, parameters: dict) -> dict:
        """A query generation job's parameters as shown: without the grade it gives and the passages it wrote from
        when reference grades are hidden."""
        if self.reference_grade:
            return parameters
        return {key: value for key, value in parameters.items() if key not in GRADE_TELLING_PARAMETERS}


def item_disclosure(*, project: Project, role: str | None, labelled: bool) -> Disclosure:
    """What a member with `role` may see of an item they have (`labelled`) or have not labelled. Experts label
    blind: nothing before they have labelled the item, and afterwards only the judges' P, when the project
    reveals it after submitting. Admins (who adjudicate) and viewers (who audit) see everything. Labelling an
    item never hides anything, so what an expert may not see of an item they labelled they see of no item."""
    if role != Membership.Role.EXPERT:
        return Disclosure(reference_grade=True, others_labels=True, judge_p=True)
    return Disclosure(reference_grade=False, others_labels=False,
                      judge_p=labelled and project.reveal_llm_after_submit)


@dataclass(frozen=True)
class RevealedP:
    """What a member is shown after labelling an item: their grade, and the queue judge's P (None: not judged)."""

    grade: Grade
    judge: str
    p: float | None


def revealed_after_submit(*, project: Project, role: str | None, pair_id: int, grade: int) -> RevealedP | None:
    """The queue judge's P for the item just labelled with `grade`, where the rule lets the member see it; None
    where it does not, or when the project has no queue judge."""
    if not item_disclosure(project=project, role=role, labelled=True).judge_p or project.queue_judge_id is None:
        return None
    judgment = (
        Judgment.objects.filter(pair_id=pair_id, judge_id=project.queue_judge_id, status=Judgment.Status.OK)
        .order_by("-created_at", "-id")
        .first()
    )
    return RevealedP(grade=project.label_scale.grade(grade), judge=project.queue_judge.name,
                     p=None if judgment is None else judgment.p_relevant)


def job_error_shown(job: Job, *, show: bool) -> str:
    """A job's error as a member sees it: its text for those who may (`show`: project admins; a remote model's
    answer or a path can be in it), else its kind's public text and where the reason is; empty when there is none."""
    if show or not job.error:
        return job.error
    return f"{kind_of(job).failed_text} (a project admin sees the reason)"


@dataclass(frozen=True)
class JobRow:
    """A job as a member's page or API list shows it: the row, and its error as the reader may see it. Kinds that
    show more (a cost, the last loss) extend it."""

    job: Job
    error: str  # the job's error as the reader may see it (job_error_shown)

    @property
    def unfinished(self) -> bool:
        return self.job.finished_at is None


def job_row(job: Job, *, show_errors: bool) -> JobRow:
    return JobRow(job=job, error=job_error_shown(job, show=show_errors))


BLIND_REPORTS = ("Experts label blind: the validation reports are made of the reference grades, labels and judges' P "
                 "of items they have not labelled.")


def sees_reports(*, project: Project, role: str | None) -> bool:
    """Whether a member may see the validation report and the metrics by definition version. They are computed
    from the reference grades, labels and P of every gold pair, most of which an expert has not labelled (a
    reliability bin holding one pair shows its P), so only a member who may see all of that of any item may."""
    return item_disclosure(project=project, role=role, labelled=False).everything


def labels_visible_to(*, project: Project, user: AbstractBaseUser, role: str | None) -> QuerySet[Label]:
    """The project's labels, history included, that a member may see: everyone's, or only their own when the
    rule hides other experts' labels even of the items the member labelled."""
    labels = Label.objects.filter(pair__project=project)
    if item_disclosure(project=project, role=role, labelled=True).others_labels:
        return labels
    return labels.filter(annotator=user)


# Below this many items labelled by another expert too, a count of agreements would tell an expert the other's
# grade on a given item, which blind first hides; from it on, the count is an aggregate.
AGREEMENT_MIN_ITEMS = 3


def agreement_shown(*, project: Project, role: str | None, overlap_items: int) -> bool:
    """Whether a member is shown how many of the items they just labelled other experts graded alike: a count
    over items already labelled, which cannot steer a label. Experts see it only from AGREEMENT_MIN_ITEMS
    overlapping items on; members who may see others' labels always."""
    if item_disclosure(project=project, role=role, labelled=True).others_labels:
        return True
    return overlap_items >= AGREEMENT_MIN_ITEMS

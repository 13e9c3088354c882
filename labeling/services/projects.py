"""Project writes: creating a project (staff), and the settings a project's admin chooses for how experts' queues are
filled."""
from __future__ import annotations

from collections.abc import Mapping

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db import IntegrityError, transaction

from labeling.exceptions import Conflict, DomainError, Forbidden
from labeling.models import Judge, Membership, Project
from labeling.models.project import QUEUE_STRATEGIES
from labeling.names import NameRefused, clean_name
from labeling.scale import DEFAULT_SCALE, LabelScale
from labeling.selectors.projects import project_named, project_role, projects_visible_to
from labeling.selectors.queue_settings import STRATEGIES_NEEDING_JUDGE
from labeling.selectors.scoring import judges_with_judgments
from labeling.services.validation import validation_request

LABELS_PER_ITEM_MAX = 10
LEASE_MINUTES_MAX = 240


class ProjectSettingsError(DomainError):
    """Queue settings that cannot be saved; `errors` maps each bad field to a message naming it."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{field}: {message}" for field, message in errors.items()))
        self.errors = errors


class ProjectSettingsForbidden(Forbidden):
    """Someone other than a project admin tried to change the settings."""


class ProjectCreateError(DomainError):
    """A project that cannot be created as given; `errors` maps each bad field to a message naming it."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{field}: {message}" for field, message in errors.items()))
        self.errors = errors


class ProjectTaken(ProjectCreateError, Conflict):
    """The slug or the name is another project's already (409 in the API); `errors` names each field taken."""


class ProjectCreateForbidden(Forbidden):
    """Someone who is not staff tried to create a project."""


PROJECT_CREATE_REFUSED = "Only staff can create projects."
SLUG_MAX_LENGTH = Project._meta.get_field("slug").max_length
NAME_MAX_LENGTH = Project._meta.get_field("name").max_length


def is_staff_user(user: AbstractBaseUser) -> bool:
    """An active staff member or superuser: the operator's people, who create projects and raise job priorities."""
    return bool(user.is_authenticated and user.is_active and (user.is_staff or user.is_superuser))


def may_create_projects(user: AbstractBaseUser) -> bool:
    """Staff and superusers create projects; everyone else works in the projects they are members of."""
    return is_staff_user(user)


def project_name_refusal(*, name: str, project: Project | None = None,
                         told: AbstractBaseUser | None = None) -> str | None:
    """Why `name` (as clean_name left it) cannot be the name of `project` (None: a new project): another project
    bears it, whatever the case; None when it is free. The pages, the API and import_bundle all say this. The
    other project's own spelling is quoted only to whoever may see that project (`told` None: the operator at the
    command line); anyone else is told only that the name they gave is taken."""
    other = project_named(name=name, other_than=project)
    if other is None:
        return None
    # A project someone may not see is a 404 to them everywhere, so its exact name is not theirs to learn.
    if told is not None and not projects_visible_to(user=told).filter(pk=other.pk).exists():
        return f"the name {name!r} is taken (project names are compared ignoring case): choose another name"
    return (f"a project named {other.name!r} exists already: choose another name (project names are compared "
            "ignoring case)")


def _taken(slug: str, name: str, told: AbstractBaseUser) -> dict[str, str]:
    taken = {}
    if Project.objects.filter(slug=slug).exists():
        taken["slug"] = f"a project named {slug!r} exists already"
    name_refusal = project_name_refusal(name=name, told=told)
    if name_refusal is not None:
        taken["name"] = name_refusal
    return taken


def project_create(
    *, by: AbstractBaseUser, name: str, slug: str, scale: LabelScale | None = None, description: str = ""
) -> Project:
    """A new, empty project with `by` as its admin member. `by` must be staff (ProjectCreateForbidden); a bad slug
    or name is a ProjectCreateError naming the field, a slug or name another project has (names whatever their
    case) a ProjectTaken naming it. `scale` None: the default scale."""
    if not may_create_projects(by):
        raise ProjectCreateForbidden(PROJECT_CREATE_REFUSED)
    errors = {}
    try:
        name = clean_name(name, what="project name", max_length=NAME_MAX_LENGTH)
    except NameRefused as exc:
        errors["name"] = str(exc)
    try:
        slug = clean_name(slug, what="slug", max_length=SLUG_MAX_LENGTH)
        validate_slug(slug)
    except NameRefused as exc:
        errors["slug"] = str(exc)
    except ValidationError:
        errors["slug"] = f"{slug!r} is not a slug: letters, digits, '-' and '_'"
    if errors:
        raise ProjectCreateError(errors)
    taken = _taken(slug, name, by)
    if taken:
        raise ProjectTaken(taken)
    try:
        with transaction.atomic():
            project = Project.objects.create(slug=slug, name=name, description=description,
                                             scale=(scale or DEFAULT_SCALE).to_json())
            Membership.objects.create(project=project, user=by, role=Membership.Role.ADMIN)
    except IntegrityError:
        # Two requests for one slug or name at once: the unique constraints decide, and the loser is told as above.
        raise ProjectTaken(_taken(slug, name, by) or {"slug": f"a project named {slug!r} exists already"}) from None
    return project


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _mix_error(mix: object) -> str | None:
    if not isinstance(mix, Mapping):
        return "give a share for each strategy, e.g. {'uncertain': 80, 'random': 20}"
    unknown = sorted(str(name) for name in mix if name not in QUEUE_STRATEGIES)
    if unknown:
        return f"unknown strategy {', '.join(map(repr, unknown))}; the strategies are {', '.join(QUEUE_STRATEGIES)}"
    for name, share in mix.items():
        if not _is_number(share) or share < 0:
            return f"the share of {name!r} must be a number >= 0, not {share!r}"
    # A strategy left out has share 0, so an empty mix is all zeros too.
    if sum(mix.values()) <= 0:
        return "the shares are all 0: give at least one strategy a share above 0"
    return None


def _judge_errors(*, project: Project, mix: Mapping[str, float], judge: Judge | None) -> dict[str, str]:
    errors = {}
    needing = [name for name in STRATEGIES_NEEDING_JUDGE if mix.get(name, 0) > 0]
    if needing and judge is None:
        if len(needing) == 1:
            which = f"the {needing[0]} queue ranks pairs by the queue judge's P: choose a queue judge or set its share"
        else:
            names = f"{', '.join(needing[:-1])} and {needing[-1]}"
            which = f"the {names} queues rank pairs by the queue judge's P: choose a queue judge or set their shares"
        errors["queue_judge"] = f"{which} to 0"
    if mix.get("disagreement", 0) > 0:
        judged = list(judges_with_judgments(project=project).values_list("name", flat=True))
        if len(judged) < 2:
            having = f"only {judged[0]!r} has" if judged else "none has"
            errors["queue_mix"] = (
                "the disagreement queue compares the P of at least 2 judges, but of this project's judges "
                f"{having} judgments: score the pool with a second judge or set the disagreement share to 0"
            )
    return errors


@transaction.atomic
def project_queue_settings_update(
    *,
    project: Project,
    by: AbstractBaseUser,
    queue_mix: Mapping[str, float],
    queue_judge_id: int | None,
    labels_per_item: int,
    overlap_share: float,
    lease_minutes: int,
    reveal_llm_after_submit: bool,
) -> Project:
    """Set how experts' queues are filled. Shares are relative weights, stored as given. Every field is
    checked before anything is written; ProjectSettingsError lists each bad field with its reason. `by` must be
    an admin of the project (or a superuser), else ProjectSettingsForbidden: the API and the CLI get the same rule."""
    if project_role(user=by, project=project) != Membership.Role.ADMIN:
        raise ProjectSettingsForbidden("only a project admin can change the queue settings")
    # The row lock serializes two admins saving at once, so the checks below see the state they overwrite.
    locked = Project.objects.select_for_update().get(pk=project.pk)
    errors: dict[str, str] = {}
    mix_error = _mix_error(queue_mix)
    if mix_error:
        errors["queue_mix"] = mix_error
    judge = None
    if queue_judge_id is not None:
        judge = Judge.objects.filter(project=locked, pk=queue_judge_id).first() if _is_int(queue_judge_id) else None
        if judge is None:
            errors["queue_judge"] = f"judge {queue_judge_id!r} is not a judge of project {locked.slug!r}"
    if not errors:
        errors.update(_judge_errors(project=locked, mix=queue_mix, judge=judge))
    if not _is_int(labels_per_item) or not 1 <= labels_per_item <= LABELS_PER_ITEM_MAX:
        errors["labels_per_item"] = f"k (labels per item) must be a whole number from 1 to {LABELS_PER_ITEM_MAX}"
    if not _is_number(overlap_share) or not 0 <= overlap_share <= 1:
        errors["overlap_share"] = "the overlap share must be between 0 and 1 (0% to 100% of items)"
    if not _is_int(lease_minutes) or not 1 <= lease_minutes <= LEASE_MINUTES_MAX:
        errors["lease_minutes"] = f"the lease must be a whole number of minutes from 1 to {LEASE_MINUTES_MAX}"
    if not isinstance(reveal_llm_after_submit, bool):
        errors["reveal_llm_after_submit"] = "reveal the judge's P after submitting must be true or false"
    if errors:
        raise ProjectSettingsError(errors)
    locked.queue_mix = dict(queue_mix)
    locked.queue_judge = judge
    locked.labels_per_item = labels_per_item
    locked.overlap_share = float(overlap_share)
    locked.lease_minutes = lease_minutes
    locked.reveal_llm_after_submit = reveal_llm_after_submit
    locked.save(update_fields=[
        "queue_mix", "queue_judge", "labels_per_item", "overlap_share", "lease_minutes", "reveal_llm_after_submit",
    ])
    return locked


@transaction.atomic
def queue_judge_default(*, project: Project, judge: Judge) -> bool:
    """Make `judge` the project's queue judge when it has none (a setup script's choice never overrides an
    admin's). True when it was set."""
    if judge.project_id != project.id:
        raise ProjectSettingsError({"queue_judge": f"judge {judge.name!r} is not a judge of project {project.slug!r}"})
    return bool(Project.objects.select_for_update().filter(pk=project.pk, queue_judge__isnull=True)
                .update(queue_judge=judge))


def project_stopping_update(*, project: Project, by: AbstractBaseUser, stop_recall: float | None, stop_alpha: float,
                            stop_budget: int | None, stop_kappa: float | None = None) -> Project:
    """Set when labelling stops paying (#33): a recall target of the verified qrels (met when P(recall >=
    stop_recall) >= 1 - stop_alpha under the queue judge), a lower bound of the queue judge's kappa on the random
    validation sample (met when its 95 % interval starts at or above stop_kappa), a budget of labels, any of them
    (None: none). Experts get no new item once one is met; admins may go on. Every field is checked before anything is written
    (ProjectSettingsError lists each bad one); only the project's admins may (ProjectSettingsForbidden). The cached
    report, which holds whether the recall target is met, is recomputed."""
    if project_role(user=by, project=project) != Membership.Role.ADMIN:
        raise ProjectSettingsForbidden("only a project admin can change the stopping target")
    errors: dict[str, str] = {}
    if stop_recall is not None and (not _is_number(stop_recall) or not 0 < stop_recall <= 1):
        errors["stop_recall"] = "the recall target must be above 0 and at most 1 (or none)"
    if not _is_number(stop_alpha) or not 0 < stop_alpha < 1:
        errors["stop_alpha"] = "alpha must be between 0 and 1, e.g. 0.1 for 90 % confidence"
    if stop_budget is not None and (not _is_int(stop_budget) or not 1 <= stop_budget <= 2_000_000_000):
        errors["stop_budget"] = "the budget must be a whole number of labels from 1 (or none)"
    if stop_kappa is not None and (not _is_number(stop_kappa) or not -1 < stop_kappa <= 1):
        errors["stop_kappa"] = "the kappa target must be above -1 and at most 1 (or none)"
    if errors:
        raise ProjectSettingsError(errors)
    locked = Project.objects.select_for_update().get(pk=project.pk)
    locked.stop_kappa = None if stop_kappa is None else float(stop_kappa)
    locked.stop_recall = None if stop_recall is None else float(stop_recall)
    locked.stop_alpha = float(stop_alpha)
    locked.stop_budget = stop_budget
    locked.save(update_fields=["stop_recall", "stop_alpha", "stop_budget", "stop_kappa"])
    validation_request(project=locked, user=by)
    return locked

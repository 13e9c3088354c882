"""project_queue_settings_update: a valid update round-trips; every invalid input is refused with its field
named and leaves the project row exactly as it was."""
from __future__ import annotations

import pytest
from django.db import IntegrityError

from labeling.exceptions import Conflict
from labeling.models import Judgment, Membership, Project
from labeling.services import projects as project_services
from labeling.services.projects import (
    ProjectCreateError,
    ProjectSettingsError,
    ProjectSettingsForbidden,
    ProjectTaken,
    project_create,
    project_queue_settings_update,
)
from tests.factories import JudgeFactory, JudgmentFactory, MembershipFactory, PairFactory, ProjectFactory, UserFactory

pytestmark = pytest.mark.django_db

SETTING_FIELDS = (
    "queue_mix", "queue_judge_id", "labels_per_item", "overlap_share", "lease_minutes", "reveal_llm_after_submit"
)


@pytest.fixture
def project():
    return ProjectFactory(slug="alpha")


@pytest.fixture
def admin(project):
    user = UserFactory(username="ada")
    MembershipFactory(project=project, user=user, role=Membership.Role.ADMIN)
    return user


@pytest.fixture
def judge(project):
    return JudgeFactory(project=project, name="gpt")


def row(project: Project) -> dict:
    return Project.objects.filter(pk=project.pk).values(*SETTING_FIELDS).get()


def arguments(**overrides) -> dict:
    valid = {
        "queue_mix": {"random": 100},
        "queue_judge_id": None,
        "labels_per_item": 1,
        "overlap_share": 1.0,
        "lease_minutes": 10,
        "reveal_llm_after_submit": False,
    }
    return {**valid, **overrides}


def test_a_valid_update_round_trips(project, admin, judge):
    updated = project_queue_settings_update(
        project=project, by=admin,
        queue_mix={"uncertain": 60, "stratified": 20, "random": 20, "sequential": 0},
        queue_judge_id=judge.pk, labels_per_item=3, overlap_share=0.25, lease_minutes=30,
        reveal_llm_after_submit=True,
    )
    assert row(project) == {
        # Stored as given: the zero share stays, nothing is rescaled.
        "queue_mix": {"uncertain": 60, "stratified": 20, "random": 20, "sequential": 0},
        "queue_judge_id": judge.pk,
        "labels_per_item": 3,
        "overlap_share": 0.25,
        "lease_minutes": 30,
        "reveal_llm_after_submit": True,
    }
    assert updated.queue_judge == judge and updated.labels_per_item == 3


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"labels_per_item": 10, "lease_minutes": 240, "overlap_share": 0}, (10, 240, 0.0)),
        ({"labels_per_item": 1, "lease_minutes": 1, "overlap_share": 1}, (1, 1, 1.0)),
    ],
)
def test_the_ends_of_each_range_are_accepted(project, admin, overrides, expected):
    project_queue_settings_update(project=project, by=admin, **arguments(**overrides))
    saved = row(project)
    assert (saved["labels_per_item"], saved["lease_minutes"], saved["overlap_share"]) == expected


@pytest.mark.parametrize(
    ("overrides", "field", "words"),
    [
        ({"queue_mix": {"uncertian": 50, "random": 50}}, "queue_mix", "unknown strategy 'uncertian'"),
        ({"queue_mix": {"random": -5}}, "queue_mix", "'random' must be a number >= 0"),
        ({"queue_mix": {"random": "50"}}, "queue_mix", "'random' must be a number >= 0"),
        ({"queue_mix": {"random": 0, "sequential": 0}}, "queue_mix", "all 0"),
        ({"queue_mix": {}}, "queue_mix", "all 0"),
        ({"queue_mix": [("random", 1)]}, "queue_mix", "a share for each strategy"),
        ({"queue_mix": {"uncertain": 80, "random": 20}}, "queue_judge", "uncertain queue ranks pairs"),
        ({"queue_mix": {"conflict": 10, "random": 90}}, "queue_judge", "conflict queue"),
        ({"queue_mix": {"uncertain": 1, "stratified": 1}}, "queue_judge", "uncertain and stratified queues"),
        ({"queue_judge_id": 10**9}, "queue_judge", "not a judge of project 'alpha'"),
        ({"labels_per_item": 0}, "labels_per_item", "from 1 to 10"),
        ({"labels_per_item": 11}, "labels_per_item", "from 1 to 10"),
        ({"labels_per_item": True}, "labels_per_item", "from 1 to 10"),
        ({"overlap_share": -0.01}, "overlap_share", "between 0 and 1"),
        ({"overlap_share": 1.5}, "overlap_share", "between 0 and 1"),
        ({"lease_minutes": 0}, "lease_minutes", "from 1 to 240"),
        ({"lease_minutes": 241}, "lease_minutes", "from 1 to 240"),
        ({"lease_minutes": 2.5}, "lease_minutes", "from 1 to 240"),
    ],
)
def test_invalid_input_names_the_field_and_writes_nothing(project, admin, overrides, field, words):
    before = row(project)
    with pytest.raises(ProjectSettingsError) as caught:
        project_queue_settings_update(project=project, by=admin, **arguments(**overrides))
    assert list(caught.value.errors) == [field]
    assert words in caught.value.errors[field]
    assert field in str(caught.value)
    assert row(project) == before


def test_a_judge_of_another_project_is_refused(project, admin):
    stranger = JudgeFactory(project=ProjectFactory(slug="beta"), name="other")
    with pytest.raises(ProjectSettingsError) as caught:
        project_queue_settings_update(project=project, by=admin, **arguments(queue_judge_id=stranger.pk))
    assert caught.value.errors == {"queue_judge": f"judge {stranger.pk} is not a judge of project 'alpha'"}
    assert row(project)["queue_judge_id"] is None


def test_every_bad_field_is_reported_at_once(project, admin):
    before = row(project)
    with pytest.raises(ProjectSettingsError) as caught:
        project_queue_settings_update(
            project=project, by=admin, **arguments(queue_mix={"random": 0}, labels_per_item=0, lease_minutes=999)
        )
    assert set(caught.value.errors) == {"queue_mix", "labels_per_item", "lease_minutes"}
    assert row(project) == before


def _judged(project, judge, status=Judgment.Status.OK):
    p = 0.7 if status == Judgment.Status.OK else None
    JudgmentFactory(pair=PairFactory(project=project), judge=judge, status=status, p_relevant=p)


def test_disagreement_needs_two_judges_with_judgments(project, admin, judge):
    _judged(project, judge)
    silent = JudgeFactory(project=project, name="silent")
    _judged(project, silent, status=Judgment.Status.FAILED)  # no P: it cannot disagree with anyone
    before = row(project)
    with pytest.raises(ProjectSettingsError) as caught:
        project_queue_settings_update(
            project=project, by=admin, **arguments(queue_mix={"disagreement": 50, "random": 50})
        )
    message = caught.value.errors["queue_mix"]
    assert "disagreement" in message and "at least 2 judges" in message and "only 'gpt' has judgments" in message
    assert row(project) == before

    _judged(project, silent)
    project_queue_settings_update(project=project, by=admin, **arguments(queue_mix={"disagreement": 50, "random": 50}))
    assert row(project)["queue_mix"] == {"disagreement": 50, "random": 50}


def test_disagreement_without_any_judged_pair_says_so(project, admin):
    with pytest.raises(ProjectSettingsError) as caught:
        project_queue_settings_update(project=project, by=admin, **arguments(queue_mix={"disagreement": 1}))
    assert "none has judgments" in caught.value.errors["queue_mix"]


def test_judgments_in_another_project_do_not_count(project, admin, judge):
    _judged(project, judge)
    other = ProjectFactory(slug="beta")
    for name in ("x", "y"):
        _judged(other, JudgeFactory(project=other, name=name))
    with pytest.raises(ProjectSettingsError):
        project_queue_settings_update(project=project, by=admin, **arguments(queue_mix={"disagreement": 1}))


@pytest.mark.parametrize("role", [Membership.Role.EXPERT, Membership.Role.VIEWER, None])
def test_only_a_project_admin_may_change_the_settings(project, role):
    user = UserFactory()
    if role is not None:
        MembershipFactory(project=project, user=user, role=role)
    before = row(project)
    with pytest.raises(ProjectSettingsForbidden):
        project_queue_settings_update(project=project, by=user, **arguments(lease_minutes=60))
    assert row(project) == before


def test_a_superuser_may_change_any_project(project):
    root = UserFactory(username="root", is_superuser=True)
    project_queue_settings_update(project=project, by=root, **arguments(lease_minutes=60))
    assert row(project)["lease_minutes"] == 60


def test_a_new_projects_name_and_slug_are_stored_nfkc_normalised():
    staff = UserFactory(is_staff=True)
    project = project_create(by=staff, name=" \uff22\uff2d25 re\u0301gle\u0301 ", slug="\uff46lood")
    assert (project.name, project.slug) == ("BM25 réglé", "flood")


def test_a_project_name_or_slug_that_breaks_the_rule_for_names_is_refused_by_field():
    staff = UserFactory(is_staff=True)
    with pytest.raises(ProjectCreateError) as refused:
        project_create(by=staff, name="Flood\u2028plans", slug="flood\n")
    assert refused.value.errors["name"].startswith("the project name holds a line separator (U+2028) at position 6")
    assert refused.value.errors["slug"].startswith("the slug holds a control character (U+000A) at position 6")
    assert not Project.objects.filter(slug__startswith="flood").exists()


def test_a_project_name_another_project_has_whatever_its_case_is_refused_naming_it():
    staff = UserFactory(is_staff=True)
    project_create(by=staff, name="Climate study", slug="climate")
    # Another case, spaces around it, full-width letters (NFKC makes them the name they look like): all the same.
    for name in ("CLIMATE STUDY", " climate study ", "\uff43limate study"):
        with pytest.raises(ProjectTaken) as taken:
            project_create(by=staff, name=name, slug="other")
        assert taken.value.errors == {"name": "a project named 'Climate study' exists already: choose another name "
                                              "(project names are compared ignoring case)"}
        assert isinstance(taken.value, Conflict)  # the API answers 409
    with pytest.raises(ProjectTaken) as both:
        project_create(by=staff, name="climate Study", slug="climate")
    assert set(both.value.errors) == {"name", "slug"}
    assert list(Project.objects.values_list("slug", flat=True)) == ["climate"]
    assert project_create(by=staff, name="Climate study 2", slug="other").name == "Climate study 2"


def test_the_database_refuses_two_names_that_differ_only_in_case():
    # What decides when two requests pass the check at once (project_create turns it into ProjectTaken).
    ProjectFactory(name="Flood")
    with pytest.raises(IntegrityError):
        ProjectFactory(name="fLOOD")


def test_two_creations_of_one_name_at_once_tell_the_loser_what_is_taken(monkeypatch):
    """Both pass the check before either writes: the constraint refuses the second, which is told as above."""
    staff = UserFactory(is_staff=True)
    project_create(by=staff, name="Flood", slug="flood")
    real, calls = project_services._taken, []

    def first_sees_nothing(slug, name, told):
        calls.append(name)
        return {} if len(calls) == 1 else real(slug, name, told)

    monkeypatch.setattr(project_services, "_taken", first_sees_nothing)
    with pytest.raises(ProjectTaken) as taken:
        project_create(by=staff, name="FLOOD", slug="flood-2")
    assert list(taken.value.errors) == ["name"] and len(calls) == 2
    assert not Project.objects.filter(slug="flood-2").exists()

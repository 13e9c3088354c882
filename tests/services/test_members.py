"""membership_set and membership_remove: adding, re-roling and removing members, and the last admin kept."""
from __future__ import annotations

import pytest
from django.utils import timezone

from labeling.models import Label, Lease, Membership
from labeling.services.members import MembershipError, membership_remove, membership_set
from tests.factories import LabelFactory, MembershipFactory, PairFactory, ProjectFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def project():
    project = ProjectFactory()
    MembershipFactory(project=project, user=UserFactory(username="boss"), role="admin")
    return project


def roles(project) -> dict[str, str]:
    return dict(Membership.objects.filter(project=project).values_list("user__username", "role"))


def boss():
    return UserFactory(username="boss")


def test_an_admin_adds_an_existing_user_and_changes_their_role(project):
    UserFactory(username="alice")
    membership_set(project=project, username=" alice ", role="expert", by=boss())
    assert roles(project) == {"boss": "admin", "alice": "expert"}
    membership_set(project=project, username="alice", role="viewer", by=boss())
    assert roles(project) == {"boss": "admin", "alice": "viewer"}
    assert Membership.objects.filter(project=project).count() == 2


def test_unknown_users_and_roles_are_refused(project):
    UserFactory(username="alice")
    with pytest.raises(MembershipError, match="no user named 'nobody'"):
        membership_set(project=project, username="nobody", role="expert", by=boss())
    with pytest.raises(MembershipError, match="unknown role 'owner'"):
        membership_set(project=project, username="alice", role="owner", by=boss())
    assert roles(project) == {"boss": "admin"}


def test_only_an_admin_of_the_project_may_change_members(project):
    expert = UserFactory(username="eve")
    MembershipFactory(project=project, user=expert, role="expert")
    admin_elsewhere = UserFactory(username="mallory")
    MembershipFactory(project=ProjectFactory(), user=admin_elsewhere, role="admin")
    for who in (expert, admin_elsewhere):
        with pytest.raises(MembershipError, match="only a project admin"):
            membership_set(project=project, username="eve", role="admin", by=who)
        with pytest.raises(MembershipError, match="only a project admin"):
            membership_remove(project=project, user_id=boss().id, by=who)
    assert roles(project) == {"boss": "admin", "eve": "expert"}


def test_the_last_admin_can_be_neither_demoted_nor_removed(project):
    with pytest.raises(MembershipError, match="boss is the project's last admin"):
        membership_set(project=project, username="boss", role="expert", by=boss())
    with pytest.raises(MembershipError, match="boss is the project's last admin"):
        membership_remove(project=project, user_id=boss().id, by=boss())
    assert roles(project) == {"boss": "admin"}


def test_with_a_second_admin_the_first_may_step_down(project):
    UserFactory(username="chief")
    membership_set(project=project, username="chief", role="admin", by=boss())
    membership_set(project=project, username="boss", role="viewer", by=boss())
    assert roles(project) == {"boss": "viewer", "chief": "admin"}
    chief = UserFactory(username="chief")
    membership_remove(project=project, user_id=boss().id, by=chief)
    assert roles(project) == {"chief": "admin"}


def test_removing_a_member_keeps_their_labels_and_frees_their_items(project):
    alice = UserFactory(username="alice")
    MembershipFactory(project=project, user=alice, role="expert")
    pair, elsewhere = PairFactory(project=project), PairFactory()
    LabelFactory(pair=pair, annotator=alice, grade=2)
    now = timezone.now()
    Lease.objects.create(pair=PairFactory(project=project), annotator=alice, queue="random", expires_at=now)
    Lease.objects.create(pair=elsewhere, annotator=alice, queue="random", expires_at=now)
    removed = membership_remove(project=project, user_id=alice.id, by=boss())
    assert removed.user == alice
    assert roles(project) == {"boss": "admin"}
    assert Label.objects.filter(annotator=alice).count() == 1
    assert list(Lease.objects.filter(annotator=alice).values_list("pair_id", flat=True)) == [elsewhere.id]


def test_removing_a_non_member_is_an_error(project):
    stranger = UserFactory(username="stranger")
    with pytest.raises(MembershipError, match="is not a member"):
        membership_remove(project=project, user_id=stranger.id, by=boss())

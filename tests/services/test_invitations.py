"""invitation_create, invitation_revoke and invitation_accept: who may invite whom, when a link works, and that
a link makes one account once, even when it is sent twice at the same moment."""
from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connections
from django.utils import timezone

from labeling.exceptions import Conflict, DomainError, NotFound
from labeling.models import Invitation, Membership
from labeling.services.invitations import (
    InvitationError,
    InvitationGone,
    InvitationNotFound,
    invitation_accept,
    invitation_create,
    invitation_revoke,
    token_digest,
)
from tests.factories import MembershipFactory, ProjectFactory, UserFactory

pytestmark = pytest.mark.django_db
PASSWORD = "a long passphrase for carol"


@pytest.fixture
def project():
    return ProjectFactory()


@pytest.fixture
def admin(project):
    user = UserFactory(username="boss")
    MembershipFactory(project=project, user=user, role="admin")
    return user


def test_the_token_has_256_random_bits_and_only_its_sha256_is_kept(project, admin):
    invited = invitation_create(project=project, username=" carol ", role="expert", email="c@example.org", by=admin)
    invitation = Invitation.objects.get()
    assert invited.invitation == invitation and invitation.username == "carol"
    assert len(invited.token) == 43  # token_urlsafe(32): 32 bytes in unpadded base64
    assert invitation.token_sha256 == token_digest(invited.token) != invited.token
    assert invitation.expires_at - invitation.created_at == timedelta(days=7)


def test_invitation_days_sets_how_long_a_link_works(project, admin, settings):
    settings.INVITATION_DAYS = 2
    now = timezone.now()
    invited = invitation_create(project=project, username="carol", role="expert", by=admin, now=now)
    assert invited.invitation.expires_at == now + timedelta(days=2)
    with pytest.raises(InvitationGone, match="expired"):
        invitation_accept(token=invited.token, password=PASSWORD, password_again=PASSWORD,
                          now=now + timedelta(days=2))
    user = invitation_accept(token=invited.token, password=PASSWORD, password_again=PASSWORD,
                             now=now + timedelta(days=2) - timedelta(seconds=1))
    assert Membership.objects.get(project=project, user=user).role == "expert"


def test_errors_are_domain_errors_that_say_which_answer_they_are():
    assert issubclass(InvitationError, DomainError)
    assert issubclass(InvitationNotFound, NotFound) and issubclass(InvitationGone, Conflict)


def test_a_link_is_refused_once_used_or_revoked_and_an_unknown_one_is_not_found(project, admin):
    used = invitation_create(project=project, username="carol", role="viewer", by=admin)
    carol = invitation_accept(token=used.token, password=PASSWORD, password_again=PASSWORD)
    assert (carol.get_username(), carol.check_password(PASSWORD)) == ("carol", True)
    with pytest.raises(InvitationGone, match="was used"):
        invitation_accept(token=used.token, password=PASSWORD, password_again=PASSWORD)

    revoked = invitation_create(project=project, username="dave", role="expert", by=admin)
    invitation_revoke(project=project, invitation_id=revoked.invitation.id, by=admin)
    with pytest.raises(InvitationGone, match="was revoked"):
        invitation_accept(token=revoked.token, password=PASSWORD, password_again=PASSWORD)
    with pytest.raises(InvitationNotFound, match="not valid"):
        invitation_accept(token="x" * 43, password=PASSWORD, password_again=PASSWORD)
    with pytest.raises(InvitationGone, match="used already"):
        invitation_revoke(project=project, invitation_id=used.invitation.id, by=admin)
    assert not get_user_model().objects.filter(username="dave").exists()


def test_a_name_taken_after_the_invitation_is_refused_and_its_password_is_left_alone(project, admin):
    invited = invitation_create(project=project, username="carol", role="expert", by=admin)
    taken = UserFactory(username="Carol")
    with pytest.raises(InvitationGone, match="was made meanwhile"):
        invitation_accept(token=invited.token, password=PASSWORD, password_again=PASSWORD)
    taken.refresh_from_db()
    assert not taken.check_password(PASSWORD)
    assert not Membership.objects.filter(user=taken).exists()
    assert Invitation.objects.get().used_at is None


def test_a_full_width_look_alike_of_an_account_is_that_account(project, admin):
    """Issue 30, finding 10: an invitation for "\uff41dmin" (a full-width a) made an account that looks like admin,
    whose failed logins django-axes counted against the real admin (the login form NFKC-normalises the name)."""
    UserFactory(username="admin")
    with pytest.raises(InvitationError, match="there is already an account named 'admin'"):
        invitation_create(project=project, username="\uff41dmin", role="expert", by=admin)
    assert not Invitation.objects.exists()


def test_a_new_full_width_name_is_invited_and_its_account_made_nfkc_normalised(project, admin):
    invited = invitation_create(project=project, username="\uff43\uff41\uff52\uff4f\uff4c", role="expert", by=admin)
    assert invited.invitation.username == "carol"
    user = invitation_accept(token=invited.token, password=PASSWORD, password_again=PASSWORD)
    assert user.get_username() == "carol"


@pytest.mark.parametrize(("username", "message"), [
    ("car\u200bol", r"the user name holds an invisible format character \(U\+200B\) at position 4"),
    ("car\nol", r"the user name holds a control character \(U\+000A\) at position 4"),
    ("  ", "the user name is empty"),
    ("x" * 151, "the user name has 151 characters: at most 150"),
])
def test_a_user_name_that_breaks_the_rule_for_names_is_refused(project, admin, username, message):
    with pytest.raises(InvitationError, match=message):
        invitation_create(project=project, username=username, role="expert", by=admin)
    assert not Invitation.objects.exists()


def test_only_an_admin_of_the_project_invites_or_revokes(project, admin):
    invited = invitation_create(project=project, username="carol", role="expert", by=admin)
    expert = UserFactory()
    MembershipFactory(project=project, user=expert, role="expert")
    with pytest.raises(DomainError, match="only a project admin"):
        invitation_create(project=project, username="dave", role="expert", by=expert)
    with pytest.raises(DomainError, match="only a project admin"):
        invitation_revoke(project=project, invitation_id=invited.invitation.id, by=expert)
    other = ProjectFactory()
    MembershipFactory(project=other, user=admin, role="admin")
    with pytest.raises(InvitationNotFound):
        invitation_revoke(project=other, invitation_id=invited.invitation.id, by=admin)
    assert Invitation.objects.get().revoked_at is None


@pytest.mark.django_db(transaction=True)
def test_a_link_sent_twice_at_the_same_moment_makes_one_account(project, admin):
    invited = invitation_create(project=project, username="carol", role="expert", by=admin)
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def accept() -> None:
        try:
            barrier.wait(timeout=30)
            invitation_accept(token=invited.token, password=PASSWORD, password_again=PASSWORD)
            outcomes.append("joined")
        except InvitationGone:
            outcomes.append("refused")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=accept) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(outcomes) == ["joined", "refused"]
    assert get_user_model().objects.filter(username="carol").count() == 1
    assert Membership.objects.filter(project=project, user__username="carol").count() == 1

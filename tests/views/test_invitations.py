"""Invitations: a project admin invites someone new by a one-time link that lets them set a password and join
the project; the link works once, expires, can be revoked, and only its hash is stored."""
from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from labeling.models import Invitation, Membership
from labeling.services.invitations import InvitationError, invitation_create
from tests.factories import MembershipFactory, ProjectFactory, UserFactory

pytestmark = pytest.mark.django_db
NEW_PASSWORD = "a long passphrase for carol"


@pytest.fixture
def project():
    return ProjectFactory()


@pytest.fixture
def admin(project):
    user = UserFactory(username="boss")
    MembershipFactory(project=project, user=user, role="admin")
    return user


def _invite(client, project, admin, **fields):
    client.force_login(admin)
    data = {"username": "carol", "email": "", "role": "expert", **fields}
    return client.post(reverse("labeling:invitation_create", kwargs={"slug": project.slug}), data)


def _link(response) -> str:
    """The one-time link the members page shows after an invitation."""
    return re.search(r'value="(http[^"]+/invite/[^"]+/)"[^>]*data-testid="invite-link-input"',
                     response.content.decode()).group(1)


def _path(link: str) -> str:
    return link[link.index("/invite/"):]


def test_an_admin_invites_and_the_link_creates_the_account_with_the_role(client, project, admin):
    response = _invite(client, project, admin, role="viewer")
    assert response.status_code == 200
    link = _link(response)
    client.logout()
    page = client.get(_path(link))
    assert page.status_code == 200 and "carol" in page.content.decode() and "viewer" in page.content.decode()
    assert page["Referrer-Policy"] == "same-origin"  # the address holds the secret: no referrer to other sites
    done = client.post(_path(link), {"password": NEW_PASSWORD, "password_again": NEW_PASSWORD})
    assert done.status_code == 302 and done["Location"] == reverse("labeling:project_detail", args=[project.slug])
    carol = get_user_model().objects.get(username="carol")
    assert carol.check_password(NEW_PASSWORD)
    assert Membership.objects.get(project=project, user=carol).role == "viewer"
    # Logged in as carol now: the project page opens.
    assert client.get(done["Location"]).status_code == 200
    invitation = Invitation.objects.get()
    assert invitation.used_by == carol and invitation.used_at is not None


def test_the_link_is_never_stored_only_its_hash(client, project, admin):
    link = _link(_invite(client, project, admin))
    token = link.rstrip("/").rsplit("/", 1)[1]
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM labeling_invitation")
        rows = cursor.fetchall()
    assert rows and not any(token in str(value) for row in rows for value in row)
    # And the members page, loaded again, does not show it.
    assert token not in client.get(reverse("labeling:members", args=[project.slug])).content.decode()


def test_a_used_expired_revoked_or_unknown_link_is_refused_and_nothing_is_stored(client, project, admin):
    link = _link(_invite(client, project, admin))
    client.logout()
    client.post(_path(link), {"password": NEW_PASSWORD, "password_again": NEW_PASSWORD})
    client.logout()
    again = client.post(_path(link), {"password": NEW_PASSWORD, "password_again": NEW_PASSWORD})
    assert again.status_code == 410 and "was used" in again.content.decode()
    assert client.get(_path(link)).status_code == 410

    expired = _link(_invite(client, project, admin, username="dave"))
    Invitation.objects.filter(username="dave").update(expires_at=timezone.now() - timedelta(minutes=1))
    client.logout()
    response = client.post(_path(expired), {"password": NEW_PASSWORD, "password_again": NEW_PASSWORD})
    assert response.status_code == 410 and "expired" in response.content.decode()

    revoked = _link(_invite(client, project, admin, username="erin"))
    invitation = Invitation.objects.get(username="erin")
    assert client.post(reverse("labeling:invitation_revoke", args=[project.slug, invitation.id])).status_code == 302
    client.logout()
    response = client.get(_path(revoked))
    assert response.status_code == 410 and "revoked" in response.content.decode()

    assert client.get("/invite/not-a-real-token/").status_code == 404
    assert not get_user_model().objects.filter(username__in=["dave", "erin"]).exists()


def test_a_weak_or_mismatched_password_is_refused_with_the_reason(client, project, admin):
    link = _link(_invite(client, project, admin))
    client.logout()
    weak = client.post(_path(link), {"password": "carol", "password_again": "carol"})
    assert weak.status_code == 400 and "too short" in weak.content.decode()
    differ = client.post(_path(link), {"password": NEW_PASSWORD, "password_again": NEW_PASSWORD + "x"})
    assert differ.status_code == 400 and "differ" in differ.content.decode()
    assert not get_user_model().objects.filter(username="carol").exists()
    assert Invitation.objects.get().used_at is None


def test_only_admins_invite_and_names_must_be_new_and_not_invited_twice(client, project, admin):
    expert = UserFactory(username="exp")
    MembershipFactory(project=project, user=expert, role="expert")
    client.force_login(expert)
    assert client.post(reverse("labeling:invitation_create", args=[project.slug]),
                       {"username": "carol", "role": "expert"}).status_code == 403
    response = _invite(client, project, admin, username="exp")
    assert response.status_code == 400 and "already an account named" in response.content.decode()
    _invite(client, project, admin)
    response = _invite(client, project, admin)
    assert response.status_code == 400 and "already has an open invitation" in response.content.decode()
    response = _invite(client, project, admin, username="bad name!")
    assert response.status_code == 400 and "is not a user name" in response.content.decode()
    assert Invitation.objects.count() == 1
    # An expired invitation does not block inviting the name again.
    Invitation.objects.update(expires_at=timezone.now() - timedelta(days=1))
    assert _invite(client, project, admin).status_code == 200
    assert Invitation.objects.filter(revoked_at__isnull=True, used_at__isnull=True).count() == 1


def test_a_full_width_look_alike_of_an_existing_account_is_not_invited(client, project, admin):
    """Issue 30, finding 10, through the members page."""
    response = _invite(client, project, admin, username="\uff42oss")  # a full-width b: "boss", the admin
    assert response.status_code == 400
    assert "there is already an account named &#x27;boss&#x27;" in response.content.decode()
    assert not Invitation.objects.exists()


def test_the_link_is_emailed_only_when_the_operator_configured_email(client, project, admin, settings,
                                                                     django_capture_on_commit_callbacks):
    settings.INVITATION_EMAIL = False
    with django_capture_on_commit_callbacks(execute=True):
        _invite(client, project, admin, email="carol@example.org")
    assert mail.outbox == []
    settings.INVITATION_EMAIL = True
    with django_capture_on_commit_callbacks(execute=True):
        response = _invite(client, project, admin, username="dave", email="dave@example.org")
    link = _link(response)
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["dave@example.org"] and link in mail.outbox[0].body


def test_an_expert_cannot_invite_through_the_service(project, admin):
    expert = UserFactory()
    MembershipFactory(project=project, user=expert, role="expert")
    with pytest.raises(Exception, match="only a project admin"):
        invitation_create(project=project, username="x", role="expert", by=expert)
    with pytest.raises(InvitationError, match="unknown role"):
        invitation_create(project=project, username="x", role="owner", by=admin)

"""Invitations: a project admin invites someone by name and role; the one-time link lets them set a password,
which creates their account and adds them to the project. No site administrator is involved."""
from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from labeling.exceptions import Conflict, DomainError, NotFound
from labeling.models import Invitation, Membership, Project
from labeling.names import NameRefused, clean_name
from labeling.services.members import locked_by_admin

# 256 random bits: a link cannot be guessed, so failed tries need no throttling of their own.
TOKEN_BYTES = 32
USERNAME_MAX_LENGTH = Invitation._meta.get_field("username").max_length


class InvitationError(DomainError):
    """An invitation that cannot be made, revoked or accepted as asked (the message says why)."""


class InvitationNotFound(InvitationError, NotFound):
    """No invitation has this link (a mistyped or made-up link)."""


class InvitationGone(InvitationError, Conflict):
    """The link was valid once: it was used, revoked or has expired (the owner must ask for a new one)."""


@dataclass(frozen=True)
class Invited:
    invitation: Invitation
    token: str  # the link's secret: shown once, never stored


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _username_clean(username: str) -> str:
    """The user name the account will have: normalised as the user model and its login form normalise it (NFKC
    for Django's), so that a look-alike of an existing name is that name, then checked as every name is
    (labeling.names) and by Django's username rules. InvitationError saying what is wrong."""
    try:
        username = clean_name(get_user_model().normalize_username(username), what="user name",
                              max_length=USERNAME_MAX_LENGTH)
        UnicodeUsernameValidator()(username)
    except NameRefused as exc:
        raise InvitationError(str(exc)) from None
    except ValidationError:
        raise InvitationError(f"{username!r} is not a user name: letters, digits and @ . + - _ only") from None
    return username


def _account_exists(username: str) -> bool:
    user_model = get_user_model()
    return user_model.objects.filter(**{f"{user_model.USERNAME_FIELD}__iexact": username}).exists()


def _send(invitation: Invitation, link: str) -> None:
    send_mail(
        subject=f"You are invited to label for {invitation.project.name}",
        message=(f"{invitation.created_by.get_username() if invitation.created_by else 'An admin'} invited you to "
                 f"the project {invitation.project.name} as {invitation.role}, with the user name "
                 f"{invitation.username}.\n\nSet your password here (the link works once, until "
                 f"{invitation.expires_at:%Y-%m-%d %H:%M} UTC):\n{link}\n"),
        from_email=settings.DEFAULT_FROM_EMAIL,
        recipient_list=[invitation.email],
    )


@transaction.atomic
def invitation_create(*, project: Project, username: str, role: str, by: AbstractBaseUser, email: str = "",
                      link_for: object = None, now: datetime | None = None) -> Invited:
    """Invite `username` (a new account) to the project with `role`. `link_for(token)` turns the token into the
    absolute link that is e-mailed when the operator configured e-mail and the invitation has an address."""
    now = now or timezone.now()
    email = email.strip()
    if role not in Membership.Role.values:
        raise InvitationError(f"unknown role {role!r}; one of {', '.join(Membership.Role.values)}")
    username = _username_clean(username)
    locked_by_admin(project, by)
    if _account_exists(username):
        raise InvitationError(f"there is already an account named {username!r}: add it with 'Add a member' instead")
    open_ones = Invitation.objects.filter(project=project, username=username, used_at=None, revoked_at=None)
    if open_ones.filter(expires_at__gt=now).exists():
        raise InvitationError(f"{username!r} already has an open invitation to this project: revoke it first")
    open_ones.update(revoked_at=now)  # expired ones: closed, so the name can be invited again
    token = secrets.token_urlsafe(TOKEN_BYTES)
    invitation = Invitation.objects.create(
        project=project, username=username, email=email, role=role, token_sha256=token_digest(token),
        created_by=by, created_at=now, expires_at=now + timedelta(days=settings.INVITATION_DAYS),
    )
    if settings.INVITATION_EMAIL and email and callable(link_for):
        link = link_for(token)
        transaction.on_commit(lambda: _send(invitation, link))
    return Invited(invitation=invitation, token=token)


@transaction.atomic
def invitation_revoke(*, project: Project, invitation_id: int, by: AbstractBaseUser,
                      now: datetime | None = None) -> Invitation:
    locked_by_admin(project, by)
    invitation = Invitation.objects.select_for_update().filter(project=project, id=invitation_id).first()
    if invitation is None:
        raise InvitationNotFound(f"invitation {invitation_id!r} is not one of project {project.slug!r}")
    if invitation.used_at is not None:
        raise InvitationGone(f"the invitation of {invitation.username!r} was used already: remove the member instead")
    if invitation.revoked_at is None:
        invitation.revoked_at = now or timezone.now()
        invitation.save(update_fields=["revoked_at"])
    return invitation


def invitation_for_token(*, token: str, now: datetime | None = None) -> Invitation:
    """The open invitation behind a link; InvitationNotFound or InvitationGone (saying why) otherwise."""
    now = now or timezone.now()
    invitation = Invitation.objects.select_related("project").filter(token_sha256=token_digest(token)).first()
    if invitation is None:
        raise InvitationNotFound("this invitation link is not valid: check that it was copied whole")
    state = invitation.state(now)
    if state != "open":
        raise InvitationGone(f"this invitation link was {state} ({'at' if state != 'expired' else 'on'} "
                             f"{_when(invitation, state):%Y-%m-%d %H:%M} UTC): ask the project's admin for a new one")
    return invitation


def _when(invitation: Invitation, state: str) -> datetime:
    return {"used": invitation.used_at, "revoked": invitation.revoked_at, "expired": invitation.expires_at}[state]


@transaction.atomic
def invitation_accept(*, token: str, password: str, password_again: str,
                      now: datetime | None = None) -> AbstractBaseUser:
    """Use the link: create the account with the password (Django's password validators apply) and add it to
    the project with the invited role. The invitation row is locked, so a link is used once even when sent
    twice at the same moment."""
    now = now or timezone.now()
    found = invitation_for_token(token=token, now=now)
    invitation = Invitation.objects.select_for_update().select_related("project").get(id=found.id)
    if invitation.state(now) != "open":  # used or revoked while this request waited for the lock
        invitation_for_token(token=token, now=now)  # raises, saying which
    if password != password_again:
        raise InvitationError("the two passwords differ")
    user_model = get_user_model()
    user = user_model(**{user_model.USERNAME_FIELD: invitation.username, "email": invitation.email})
    try:
        password_validation.validate_password(password, user=user)
    except ValidationError as exc:
        raise InvitationError(" ".join(exc.messages)) from None
    if _account_exists(invitation.username):
        raise InvitationGone(f"an account named {invitation.username!r} was made meanwhile: ask the admin to add it")
    user.set_password(password)
    user.save()
    Membership.objects.create(project=invitation.project, user=user, role=invitation.role)
    invitation.used_at, invitation.used_by = now, user
    invitation.save(update_fields=["used_at", "used_by"])
    return user

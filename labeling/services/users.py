"""Writes on user accounts: the bootstrap administrator for a fresh installation, and API tokens (issued at a token
login, revoked)."""
from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractUser
from django.db import IntegrityError, transaction
from rest_framework.authtoken.models import Token


@transaction.atomic
def admin_ensure(*, username: str = "admin", email: str = "") -> tuple[AbstractUser, str | None]:
    """Create a superuser with a fresh random password and return it with that password.

    If the user already exists it is returned unchanged with None: an existing password is never reset
    or revealed, so running this on every start is safe.
    """
    user_model = get_user_model()
    existing = user_model.objects.filter(username=username).first()
    if existing is not None:
        return existing, None
    password = secrets.token_urlsafe(16)
    try:
        # A savepoint, so losing a race with a concurrent creator leaves the outer transaction usable.
        with transaction.atomic():
            user = user_model.objects.create_superuser(username=username, email=email, password=password)
    except IntegrityError:
        return user_model.objects.get(username=username), None
    return user, password


@transaction.atomic
def user_token_ensure(*, user: AbstractUser) -> Token:
    """The user's API token, created at their first token login."""
    token, _ = Token.objects.get_or_create(user=user)
    return token


@transaction.atomic
def user_tokens_revoke(*, user: AbstractUser) -> int:
    """Delete the user's API tokens and return how many there were. Requests with a revoked token are refused at
    once; the user gets a new token by logging in at /api/token/ again."""
    count, _ = Token.objects.filter(user=user).delete()
    return count


@transaction.atomic
def tokens_revoke_all() -> int:
    """Delete every user's API token (after a leak, or to rotate them all) and return how many there were."""
    count, _ = Token.objects.all().delete()
    return count

"""labeling.services.users and `manage.py ensure_admin`: the first superuser gets a fresh random password,
shown once; an existing user is never changed or revealed."""
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.core.management import call_command

from labeling.services.users import admin_ensure
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

DEFAULT_PASSWORDS = {"admin", "password", "changeme", "admin123", "123456", "annotator", "secret"}


def test_admin_ensure_creates_a_superuser_who_can_log_in(client):
    user, password = admin_ensure(username="admin", email="admin@example.org")

    user.refresh_from_db()
    assert user.is_superuser and user.is_staff and user.is_active
    assert user.email == "admin@example.org"
    assert password is not None
    assert user.check_password(password)
    assert client.login(username="admin", password=password)


def test_admin_ensure_password_is_strong_and_fresh_each_time():
    _, first = admin_ensure(username="admin")
    second_user, second = admin_ensure(username="other-admin")

    assert first not in DEFAULT_PASSWORDS and len(first) >= 20
    assert first != second
    validate_password(second, second_user)


def test_admin_ensure_leaves_an_existing_user_alone():
    user, _ = admin_ensure(username="admin")
    hash_before = user.password

    again, password = admin_ensure(username="admin")

    assert password is None
    assert again.pk == user.pk
    assert get_user_model().objects.get(pk=user.pk).password == hash_before
    assert get_user_model().objects.filter(username="admin").count() == 1


def test_admin_ensure_does_not_promote_or_reset_an_existing_ordinary_user():
    existing = UserFactory(username="admin")
    hash_before = existing.password

    user, password = admin_ensure(username="admin")

    user.refresh_from_db()
    assert password is None
    assert user.password == hash_before
    assert not user.is_superuser


def test_ensure_admin_command_prints_the_password_once():
    first = StringIO()
    call_command("ensure_admin", stdout=first)
    password = first.getvalue().split("with password: ")[1].split()[0]
    assert get_user_model().objects.get(username="admin").check_password(password)
    assert "shown once" in first.getvalue()

    second = StringIO()
    call_command("ensure_admin", stdout=second)
    assert "already exists" in second.getvalue()
    assert password not in second.getvalue()
    assert "changepassword admin" in second.getvalue()

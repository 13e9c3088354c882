"""`manage.py revoke_tokens` and labeling.services.users' token revocation: a revoked token stops working at once,
other users' tokens keep working, and the user gets a fresh token by logging in at /api/token/ again."""
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from labeling.services.users import tokens_revoke_all, user_tokens_revoke
from tests.factories import PASSWORD, UserFactory

pytestmark = pytest.mark.django_db


def revoke(*args: str) -> str:
    out = StringIO()
    call_command("revoke_tokens", *args, stdout=out)
    return out.getvalue()


def works(token: Token | str) -> bool:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {getattr(token, 'key', token)}")
    return client.get(reverse("api:project-list")).status_code == 200


def test_revoking_a_users_token_stops_it_and_leaves_others_working():
    alice, bob = UserFactory(username="alice"), UserFactory(username="bob")
    alice_token, bob_token = Token.objects.create(user=alice), Token.objects.create(user=bob)
    assert works(alice_token)

    output = revoke("alice")

    assert "Revoked 1 API token of 'alice'" in output
    assert not works(alice_token)
    assert works(bob_token)


def test_after_revoking_the_user_logs_in_for_a_new_token():
    alice = UserFactory(username="alice")
    old = Token.objects.create(user=alice)
    revoke("alice")

    response = APIClient().post(reverse("api:token"), {"username": "alice", "password": PASSWORD})

    new = response.json()["token"]
    assert new != old.key
    assert works(new) and not works(old)


def test_a_user_without_a_token_has_none_revoked():
    UserFactory(username="alice")
    assert "Revoked 0 API tokens of 'alice'" in revoke("alice")


def test_all_users_revokes_every_token():
    tokens = [Token.objects.create(user=UserFactory()) for _ in range(3)]

    output = revoke("--all-users")

    assert "Revoked 3 API tokens of all users" in output
    assert not Token.objects.exists()
    assert not any(works(token) for token in tokens)


def test_an_unknown_user_is_a_clear_error_and_revokes_nothing():
    Token.objects.create(user=UserFactory(username="alice"))
    with pytest.raises(CommandError, match="No user named 'mallory'"):
        revoke("mallory")
    assert Token.objects.count() == 1


@pytest.mark.parametrize("args", [(), ("alice", "--all-users")], ids=["neither", "both"])
def test_one_user_or_all_users_must_be_named(args):
    UserFactory(username="alice")
    with pytest.raises(CommandError, match="--all-users"):
        revoke(*args)


def test_the_services_return_how_many_tokens_went():
    alice = UserFactory()
    Token.objects.create(user=alice)
    Token.objects.create(user=UserFactory())

    assert user_tokens_revoke(user=alice) == 1
    assert user_tokens_revoke(user=alice) == 0
    assert tokens_revoke_all() == 1

"""Login throttling (django-axes, labeling/login_throttle.py) on the three places that check a password: the login
page, the admin's login page and the API's token login. Failures are counted per account and per address; once
either reaches the limit, even the right password is refused with 429 and how long to wait, without hashing it."""
from __future__ import annotations

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.hashers import MD5PasswordHasher, make_password
from django.core.exceptions import ImproperlyConfigured
from django.db.models import F
from django.test import Client, RequestFactory
from django.urls import reverse

from labeling.login_throttle import client_address
from tests.annotator.test_settings import load_settings
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

PASSWORD = "correct-horse-battery"
WRONG = "wrong-horse-battery"
HOME, AWAY = "198.51.100.7", "203.0.113.9"
PATHS = ["page", "admin", "api"]


@pytest.fixture(autouse=True)
def fast_hasher(settings):
    # Dozens of logins per test: a fast hasher, and users whose passwords are hashed with it.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def limit(settings) -> int:
    return settings.AXES_FAILURE_LIMIT


def staff(username: str):
    # Staff, so that the right password logs in on the admin's login page too.
    return UserFactory(username=username, password=make_password(PASSWORD), is_staff=True)


def attempt(path: str, username: str, password: str, address: str = HOME, **headers):
    url = {"page": reverse("login"), "admin": reverse("admin:login"), "api": reverse("api:token")}[path]
    return Client().post(url, {"username": username, "password": password}, REMOTE_ADDR=address, **headers)


def logged_in(path: str, response) -> bool:
    if path == "api":
        return response.status_code == 200 and bool(response.json()["token"])
    return response.status_code == 302 and "_auth_user_id" in response.client.session


def refused(path: str, response) -> bool:
    """An ordinary wrong-password answer: the form again, or the API's 401."""
    return response.status_code == (401 if path == "api" else 200) and not logged_in(path, response)


def assert_locked_out(path: str, response, settings) -> None:
    seconds = int(settings.AXES_COOLOFF_TIME.total_seconds())
    assert response.status_code == 429
    assert response["Retry-After"] == str(seconds)
    if path == "api":
        assert response["Content-Type"] == "application/json"
        message = response.json()["message"]
    else:
        assert response["Content-Type"].startswith("text/html")
        message = response.content.decode()
        assert response["Content-Security-Policy"]  # the lockout page goes out through the site's middleware
    assert "Too many failed login attempts" in message
    assert f"Try again in {seconds // 60} minutes." in message


@pytest.mark.parametrize("path", PATHS)
def test_after_the_limit_even_the_right_password_is_refused(path, limit, settings):
    staff("alice")
    for _ in range(limit - 1):
        assert refused(path, attempt(path, "alice", WRONG))
    assert_locked_out(path, attempt(path, "alice", WRONG), settings)  # the failure that reaches the limit

    response = attempt(path, "alice", PASSWORD)

    assert_locked_out(path, response, settings)
    assert not logged_in(path, response)


@pytest.mark.parametrize("path", PATHS)
def test_one_address_is_locked_out_whatever_the_usernames(path, limit, settings):
    staff("alice")
    for n in range(limit):
        attempt(path, f"guess{n}", WRONG, address=HOME)

    assert_locked_out(path, attempt(path, "alice", PASSWORD, address=HOME), settings)
    assert logged_in(path, attempt(path, "alice", PASSWORD, address=AWAY))


@pytest.mark.parametrize("path", PATHS)
def test_one_account_is_locked_out_whatever_the_addresses(path, limit, settings):
    staff("alice")
    staff("bob")
    addresses = [f"192.0.2.{n}" for n in range(1, limit + 1)]
    for address in addresses:
        attempt(path, "alice", WRONG, address=address)

    assert_locked_out(path, attempt(path, "alice", PASSWORD, address="192.0.2.200"), settings)
    # Each of those addresses failed once only: another account logs in from them.
    assert logged_in(path, attempt(path, "bob", PASSWORD, address=addresses[0]))


@pytest.mark.parametrize("path", PATHS)
def test_a_locked_out_login_hashes_no_password(path, limit, monkeypatch):
    staff("alice")
    calls = []
    for method in ("encode", "verify"):
        original = getattr(MD5PasswordHasher, method)
        monkeypatch.setattr(
            MD5PasswordHasher, method, lambda self, *args, _original=original: calls.append(1) or _original(self, *args)
        )
    attempt(path, "alice", WRONG)
    assert calls, "the counting hasher is not the one in use"
    for _ in range(limit - 1):
        attempt(path, "alice", WRONG)

    calls.clear()
    attempt(path, "alice", PASSWORD)
    attempt(path, "alice", WRONG)
    attempt(path, "nobody", WRONG)  # an unknown user costs a hash too, while the address is not locked

    assert calls == []


@pytest.mark.parametrize("path", PATHS)
def test_a_successful_login_before_the_limit_starts_the_count_again(path, limit):
    staff("alice")
    for _ in range(2):
        for _ in range(limit - 1):
            assert refused(path, attempt(path, "alice", WRONG))
        assert logged_in(path, attempt(path, "alice", PASSWORD))


@pytest.mark.parametrize("path", PATHS)
def test_logging_in_to_ones_own_account_forgives_no_guesses_at_others(path, limit, settings):
    staff("mallory")
    staff("victim")
    for _ in range(limit - 1):
        attempt(path, "victim", WRONG, address=HOME)
    assert logged_in(path, attempt(path, "mallory", PASSWORD, address=HOME))
    attempt(path, "victim", WRONG, address=HOME)

    assert_locked_out(path, attempt(path, "victim", PASSWORD, address=AWAY), settings)  # the account
    assert_locked_out(path, attempt(path, "mallory", PASSWORD, address=HOME), settings)  # the address


def lock_out(limit: int) -> None:
    staff("alice")
    for _ in range(limit):
        attempt("page", "alice", WRONG)


def age_failures(by: timedelta) -> None:
    AccessAttempt.objects.update(attempt_time=F("attempt_time") - by)


def test_the_lockout_ends_after_the_cool_off(limit, settings):
    lock_out(limit)
    cool_off = settings.AXES_COOLOFF_TIME

    age_failures(cool_off - timedelta(minutes=1))
    assert_locked_out("page", attempt("page", "alice", PASSWORD), settings)

    age_failures(timedelta(minutes=1, seconds=1))
    assert logged_in("page", attempt("page", "alice", PASSWORD))


def test_logins_refused_during_the_lockout_do_not_extend_it(limit, settings):
    lock_out(limit)
    age_failures(settings.AXES_COOLOFF_TIME - timedelta(minutes=1))
    for _ in range(3):
        assert_locked_out("page", attempt("page", "alice", WRONG), settings)

    age_failures(timedelta(minutes=1, seconds=1))

    assert logged_in("page", attempt("page", "alice", PASSWORD))


def test_the_limit_and_cool_off_follow_the_settings(settings):
    settings.AXES_FAILURE_LIMIT = 2
    settings.AXES_COOLOFF_TIME = timedelta(minutes=1)
    staff("alice")
    attempt("api", "alice", WRONG)
    attempt("api", "alice", WRONG)

    response = attempt("api", "alice", PASSWORD)

    assert response.status_code == 429
    assert response["Retry-After"] == "60"
    assert "Try again in 1 minute." in response.json()["message"]


def test_the_environment_sets_the_limit_and_cool_off(monkeypatch, tmp_path):
    loaded = load_settings(
        monkeypatch, DEBUG="1", VAR_DIR=str(tmp_path), LOGIN_FAILURE_LIMIT="8", LOGIN_COOLOFF_MINUTES="30"
    )
    assert loaded["AXES_FAILURE_LIMIT"] == 8
    assert loaded["AXES_COOLOFF_TIME"] == timedelta(minutes=30)
    assert loaded["AUTHENTICATION_BACKENDS"][0] == "axes.backends.AxesStandaloneBackend"
    with pytest.raises(ImproperlyConfigured, match="LOGIN_COOLOFF_MINUTES"):
        load_settings(monkeypatch, DEBUG="1", VAR_DIR=str(tmp_path), LOGIN_COOLOFF_MINUTES="0")


def test_the_address_is_the_connections_unless_a_proxy_header_is_named(settings):
    request = RequestFactory().post("/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="198.51.100.7")
    settings.LOGIN_CLIENT_IP_HEADER = ""
    assert client_address(request) == "10.0.0.1"

    settings.LOGIN_CLIENT_IP_HEADER = "X-Forwarded-For"
    assert client_address(request) == "198.51.100.7"


@pytest.mark.parametrize(
    ("forwarded", "expected"),
    [
        ("6.6.6.6, 198.51.100.7", "198.51.100.7"),  # the client's own entries come first; the proxy's is last
        ("2001:db8::1", "2001:db8::1"),
        ("not-an-address", "10.0.0.1"),
        (None, "10.0.0.1"),
    ],
)
def test_behind_a_proxy_the_last_forwarded_address_counts(settings, forwarded, expected):
    settings.LOGIN_CLIENT_IP_HEADER = "X-Forwarded-For"
    headers = {} if forwarded is None else {"HTTP_X_FORWARDED_FOR": forwarded}
    assert client_address(RequestFactory().post("/", REMOTE_ADDR="10.0.0.1", **headers)) == expected


def test_behind_a_proxy_one_client_is_locked_out_not_everybody(limit, settings):
    settings.LOGIN_CLIENT_IP_HEADER = "X-Forwarded-For"
    staff("alice")
    for n in range(limit):
        attempt("page", f"guess{n}", WRONG, address="10.0.0.1", HTTP_X_FORWARDED_FOR=HOME)

    assert_locked_out("page", attempt("page", "alice", PASSWORD, "10.0.0.1", HTTP_X_FORWARDED_FOR=HOME), settings)
    assert logged_in("page", attempt("page", "alice", PASSWORD, "10.0.0.1", HTTP_X_FORWARDED_FOR=AWAY))

"""Login throttling on top of django-axes: which address a login comes from, what a successful login forgives, and
what a locked-out login is told. The "Login throttling (django-axes)" block in annotator/settings.py wires these in."""
from __future__ import annotations

import ipaddress
import math

from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username, get_cool_off
from axes.models import AccessAttempt
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def client_address(request: HttpRequest) -> str | None:
    """The address failed logins are counted against: the connection's, or behind a reverse proxy the last address
    in settings.LOGIN_CLIENT_IP_HEADER (the one the proxy added; earlier ones are whatever the client sent). A
    header that is missing or not an address falls back to the connection's."""
    header = settings.LOGIN_CLIENT_IP_HEADER
    if header:
        last = request.headers.get(header, "").rsplit(",", 1)[-1].strip()
        try:
            return str(ipaddress.ip_address(last))
        except ValueError:
            pass
    return request.META.get("REMOTE_ADDR")


def login_failures_forgive(*, username: str, ip_address: str | None) -> int:
    """Forget the failed logins of `username` from `ip_address` (it has just logged in from there); return how many
    records went. Failures of other accounts from that address, and of this account from elsewhere, still count."""
    count, _ = AccessAttempt.objects.filter(username=username, ip_address=ip_address).delete()
    return count


class LoginAttemptHandler(AxesDatabaseHandler):
    """axes' database handler, except for what a successful login resets. axes deletes every failure of the account
    and every failure of the address, so someone owning one account could log in between guesses at other accounts
    and never reach the per-address limit; here a login forgives only its own account's failures from its address."""

    def reset_user_attempts(self, request: HttpRequest, credentials: dict | None = None) -> int:
        return login_failures_forgive(
            username=get_client_username(request, credentials), ip_address=request.axes_ip_address
        )


def lockout_seconds(request: HttpRequest) -> int:
    """How long a locked-out client waits at most: the cool-off, counted from its newest failure."""
    return int(get_cool_off(request).total_seconds())


def lockout_message(request: HttpRequest) -> str:
    minutes = math.ceil(lockout_seconds(request) / 60)
    return (
        "Too many failed login attempts for this account or from this address. "
        f"Try again in {minutes} minute{'' if minutes == 1 else 's'}."
    )


def lockout_page(
    request: HttpRequest, original_response: HttpResponse | None, credentials: dict | None
) -> HttpResponse:
    """axes' AXES_LOCKOUT_CALLABLE: the page a locked-out login on /accounts/login/ or /admin/login/ gets. (The API's
    token login answers JSON itself: axes never learns that it refused a DRF request.)"""
    response = render(request, "registration/lockout.html", {"message": lockout_message(request)}, status=429)
    response["Retry-After"] = str(lockout_seconds(request))
    return response

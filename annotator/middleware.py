"""Response headers Django's SecurityMiddleware does not set: the Content-Security-Policy.

X-Content-Type-Options (SECURE_CONTENT_TYPE_NOSNIFF), Referrer-Policy (SECURE_REFERRER_POLICY) and
Cross-Origin-Opener-Policy already come from SecurityMiddleware, and X-Frame-Options from
XFrameOptionsMiddleware, so they are not repeated here.
"""
from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse


class ContentSecurityPolicyMiddleware:
    """Sends settings.CSP_POLICY with every response. Passages, queries and notes are untrusted text: if an
    escaping mistake ever lets markup through, the policy still refuses inline scripts, inline styles and
    foreign origins. A view that needs another policy sets the header itself and keeps it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.policy = settings.CSP_POLICY

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if self.policy and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = self.policy
        return response

"""Security headers and what the Content-Security-Policy demands of the templates (no inline script, style or
event handler on any page), and CSRF protection of htmx requests through the token base.html hands to htmx."""
from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.http import HttpResponse
from django.test import Client, RequestFactory
from django.urls import reverse

from annotator.middleware import ContentSecurityPolicyMiddleware
from labeling.models import ScoringJob, ValidationResult
from tests.annotator.test_settings import load_settings
from tests.html_audit import audit_html
from tests.url_matrix import ADMIN, VIEWER, all_routes, build_world
from tests.views.test_roles import ALLOWED, MATRIX

pytestmark = pytest.mark.django_db

POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
    "base-uri 'self'; frame-ancestors 'none'; form-action 'self'"
)
# Every page an admin may GET, as the role matrix lists them.
HTML_ROUTES = [
    route for route in all_routes()
    if not route.is_api and ADMIN in ALLOWED.get(MATRIX.get(route.name, {}).get("GET"), ())
]


def test_the_default_policy_comes_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("CSP_POLICY", raising=False)
    assert load_settings(monkeypatch, DEBUG="1", VAR_DIR=str(tmp_path))["CSP_POLICY"] == POLICY
    custom = load_settings(monkeypatch, DEBUG="1", VAR_DIR=str(tmp_path), CSP_POLICY="default-src 'none'")
    assert custom["CSP_POLICY"] == "default-src 'none'"


@pytest.mark.parametrize("user", [None, ADMIN])
@pytest.mark.parametrize("url", ["/", "/accounts/login/", "/projects/nowhere/", "/api/projects/"])
def test_every_response_carries_the_security_headers(client, url, user):
    world = build_world()
    if user:
        client.force_login(world.users[user])
    response = client.get(url)
    assert response["Content-Security-Policy"] == POLICY
    # These come from Django's SecurityMiddleware and XFrameOptionsMiddleware, not from ours.
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["X-Frame-Options"] == "DENY"


def test_a_policy_the_view_set_itself_is_kept():
    own = "default-src 'none'"

    def view(request):
        response = HttpResponse("x")
        response["Content-Security-Policy"] = own
        return response

    response = ContentSecurityPolicyMiddleware(view)(RequestFactory().get("/"))
    assert response["Content-Security-Policy"] == own


def test_an_empty_policy_sends_no_header(settings):
    settings.CSP_POLICY = ""
    response = ContentSecurityPolicyMiddleware(lambda request: HttpResponse("x"))(RequestFactory().get("/"))
    assert "Content-Security-Policy" not in response


@pytest.mark.parametrize("htmx", [False, True], ids=["page", "htmx"])
@pytest.mark.parametrize("route", HTML_ROUTES, ids=[route.name for route in HTML_ROUTES])
def test_no_page_has_inline_script_style_or_handlers(client, route, htmx):
    world = build_world(with_report=True)
    client.force_login(world.users[ADMIN])
    response = client.get(world.url(route), headers={"HX-Request": "true"} if htmx else {})
    assert response.status_code == 200
    if response.streaming:
        # A download (the qrels), not a page: nothing in it may be run as HTML.
        assert not response["Content-Type"].startswith("text/html")
        return
    audit = audit_html(response.content.decode())
    assert audit.inline_scripts == 0
    assert audit.style_elements == 0
    assert audit.style_attributes == []
    assert audit.handlers == []
    assert audit.script_urls == []


def test_the_login_page_has_no_inline_script_or_style(client):
    audit = audit_html(client.get(reverse("login")).content.decode())
    assert (audit.inline_scripts, audit.style_elements, audit.style_attributes, audit.handlers) == (0, 0, [], [])


def test_htmx_is_told_not_to_inject_its_indicator_style(client):
    world = build_world()
    client.force_login(world.users[VIEWER])
    audit = audit_html(client.get(reverse("labeling:project_list")).content.decode())
    (config,) = [meta["content"] for meta in audit.attributes["meta"] if meta.get("name") == "htmx-config"]
    assert json.loads(config)["includeIndicatorStyles"] is False
    css = (settings.BASE_DIR / "static" / "css" / "app.css").read_text()
    assert ".htmx-indicator" in css and ".htmx-request .htmx-indicator" in css


def _hx_headers(html: str) -> dict[str, str]:
    (body,) = audit_html(html).attributes["body"]
    return json.loads(body["hx-headers"])


def test_the_body_hands_htmx_the_csrf_token(client):
    world = build_world()
    client.force_login(world.users[VIEWER])
    response = client.get(reverse("labeling:validation", args=[world.project.slug]))
    token = _hx_headers(response.content.decode())["X-CSRFToken"]
    assert len(token) == 64 and token.isalnum()  # a masked token, as {% csrf_token %} would render


def test_an_htmx_post_without_the_token_is_refused_and_with_it_goes_through():
    world = build_world()
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(world.users[ADMIN])  # asking for a recomputation is for admins
    page = browser.get(reverse("labeling:validation", args=[world.project.slug]))
    token = _hx_headers(page.content.decode())["X-CSRFToken"]
    refresh = reverse("labeling:validation_refresh", args=[world.project.slug])

    refused = browser.post(refresh, headers={"HX-Request": "true"})
    assert refused.status_code == 403
    requested_before = ValidationResult.objects.get(project=world.project).requested_at

    accepted = browser.post(refresh, headers={"HX-Request": "true", "X-CSRFToken": token})
    assert accepted.status_code == 302
    assert ValidationResult.objects.get(project=world.project).requested_at > requested_before


def test_a_job_cancel_without_the_token_leaves_the_job_running():
    world = build_world()
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(world.users[ADMIN])
    token = _hx_headers(browser.get(reverse("labeling:judges", args=[world.project.slug])).content.decode())[
        "X-CSRFToken"
    ]
    cancel = reverse("labeling:job_cancel", args=[world.project.slug, world.job.id])

    assert browser.post(cancel, headers={"HX-Request": "true"}).status_code == 403
    world.job.refresh_from_db()
    assert world.job.status == ScoringJob.Status.RUNNING

    assert browser.post(cancel, headers={"HX-Request": "true", "X-CSRFToken": token}).status_code == 302
    world.job.refresh_from_db()
    assert world.job.status == ScoringJob.Status.CANCELLED

"""The Content-Security-Policy in a real browser (Debian's chromium driven by playwright): every page of a
project loads, and htmx polls and swaps, without the browser refusing a single script or style."""
from __future__ import annotations

import os
import shutil

import pytest
from playwright.sync_api import sync_playwright

from tests.factories import PASSWORD
from tests.test_roles import ALLOWED, MATRIX
from tests.url_matrix import ADMIN, all_routes, build_world

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not shutil.which(CHROMIUM), reason=f"no chromium at {CHROMIUM} (Debian package chromium)"),
]

# Runs before any page script; playwright injects it outside the page's policy. Chromium also logs each
# refusal to the console, but the event names the directive.
RECORD_VIOLATIONS = """
window.__violations = [];
document.addEventListener('securitypolicyviolation',
  (e) => window.__violations.push(e.violatedDirective + ' ' + (e.blockedURI || 'inline')));
"""
PAGES = ["labeling:project_detail", "labeling:validation", "labeling:judges"]


@pytest.fixture
def browser(monkeypatch):
    # live_server runs Django in a thread of this process, and playwright's sync API runs an event loop here.
    # Set for this test only: left in os.environ it would reach `check --deploy` in tests/test_settings.py.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def admin_page(browser, live_server):
    world = build_world(with_report=True)
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.add_init_script(RECORD_VIOLATIONS)
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", world.users[ADMIN].username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    yield world, page, errors
    # A polling page left open would keep querying while the test database is torn down.
    page.close()


def test_the_violation_recorder_sees_an_inline_style(admin_page, live_server):
    # The negative control: without it, an empty list below could mean the recorder never worked.
    _, page, errors = admin_page
    page.evaluate("document.head.insertAdjacentHTML('beforeend', '<style>body { color: red; }</style>')")
    page.wait_for_function("() => window.__violations.length > 0")  # a function: a string would need eval
    assert page.evaluate("window.__violations") == ["style-src-elem inline"]
    assert any("Content Security Policy" in text for text in errors)


def test_project_pages_load_without_a_policy_violation(admin_page, live_server):
    world, page, errors = admin_page
    # Every page an admin may GET (from the role matrix), the three the policy was written against first.
    routes = {route.name: route for route in all_routes() if not route.is_api}
    pages = {name for name, methods in MATRIX.items() if ADMIN in ALLOWED.get(methods.get("GET"), ())} & set(routes)
    for name in PAGES + sorted(pages - set(PAGES)):
        response = page.goto(f"{live_server.url}{world.url(routes[name])}")
        assert response.status == 200, name
        assert page.evaluate("typeof htmx") == "object", name  # htmx itself loaded under the policy
        assert page.evaluate("window.__violations") == [], name
    assert errors == []


def test_htmx_polling_swaps_without_a_policy_violation(admin_page, live_server):
    world, page, errors = admin_page
    page.goto(f"{live_server.url}/projects/{world.project.slug}/judges/")
    # The running job makes the jobs table poll every 2 s; wait for one poll to be swapped in.
    with page.expect_response(lambda r: r.request.headers.get("hx-request") == "true", timeout=10_000) as poll:
        pass
    assert poll.value.status == 200
    page.wait_for_selector(f"[data-job='{world.job.id}']")
    assert page.evaluate("window.__violations") == []
    assert errors == []

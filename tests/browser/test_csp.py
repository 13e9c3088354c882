"""The Content-Security-Policy in a real browser (Debian's chromium driven by playwright): every page of a
project loads, and htmx polls and swaps, without the browser refusing a single script or style."""
from __future__ import annotations

import pytest

from tests.browser import log_in, needs_chromium
from tests.url_matrix import ADMIN, all_routes, build_world
from tests.views.test_roles import ALLOWED, MATRIX

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), needs_chromium]

# Runs before any page script; playwright injects it outside the page's policy. Chromium also logs each
# refusal to the console, but the event names the directive.
RECORD_VIOLATIONS = """
window.__violations = [];
document.addEventListener('securitypolicyviolation',
  (e) => window.__violations.push(e.violatedDirective + ' ' + (e.blockedURI || 'inline')));
"""
PAGES = ["labeling:project_detail", "labeling:validation", "labeling:judges"]
# GETs that answer a file to save, not a page: the browser downloads it and there is no document to check.
DOWNLOADS = {"labeling:qrels_export", "labeling:release_export"}


@pytest.fixture
def admin_page(browser, live_server):
    world = build_world(with_report=True)
    page, errors = log_in(browser, live_server, world.users[ADMIN].username, init_script=RECORD_VIOLATIONS)
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
    pages = ({name for name, methods in MATRIX.items() if ADMIN in ALLOWED.get(methods.get("GET"), ())} & set(routes)
             - DOWNLOADS)
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

"""Accessibility of the project's pages in a real browser (Debian's chromium): axe-core (the audit browser
extensions and CI tools run) finds nothing serious or critical: contrast, names of buttons, links and fields,
landmarks. The project header stays one compact row at 1366 px and its tabs are reached and outlined from the
keyboard. The workspace has its own audit in tests/browser/test_workspace.py."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from axe_playwright_python.sync_playwright import Axe

from tests.browser import log_in, needs_chromium
from tests.url_matrix import ADMIN, EXPERT, build_world

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), needs_chromium]
SCREEN = {"width": 1366, "height": 768}
SHOTS = os.environ.get("SCREENSHOT_DIR")
PAGES = ("", "judges/", "systems/", "validation/", "members/", "adjudication/", "queries/", "definitions/", "settings/",
         "finetune/", "releases/")
# The header's share of a 768 px screen: the workspace below it must still fit.
HEADER_MAX_PX = 90


def test_the_project_pages_pass_an_axe_audit(browser, live_server):
    world = build_world(with_report=True)
    page, errors = log_in(browser, live_server, world.users[ADMIN].username, viewport=SCREEN)
    axe = Axe()
    found, heights = {}, {}
    for path in PAGES:
        page.goto(f"{live_server.url}/projects/{world.project.slug}/{path}")
        if SHOTS and path in ("", "systems/", "releases/"):
            Path(SHOTS).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=f"{SHOTS}/{path.strip('/') or 'overview'}.png", full_page=True)
        heights[path or "overview"] = page.locator(".project-header").bounding_box()["height"]
        violations = [v for v in axe.run(page).response["violations"] if v["impact"] in ("serious", "critical")]
        if violations:
            found[path or "overview"] = [f"{v['id']} ({v['impact']}): {v['help']} -> "
                                         f"{[n['target'] for n in v['nodes']][:4]}" for v in violations]
    assert found == {}, "\n".join(f"{page}: {line}" for page, lines in found.items() for line in lines)
    assert all(height <= HEADER_MAX_PX for height in heights.values()), heights
    assert errors == []


def test_the_tabs_are_reached_from_the_keyboard_with_a_visible_outline(browser, live_server):
    world = build_world()
    page, errors = log_in(browser, live_server, world.users[ADMIN].username, viewport=SCREEN)
    page.goto(f"{live_server.url}/projects/{world.project.slug}/judges/")
    focused = None
    for _ in range(12):  # the site's links, the project's name, then the tabs
        page.keyboard.press("Tab")
        focused = page.evaluate("document.activeElement.dataset.tab || null")
        if focused:
            break
    assert focused == "overview"
    outline = page.evaluate("(() => { const s = getComputedStyle(document.activeElement);"
                            " return [s.outlineStyle, s.outlineWidth, s.outlineColor]; })()")
    assert outline == ["solid", "2px", "rgb(47, 91, 211)"]  # --accent: 5.5:1 on the page's background
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.dataset.tab") == "annotate"
    page.keyboard.press("Enter")
    page.wait_for_url(f"{live_server.url}/projects/{world.project.slug}/annotate/")
    assert page.locator('.project-tab[aria-current="page"]').get_attribute("data-tab") == "annotate"
    assert errors == []


def test_an_expert_refused_an_admin_page_gets_the_sites_page_with_its_navigation(browser, live_server):
    world = build_world()
    page, errors = log_in(browser, live_server, world.users[EXPERT].username, viewport=SCREEN)
    response = page.goto(f"{live_server.url}/projects/{world.project.slug}/settings/")
    assert response.status == 403
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=f"{SHOTS}/forbidden.png", full_page=True)
    assert page.locator(".site-nav a").first.inner_text() == "Projects"
    tabs = [tab.get_attribute("data-tab") for tab in page.locator(".project-tab").all()]
    assert "annotate" in tabs and "settings" not in tabs
    assert page.locator("[data-testid=forbidden-reason]").inner_text() == (
        f"You are an expert of {world.project.name}. Only a project admin can change the queue settings.")
    violations = [v["id"] for v in Axe().run(page).response["violations"] if v["impact"] in ("serious", "critical")]
    assert violations == []
    page.locator("[data-testid=forbidden] a").click()
    page.wait_for_url(f"{live_server.url}/projects/{world.project.slug}/")
    # The browser logs the 403 answer itself as a console error: nothing else went wrong.
    assert [error for error in errors if "403" not in error] == []

"""Accessibility of the project's pages in a real browser (Debian's chromium): axe-core (the audit browser
extensions and CI tools run) finds nothing serious or critical: contrast, names of buttons, links and fields,
landmarks. The workspace has its own audit in tests/test_browser_workspace.py."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from axe_playwright_python.sync_playwright import Axe

from tests.browser import log_in, needs_chromium
from tests.url_matrix import ADMIN, build_world

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), needs_chromium]
SCREEN = {"width": 1366, "height": 768}
SHOTS = os.environ.get("SCREENSHOT_DIR")
PAGES = ("", "judges/", "systems/", "validation/", "members/", "adjudication/", "queries/", "settings/", "finetune/")


def test_the_project_pages_pass_an_axe_audit(browser, live_server):
    world = build_world(with_report=True)
    page, errors = log_in(browser, live_server, world.users[ADMIN].username, viewport=SCREEN)
    axe = Axe()
    found = {}
    for path in PAGES:
        page.goto(f"{live_server.url}/projects/{world.project.slug}/{path}")
        if SHOTS and path in ("", "systems/"):
            Path(SHOTS).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=f"{SHOTS}/{path.strip('/') or 'overview'}.png", full_page=True)
        violations = [v for v in axe.run(page).response["violations"] if v["impact"] in ("serious", "critical")]
        if violations:
            found[path or "overview"] = [
                f"{v['id']} ({v['impact']}): {v['help']} -> {[n['target'] for n in v['nodes']][:4]}" for v in violations]
    assert found == {}, "\n".join(f"{page}: {line}" for page, lines in found.items() for line in lines)
    assert errors == []

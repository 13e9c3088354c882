"""Helpers for the browser tests: Debian's chromium (CHROMIUM_PATH) driven by playwright's sync API; the `browser`
fixture itself is in conftest.py."""
from __future__ import annotations

import os
import shutil

import pytest

from tests.factories import PASSWORD

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
needs_chromium = pytest.mark.skipif(
    not shutil.which(CHROMIUM), reason=f"no chromium at {CHROMIUM} (Debian package chromium)"
)


def log_in(browser, live_server, username: str, *, init_script: str | None = None,
           viewport: dict | None = None):
    """A new page logged in as `username` (password factories.PASSWORD) and the list that collects its script
    errors and console errors; `viewport` {"width", "height"} sets the window (playwright's default otherwise)."""
    page = browser.new_page(**({"viewport": viewport} if viewport else {}))
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    if init_script:
        page.add_init_script(init_script)
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    return page, errors

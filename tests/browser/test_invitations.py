"""An admin brings a new expert in without the Django admin, in a real browser (Debian's chromium): invite, open
the link logged out, set a password, land in the project, label an item; the used link and an expired one are
refused."""
from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from labeling.models import Invitation, Label
from tests.browser import log_in, needs_chromium
from tests.factories import (
    MembershipFactory,
    PairFactory,
    PassageFactory,
    ProjectFactory,
    QueryFactory,
    RelevanceDefinitionFactory,
    UserFactory,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), needs_chromium]
SCREEN = {"width": 1366, "height": 768}
SHOTS = os.environ.get("SCREENSHOT_DIR")
PASSPHRASE = "violet harbour lantern 42"


def test_an_admin_invites_an_expert_who_sets_a_password_and_labels(browser, live_server):
    project = ProjectFactory(name="Climate", queue_mix={"sequential": 100}, labels_per_item=1)
    query = QueryFactory(project=project, text="Which emission targets does the company set?")
    RelevanceDefinitionFactory(query=query, text="Numeric targets for greenhouse gas emissions.")
    for i in range(2):
        PairFactory(project=project, query=query,
                    passage=PassageFactory(project=project, title=f"Report {i}", text=f"We cut emissions {i}."))
    boss = UserFactory(username="boss")
    MembershipFactory(project=project, user=boss, role="admin")

    page, errors = log_in(browser, live_server, "boss", viewport=SCREEN)
    page.goto(f"{live_server.url}/projects/{project.slug}/members/")
    invite = page.locator("#invite")
    invite.locator("input[name=username]").fill("carol")
    invite.locator("input[name=email]").fill("carol@example.org")
    invite.locator("select[name=role]").select_option("expert")
    invite.locator("button[type=submit]").click()
    link = page.locator("[data-testid=invite-link-input]").input_value()
    assert "/invite/" in link and page.locator("tr[data-invitation=carol][data-state=open]").count() == 1
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=f"{SHOTS}/members.png", full_page=True)
    assert errors == []

    stranger = browser.new_page(viewport=SCREEN)  # a browser of its own: nobody logged in
    stranger.goto(link)
    assert stranger.locator("[data-testid=invited-name]").inner_text() == "carol"
    stranger.fill("#id_password", PASSPHRASE)
    stranger.fill("#id_password_again", PASSPHRASE)
    stranger.locator("button[type=submit]").click()
    stranger.wait_for_url(f"{live_server.url}/projects/{project.slug}/")
    stranger.goto(f"{live_server.url}/projects/{project.slug}/annotate/")
    pair = stranger.locator("#ws-current .ws-item").get_attribute("data-pair")
    stranger.keyboard.press("1")
    stranger.wait_for_selector("#ws-progress:not([aria-busy]) [data-count=done-today]:text-is('1')")
    label = Label.objects.get()
    assert (label.annotator.username, label.pair_id, label.grade) == ("carol", int(pair), 1)

    # The link worked once.
    used = browser.new_page(viewport=SCREEN)
    response = used.goto(link)
    assert response.status == 410 and "was used" in used.locator("[data-testid=invitation-refused]").inner_text()

    # An expired link is refused too.
    page.goto(f"{live_server.url}/projects/{project.slug}/members/")
    page.locator("#invite input[name=username]").fill("dave")
    page.locator("#invite button[type=submit]").click()
    late = page.locator("[data-testid=invite-link-input]").input_value()
    Invitation.objects.filter(username="dave").update(expires_at=timezone.now() - timedelta(seconds=1))
    response = used.goto(late)
    assert response.status == 410 and "expired" in used.locator("[data-testid=invitation-refused]").inner_text()
    assert errors == []

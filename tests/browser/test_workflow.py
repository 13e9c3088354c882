"""The experts' day in a real browser (Debian's chromium driven by playwright): an expert labels three items
with the keyboard and undoes one; an admin then adjudicates the conflict her label made. The database must
hold exactly what was done."""
from __future__ import annotations

import pytest

from labeling.models import Label, Lease
from labeling.services.labels import label_submit
from tests.browser import log_in, needs_chromium
from tests.factories import (
    LeaseFactory,
    MembershipFactory,
    PairFactory,
    PassageFactory,
    ProjectFactory,
    QueryFactory,
    RelevanceDefinitionFactory,
    UserFactory,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), needs_chromium]


def test_an_expert_labels_with_the_keyboard_undoes_one_and_an_admin_adjudicates(browser, live_server):
    project = ProjectFactory(queue_mix={"sequential": 100}, labels_per_item=2, overlap_share=1.0)
    query = QueryFactory(project=project, text="Which emission targets does the company set?")
    RelevanceDefinitionFactory(query=query, text="Numeric targets for greenhouse gas emissions.")
    pairs = [
        PairFactory(project=project, query=query,
                    passage=PassageFactory(project=project, title=f"Passage {i}", text=f"Emission text number {i}."))
        for i in range(4)
    ]
    alice, bob, admin = (UserFactory(username=name) for name in ("alice", "bob", "boss"))
    MembershipFactory(project=project, user=alice, role="expert")
    MembershipFactory(project=project, user=bob, role="expert")
    MembershipFactory(project=project, user=admin, role="admin")
    # Bob said the first item is irrelevant; Alice will say it is relevant: a conflict (0 and the top grade).
    LeaseFactory(pair=pairs[0], annotator=bob)  # the queue gave it to him
    label_submit(project=project, annotator=bob, pair_id=pairs[0].id, grade=0)

    page, errors = log_in(browser, live_server, "alice")
    page.goto(f"{live_server.url}/projects/{project.slug}/annotate/")
    shown = []
    for key in ("2", "0", "1"):
        item = page.locator(".ws-item").get_attribute("data-pair")
        shown.append(int(item))
        page.keyboard.press(key)
        # A selector, not a JavaScript string: the pages' Content-Security-Policy forbids eval.
        page.wait_for_selector(f".ws-item:not([data-pair='{item}'])")
    assert shown == [pairs[0].id, pairs[1].id, pairs[2].id]
    # The labels go in the background (the next item was already on the page): the server's counter follows.
    page.wait_for_selector("#ws-progress:not([aria-busy]) [data-count=done-today]:text-is('3')")
    page.keyboard.press("u")
    page.wait_for_selector(f".ws-item[data-pair='{pairs[2].id}']")
    assert "Undid your last label" in page.locator("#workspace").inner_text()
    page.keyboard.press("?")
    assert page.locator("#shortcut-help").is_visible()
    assert errors == []

    mine = Label.objects.filter(annotator=alice).order_by("id")
    assert [(label.pair_id, label.grade, label.superseded_at is None, label.undone) for label in mine] == [
        (pairs[0].id, 2, True, False),
        (pairs[1].id, 0, True, False),
        (pairs[2].id, 1, False, True),
    ]
    # Held: the item undone, on screen again, and the one after it (the last pair), leased ahead.
    assert sorted(Lease.objects.filter(annotator=alice).values_list("pair_id", flat=True)) == [
        pairs[2].id, pairs[3].id]

    page, errors = log_in(browser, live_server, "boss")
    page.goto(f"{live_server.url}/projects/{project.slug}/adjudication/")
    item = page.locator(f"[data-pair='{pairs[0].id}']")
    assert "alice" in item.inner_text() and "bob" in item.inner_text()
    item.locator("button[name=grade][value='1']").click()
    page.wait_for_selector(f"[data-pair='{pairs[0].id}'] >> text=gold")
    assert errors == []

    gold = Label.objects.get(role=Label.Role.ADJUDICATOR)
    assert (gold.pair_id, gold.grade, gold.annotator, gold.superseded_at) == (pairs[0].id, 1, admin, None)
    assert Label.objects.count() == 5  # bob's, alice's three (one undone) and the gold grade: nothing else

"""An expert's hour in a real browser (Debian's chromium, 1366 x 768, keyboard only) on the sample project: each
item's passage and grade buttons are on screen before the key is pressed, the next item comes without a wait
(it was prefetched), the database holds exactly the labels given, and the workspace passes an axe-core audit."""
from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

import pytest

from labeling.models import Label, Lease, Pair, Project
from labeling.services.bundle_import import bundle_import
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

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "climretrieve"
SCREEN = {"width": 1366, "height": 768}
ITEMS = 20
# Screenshots for a reader, where one asks for them: SCREENSHOT_DIR=/tmp/shots.
SHOTS = os.environ.get("SCREENSHOT_DIR")


def _inside(box: dict | None) -> bool:
    return box is not None and box["x"] >= 0 and box["y"] >= 0 and box["x"] + box["width"] <= SCREEN["width"] \
        and box["y"] + box["height"] <= SCREEN["height"]


def _expert_on_the_sample(browser, live_server):
    """The sample project (sequential queue), an expert of it, and their browser page on its workspace."""
    bundle_import(path=SAMPLE, project_slug="climretrieve")
    project = Project.objects.get(slug="climretrieve")
    project.queue_mix = {"sequential": 100}
    project.save()
    expert = UserFactory(username="erin")
    MembershipFactory(project=project, user=expert, role="expert")
    page, errors = log_in(browser, live_server, "erin", viewport=SCREEN)
    page.goto(f"{live_server.url}/projects/{project.slug}/annotate/")
    return expert, page, errors


def test_an_expert_labels_twenty_sample_items_by_keyboard_with_each_passage_on_screen(browser, live_server):
    expert, page, errors = _expert_on_the_sample(browser, live_server)
    grades = [str(i % 4) for i in range(ITEMS)]
    shown, waits, longest = [], [], 0
    for i, key in enumerate(grades):
        item = page.locator("#ws-current .ws-item")
        pair = item.get_attribute("data-pair")
        shown.append(int(pair))
        passage = item.locator(".ws-passage")
        if SHOTS and i == 0:
            Path(SHOTS).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=f"{SHOTS}/workspace.png")
        text = passage.inner_text()
        longest = max(longest, len(text))
        # The passage's first line, and every grade button, inside the window: nothing to scroll to.
        first_line = passage.bounding_box()
        assert _inside({**first_line, "height": 24}), (i, first_line)
        buttons = item.locator("button[name=grade]")
        assert buttons.count() == 4
        for b in range(buttons.count()):
            assert _inside(buttons.nth(b).bounding_box()), (i, b, buttons.nth(b).bounding_box())
        if len(text) <= 1500:  # the whole passage shows without scrolling its box
            sizes = passage.evaluate("box => [box.scrollHeight, box.clientHeight]")
            assert sizes[0] <= sizes[1] + 1, (i, len(text), sizes)
        start = time.perf_counter()
        page.keyboard.press(key)
        page.wait_for_selector(f"#ws-current .ws-item:not([data-pair='{pair}'])", timeout=10_000)
        waits.append(time.perf_counter() - start)
    median_ms = statistics.median(waits) * 1000
    print(f"\nmedian time between items: {median_ms:.0f} ms over {ITEMS} items (longest passage {longest} chars)")

    # The labels went in the background: once the last answer is in (the counter the server sent, no longer busy,
    # says so), the database holds exactly what was pressed.
    page.wait_for_selector(f"#ws-progress:not([aria-busy]) [data-count=done-today]:text-is('{ITEMS}')",
                           timeout=10_000)
    labels = list(Label.objects.filter(annotator=expert).order_by("id").values_list("pair_id", "grade"))
    assert labels == [(pair, int(key)) for pair, key in zip(shown, grades)]
    assert len(set(shown)) == ITEMS
    # Each label's time counts from when its item was on screen, not from when it was prefetched.
    spent = Label.objects.filter(annotator=expert).values_list("time_spent_seconds", flat=True)
    assert all(seconds is not None and seconds < 30 for seconds in spent)
    # Held now: the item on screen and the one prefetched after it.
    assert Lease.objects.filter(annotator=expert, skipped=False).count() == 2

    page.keyboard.press("f")
    page.wait_for_selector("[data-testid=session-summary]")
    assert page.locator("[data-count=session-items]").inner_text() == str(ITEMS)
    assert errors == []


def test_the_workspace_passes_an_axe_audit_and_the_definition_folds_by_key(browser, live_server):
    from axe_playwright_python.sync_playwright import Axe

    _, page, errors = _expert_on_the_sample(browser, live_server)
    # The saved-label toast fades in and out; the audit once caught it half-faded (its text blended into the page:
    # contrast 1.42). With reduced motion it is shown or gone, never between (workspace.css).
    page.emulate_media(reduced_motion="reduce")
    aside = page.locator("#ws-current .ws-definition")
    assert "collapsed" in aside.get_attribute("class")
    page.keyboard.press("d")
    assert "collapsed" not in aside.get_attribute("class")
    assert aside.locator(".ws-definition-toggle").get_attribute("aria-expanded") == "true"
    # Opened for this question: the next item of the same question shows it opened too (remembered).
    query = page.locator("#ws-current .ws-grid").get_attribute("data-query")
    pair = page.locator("#ws-current .ws-item").get_attribute("data-pair")
    page.keyboard.press("0")
    page.wait_for_selector(f"#ws-current .ws-item:not([data-pair='{pair}'])")
    if page.locator("#ws-current .ws-grid").get_attribute("data-query") == query:
        assert "collapsed" not in page.locator("#ws-current .ws-definition").get_attribute("class")

    results = Axe().run(page)
    serious = [v for v in results.response["violations"] if v["impact"] in ("serious", "critical")]
    assert serious == [], "\n".join(
        f"{v['id']} ({v['impact']}): {v['help']} -> {[n['target'] for n in v['nodes']][:5]}" for v in serious)
    # Every grade button has a name a screen reader says.
    for button in page.locator("#ws-current button[name=grade]").all():
        assert button.get_attribute("aria-keyshortcuts") and button.inner_text().strip()
    assert errors == []


def _box(page, selector: str) -> dict:
    return page.locator(selector).bounding_box()


def _counters(page) -> tuple[str, str, str, str]:
    """This session, done today, left after the shown item, and the project header's count of items waiting."""
    progress = page.locator("#ws-progress")
    tab = page.locator('.project-tab[data-tab="annotate"] .tab-count')
    return (progress.locator("[data-count=session-labelled]").inner_text(),
            progress.locator("[data-count=done-today]").inner_text(),
            progress.locator("[data-count=left]").inner_text(),
            tab.evaluate("span => span.firstElementChild.nextSibling.nodeValue"))


def test_a_saved_label_is_confirmed_over_the_page_and_the_counters_follow_labels_and_undo(browser, live_server):
    """Six items, one label each (sequential): after k labels the session and today counters read k, the items
    left after the one on screen 5 - k, and the header's items waiting (the one on screen included) 6 - k."""
    project = ProjectFactory(queue_mix={"sequential": 100})
    query = QueryFactory(project=project, external_id="q-emissions")
    RelevanceDefinitionFactory(query=query, text="Targets for cutting emissions.")
    for i in range(6):
        passage = PassageFactory(project=project, external_id=f"<b>doc-{i}</b>" if i == 0 else f"doc-{i}")
        PairFactory(project=project, query=query, passage=passage)
    expert = UserFactory(username="erin")
    MembershipFactory(project=project, user=expert, role="expert")
    page, errors = log_in(browser, live_server, "erin", viewport=SCREEN)
    page.goto(f"{live_server.url}/projects/{project.slug}/annotate/")
    assert _counters(page) == ("0", "0", "5", "6")
    region = page.locator("#ws-toast")
    assert (region.get_attribute("aria-live"), region.inner_text()) == ("polite", "")
    above, below = _box(page, "#ws-progress"), _box(page, "#ws-current")

    names = {0: "irrelevant", 1: "partially relevant", 2: "relevant"}
    labelled = []
    for k, grade in enumerate((2, 1, 0), start=1):
        pair = Pair.objects.select_related("passage").get(
            id=page.locator("#ws-current .ws-item").get_attribute("data-pair"))
        labelled.append(pair.id)
        page.keyboard.press(str(grade))
        toast = page.locator("#ws-toast [data-testid=saved]")
        # The confirmation names the item just labelled (not the one now shown), its passage id as text.
        toast.filter(has_text=pair.passage.external_id).wait_for(timeout=10_000)
        assert toast.inner_text() == (f"Saved: {grade} {names[grade]} for query q-emissions, "
                                      f"passage {pair.passage.external_id}.")
        assert toast.evaluate("el => getComputedStyle(el.parentElement).position") == "fixed"
        # Nothing moved: the counters above and the item below are where they were before any label.
        shown = _box(page, "#ws-current")
        for before, now in ((above, _box(page, "#ws-progress")), (below, shown)):
            assert (now["x"], now["y"]) == (before["x"], before["y"]), (k, before, now)
        page.wait_for_selector(f"#ws-progress:not([aria-busy]) [data-count=session-labelled]:text-is('{k}')")
        assert _counters(page) == (str(k), str(k), str(5 - k), str(6 - k))
        if SHOTS and k == 1:
            Path(SHOTS).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=f"{SHOTS}/workspace-toast.png")
        # It goes by itself, and the page around it stays as it was.
        toast.wait_for(state="detached", timeout=8_000)
        assert _box(page, "#ws-current") == shown
    assert Label.objects.filter(annotator=expert, superseded_at__isnull=True).count() == 3

    page.keyboard.press("u")
    page.wait_for_selector("[data-count=session-labelled]:text-is('2')")
    assert _counters(page) == ("2", "2", "3", "4")
    assert int(page.locator("#ws-current .ws-item").get_attribute("data-pair")) == labelled[-1]
    page.keyboard.press("2")
    page.wait_for_selector("#ws-progress:not([aria-busy]) [data-count=session-labelled]:text-is('3')")
    assert _counters(page) == ("3", "3", "2", "3")
    assert page.locator("#ws-toast [data-testid=saved]").inner_text().startswith("Saved: 2 relevant for query")
    assert Label.objects.filter(annotator=expert, superseded_at__isnull=True).count() == 3
    assert errors == []


def test_the_counters_count_a_label_while_the_server_is_still_answering(browser, live_server):
    """A busy server answers a label seconds later; meanwhile the next item is on screen, and the counters already
    count the label given (not one behind); the answer then confirms them."""
    project = ProjectFactory(queue_mix={"sequential": 100})
    query = QueryFactory(project=project, external_id="q-slow")
    for i in range(4):
        PairFactory(project=project, query=query, passage=PassageFactory(project=project, external_id=f"doc-{i}"))
    MembershipFactory(project=project, user=UserFactory(username="erin"), role="expert")
    page, errors = log_in(browser, live_server, "erin", viewport=SCREEN)
    page.goto(f"{live_server.url}/projects/{project.slug}/annotate/")
    assert _counters(page) == ("0", "0", "3", "4")
    held = []
    page.route("**/annotate/submit/", lambda route: held.append(route))
    first = page.locator("#ws-current .ws-item").get_attribute("data-pair")
    page.keyboard.press("2")
    page.wait_for_function(f"document.querySelector('#ws-current .ws-item').dataset.pair !== '{first}'")
    assert Label.objects.count() == 0  # the label has not reached the server yet
    assert _counters(page) == ("1", "1", "2", "3")
    assert page.locator("#ws-progress").get_attribute("aria-busy") == "true"
    assert len(held) == 1
    held[0].continue_()
    page.wait_for_selector("#ws-progress:not([aria-busy])", timeout=10_000)
    assert Label.objects.count() == 1
    assert _counters(page) == ("1", "1", "2", "3")
    assert errors == []

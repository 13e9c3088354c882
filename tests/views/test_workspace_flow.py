"""The workspace's flow through the test client: the next item is leased ahead and shown the moment a label
is posted (the answer then brings only the item after it), the definition's changes are marked the first time
an expert meets them, and a session ends with a summary that blind first allows."""
from __future__ import annotations

import re
import statistics
from datetime import timedelta

import pytest
from django.utils import timezone

from labeling.models import Label, Lease, Pair
from labeling.selectors.queues import queue_progress
from labeling.services.labels import label_submit, lease_restart, queue_next_for_annotator, queue_prefetch_for_annotator
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
from tests.workspace_fixtures import login_member, workspace_url

pytestmark = pytest.mark.django_db


@pytest.fixture
def project():
    project = ProjectFactory(queue_mix={"sequential": 100})
    query = QueryFactory(project=project, text="Which emission targets does the company set?")
    RelevanceDefinitionFactory(query=query, text="Targets for cutting greenhouse gas emissions.\nWith a year.")
    for i in range(4):
        PairFactory(project=project, query=query,
                    passage=PassageFactory(project=project, title=f"Report {i}", text=f"Our emission target {i}."))
    return project


_login, _url = login_member, workspace_url


def _parts(html: str) -> tuple[dict, dict]:
    """The shown item's hidden fields and the prefetched one's (in <template id="ws-next">)."""
    shown, _, upcoming = html.partition('<template id="ws-next">')
    fields = re.compile(r'<input type="hidden" name="(\w+)" value="([^"]*)"')
    return dict(fields.findall(shown)), dict(fields.findall(upcoming.split("</template>")[0]))


def test_the_page_holds_the_next_item_leased_and_a_reload_keeps_both(client, project):
    alice = _login(client, project)
    shown, upcoming = _parts(client.get(_url(project)).content.decode())
    assert shown["pair_id"] != upcoming["pair_id"]
    assert set(Lease.objects.filter(annotator=alice).values_list("pair_id", flat=True)) == {
        int(shown["pair_id"]), int(upcoming["pair_id"])}
    again = _parts(client.get(_url(project)).content.decode())
    assert (again[0]["pair_id"], again[1]["pair_id"]) == (shown["pair_id"], upcoming["pair_id"])
    # Both held items are still the expert's to label: the counter counts the prefetched one, not the shown one.
    progress = queue_progress(project=project, annotator=alice, now=timezone.now(), shown=int(shown["pair_id"]))
    assert progress.left == 3


def test_a_label_posted_with_the_shown_item_answers_with_only_the_item_after_it(client, project):
    alice = _login(client, project)
    shown, upcoming = _parts(client.get(_url(project)).content.decode())
    response = client.post(_url(project, "workspace_submit"), {**shown, "grade": "2"}, HTTP_HX_REQUEST="true",
                           HTTP_X_WORKSPACE_SHOWN=upcoming["pair_id"])
    html = response.content.decode()
    assert response.status_code == 200 and response["X-Workspace"] == "advance"
    assert 'id="workspace"' not in html
    # The confirmation names the item labelled (not the one now shown) and the grade, by the names the page shows.
    pair = Pair.objects.select_related("query", "passage").get(id=shown["pair_id"])
    assert (f'Saved: <strong>2 relevant</strong> for query <span class="mono">{pair.query.external_id}</span>, '
            f'passage <span class="mono">{pair.passage.external_id}</span>.') in html
    assert 'data-count="done-today">1<' in html and 'data-count="session-labelled">1<' in html
    _, after = _parts(html)
    assert after["pair_id"] not in (shown["pair_id"], upcoming["pair_id"])
    assert Label.objects.get(annotator=alice).pair_id == int(shown["pair_id"])
    # Held: the item on screen and the new one after it; the next page load shows the one on screen.
    assert set(Lease.objects.filter(annotator=alice).values_list("pair_id", flat=True)) == {
        int(upcoming["pair_id"]), int(after["pair_id"])}
    assert _parts(client.get(_url(project)).content.decode())[0]["pair_id"] == upcoming["pair_id"]


def test_the_time_spent_on_a_prefetched_item_counts_from_when_it_was_shown(project):
    alice = UserFactory()
    MembershipFactory(project=project, user=alice, role="expert")
    start = timezone.now() - timedelta(minutes=5)
    first = queue_next_for_annotator(project=project, annotator=alice, now=start)
    second = queue_prefetch_for_annotator(project=project, annotator=alice, shown=first.pair.id, now=start)
    shown_at = start + timedelta(seconds=40)
    label_submit(project=project, annotator=alice, pair_id=first.pair.id, grade=1, time_spent_from_lease=True,
                 now=shown_at)
    assert lease_restart(project=project, annotator=alice, pair_id=second.pair.id, now=shown_at)
    label = label_submit(project=project, annotator=alice, pair_id=second.pair.id, grade=0,
                         time_spent_from_lease=True, now=shown_at + timedelta(seconds=7)).label
    assert label.time_spent_seconds == pytest.approx(7)
    # An item no longer held cannot be restarted: the browser is told to reload.
    assert not lease_restart(project=project, annotator=alice, pair_id=second.pair.id, now=shown_at)


def test_a_shown_item_lost_meanwhile_or_a_refused_label_brings_the_whole_workspace(client, project):
    alice = _login(client, project)
    shown, upcoming = _parts(client.get(_url(project)).content.decode())
    Lease.objects.filter(annotator=alice, pair_id=upcoming["pair_id"]).update(expires_at=timezone.now())
    response = client.post(_url(project, "workspace_submit"), {**shown, "grade": "1"}, HTTP_HX_REQUEST="true",
                           HTTP_X_WORKSPACE_SHOWN=upcoming["pair_id"])
    assert response["X-Workspace"] == "page" and 'id="workspace"' in response.content.decode()
    assert "had gone to someone else" in response.content.decode()
    assert Label.objects.filter(annotator=alice).count() == 1

    shown, upcoming = _parts(response.content.decode())
    response = client.post(_url(project, "workspace_submit"), {**shown, "grade": "7"}, HTTP_HX_REQUEST="true",
                           HTTP_X_WORKSPACE_SHOWN=upcoming["pair_id"])
    assert response.status_code == 400 and response["X-Workspace"] == "page"
    # The refused item is shown again, with the reason; nothing stored.
    assert _parts(response.content.decode())[0]["pair_id"] == shown["pair_id"]
    assert "not on this project&#x27;s scale" in response.content.decode()
    assert Label.objects.filter(annotator=alice).count() == 1
    bad = client.post(_url(project, "workspace_submit"), {**shown, "grade": "1"}, HTTP_HX_REQUEST="true",
                      HTTP_X_WORKSPACE_SHOWN="x")
    assert bad.status_code == 400 and Label.objects.filter(annotator=alice).count() == 1


def test_changed_definition_words_are_marked_until_the_expert_labels_under_the_new_version(client, project):
    _login(client, project)
    query = project.queries.get()
    html = client.get(_url(project)).content.decode()
    assert 'data-testid="definition-news"' not in html  # never labelled under an earlier version
    shown, _ = _parts(html)
    client.post(_url(project, "workspace_submit"), {**shown, "grade": "1"})
    RelevanceDefinitionFactory(query=query, version=2,
                               text="Targets for cutting greenhouse gas emissions.\nWith a year and a baseline.")
    html = client.get(_url(project)).content.decode()
    assert "Changed since version 1, which you last labelled under" in html
    assert "<ins>and a baseline</ins>" in html or "<ins> and a baseline</ins>" in html
    assert "Targets for cutting greenhouse gas emissions." in html  # the whole text, not only the change
    shown, _ = _parts(html)
    client.post(_url(project, "workspace_submit"), {**shown, "grade": "1"})
    html = client.get(_url(project)).content.decode()
    assert 'data-testid="definition-news"' not in html and "version 2" in html


def _label(project, user, pair, grade, seconds, now):
    LeaseFactory(pair=pair, annotator=user)  # the queue gave it to them
    label = label_submit(project=project, annotator=user, pair_id=pair.id, grade=grade, now=now).label
    Label.objects.filter(id=label.id).update(time_spent_seconds=seconds)


def test_the_session_summary_counts_items_times_and_agreement_only_where_blind_first_allows(client, project):
    alice = _login(client, project)
    client.get(_url(project))  # the session starts
    bob = UserFactory(username="bob")
    MembershipFactory(project=project, user=bob, role="expert")
    pairs = list(project.pairs.order_by("id"))
    now = timezone.now()
    for pair, grade in zip(pairs[:2], (2, 0)):
        _label(project, bob, pair, grade, 5, now)
    for pair, grade, seconds in zip(pairs, (2, 1, 0, 2), (4, 10, 6, 30)):
        _label(project, alice, pair, grade, seconds, now)
    html = client.get(_url(project, "workspace_summary")).content.decode()
    assert 'data-count="session-items">4<' in html
    assert f'data-count="session-median">{statistics.median([4, 10, 6, 30]):.0f} s<' in html
    # Two items in common: a count of them, or of agreements, would tell Alice Bob's grades: she is shown neither.
    assert 'data-count="session-overlap"' not in html
    assert "Agreement with the other experts is shown once 3 of the items" in html and "the same on" not in html

    _label(project, bob, pairs[2], 0, 5, now)
    html = client.get(_url(project, "workspace_summary")).content.decode()
    # Same grade on pairs[0] (2, 2) and pairs[2] (0, 0); same side (relevant from 1) on those two only.
    assert 'data-count="session-overlap">3<' in html
    assert "your first grade was the same on <strong>2</strong> and on the same relevant / not relevant side on " \
           "<strong>2</strong>" in html

    # A new session starts from zero.
    assert client.post(_url(project, "workspace_summary")).status_code == 302
    assert 'data-count="session-items">0<' in client.get(_url(project, "workspace_summary")).content.decode()


def test_the_session_summary_reads_short_times_as_such_and_counts_the_labels_by_grade(client, project):
    alice = _login(client, project)
    client.get(_url(project))  # the session starts
    now = timezone.now()
    for pair, grade, seconds in zip(project.pairs.order_by("id"), (2, 0, 2, 1), (0.1, 0.3, 0.5, 1.7)):
        _label(project, alice, pair, grade, seconds, now)
    html = client.get(_url(project, "workspace_summary")).content.decode()
    # Median of 0.1, 0.3, 0.5, 1.7 is 0.4 s; their sum 2.6 s reads 3 s.
    assert 'data-count="session-median">0.4 s<' in html and "<dd>3 s</dd>" in html
    rows = re.findall(r'<tr data-grade="(\d)"><td>.*?</span> ([^<]+)</td>'
                      r'<td class="num" data-count="grade-items">(\d+)</td>.*?</meter> (\d+)%</td></tr>', html)
    assert rows == [("0", "irrelevant", "1", "25"), ("1", "partially relevant", "1", "25"),
                    ("2", "relevant", "2", "50")]


def test_an_empty_queue_shows_the_session_summary(client, project):
    _login(client, project)
    for _ in range(4):
        shown, _ = _parts(client.get(_url(project)).content.decode())
        client.post(_url(project, "workspace_submit"), {**shown, "grade": "1"})
    html = client.get(_url(project)).content.decode()
    assert "Nothing left to label" in html and 'data-count="session-items">4<' in html


@pytest.mark.parametrize("queue", ["conflict", "uncertain", "stratified"])
def test_an_expert_naming_a_queue_in_the_workspace_is_refused_and_an_admin_previews_it(client, project, queue):
    alice = _login(client, project)
    response = client.get(_url(project) + f"?queue={queue}")
    html = response.content.decode()
    assert response.status_code == 403 and "only a project admin may ask for the" in html
    assert 'data-testid="queue-refused"' in html and not Lease.objects.filter(annotator=alice).exists()
    assert client.post(_url(project, "workspace_skip"), {"pair_id": project.pairs.first().id,
                                                         "queue": queue}, HTTP_HX_REQUEST="true").status_code == 403
    admin = _login(client, project, role="admin", name="root")
    assert client.get(_url(project) + f"?queue={queue}").status_code == 200
    assert not Lease.objects.filter(annotator=admin, queue="sequential").exists()

"""Blind first in the session summary: the attack of the security review, through the API and through the workspace.
Another expert labels four items 0, 1, 2, 3; the expert labels three of them, then relabels the fourth 0, 1, 2, 3 and
reads the summary after each. Nothing on the summary may move with those relabels (it did: "same grade" changed
exactly when the grade equalled the other expert's), whether the relabel is a POST of the label API, an undo and a
new label in the workspace, or a label given in a new session."""
from __future__ import annotations

import re

import pytest
from django.test import Client

from labeling.models import Label
from tests.factories import (
    PASSWORD,
    MembershipFactory,
    PairFactory,
    ProjectFactory,
    QueryFactory,
    RelevanceDefinitionFactory,
    UserFactory,
)
from tests.workspace_fixtures import workspace_url

pytestmark = pytest.mark.django_db

SCALE = {"grades": [{"value": v, "name": f"grade {v}", "gain": v / 3} for v in range(4)], "relevant_from": 2}
BOB_GRADES = (0, 1, 2, 3)


@pytest.fixture
def project():
    # Every item wants two labels, so the queue hands Alice the items Bob labelled.
    project = ProjectFactory(queue_mix={"sequential": 100}, scale=SCALE, labels_per_item=2, overlap_share=1.0)
    query = QueryFactory(project=project, text="Which targets?")
    RelevanceDefinitionFactory(query=query, text="Numeric targets.")
    for _ in range(6):
        PairFactory(project=project, query=query)
    return project


def _expert(project, name: str) -> Client:
    MembershipFactory(project=project, user=UserFactory(username=name), role="expert")
    client = Client()
    assert client.login(username=name, password=PASSWORD)
    return client


def _api_label(client: Client, project, grade: int, pair_id: int | None = None) -> int:
    """Label the item the queue gives (or `pair_id`) through the API; returns the pair id."""
    if pair_id is None:
        pair_id = client.get(f"/api/projects/{project.slug}/queue/next/").json()["pair_id"]
    response = client.post(f"/api/projects/{project.slug}/labels/", {"pair_id": pair_id, "grade": grade},
                           content_type="application/json")
    assert response.status_code in (200, 201), response.content
    return pair_id


def _summary(client: Client, project) -> str:
    html = client.get(workspace_url(project, "workspace_summary")).content.decode()
    start = html.index('data-testid="session-summary"')
    return html[start:html.index("<form", start)]


def _bob_labels_four(project) -> list[int]:
    bob = _expert(project, "bob")
    pairs = [_api_label(bob, project, grade) for grade in BOB_GRADES]
    assert sorted(Label.objects.filter(annotator__username="bob").values_list("grade", flat=True)) == [0, 1, 2, 3]
    return pairs


def test_relabelling_through_the_api_never_moves_the_summary(project):
    bobs = _bob_labels_four(project)
    alice = _expert(project, "alice")
    alice.get(workspace_url(project, "workspace_summary"))  # the session starts
    mine = [_api_label(alice, project, 3) for _ in range(4)]
    assert mine == bobs  # the queue handed her Bob's four items
    seen = set()
    for grade in range(4):
        _api_label(alice, project, grade, pair_id=mine[3])
        seen.add(_summary(alice, project))
    assert len(seen) == 1, seen
    # Her first grades were 3, 3, 3, 3 against Bob's 0, 1, 2, 3: one same grade, two on the same side.
    assert "same on <strong>1</strong>" in seen.pop()


def test_fewer_shared_items_than_the_minimum_show_no_overlap_count(project):
    _bob_labels_four(project)
    alice = _expert(project, "alice")
    alice.get(workspace_url(project, "workspace_summary"))
    _api_label(alice, project, 0)
    _api_label(alice, project, 1)
    html = _summary(alice, project)
    assert 'data-count="session-overlap"' not in html and "Also labelled by another expert" not in html
    assert "shown once 3 of the items" in html


def _workspace_fields(client: Client, project) -> dict:
    html = client.get(workspace_url(project)).content.decode()
    shown = html.partition('<template id="ws-next">')[0]
    return dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', shown))


def _workspace_label(client: Client, project, grade: int) -> int:
    fields = _workspace_fields(client, project)
    response = client.post(workspace_url(project, "workspace_submit"), {**fields, "grade": str(grade)})
    assert response.status_code == 302
    return int(fields["pair_id"])


def test_undo_and_relabel_in_the_workspace_never_moves_the_summary_nor_does_a_new_session(project):
    bobs = _bob_labels_four(project)
    alice = _expert(project, "alice")
    mine = [_workspace_label(alice, project, 3) for _ in range(4)]
    assert mine == bobs
    seen = set()
    for grade in range(4):
        assert alice.post(workspace_url(project, "workspace_undo")).status_code == 302
        assert _workspace_label(alice, project, grade) == mine[3]
        seen.add(_summary(alice, project))
    assert len(seen) == 1, seen
    # A new session: relabelling an item first labelled earlier is counted as work, never compared.
    assert alice.post(workspace_url(project, "workspace_summary")).status_code == 302
    seen = set()
    for grade in range(4):
        _api_label(alice, project, grade, pair_id=mine[3])
        seen.add(_summary(alice, project))
    assert len(seen) == 1, seen
    assert 'data-count="session-items">1<' in seen.pop()

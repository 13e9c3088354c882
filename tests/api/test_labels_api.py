"""The experts' API: queue/next, labels (idempotent by client key), skip, undo, and who sees which labels."""
from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from labeling.models import Label, Lease
from tests.factories import (
    MembershipFactory,
    PairFactory,
    ProjectFactory,
    QueryFactory,
    RelevanceDefinitionFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def project():
    project = ProjectFactory(queue_mix={"sequential": 100})
    query = QueryFactory(project=project, external_id="q1", text="What are the targets?")
    RelevanceDefinitionFactory(query=query, text="Any numeric target.")
    for _ in range(2):
        PairFactory(project=project, query=query)
    return project


def _client(project, role="expert", name="alice"):
    user = UserFactory(username=name)
    MembershipFactory(project=project, user=user, role=role)
    client = APIClient()
    client.force_authenticate(user)
    return client, user


def test_next_leases_an_item_and_returns_it_with_its_definition(project):
    client, alice = _client(project)
    response = client.get(f"/api/projects/{project.slug}/queue/next/")
    body = response.json()
    first = project.pairs.order_by("id").first()
    assert response.status_code == 200
    assert body["pair_id"] == first.id and body["queue"] is None and body["validation_sample"] is None
    assert body["query"] == {"external_id": "q1", "text": "What are the targets?"}
    assert body["definition"]["text"] == "Any numeric target." and body["definition"]["version"] == 1
    assert body["passage"]["external_id"] == first.passage.external_id
    assert Lease.objects.get().annotator == alice
    assert client.get(f"/api/projects/{project.slug}/queue/next/").json()["pair_id"] == first.id


def test_the_queue_that_served_an_item_is_shown_to_admins_and_not_to_experts(project, client):
    # The uncertain queue would tell an expert the judge's P is near 0.5, the conflict queue that another expert
    # contradicted it; the random queue is told from them by elimination, so no queue is named to an expert.
    project.queue_mix = {"random": 100}
    project.save()
    for _ in range(3):  # the expert's label, the workspace's item and the one it prefetches; the admin's
        PairFactory(project=project, query=project.queries.get())
    api, alice = _client(project)
    body = api.get(f"/api/projects/{project.slug}/queue/next/").json()
    assert body["queue"] is None and body["validation_sample"] is None
    label = api.post(f"/api/projects/{project.slug}/labels/", {"pair_id": body["pair_id"], "grade": 1},
                     format="json").json()
    assert label["queue"] is None
    assert [mine["queue"] for mine in api.get(f"/api/projects/{project.slug}/labels/").json()["results"]] == [None]
    client.force_login(alice)
    page = client.get(f"/projects/{project.slug}/annotate/").content.decode()
    assert 'data-testid="passage"' in page and "From the" not in page and "validation sample" not in page

    admin, root = _client(project, role="admin", name="root")
    body = admin.get(f"/api/projects/{project.slug}/queue/next/").json()
    assert body["queue"] == "random" and body["validation_sample"] is True
    assert {label["queue"] for label in admin.get(f"/api/projects/{project.slug}/labels/").json()["results"]} == {
        "random"}
    client.force_login(root)
    page = client.get(f"/projects/{project.slug}/annotate/").content.decode()
    assert "From the <em>random</em> queue (validation sample)" in page


@pytest.mark.parametrize("strategy", ["conflict", "uncertain", "stratified", "random", "sequential"])
def test_an_expert_naming_a_queue_is_refused_and_an_admin_previews_it(project, strategy):
    client, _ = _client(project)
    response = client.get(f"/api/projects/{project.slug}/queue/next/?strategy={strategy}")
    assert response.status_code == 403 and response.json()["code"] == "permission_denied"
    assert "experts label the project's mix" in response.json()["message"]
    assert not Lease.objects.exists()
    admin, _ = _client(project, role="admin", name="root")
    response = admin.get(f"/api/projects/{project.slug}/queue/next/?strategy={strategy}")
    assert response.status_code in (200, 204)


def test_an_expert_cannot_label_an_item_by_id_that_the_queue_did_not_give_them(project):
    client, alice = _client(project)
    first, second = project.pairs.order_by("id")
    given = client.get(f"/api/projects/{project.slug}/queue/next/").json()["pair_id"]
    assert given == first.id
    response = client.post(f"/api/projects/{project.slug}/labels/", {"pair_id": second.id, "grade": 1}, format="json")
    assert response.status_code == 409 and "was not given to you" in response.json()["message"]
    assert not Label.objects.exists()
    assert client.post(f"/api/projects/{project.slug}/labels/", {"pair_id": first.id, "grade": 1},
                       format="json").status_code == 201
    # Her own label she may change, with no lease.
    assert client.post(f"/api/projects/{project.slug}/labels/", {"pair_id": first.id, "grade": 2},
                       format="json").status_code == 201


def test_an_unknown_strategy_is_a_400_naming_the_valid_ones(project):
    client, _ = _client(project)
    response = client.get(f"/api/projects/{project.slug}/queue/next/?strategy=vibes")
    assert response.status_code == 400 and "uncertain" in response.json()["errors"]["strategy"][0]
    assert not Lease.objects.exists()


def test_labels_post_is_idempotent_by_client_key(project):
    client, alice = _client(project)
    item = client.get(f"/api/projects/{project.slug}/queue/next/").json()
    body = {"pair_id": item["pair_id"], "grade": 2, "client_key": "k-1", "note": "fine", "time_spent_seconds": 4.2}
    first = client.post(f"/api/projects/{project.slug}/labels/", body, format="json")
    again = client.post(f"/api/projects/{project.slug}/labels/", body, format="json")
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["id"] == again.json()["id"]
    assert first.json()["definition_version"] == 1
    assert Label.objects.filter(annotator=alice).count() == 1


def test_a_bad_label_is_a_400_and_stores_nothing(project):
    client, _ = _client(project)
    pair = project.pairs.first()
    response = client.post(f"/api/projects/{project.slug}/labels/", {"pair_id": pair.id, "grade": 5}, format="json")
    assert response.status_code == 409 and "not on this project's scale" in response.json()["message"]
    response = client.post(f"/api/projects/{project.slug}/labels/", {"grade": 1}, format="json")
    assert response.status_code == 400 and response.json()["errors"] == {"pair_id": ["This field is required."]}
    assert not Label.objects.exists()


def test_the_queue_runs_dry_with_204(project):
    client, _ = _client(project)
    for _ in range(2):
        item = client.get(f"/api/projects/{project.slug}/queue/next/").json()
        client.post(f"/api/projects/{project.slug}/labels/", {"pair_id": item["pair_id"], "grade": 0}, format="json")
    assert client.get(f"/api/projects/{project.slug}/queue/next/").status_code == 204


def test_skip_and_undo(project):
    client, alice = _client(project)
    first = client.get(f"/api/projects/{project.slug}/queue/next/").json()["pair_id"]
    assert client.post(f"/api/projects/{project.slug}/queue/skip/", {"pair_id": first}, format="json").status_code == 204
    second = client.get(f"/api/projects/{project.slug}/queue/next/").json()["pair_id"]
    assert second != first
    assert client.post(f"/api/projects/{project.slug}/labels/undo/").status_code == 204
    client.post(f"/api/projects/{project.slug}/labels/", {"pair_id": second, "grade": 1}, format="json")
    undone = client.post(f"/api/projects/{project.slug}/labels/undo/")
    assert undone.status_code == 200 and undone.json()["undone"] is True and undone.json()["current"] is False
    assert client.get(f"/api/projects/{project.slug}/queue/next/").json()["pair_id"] == second


def test_experts_list_only_their_own_labels_admins_and_viewers_see_all(project):
    alice_client, _ = _client(project, name="alice")
    bob_client, _ = _client(project, name="bob")
    for client in (alice_client, bob_client):
        item = client.get(f"/api/projects/{project.slug}/queue/next/").json()
        client.post(f"/api/projects/{project.slug}/labels/", {"pair_id": item["pair_id"], "grade": 1}, format="json")
    mine = alice_client.get(f"/api/projects/{project.slug}/labels/").json()["results"]
    assert [label["annotator"] for label in mine] == ["alice"]
    for role in ("admin", "viewer"):
        client, _ = _client(project, role=role, name=f"the-{role}")
        listed = client.get(f"/api/projects/{project.slug}/labels/?current=true").json()["results"]
        assert sorted(label["annotator"] for label in listed) == ["alice", "bob"]


def test_viewers_cannot_claim_or_label_and_non_members_see_nothing(project):
    viewer, _ = _client(project, role="viewer", name="vera")
    pair = project.pairs.first()
    assert viewer.get(f"/api/projects/{project.slug}/queue/next/").status_code == 403
    assert viewer.post(f"/api/projects/{project.slug}/labels/", {"pair_id": pair.id, "grade": 1},
                       format="json").status_code == 403
    stranger = APIClient()
    stranger.force_authenticate(UserFactory(username="mallory"))
    assert stranger.get(f"/api/projects/{project.slug}/queue/next/").status_code == 404
    assert stranger.get(f"/api/projects/{project.slug}/labels/").status_code == 404
    assert not Label.objects.exists() and not Lease.objects.exists()

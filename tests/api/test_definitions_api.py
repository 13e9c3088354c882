"""The definition versions API: listing for members, creating for admins, errors and the schema."""
from __future__ import annotations

import pytest
from django.urls import reverse
from drf_spectacular.validation import validate_schema
from rest_framework.test import APIClient

from labeling.models import RelevanceDefinition
from tests.factories import (
    JudgeFactory,
    MembershipFactory,
    ProjectFactory,
    QueryFactory,
    RelevanceDefinitionFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def query():
    # An external id with a slash and a space: the URL takes it as it is.
    return QueryFactory(project=ProjectFactory(slug="alpha"), external_id="topic/7 b")


def client_as(query, role: str | None) -> APIClient:
    api = APIClient()
    user = UserFactory()
    if role is not None:
        MembershipFactory(project=query.project, user=user, role=role)
    api.force_authenticate(user)
    return api


def url(query) -> str:
    return reverse("api:definition-list", args=[query.project.slug, query.external_id])


def test_members_list_versions_newest_first(query):
    editor = UserFactory(username="editor")
    v1 = RelevanceDefinitionFactory(query=query, text="first")
    v2 = RelevanceDefinitionFactory(query=query, text="second", author=editor)
    assert url(query).endswith("/api/projects/alpha/queries/topic/7%20b/definitions/")
    for role in ("admin", "expert", "viewer"):
        response = client_as(query, role).get(url(query))
        assert response.status_code == 200
        assert response.json() == [
            {"version": 2, "text": "second", "author": "editor",
             "created_at": v2.created_at.isoformat().replace("+00:00", "Z"), "is_current": True,
             "is_draft": False, "origin": "manual", "drafted_by": None},
            {"version": 1, "text": "first", "author": None,
             "created_at": v1.created_at.isoformat().replace("+00:00", "Z"), "is_current": False,
             "is_draft": False, "origin": "manual", "drafted_by": None},
        ]


def test_an_llm_draft_is_listed_but_the_newest_non_draft_stays_current(query):
    judge = JudgeFactory(project=query.project, name="gpt", backend="openai")
    RelevanceDefinitionFactory(query=query, text="written by a person")
    RelevanceDefinitionFactory(query=query, text="drafted", is_draft=True, origin="llm_refined", drafted_by=judge)
    listed = client_as(query, "viewer").get(url(query)).json()
    assert [(d["version"], d["is_current"], d["is_draft"], d["origin"], d["drafted_by"]) for d in listed] == [
        (2, False, True, "llm_refined", "gpt"),
        (1, True, False, "manual", None),
    ]


def test_a_query_without_definitions_lists_nothing(query):
    assert client_as(query, "viewer").get(url(query)).json() == []


def test_non_members_and_unknown_queries_get_404(query):
    RelevanceDefinitionFactory(query=query)
    outsider = client_as(query, None)
    assert outsider.get(url(query)).status_code == 404
    assert outsider.post(url(query), {"text": "x"}, format="json").status_code == 404
    missing = reverse("api:definition-list", args=[query.project.slug, "nope"])
    assert client_as(query, "admin").get(missing).status_code == 404
    assert APIClient().get(url(query)).status_code == 401  # anonymous


def test_admin_creates_versions(query):
    api = client_as(query, "admin")
    created = api.post(url(query), {"text": "  Relevant if it names a year.\n"}, format="json")
    assert created.status_code == 201
    body = created.json()
    assert (body["version"], body["text"], body["is_current"]) == (1, "Relevant if it names a year.", True)
    assert api.post(url(query), {"text": "Relevant if it names a year and a target."}, format="json").json()["version"] == 2
    listed = api.get(url(query)).json()
    assert [(d["version"], d["is_current"]) for d in listed] == [(2, True), (1, False)]


@pytest.mark.parametrize("role", ["expert", "viewer"])
def test_experts_and_viewers_cannot_create(query, role):
    response = client_as(query, role).post(url(query), {"text": "mine"}, format="json")
    assert response.status_code == 403
    assert not RelevanceDefinition.objects.exists()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"text": "same"}, "unchanged from version 1"),
        ({"text": "  "}, "the definition is empty"),
        ({"text": "x" * 50_001}, "the limit is 50,000"),
        ({}, "This field is required."),
    ],
)
def test_refused_creations_say_why(query, body, message):
    RelevanceDefinitionFactory(query=query, text="same")
    response = client_as(query, "admin").post(url(query), body, format="json")
    # A missing field breaks the schema (400); a text the domain refuses is well formed (422).
    assert response.status_code == (400 if not body else 422)
    assert message in response.json()["errors"]["text"][0]
    assert RelevanceDefinition.objects.filter(query=query).count() == 1


def test_schema_documents_the_endpoint(query):
    response = client_as(query, "viewer").get(reverse("api:schema"), {"format": "json"})
    schema = response.json()
    validate_schema(schema)
    operations = schema["paths"]["/api/projects/{slug}/queries/{query_external_id}/definitions/"]
    assert {"get", "post"} <= set(operations)

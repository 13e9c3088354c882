"""The read-only API through DRF's test client: visibility, shapes, pagination, token auth and schema."""
import pytest
from django.urls import reverse
from django.utils import timezone
from drf_spectacular.validation import validate_schema
from rest_framework.test import APIClient

from labeling.api.views import IdCursorPagination
from labeling.models import Membership
from tests.factories import (
    PASSWORD,
    JudgmentFactory,
    LabelFactory,
    MembershipFactory,
    PairFactory,
    PairSourceFactory,
    PassageFactory,
    ProjectFactory,
    QueryFactory,
    RelevanceDefinitionFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

NESTED = ["api:query-list", "api:passage-list", "api:pair-list"]


@pytest.fixture
def api():
    return APIClient()


@pytest.fixture
def member(api):
    user = UserFactory()
    api.force_authenticate(user)
    return user


@pytest.fixture
def project(member):
    project = ProjectFactory(slug="alpha", name="Alpha", description="About alpha.")
    MembershipFactory(user=member, project=project)
    return project


def test_anonymous_requests_are_refused(project):
    # 401 with the token challenge: token auth is listed first, so a client knows to log in.
    anonymous = APIClient()
    for url in (reverse("api:project-list"), reverse("api:query-list", args=[project.slug])):
        response = anonymous.get(url)
        assert response.status_code == 401 and response["WWW-Authenticate"] == "Token"
        assert response.json() == {"code": "not_authenticated", "errors": {},
                                   "message": "Authentication credentials were not provided."}


def test_project_list_holds_only_visible_projects_with_counts(api, project):
    ProjectFactory(slug="hidden")
    pair = PairFactory(project=project)
    PassageFactory(project=project)
    LabelFactory(pair=pair)
    LabelFactory(pair=pair, superseded_at=timezone.now())
    JudgmentFactory(pair=pair)

    response = api.get(reverse("api:project-list"))

    assert response.status_code == 200
    (item,) = response.json()["results"]
    assert item["slug"] == "alpha"
    assert item["counts"] == {"queries": 1, "passages": 2, "pairs": 1, "labels": 1, "judgments": 1}
    assert item["scale"]["relevant_from"] == 1
    assert [g["name"] for g in item["scale"]["grades"]] == ["irrelevant", "partially relevant", "relevant"]


def test_superuser_lists_every_project(api):
    api.force_authenticate(UserFactory(is_superuser=True, is_staff=True))
    ProjectFactory(slug="b")
    ProjectFactory(slug="a")
    slugs = [p["slug"] for p in api.get(reverse("api:project-list")).json()["results"]]
    assert slugs == ["a", "b"]


def test_project_detail(api, project):
    QueryFactory.create_batch(2, project=project)
    response = api.get(reverse("api:project-detail", args=[project.slug]))
    assert response.status_code == 200
    body = response.json()
    assert (body["name"], body["description"], body["counts"]["queries"]) == ("Alpha", "About alpha.", 2)


@pytest.mark.parametrize("name", ["api:project-detail", *NESTED])
def test_member_gets_200_and_non_member_404_everywhere(api, project, name):
    url = reverse(name, args=[project.slug])
    assert api.get(url).status_code == 200
    api.force_authenticate(UserFactory(is_staff=True))
    assert api.get(url).status_code == 404
    assert api.get(reverse(name, args=["no-such-project"])).status_code == 404


def test_queries_carry_their_current_definition(api, project):
    defined = QueryFactory(project=project, external_id="q1", text="llamas", metadata={"lang": "en"})
    RelevanceDefinitionFactory(query=defined, text="first")
    RelevanceDefinitionFactory(query=defined, text="second")
    QueryFactory(project=project, external_id="q2")

    results = api.get(reverse("api:query-list", args=[project.slug])).json()["results"]

    assert results == [
        {
            "external_id": "q1",
            "text": "llamas",
            "metadata": {"lang": "en"},
            "current_definition": {"version": 2, "text": "second"},
        },
        {"external_id": "q2", "text": results[1]["text"], "metadata": {}, "current_definition": None},
    ]


def test_passages(api, project):
    PassageFactory(project=project, external_id="d1", title="T", text="body", metadata={"url": "u"})
    PassageFactory(external_id="elsewhere")
    results = api.get(reverse("api:passage-list", args=[project.slug])).json()["results"]
    assert results == [{"external_id": "d1", "title": "T", "text": "body", "metadata": {"url": "u"}}]


def test_pairs_with_sources_and_query_filter(api, project, member):
    Membership.objects.filter(user=member, project=project).update(role=Membership.Role.VIEWER)  # experts label blind
    query = QueryFactory(project=project, external_id="q1")
    first = PairFactory(
        project=project,
        query=query,
        passage=PassageFactory(project=project, external_id="d1"),
        reference_grade=2,
        reference_source="qrels/test.tsv",
    )
    PairSourceFactory(pair=first, system="bm25", rank=1)
    PairSourceFactory(pair=first, system="dense", rank=4)
    other = PairFactory(project=project)
    url = reverse("api:pair-list", args=[project.slug])

    assert [p["id"] for p in api.get(url).json()["results"]] == [first.id, other.id]
    results = api.get(url, {"query": "q1"}).json()["results"]
    assert results == [
        {
            "id": first.id,
            "query": "q1",
            "passage": "d1",
            "reference_grade": 2,
            "reference_source": "qrels/test.tsv",
            "sources": [{"system": "bm25", "rank": 1}, {"system": "dense", "rank": 4}],
        }
    ]
    assert api.get(url, {"query": "unknown"}).json()["results"] == []


def test_cursor_pagination_walks_all_rows_in_id_order(api, project, monkeypatch):
    monkeypatch.setattr(IdCursorPagination, "page_size", 2)
    passages = PassageFactory.create_batch(5, project=project)
    url, seen = reverse("api:passage-list", args=[project.slug]), []
    while url:
        body = api.get(url).json()
        seen += [p["external_id"] for p in body["results"]]
        url = body["next"]
    assert seen == [p.external_id for p in passages]


def test_token_auth(project, member):
    anonymous = APIClient()
    response = anonymous.post(reverse("api:token"), {"username": member.username, "password": PASSWORD})
    assert response.status_code == 200
    token = response.json()["token"]

    with_token = APIClient()
    with_token.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert with_token.get(reverse("api:project-detail", args=[project.slug])).status_code == 200

    with_token.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    refused = with_token.get(reverse("api:project-list"))
    assert refused.status_code == 401 and refused["WWW-Authenticate"] == "Token"
    assert refused.json()["code"] == "authentication_failed"
    wrong = anonymous.post(reverse("api:token"), {"username": member.username, "password": "not-it"})
    assert wrong.status_code == 401 and wrong.json()["code"] == "authentication_failed"


def test_session_auth(client, project, member):
    client.force_login(member)
    assert client.get(reverse("api:project-detail", args=[project.slug])).status_code == 200


def test_schema_is_valid_openapi_with_every_path(api, member):
    response = api.get(reverse("api:schema"), {"format": "json"})
    assert response.status_code == 200
    schema = response.json()
    validate_schema(schema)
    assert schema["openapi"].startswith("3.")
    assert {
        "/api/projects/",
        "/api/projects/{slug}/",
        "/api/projects/{slug}/queries/",
        "/api/projects/{slug}/passages/",
        "/api/projects/{slug}/pairs/",
        "/api/token/",
    } <= set(schema["paths"])


def test_pair_page_costs_the_same_queries_for_one_pair_or_many(api, project, django_assert_num_queries):
    url = reverse("api:pair-list", args=[project.slug])
    PairSourceFactory.create_batch(2, pair=PairFactory(project=project))
    # The project, the caller's role (may they see reference grades?), the page of pairs with their query and
    # passage ids, the sources of the page.
    with django_assert_num_queries(4):
        api.get(url)
    for _ in range(5):
        PairSourceFactory.create_batch(2, pair=PairFactory(project=project))
    with django_assert_num_queries(4):
        assert len(api.get(url).json()["results"]) == 6

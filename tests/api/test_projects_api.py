"""POST /api/projects/: staff create an empty project as the project list's form does (the same service), becoming
its admin; a slug or a name another project has is a 409 naming the field, what the service refuses otherwise 422,
and whoever is not staff gets 403 whatever they sent."""
import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from labeling.models import Membership, Project
from tests.factories import MembershipFactory, ProjectFactory, UserFactory

pytestmark = pytest.mark.django_db

URL = reverse("api:project-list")


@pytest.fixture
def staff():
    return UserFactory(username="staff", is_staff=True)


@pytest.fixture
def api(staff):
    client = APIClient()
    client.force_authenticate(staff)
    return client


def test_staff_create_a_project_and_become_its_admin(api, staff):
    scale = {"grades": [{"value": 0, "name": "no", "gain": 0}, {"value": 1, "name": "yes", "gain": 1}],
             "relevant_from": 1}
    response = api.post(URL, {"name": " Flood study ", "slug": "flood", "description": "Plans.", "scale": scale},
                        format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["slug"], body["name"], body["description"]) == ("flood", "Flood study", "Plans.")
    assert body["scale"] == {**scale, "grades": [{**grade, "gain": float(grade["gain"])} for grade in scale["grades"]]}
    assert body["counts"] == {"queries": 0, "passages": 0, "pairs": 0, "labels": 0, "judgments": 0}
    assert Membership.objects.get(project__slug="flood", user=staff).role == Membership.Role.ADMIN
    assert api.get(reverse("api:project-detail", args=["flood"])).status_code == 200


def test_a_name_or_slug_taken_is_a_409_naming_the_field(api, staff):
    MembershipFactory(project=ProjectFactory(slug="flood", name="Flood study"), user=staff)
    response = api.post(URL, {"name": "FLOOD STUDY", "slug": "other"}, format="json")
    assert response.status_code == 409
    message = ("a project named 'Flood study' exists already: choose another name (project names are compared "
               "ignoring case)")
    assert response.json() == {"code": "conflict", "message": f"name: {message}", "errors": {"name": [message]}}
    response = api.post(URL, {"name": "Heat study", "slug": "flood"}, format="json")
    assert response.status_code == 409
    assert response.json()["errors"] == {"slug": ["a project named 'flood' exists already"]}
    assert list(Project.objects.values_list("slug", flat=True)) == ["flood"]


def test_a_staff_non_member_is_not_told_the_stored_name_of_a_project_they_cannot_see(api):
    ProjectFactory(slug="flood", name="Flood study")
    assert api.get(reverse("api:project-detail", args=["flood"])).status_code == 404
    response = api.post(URL, {"name": "FLOOD STUDY", "slug": "other"}, format="json")
    assert response.status_code == 409
    message = "the name 'FLOOD STUDY' is taken (project names are compared ignoring case): choose another name"
    assert response.json() == {"code": "conflict", "message": f"name: {message}", "errors": {"name": [message]}}
    assert "Flood study" not in response.content.decode()
    assert list(Project.objects.values_list("slug", flat=True)) == ["flood"]


def test_what_the_service_or_the_scale_refuses_is_a_422_naming_the_field(api):
    response = api.post(URL, {"name": "Flood\u2028plans", "slug": "flood"}, format="json")
    assert response.status_code == 422
    assert response.json()["errors"]["name"][0].startswith("the project name holds a line separator (U+2028)")
    scale = {"grades": [{"value": 0, "name": "no", "gain": 0}], "relevant_from": 2}
    response = api.post(URL, {"name": "Flood", "slug": "flood", "scale": scale}, format="json")
    assert response.status_code == 422
    assert response.json()["errors"] == {"scale": ["relevant_from must be one of the grade values [0], got 2"]}
    assert not Project.objects.exists()


def test_whoever_is_not_staff_gets_403_before_their_body_is_read():
    client = APIClient()
    client.force_authenticate(UserFactory())
    for body in ({"name": "Flood", "slug": "flood"}, {}):
        response = client.post(URL, body, format="json")
        assert response.status_code == 403
        assert response.json()["message"] == "Only staff can create projects."
    assert not Project.objects.exists()

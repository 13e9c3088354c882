"""The members page through the test client: roles, adding, re-roling and removing members, the last admin,
CSRF and escaping."""
from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from labeling.models import Membership
from tests.factories import MembershipFactory, ProjectFactory, UserFactory
from tests.services.test_bundle_import import SMALL, write_bundle

pytestmark = pytest.mark.django_db


@pytest.fixture
def project():
    project = ProjectFactory(slug="alpha", name="Alpha")
    MembershipFactory(project=project, user=UserFactory(username="boss"), role="admin")
    MembershipFactory(project=project, user=UserFactory(username="alice"), role="expert")
    return project


def url(project) -> str:
    return reverse("labeling:members", args=[project.slug])


def remove_url(project, user) -> str:
    return reverse("labeling:member_remove", args=[project.slug, user.id])


def roles(project) -> dict[str, str]:
    return dict(Membership.objects.filter(project=project).values_list("user__username", "role"))


def as_user(client, name: str):
    user = UserFactory(username=name)
    client.force_login(user)
    return user


@pytest.mark.parametrize(("name", "status"), [("boss", 200), ("alice", 403), ("vera", 403), ("stranger", 404)])
def test_only_admins_manage_members_and_non_members_do_not_see_the_project(client, project, name, status):
    MembershipFactory(project=project, user=UserFactory(username="vera"), role="viewer")
    UserFactory(username="newbie")
    as_user(client, name)
    assert client.get(url(project)).status_code == status
    post_status = 302 if status == 200 else status
    assert client.post(url(project), {"username": "newbie", "role": "expert"}).status_code == post_status
    assert client.post(remove_url(project, UserFactory(username="alice"))).status_code == post_status
    expected = {"boss": "admin", "vera": "viewer", "newbie": "expert"} if status == 200 else {
        "boss": "admin", "alice": "expert", "vera": "viewer"}
    assert roles(project) == expected


def test_the_page_lists_members_admins_first_with_role_selects(client, project):
    as_user(client, "boss")
    html = client.get(url(project)).content.decode()
    assert html.index('data-member="boss"') < html.index('data-member="alice"')
    assert '<option value="expert" selected>expert</option>' in html
    assert 'name="csrfmiddlewaretoken"' in html


def test_adding_and_changing_a_role_redirect_back_with_a_message(client, project):
    as_user(client, "boss")
    UserFactory(username="carol")
    response = client.post(url(project), {"username": "carol", "role": "viewer"}, follow=True)
    assert response.redirect_chain == [(url(project), 302)]
    assert "carol is now viewer of Alpha." in response.content.decode()
    client.post(url(project), {"username": "alice", "role": "admin"})
    assert roles(project) == {"boss": "admin", "alice": "admin", "carol": "viewer"}


def test_errors_are_shown_with_a_400_and_keep_what_was_typed(client, project):
    as_user(client, "boss")
    response = client.post(url(project), {"username": "ghost", "role": "expert"})
    assert response.status_code == 400
    html = response.content.decode()
    assert "there is no user named &#x27;ghost&#x27;" in html
    assert 'name="username" value="ghost"' in html
    response = client.post(url(project), {"username": "boss", "role": "viewer"})
    assert response.status_code == 400
    assert "boss is the project&#x27;s last admin" in response.content.decode()
    response = client.post(remove_url(project, UserFactory(username="boss")))
    assert response.status_code == 400
    assert roles(project) == {"boss": "admin", "alice": "expert"}


def test_removing_a_member_redirects_back_and_they_lose_access(client, project):
    as_user(client, "boss")
    alice = UserFactory(username="alice")
    response = client.post(remove_url(project, alice), follow=True)
    assert "Removed alice from Alpha; their labels stay." in response.content.decode()
    assert roles(project) == {"boss": "admin"}
    client.force_login(alice)
    assert client.get(reverse("labeling:project_detail", args=[project.slug])).status_code == 404


def test_posts_need_the_csrf_token(project):
    client = Client(enforce_csrf_checks=True)
    client.force_login(UserFactory(username="boss"))
    UserFactory(username="carol")
    assert client.post(url(project), {"username": "carol", "role": "expert"}).status_code == 403
    assert roles(project) == {"boss": "admin", "alice": "expert"}


def test_user_names_are_escaped(client, project):
    MembershipFactory(project=project, user=UserFactory(username="x", first_name="<script>alert(1)</script>"))
    as_user(client, "boss")
    html = client.get(url(project)).content.decode()
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def _member_row(html: str, username: str) -> str:
    start = html.index(f'<tr data-member="{username}">')
    return html[start:html.index("</tr>", start)]


def test_the_staff_member_who_creates_a_project_is_listed_as_its_admin(client):
    creator = UserFactory(username="creator", is_staff=True)
    client.force_login(creator)
    response = client.post(reverse("labeling:project_create"), {"name": "Flood study", "slug": "flood"})
    assert response.status_code == 302
    html = client.get(reverse("labeling:members", args=["flood"])).content.decode()
    assert '<option value="admin" selected>admin</option>' in _member_row(html, "creator")


def test_the_admin_import_bundle_names_is_listed_on_the_members_page_of_the_project_it_creates(client, tmp_path):
    """`make demo`'s way in: the superuser ensure_admin makes, and a project import_bundle creates. Without --admin the
    project had no member at all, so its members page listed nobody, not even the superuser who runs it."""
    root = UserFactory(username="admin", is_superuser=True, is_staff=True)
    call_command("import_bundle", str(write_bundle(tmp_path / "small", SMALL)), "--project", "small",
                 "--admin", "admin", stdout=io.StringIO())
    client.force_login(root)
    html = client.get(reverse("labeling:members", args=["small"])).content.decode()
    assert '<option value="admin" selected>admin</option>' in _member_row(html, "admin")
    assert "(you)" in _member_row(html, "admin")

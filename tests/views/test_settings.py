"""The queue settings page through the test client: who may see and save it, the form pre-filled from the
project, saving with a redirect and a message, refusals re-rendered with 400, CSRF, and the one-line summary
with its link on the project page."""
from __future__ import annotations

import html
import re

import pytest
from django.test import Client
from django.urls import reverse

from labeling.models import Project
from tests.factories import JudgeFactory, MembershipFactory, ProjectFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def project():
    return ProjectFactory(slug="alpha", queue_mix={"uncertain": 3, "random": 1}, labels_per_item=2,
                          overlap_share=0.2, lease_minutes=15, reveal_llm_after_submit=True)


@pytest.fixture
def judge(project):
    judge = JudgeFactory(project=project, name="gpt")
    Project.objects.filter(pk=project.pk).update(queue_judge=judge)
    project.refresh_from_db()
    return judge


def login(client, project, role: str | None):
    user = UserFactory()
    if role is not None:
        MembershipFactory(project=project, user=user, role=role)
    client.force_login(user)
    return user


def url(project) -> str:
    return reverse("labeling:settings", args=[project.slug])


def form_data(judge=None, **overrides) -> dict:
    data = {
        "share_uncertain": "60", "share_disagreement": "0", "share_conflict": "0", "share_random": "40",
        "share_stratified": "0", "share_sequential": "0",
        "queue_judge": str(judge.pk) if judge else "",
        "labels_per_item": "3", "overlap_share": "25", "lease_minutes": "30",
    }
    return {**data, **overrides}


def input_tag(page: str, name: str) -> str:
    match = re.search(rf'<input[^>]*name="{name}"[^>]*>', page)
    assert match, f"no input {name}"
    return match.group(0)


def value_of(page: str, name: str) -> str:
    return re.search(r'value="([^"]*)"', input_tag(page, name)).group(1)


def settings_row(project) -> tuple:
    return Project.objects.filter(pk=project.pk).values_list(
        "queue_mix", "queue_judge_id", "labels_per_item", "overlap_share", "lease_minutes", "reveal_llm_after_submit"
    ).get()


@pytest.mark.parametrize(("role", "status"), [("admin", 200), ("expert", 403), ("viewer", 403), (None, 404)])
def test_only_admins_may_open_or_save_the_page(client, project, judge, role, status):
    login(client, project, role)
    before = settings_row(project)
    assert client.get(url(project)).status_code == status
    saved = client.post(url(project), form_data(judge))
    assert saved.status_code == (302 if role == "admin" else status)
    if role != "admin":
        assert settings_row(project) == before


def test_anonymous_users_are_sent_to_log_in(client, project):
    response = client.get(url(project))
    assert response.status_code == 302 and "login" in response["Location"]


def test_the_form_shows_the_current_settings(client, project, judge):
    login(client, project, "admin")
    page = client.get(url(project)).content.decode()
    # The stored mix 3:1 shows normalised: 75% and 25%, the other queues at 0.
    strategies = ("uncertain", "disagreement", "conflict", "random", "stratified", "sequential")
    assert [value_of(page, f"share_{name}") for name in strategies] == ["75", "0", "0", "25", "0", "0"]
    assert re.search(rf'<option value="{judge.pk}" selected>gpt</option>', page)
    assert value_of(page, "labels_per_item") == "2"
    assert value_of(page, "overlap_share") == "20"
    assert value_of(page, "lease_minutes") == "15"
    assert "checked" in input_tag(page, "reveal_llm_after_submit")
    text = html.unescape(page)
    assert "Queues: 75% uncertain, 25% random (queue judge gpt); k=2 on 20% of items" in text
    assert "pairs whose P from the queue judge is closest to 0.5" in text
    assert "the unbiased validation sample" in text


def test_saving_redirects_with_a_message_and_stores_the_settings(client, project, judge):
    login(client, project, "admin")
    response = client.post(url(project), form_data(judge))
    assert response.status_code == 302 and response["Location"] == url(project)
    # Zero shares are left out of the stored mix; 25% overlap is stored as 0.25; the unticked box is False.
    assert settings_row(project) == ({"uncertain": 60, "random": 40}, judge.pk, 3, 0.25, 30, False)
    page = client.get(response["Location"]).content.decode()
    assert "Queue settings saved" in page
    assert value_of(page, "share_uncertain") == "60" and value_of(page, "share_random") == "40"
    assert "checked" not in input_tag(page, "reveal_llm_after_submit")


def test_a_queue_that_needs_a_judge_without_one_is_refused_with_400(client, project):
    login(client, project, "admin")
    before = settings_row(project)
    response = client.post(url(project), form_data(judge=None))
    page = html.unescape(response.content.decode())
    assert response.status_code == 400
    assert "the uncertain queue ranks pairs by the queue judge's P: choose a queue judge" in page
    assert value_of(response.content.decode(), "share_uncertain") == "60"  # what was typed is kept
    assert settings_row(project) == before


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"share_uncertain": "0", "share_random": "0"}, "the shares are all 0"),
        ({"labels_per_item": "11"}, "less than or equal to 10"),
        ({"lease_minutes": "0"}, "greater than or equal to 1"),
        ({"overlap_share": "120"}, "less than or equal to 100"),
        ({"share_random": "-1"}, "greater than or equal to 0"),
        ({"share_random": ""}, "This field is required"),
    ],
)
def test_bad_input_is_shown_with_400_and_saves_nothing(client, project, judge, overrides, message):
    login(client, project, "admin")
    before = settings_row(project)
    response = client.post(url(project), form_data(judge, **overrides))
    assert response.status_code == 400 and message in response.content.decode()
    assert settings_row(project) == before


def test_disagreement_with_one_judge_says_a_second_is_needed(client, project, judge):
    login(client, project, "admin")
    response = client.post(url(project), form_data(judge, share_disagreement="10"))
    assert response.status_code == 400
    assert "the disagreement queue compares the P of at least 2 judges" in response.content.decode()


def test_the_form_is_csrf_protected(project, judge):
    client = Client(enforce_csrf_checks=True)
    login(client, project, "admin")
    before = settings_row(project)
    page = client.get(url(project))
    assert 'name="csrfmiddlewaretoken"' in page.content.decode()
    assert client.post(url(project), form_data(judge)).status_code == 403
    assert settings_row(project) == before
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode()).group(1)
    assert client.post(url(project), {**form_data(judge), "csrfmiddlewaretoken": token}).status_code == 302
    assert settings_row(project)[4] == 30


def test_judge_names_are_escaped(client, project):
    JudgeFactory(project=project, name="<script>alert(1)</script>")
    login(client, project, "admin")
    page = client.get(url(project)).content.decode()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_project_page_shows_the_mix_in_one_line_and_links_admins(client, project, judge):
    Project.objects.filter(pk=project.pk).update(queue_mix={"uncertain": 80, "random": 20})
    login(client, project, "admin")
    page = html.unescape(client.get(reverse("labeling:project_detail", args=[project.slug])).content.decode())
    assert "Queues: 80% uncertain, 20% random (queue judge gpt); k=2 on 20% of items" in page
    assert f'href="{url(project)}" class="project-tab" data-tab="settings"' in page
    login(client, project, "expert")
    page = html.unescape(client.get(reverse("labeling:project_detail", args=[project.slug])).content.decode())
    assert "Queues: 80% uncertain, 20% random" in page and url(project) not in page


def test_the_project_page_warns_when_a_queue_has_no_judge(client):
    project = ProjectFactory(slug="fresh")  # the default mix, 80% uncertain, and no judge yet
    login(client, project, "admin")
    page = client.get(reverse("labeling:project_detail", args=[project.slug])).content.decode()
    assert "Queues: 80% uncertain, 20% random; one label per item" in page
    assert "no queue judge set: uncertain cannot rank pairs" in page

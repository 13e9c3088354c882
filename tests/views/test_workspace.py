"""The annotation workspace through the test client: what an expert sees and what each button stores."""
from __future__ import annotations

import re

import pytest

from labeling.models import Label, Lease
from tests.factories import (
    PASSWORD,
    JudgeFactory,
    JudgmentFactory,
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
    RelevanceDefinitionFactory(query=query, text="Targets for cutting greenhouse gas emissions, with a year.")
    for i in range(3):
        PairFactory(project=project, query=query,
                    passage=PassageFactory(project=project, title=f"Report {i}", text=f"Our emission target {i}."))
    return project


_login, _url = login_member, workspace_url


def _form_fields(html: str) -> dict:
    """The shown item's form fields (the page also carries the next item, prefetched, in a <template>)."""
    shown = html.split('<template id="ws-next">')[0]
    return dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', shown))


def test_the_page_shows_definition_question_and_passage_with_highlights_and_a_button_per_grade(client, project):
    _login(client, project)
    response = client.get(_url(project))
    html = response.content.decode()
    assert response.status_code == 200
    assert "Targets for cutting greenhouse gas emissions, with a year." in html
    assert "Which emission targets does the company set?" in html
    assert "Our <mark>emission</mark> <mark>target</mark> 0." in html
    for value, name in ((0, "irrelevant"), (1, "partially relevant"), (2, "relevant")):
        assert re.search(rf'name="grade" value="{value}"[^>]*><kbd[^>]*>{value}</kbd> {name}</button>', html)
    assert "Done today: <strong data-count=\"done-today\">0</strong>" in html
    assert "Left after this one: <strong data-count=\"left\">2</strong>" in html


def test_submitting_with_htmx_stores_the_label_and_swaps_in_the_next_item(client, project):
    alice = _login(client, project)
    fields = _form_fields(client.get(_url(project)).content.decode())
    first = int(fields["pair_id"])
    response = client.post(_url(project, "workspace_submit"), {**fields, "grade": "2", "note": " sure ", "unsure": "on"},
                           HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<div id="workspace"')  # the partial, not the whole page
    label = Label.objects.get(annotator=alice)
    assert (label.pair_id, label.grade, label.note, label.unsure) == (first, 2, "sure", True)
    assert label.time_spent_seconds is not None and label.time_spent_seconds >= 0
    assert label.definition.text.startswith("Targets for cutting")
    assert int(_form_fields(html)["pair_id"]) != first
    assert 'data-count="done-today">1<' in html


def test_a_plain_form_post_redirects_back_to_the_page(client, project):
    _login(client, project)
    fields = _form_fields(client.get(_url(project)).content.decode())
    response = client.post(_url(project, "workspace_submit"), {**fields, "grade": "0"})
    assert response.status_code == 302 and response.url == _url(project)
    assert Label.objects.count() == 1


def test_a_double_submit_of_one_form_stores_one_label(client, project):
    _login(client, project)
    fields = _form_fields(client.get(_url(project)).content.decode())
    for _ in range(2):
        client.post(_url(project, "workspace_submit"), {**fields, "grade": "1"}, HTTP_HX_REQUEST="true")
    assert Label.objects.count() == 1


def test_a_bad_grade_is_an_error_on_the_page_and_stores_nothing(client, project):
    _login(client, project)
    fields = _form_fields(client.get(_url(project)).content.decode())
    response = client.post(_url(project, "workspace_submit"), {**fields, "grade": "9"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 400
    assert "grade 9 is not on this project&#x27;s scale" in response.content.decode()
    assert not Label.objects.exists()


def test_skip_and_undo(client, project):
    alice = _login(client, project)
    first = _form_fields(client.get(_url(project)).content.decode())
    response = client.post(_url(project, "workspace_skip"), {"pair_id": first["pair_id"]}, HTTP_HX_REQUEST="true")
    second = _form_fields(response.content.decode())
    assert second["pair_id"] != first["pair_id"]
    assert Lease.objects.get(annotator=alice, pair_id=first["pair_id"]).skipped
    client.post(_url(project, "workspace_submit"), {**second, "grade": "1"}, HTTP_HX_REQUEST="true")
    response = client.post(_url(project, "workspace_undo"), HTTP_HX_REQUEST="true")
    assert _form_fields(response.content.decode())["pair_id"] == second["pair_id"]
    assert "Undid your last label" in response.content.decode()
    assert Label.objects.get().undone


def test_blind_first_then_the_judges_p_after_submitting_when_the_project_allows_it(client, project):
    judge = JudgeFactory(project=project, name="smollm2-tok")
    for pair in project.pairs.all():
        JudgmentFactory(pair=pair, judge=judge, p_relevant=0.8123)
    _login(client, project)
    html = client.get(_url(project)).content.decode()
    assert "0.81" not in html and "smollm2-tok" not in html
    fields = _form_fields(html)
    response = client.post(_url(project, "workspace_submit"), {**fields, "grade": "2"}, HTTP_HX_REQUEST="true")
    assert "0.81" not in response.content.decode()  # the project does not reveal it
    project.reveal_llm_after_submit, project.queue_judge = True, judge
    project.save()
    fields = _form_fields(response.content.decode())
    response = client.post(_url(project, "workspace_submit"), {**fields, "grade": "0"}, HTTP_HX_REQUEST="true")
    assert "Judge smollm2-tok gave P(relevant) = 0.81" in response.content.decode()


def test_an_empty_queue_says_so(client, project):
    _login(client, project)
    for _ in range(3):
        fields = _form_fields(client.get(_url(project)).content.decode())
        client.post(_url(project, "workspace_submit"), {**fields, "grade": "1"})
    html = client.get(_url(project)).content.decode()
    assert "Nothing left to label in this queue" in html
    assert 'data-count="done-today">3<' in html


@pytest.mark.parametrize(("role", "status"), [("viewer", 403), (None, 404)])
def test_viewers_and_non_members_cannot_annotate(client, project, role, status):
    if role is None:
        UserFactory(username="mallory")
        client.login(username="mallory", password=PASSWORD)
    else:
        _login(client, project, role=role)
    pair = project.pairs.first()
    assert client.get(_url(project)).status_code == status
    for name, data in (("workspace_submit", {"pair_id": pair.id, "grade": "1"}),
                       ("workspace_skip", {"pair_id": pair.id}), ("workspace_undo", {})):
        assert client.post(_url(project, name), data).status_code == status
    assert not Label.objects.exists() and not Lease.objects.exists()


def test_anonymous_users_are_sent_to_log_in(client, project):
    response = client.get(_url(project))
    assert response.status_code == 302 and "/login/" in response.url

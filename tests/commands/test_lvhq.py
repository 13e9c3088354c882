"""LVHQ's three interfaces on the fixture of tests/lvhq_fixtures.py (its numbers are worked out by hand in
tests/selectors/test_systems_lvhq.py): the Systems page's card, `manage.py lvhq` and GET .../systems/lvhq/ give the same
tau, and what cannot be done is refused naming why."""
from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from labeling.models import Membership, Project
from labeling.selectors.query_sets import query_sets
from labeling.selectors.systems_cache import systems_inputs
from tests.factories import MembershipFactory, UserFactory
from tests.lvhq_fixtures import lvhq_project

pytestmark = pytest.mark.django_db


@pytest.fixture
def project():
    return lvhq_project()


def _viewer(project):
    user = UserFactory()
    MembershipFactory(project=project, user=user, role=Membership.Role.VIEWER)
    return user


def test_the_systems_page_shows_the_lvhq_card(project, client):
    client.force_login(_viewer(project))
    html = client.get(reverse("labeling:systems", args=[project.slug])).content.decode()
    assert 'data-lvhq="human|llm"' in html
    # B is second on the human queries and first on the LLM ones; tau = (5 - 1) / 6 = 0.667, FC agrees fully.
    card = html[html.index('data-lvhq="human|llm"'):]
    assert 'data-lvhq-group="all"' in card and "0.667" in card
    fc = card[card.index('data-lvhq-group="FC"'):]
    assert '<td class="num" data-coefficient="kendall_tau">1.000' in fc
    assert 'data-lvhq-run="B"' in card and "twin pairs resampled" in card
    assert "Qrels agreement" in html


def test_the_command_prints_it_and_its_json(project):
    out = StringIO()
    call_command("lvhq", project=project.slug, stdout=out)
    text = out.getvalue()
    assert "query set 'human' and on 'llm'" in text and "All queries: Kendall's tau 0.667" in text
    assert "Intent FC: Kendall's tau 1.000" in text
    out = StringIO()
    call_command("lvhq", project=project.slug, sets=["llm", "human"], as_json=True, stdout=out)
    found = json.loads(out.getvalue())
    assert (found["set_a"], found["set_b"]) == ("llm", "human")
    assert found["overall"]["agreement"]["kendall_tau"] == pytest.approx(2 / 3)
    assert found["overall"]["resampled"] == "twin pairs" and found["overall"]["twin_pairs"] == 3
    with pytest.raises(CommandError, match="no query set 'web'"):
        call_command("lvhq", project=project.slug, sets=["web", "llm"])
    with pytest.raises(CommandError, match="no judge"):
        call_command("lvhq", project=project.slug, qrels="judge:none")


def test_the_api_gives_the_same_and_refuses_what_it_cannot_do(project):
    api = APIClient()
    api.force_authenticate(_viewer(project))
    url = reverse("api:systems-lvhq", args=[project.slug])
    found = api.get(url).json()
    assert found["overall"]["agreement"]["kendall_tau"] == pytest.approx(2 / 3)
    assert found["intents"]["QA"]["agreement"]["kendall_tau"] == pytest.approx(2 / 3)
    assert found["runs"][1] == {"run": "B", "mean_a": pytest.approx(found["runs"][1]["mean_a"]),
                                "mean_b": pytest.approx(1.0), "rank_a": 2, "rank_b": 1}
    assert api.get(url, {"measure": "judged@10"}).status_code == 400
    refused = api.get(url, {"set_a": "human", "set_b": "web"})
    assert refused.status_code == 422 and "no query set 'web'" in refused.json()["message"]
    assert api.get(url, {"qrels": "judge:none"}).status_code == 404


def test_import_puts_queries_without_a_set_in_the_one_chosen(tmp_path):
    (tmp_path / "queries.jsonl").write_text(
        '{"_id": "w1", "text": "Where are the shelters?", "metadata": {"intent": "QA"}}\n'
        '{"_id": "w2", "text": "Is the bridge closed?", "metadata": {"query_set": "human", "twin": "w1"}}\n')
    (tmp_path / "corpus.jsonl").write_text('{"_id": "p1", "text": "Shelters open at the school."}\n')
    call_command("import_bundle", str(tmp_path), project="imported", query_set="llm", stdout=StringIO())
    sets = query_sets(Project.objects.get(slug="imported"))
    assert sets.sets == {"human": ("w2",), "llm": ("w1",)}
    assert sets.twins == {"w2": {"w1"}, "w1": {"w2"}} and sets.intents == {"w1": "QA"}
    with pytest.raises(CommandError, match="the query set name is empty"):
        call_command("import_bundle", str(tmp_path), project="imported", query_set=" ", stdout=StringIO())


def test_putting_imported_queries_into_a_set_makes_the_cached_systems_evaluation_stale(tmp_path):
    (tmp_path / "queries.jsonl").write_text('{"_id": "w1", "text": "Where are the shelters?"}\n')
    (tmp_path / "corpus.jsonl").write_text('{"_id": "p1", "text": "Shelters open at the school."}\n')
    call_command("import_bundle", str(tmp_path), project="imported", stdout=StringIO())
    project = Project.objects.get(slug="imported")
    before = systems_inputs(project)
    call_command("import_bundle", str(tmp_path), project="imported", stdout=StringIO())
    assert systems_inputs(project) == before  # nothing written: nothing stale
    call_command("import_bundle", str(tmp_path), project="imported", query_set="human", stdout=StringIO())
    assert query_sets(project).sets == {"human": ("w1",)}
    assert systems_inputs(project) != before  # the stored evaluation's LVHQ knew no set: it is stale now

"""The adjudication page through the test client: who may use it, the tabs, setting a gold grade with htmx and
without, errors, and escaping of untrusted text."""
from __future__ import annotations

import re
from html import unescape

import pytest
from django.urls import reverse

from labeling.models import Label
from tests.factories import (
    JudgeFactory,
    JudgmentFactory,
    LabelFactory,
    MembershipFactory,
    PairFactory,
    PassageFactory,
    ProjectFactory,
    QueryFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

XSS = "<script>alert(1)</script>"


@pytest.fixture
def project():
    project = ProjectFactory(slug="alpha")
    query = QueryFactory(project=project, text="Which emission targets does the company set?")
    passage = PassageFactory(project=project, title="Report", text="Our emission target for 2030.")
    conflict = PairFactory(project=project, query=query, passage=passage)
    mild = PairFactory(project=project, query=query)
    for pair, grades in ((conflict, (0, 2)), (mild, (0, 1))):
        for name, grade in zip(("alice", "bob"), grades, strict=True):
            LabelFactory(pair=pair, annotator=UserFactory(username=name), grade=grade, note=f"{name} thinks {grade}")
    JudgmentFactory(pair=conflict, judge=JudgeFactory(project=project, name="gpt"), p_relevant=0.83, method="tok")
    project.conflict, project.mild = conflict, mild
    return project


def login(client, project, role: str | None, name: str = "boss"):
    user = UserFactory(username=name)
    if role is not None:
        MembershipFactory(project=project, user=user, role=role)
    client.force_login(user)
    return user


def page_url(project, **params) -> str:
    url = reverse("labeling:adjudication", args=[project.slug])
    return url + ("?" + "&".join(f"{k}={v}" for k, v in params.items()) if params else "")


def set_url(project, pair) -> str:
    return reverse("labeling:adjudication_set", args=[project.slug, pair.id])


def item_html(html: str, pair) -> str:
    match = re.search(rf'<article [^>]*data-pair="{pair.id}".*?</article>', html, re.S)
    assert match, f"no item for pair {pair.id}"
    return match.group(0)


@pytest.mark.parametrize(("role", "get", "post"),
                         [("admin", 200, 302), ("expert", 403, 403), ("viewer", 403, 403), (None, 404, 404)])
def test_only_admins_adjudicate_and_non_members_do_not_see_the_project(client, project, role, get, post):
    login(client, project, role)
    assert client.get(page_url(project)).status_code == get
    assert client.post(set_url(project, project.conflict), {"grade": "1"}).status_code == post
    assert Label.objects.filter(role=Label.Role.ADJUDICATOR).count() == (1 if role == "admin" else 0)


def test_logged_out_users_are_sent_to_log_in(client, project):
    response = client.get(page_url(project))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_conflict_tab_shows_the_labels_the_judges_p_and_a_button_per_grade(client, project):
    login(client, project, "admin")
    html = client.get(page_url(project)).content.decode()
    item = item_html(html, project.conflict)
    assert f'data-pair="{project.mild.id}"' not in html  # 0 and 1 of 0..2: not a conflict
    assert "alice thinks 0" in item and "bob thinks 2" in item
    assert "0 irrelevant" in item and "2 relevant" in item
    assert re.search(r"<td>gpt</td><td class=\"num\">0.83</td><td>tok</td>", item)
    assert "Our <mark>emission</mark> <mark>target</mark> for 2030." in item
    for value, name in ((0, "irrelevant"), (1, "partially relevant"), (2, "relevant")):
        assert re.search(rf'name="grade" value="{value}"[^>]*>{value} {name}</button>', item)
    assert "gold" not in item
    counts = dict(re.findall(r'data-count="(\w+)">(\d+)<', html))
    assert counts == {"conflict": "1", "disagreement": "1", "all": "2"}


def test_the_disagreement_tab_lists_the_milder_item_and_htmx_gets_only_the_list(client, project):
    login(client, project, "admin")
    response = client.get(page_url(project, kind="disagreement"), HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="adjudication-list"')
    assert f'data-pair="{project.mild.id}"' in html and f'data-pair="{project.conflict.id}"' not in html


def test_setting_gold_with_htmx_swaps_in_the_item_showing_the_gold_grade(client, project):
    boss = login(client, project, "admin")
    response = client.post(set_url(project, project.conflict), {"grade": "1", "note": " year missing "},
                           HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith(f'<article class="card adj-item adj-conflict" id="adj-{project.conflict.id}"')
    assert "gold: 1 (partially relevant)" in html and "year missing" in html
    gold = Label.objects.get(role=Label.Role.ADJUDICATOR)
    assert (gold.pair_id, gold.annotator, gold.grade, gold.note) == (project.conflict.id, boss, 1, "year missing")


def test_setting_gold_without_htmx_redirects_back_with_a_message_and_the_item_leaves_the_unresolved_list(
        client, project):
    login(client, project, "admin")
    response = client.post(set_url(project, project.conflict), {"grade": "2", "kind": "all", "state": "unresolved"})
    assert response.status_code == 302
    assert response["Location"] == page_url(project, kind="all", state="unresolved")
    html = client.get(response["Location"]).content.decode()
    assert f"Gold grade of item {project.conflict.id}: 2 (relevant)." in html
    assert f'data-pair="{project.conflict.id}"' not in html
    resolved = client.get(page_url(project, kind="conflict", state="resolved")).content.decode()
    assert "gold: 2 (relevant)" in item_html(resolved, project.conflict)


@pytest.mark.parametrize("htmx", [False, True])
@pytest.mark.parametrize("grade", ["7", "", "one"])
def test_a_bad_grade_is_a_400_naming_the_problem_and_stores_nothing(client, project, grade, htmx):
    login(client, project, "admin")
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    response = client.post(set_url(project, project.conflict), {"grade": grade}, **headers)
    assert response.status_code == 400
    assert "is not on this project's scale; the grades are [0, 1, 2]" in unescape(response.content.decode())
    assert not Label.objects.filter(role=Label.Role.ADJUDICATOR).exists()


def test_a_pair_of_another_project_or_no_pair_is_a_404(client, project):
    login(client, project, "admin")
    other = PairFactory()
    assert client.post(set_url(project, other), {"grade": "1"}).status_code == 404
    missing = reverse("labeling:adjudication_set", args=[project.slug, 999_999])
    assert client.post(missing, {"grade": "1"}).status_code == 404
    assert not Label.objects.filter(role=Label.Role.ADJUDICATOR).exists()


def test_the_page_is_get_only_and_setting_is_post_only(client, project):
    login(client, project, "admin")
    assert client.post(page_url(project)).status_code == 405
    assert client.get(set_url(project, project.conflict)).status_code == 405


def test_untrusted_query_passage_and_note_are_escaped(client):
    project = ProjectFactory()
    pair = PairFactory(project=project, query=QueryFactory(project=project, text=f"Targets {XSS}"),
                       passage=PassageFactory(project=project, title=XSS, text=f"Body {XSS}"))
    LabelFactory(pair=pair, annotator=UserFactory(username="alice"), grade=0, note=XSS)
    LabelFactory(pair=pair, annotator=UserFactory(username="bob"), grade=2)
    login(client, project, "admin")
    html = client.get(page_url(project)).content.decode()
    assert "<script>alert" not in html
    assert "Targets &lt;script&gt;alert(1)&lt;/script&gt;" in html  # the query
    assert "&lt;script&gt;alert(1)&lt;/script&gt;</td>" in html  # the note
    # The passage is escaped piece by piece around the highlighted query terms.
    assert "Body &lt;<mark>script</mark>&gt;<mark>alert</mark>(1)&lt;/<mark>script</mark>&gt;" in html


def test_the_project_page_links_admins_to_adjudication_with_the_conflict_count_and_to_members(client, project):
    login(client, project, "admin")
    html = client.get(reverse("labeling:project_detail", args=[project.slug])).content.decode()
    # The project header's Adjudicate tab carries the conflict count; the Members tab is there for admins.
    assert 'data-tab="adjudicate"' in html
    assert 'title="conflicts to adjudicate"><span class="visually-hidden">(</span>1<' in html
    assert reverse("labeling:members", args=[project.slug]) in html
    client.logout()
    login(client, project, "expert", name="eve")
    html = client.get(reverse("labeling:project_detail", args=[project.slug])).content.decode()
    assert 'data-tab="adjudicate"' not in html and reverse("labeling:members", args=[project.slug]) not in html

"""Untrusted text (queries, passages, definitions, notes, judge names, usernames, project names) holding markup
is shown as text on every page that shows it, never as markup, and the API returns it as the plain string."""
from __future__ import annotations

import pytest
from django.urls import reverse

from tests.factories import RelevanceDefinitionFactory
from tests.html_audit import audit_html
from tests.url_matrix import ADMIN, EXPERT, VIEWER, build_world

pytestmark = pytest.mark.django_db

PAYLOAD = '<script>alert(1)</script>"><img src=x onerror=alert(1)><a href="javascript:alert(1)">x</a>'
FIELDS = {
    "query": f"query {PAYLOAD}",
    "definition": f"definition {PAYLOAD}",
    "title": f"title {PAYLOAD}",
    "passage": f"passage {PAYLOAD}",
    "note": f"note {PAYLOAD}",
    "project": f"project {PAYLOAD}",
    "judge": f"judge {PAYLOAD}",
    "username": f"user {PAYLOAD}",
}
# What the markup would look like had a template let it through, and what escaping makes of it.
RAW = ("<script>alert", "<img src=x", '<a href="javascript:')
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"

# Page -> who looks at it -> the fields it must show (as text).
PAGES = {
    "labeling:project_list": (VIEWER, ["project"]),
    "labeling:project_detail": (VIEWER, ["project", "query"]),
    "labeling:validation": (VIEWER, ["project", "judge"]),
    "labeling:judges": (ADMIN, ["project", "judge"]),
    "labeling:workspace": (EXPERT, ["project", "query", "definition", "title", "passage"]),
    "labeling:definition": (VIEWER, ["project", "query", "definition"]),
    "labeling:adjudication": (ADMIN, ["project", "query", "title", "passage", "note", "username"]),
    "labeling:members": (ADMIN, ["project", "username"]),
}


@pytest.fixture
def hostile():
    world = build_world(
        query_text=FIELDS["query"],
        definition_text="the first definition",
        passage_title=FIELDS["title"],
        passage_text=FIELDS["passage"],
        note=FIELDS["note"],
        name=FIELDS["project"],
        judge_name=FIELDS["judge"],
        member_name=FIELDS["username"],
        with_report=True,
    )
    # A second version, so the definition page also renders the word diff between the two.
    RelevanceDefinitionFactory(query=world.query, text=FIELDS["definition"])
    return world


def _url(world, name: str) -> str:
    if name == "labeling:project_list":
        return reverse(name)
    if name == "labeling:definition":
        return reverse(name, args=[world.project.slug, world.query.id])
    return reverse(name, args=[world.project.slug])


@pytest.mark.parametrize("name", PAGES)
def test_markup_in_user_text_is_shown_escaped(client, hostile, name):
    role, shown = PAGES[name]
    client.force_login(hostile.users[role])
    response = client.get(_url(hostile, name))
    assert response.status_code == 200
    html = response.content.decode()

    for raw in RAW:
        assert raw not in html
    assert ESCAPED in html
    audit = audit_html(html)
    assert audit.inline_scripts == 0
    assert "img" not in audit.tags
    assert audit.handlers == [] and audit.script_urls == []
    # Each field reads, as text, exactly what was stored: escaped, not dropped or mangled.
    missing = [field for field in shown if FIELDS[field] not in audit.text]
    assert not missing, f"{name} does not show {missing} as text"


def test_the_api_returns_untrusted_text_as_plain_strings(client, hostile):
    client.force_login(hostile.users[ADMIN])
    slug = hostile.project.slug

    def get(name: str, *args: object) -> dict | list:
        response = client.get(reverse(name, args=[slug, *args]))
        assert response.status_code == 200
        assert response["Content-Type"] == "application/json"
        assert "&lt;" not in response.content.decode()
        return response.json()

    (query,) = get("api:query-list")["results"]
    assert (query["text"], query["current_definition"]["text"]) == (FIELDS["query"], FIELDS["definition"])
    passages = get("api:passage-list")["results"]
    assert {(p["title"], p["text"]) for p in passages} == {
        (FIELDS["title"], f"{FIELDS['passage']} ({i})") for i in range(3)
    }
    definitions = get("api:definition-list", hostile.query.external_id)
    assert [d["text"] for d in definitions] == [FIELDS["definition"], "the first definition"]
    labels = get("api:label-list")["results"]
    assert {label["note"] for label in labels} == {FIELDS["note"]}
    assert FIELDS["username"] in {label["annotator"] for label in labels}

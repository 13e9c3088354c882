"""The definition page through the test client: roles, saving versions and seeing the diff, errors, stale
judgments with their re-score button, and escaping of untrusted definitions."""
from __future__ import annotations

import re
from datetime import datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from labeling.models import Query, RelevanceDefinition, ScoringJob
from tests.factories import (
    JudgeFactory,
    JudgmentFactory,
    MembershipFactory,
    PairFactory,
    ProjectFactory,
    QueryFactory,
    RelevanceDefinitionFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

XSS = "<script>alert(1)</script> and <img src=x onerror=alert(1)>"


@pytest.fixture
def query():
    project = ProjectFactory(slug="alpha")
    return QueryFactory(project=project, external_id="q1", text="Net-zero targets of steel makers")


def login(client, query, role: str | None):
    user = UserFactory()
    if role is not None:
        MembershipFactory(project=query.project, user=user, role=role)
    client.force_login(user)
    return user


def page_url(query) -> str:
    return reverse("labeling:definition", args=[query.project.slug, query.id])


def rescore_url(query, judge) -> str:
    return reverse("labeling:definition_rescore", args=[query.project.slug, query.id, judge.name])


@pytest.mark.parametrize(
    ("role", "get", "post"),
    [("admin", 200, 302), ("expert", 200, 403), ("viewer", 200, 403), (None, 404, 404)],
)
def test_roles(client, query, role, get, post):
    judge = JudgeFactory(project=query.project, name="gpt", backend="openai", model="m",
                         parameters={"endpoint": "unreachable", "method": "ask"})
    old = RelevanceDefinitionFactory(query=query, text="old")
    RelevanceDefinitionFactory(query=query, text="current")
    JudgmentFactory(pair=PairFactory(project=query.project, query=query), judge=judge, definition=old)
    login(client, query, role)
    response = client.get(page_url(query))
    assert response.status_code == get
    if get == 200:
        html = response.content.decode()
        assert ('name="text"' in html) == (role == "admin")
        assert ("Re-score 1 stale pair<" in html) == (role == "admin")
        assert 'data-stale="1"' in html  # every member sees the stale count
        # ...and the whole history with its diff, read-only.
        assert 'data-version="2"' in html and 'data-version="1"' in html
        assert "<del>old</del><ins>current</ins>" in html
        assert ("<form" in html.split('id="stale"')[1]) == (role == "admin")
    assert client.post(page_url(query), {"text": "new"}).status_code == post
    assert client.post(rescore_url(query, judge)).status_code == post
    saved = RelevanceDefinition.objects.filter(query=query).count()
    assert saved == (3 if role == "admin" else 2)
    assert ScoringJob.objects.count() == (1 if role == "admin" else 0)


def test_anonymous_is_sent_to_login(client, query):
    response = client.get(page_url(query))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_a_query_of_another_project_is_not_found(client, query):
    login(client, query, "admin")
    other = QueryFactory()
    url = reverse("labeling:definition", args=[query.project.slug, other.id])
    assert client.get(url).status_code == 404


def test_two_saves_show_the_new_version_and_its_diff(client, query):
    admin = login(client, query, "admin")
    first = client.post(page_url(query), {"text": "Passages naming a target year."}, follow=True)
    assert "Saved version 1." in first.content.decode()
    second = client.post(page_url(query), {"text": "Passages naming a 2030 target year.\r\n"}, follow=True)
    html = second.content.decode()
    assert second.redirect_chain == [(page_url(query), 302)]
    assert "Saved version 2." in html
    assert 'data-current-version="2"' in html and admin.username in html
    # The newest diff is open; the first version is shown whole, folded.
    assert re.search(r'<details open data-version="2">', html)
    assert re.search(r'<details data-version="1">', html)
    assert "Passages naming a <ins>2030 </ins>target year." in html
    assert ">+1</span>" in html and "&minus;0</span>" in html
    # The edit form starts from the current text.
    assert re.search(r'<textarea [^>]*name="text"[^>]*>Passages naming a 2030 target year.</textarea>', html)


@pytest.mark.parametrize(
    ("text", "message"),
    [("  ", "the definition is empty"), ("Same text", "unchanged from version 1"),
     ("x" * 50_001, "the limit is 50,000")],
)
def test_refused_saves_show_the_reason_keep_the_text_and_store_nothing(client, query, text, message):
    login(client, query, "admin")
    RelevanceDefinitionFactory(query=query, text="Same text")
    response = client.post(page_url(query), {"text": text})
    html = response.content.decode()
    assert response.status_code == 400
    assert message in html
    assert f">{text}</textarea>" in html
    assert RelevanceDefinition.objects.filter(query=query).count() == 1


def test_query_without_definition(client, query):
    login(client, query, "viewer")
    html = client.get(page_url(query)).content.decode()
    assert "No definition yet" in html and "No versions yet." in html and "No stale judgments" in html


def test_rescore_button_queues_the_stale_pairs_of_this_query_only(client, query):
    login(client, query, "admin")
    project = query.project
    judge = JudgeFactory(project=project, name="gpt", backend="openai", model="m",
                         parameters={"endpoint": "unreachable", "method": "ask"})
    imported = JudgeFactory(project=project, name="from-file")
    old, current = RelevanceDefinitionFactory(query=query), RelevanceDefinitionFactory(query=query)
    stale = [PairFactory(project=project, query=query) for _ in range(3)]
    fresh = PairFactory(project=project, query=query)
    for pair in stale:
        JudgmentFactory(pair=pair, judge=judge, definition=old)
        JudgmentFactory(pair=pair, judge=imported, definition=old)
    JudgmentFactory(pair=fresh, judge=judge, definition=current)
    elsewhere = PairFactory(project=project)  # another query's stale pair stays out of this page's job
    JudgmentFactory(pair=elsewhere, judge=judge, definition=RelevanceDefinitionFactory(query=elsewhere.query))
    RelevanceDefinitionFactory(query=elsewhere.query)

    html = client.get(page_url(query)).content.decode()
    assert "Re-score 3 stale pairs" in html
    assert "imported judge: cannot re-score here" in html
    response = client.post(rescore_url(query, judge), follow=True)
    job = ScoringJob.objects.get()
    assert sorted(pid for chunk in job.chunks.all() for pid in chunk.pair_ids) == sorted(p.id for p in stale)
    assert f"Job {job.id}: re-scoring 3 stale pairs with gpt" in response.content.decode()

    failed = client.post(rescore_url(query, imported), follow=True).content.decode()
    assert "backend must be" in failed and ScoringJob.objects.count() == 1

    # The queued pairs are shown as such, and a second click starts nothing.
    html = client.get(page_url(query)).content.decode()
    assert 'data-stale="3"' in html and 'data-queued="3"' in html and "all queued in a running job" in html
    assert "Re-score 3" not in html
    again = client.post(rescore_url(query, judge), follow=True).content.decode()
    assert "the 3 stale pairs of judge &#x27;gpt&#x27; are queued in a running job" in again
    assert ScoringJob.objects.count() == 1


def test_project_page_links_each_query_to_its_definition_with_its_stale_count(client, query):
    login(client, query, "viewer")
    RelevanceDefinitionFactory(query=query)
    bare = QueryFactory(project=query.project)
    html = client.get(reverse("labeling:project_detail", args=[query.project.slug])).content.decode()
    assert f'href="{page_url(query)}"' in html and ">v1</a>" in html
    assert f'href="{page_url(bare)}"' in html and ">none</a>" in html
    assert html.count('data-stale="0"') == 2


def test_project_page_stale_counts_on_a_later_page(client, query, django_assert_max_num_queries):
    """1,000+ queries are paged 50 at a time; each page counts stale judgments of its own queries only."""
    login(client, query, "viewer")
    project = query.project
    for i in range(59):  # 60 queries: page 2 holds the last 10
        QueryFactory(project=project, external_id=f"more-{i}")
    last = project.queries.order_by("-id").first()
    old, _ = RelevanceDefinitionFactory(query=last), RelevanceDefinitionFactory(query=last)
    judges = [JudgeFactory(project=project, name=name) for name in ("one", "two")]
    pairs = [PairFactory(project=project, query=last) for _ in range(3)]
    for pair in pairs:
        JudgmentFactory(pair=pair, judge=judges[0], definition=old)
    JudgmentFactory(pair=pairs[0], judge=judges[1], definition=old)
    JudgmentFactory(pair=pairs[0], judge=judges[1], definition=None)  # two stale judgments of one pair: one
    url = reverse("labeling:project_detail", args=[project.slug])
    first = client.get(url).content.decode()
    assert first.count('data-stale="0"') == 50 and "stale</a>" not in first
    with django_assert_max_num_queries(6):  # session, user, project, count, page, stale counts
        table = client.get(url, {"page": 2}, headers={"HX-Request": "true"}).content.decode()
    # Hand count: judge one 3 pairs + judge two 1 pair.
    assert f'<a href="{page_url(last)}#stale">4 stale</a>' in table
    assert table.count("data-stale=") == 10 and "<html" not in table


def test_untrusted_definitions_are_escaped_in_the_page_and_the_diff(client, query):
    login(client, query, "admin")
    query.text = "<b>query</b>"
    query.save()
    RelevanceDefinitionFactory(query=query, text="Plain first version.")
    RelevanceDefinitionFactory(query=query, text=XSS)
    html = client.get(page_url(query)).content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "<img src=x" not in html and "<b>query</b>" not in html
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt; and &lt;img src=x onerror=alert(1)&gt;"
    assert html.count(escaped) == 3  # the current definition, the textarea and the diff
    # In the diff the new text is one insertion, escaped inside the markup the template adds.
    assert "<ins>&lt;script&gt;alert(1)&lt;/script&gt; and &lt;img src=x onerror=alert(1)&gt;</ins>" in html
    assert "<del>Plain first version.</del>" in html



def _row(html: str, external_id: str) -> str:
    start = html.index(f'<tr data-query="{external_id}">')
    return html[start:html.index("</tr>", start)]


def test_the_definitions_page_lists_each_querys_current_version_versions_and_last_change(client, query):
    """q1 (the fixture): imported v1, v2 saved by ada, v3 an LLM draft waiting. q2: only a draft. q3: imported v1.
    q4: nothing. q5: a draft reviewed by ada into v2. Worked out by hand: 3 of 5 queries have a definition."""
    project = query.project
    ada = UserFactory(username="ada")
    saved_at = timezone.make_aware(datetime(2026, 1, 2, 10, 30))
    judge = JudgeFactory(project=project, name="gpt")

    def version(of, *, author=None, draft=False, based_on=None, at=saved_at):
        definition = RelevanceDefinitionFactory(query=of, author=author, is_draft=draft, based_on=based_on,
                                                drafted_by=judge if draft else None,
                                                origin="llm_draft" if draft or based_on else "manual")
        RelevanceDefinition.objects.filter(pk=definition.pk).update(created_at=at)
        return definition

    version(query, at=saved_at - timedelta(days=3))
    version(query, author=ada)
    version(query, draft=True, at=saved_at + timedelta(days=1))
    q2, q3, q4, q5 = (QueryFactory(project=project, external_id=f"q{n}", text=XSS) for n in range(2, 6))
    version(q2, draft=True)
    version(q3)
    version(q5, author=ada, based_on=version(q5, draft=True))
    login(client, query, "expert")

    html = client.get(reverse("labeling:definitions", args=[project.slug])).content.decode()

    assert 'data-defined="3" data-total="5">3 of 5 queries</span> have one' in html
    expected = {  # current version, versions, drafts waiting, last changed, by
        "q1": ("2", "3", "1", "2026-01-02 10:30", "ada"),
        "q2": ("", "1", "1", None, ""),
        "q3": ("1", "1", None, "2026-01-02 10:30", ""),
        "q4": ("", "0", None, None, ""),
        "q5": ("2", "2", None, "2026-01-02 10:30", "ada"),
    }
    for external_id, (current, versions, waiting, changed, by) in expected.items():
        row = _row(html, external_id)
        query_id = Query.objects.get(project=project, external_id=external_id).id
        assert f'href="{reverse("labeling:definition", args=[project.slug, query_id])}"' in row
        assert f'data-current="{current}"' in row and f'data-versions="{versions}"' in row
        assert (f'data-drafts-waiting="{waiting}"' in row) if waiting else "data-drafts-waiting" not in row
        assert (f">{changed}</time>" in row) if changed else "<time" not in row
        assert f'data-changed-by="{by}"' in row
    assert "none yet" in _row(html, "q2") and "imported" in _row(html, "q3") and "imported" not in _row(html, "q4")
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html

"""LLM drafts on the definition page through the test client: the draft form for admins only, requests that poll
while pending and show their error when they fail, drafts in the history marked as not current, and a review that
pre-fills the text and saves it as the new current version."""
from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from labeling.models import DefinitionDraft, RelevanceDefinition
from labeling.selectors.definitions import current_definition
from tests.factories import (
    JudgeFactory,
    LabelFactory,
    MembershipFactory,
    PairFactory,
    ProjectFactory,
    QueryFactory,
    RelevanceDefinitionFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

DRAFT_TEXT = ("It asks whether the company commits to net zero.\n\n"
              "Examples of the information it seeks:\n1. A net-zero year\n2. <b>Interim</b> targets")


@pytest.fixture
def query():
    query = QueryFactory(project=ProjectFactory(slug="alpha"), external_id="q1", text="Net-zero targets")
    RelevanceDefinitionFactory(query=query, text="Targets for emissions.")
    return query


@pytest.fixture
def judge(query):
    return JudgeFactory(project=query.project, name="gpt-drafter", backend="openai", model="m",
                        parameters={"endpoint": "unreachable", "method": "ask"})


def login(client, query, role: str):
    user = UserFactory()
    MembershipFactory(project=query.project, user=user, role=role)
    client.force_login(user)
    return user


def page_url(query) -> str:
    return reverse("labeling:definition", args=[query.project.slug, query.id])


def draft_url(query) -> str:
    return reverse("labeling:definition_draft", args=[query.project.slug, query.id])


def drafted_version(query, judge, text: str = DRAFT_TEXT, origin: str = "llm_draft") -> RelevanceDefinition:
    version = RelevanceDefinitionFactory(query=query, text=text, is_draft=True, origin=origin, drafted_by=judge)
    DefinitionDraft.objects.create(query=query, judge=judge, refine=origin == "llm_refined", definition=version,
                                   finished_at=timezone.now(), raw_output=text)
    return version


@pytest.mark.parametrize("role", ["admin", "expert", "viewer"])
def test_only_admins_see_the_draft_form_with_the_judges_that_write(client, query, judge, role):
    JudgeFactory(project=query.project, name="from-file")  # imported judgments: cannot write
    JudgeFactory(project=query.project, name="minilm", backend="embedding", parameters={"method": "embedding"})
    login(client, query, role)
    html = client.get(page_url(query)).content.decode()
    assert ("Draft with LLM" in html) == (role == "admin")
    if role == "admin":
        form = html.split('id="drafting"')[1]
        assert f'action="{draft_url(query)}"' in form
        assert re.search(rf'<option value="{judge.id}"[^>]*>gpt-drafter</option>', form)
        assert "from-file" not in form and "minilm" not in form
        assert "Refine from labelled examples" in form and 'name="refine"' in form


def test_a_project_without_a_generative_judge_says_how_to_get_one(client, query):
    JudgeFactory(project=query.project, name="from-file")
    login(client, query, "admin")
    html = client.get(page_url(query)).content.decode()
    assert "No judge of this project can write text: drafting needs a judge with backend hf or openai" in html


@pytest.mark.parametrize("role", ["expert", "viewer"])
def test_experts_and_viewers_cannot_ask_for_a_draft(client, query, judge, role):
    login(client, query, role)
    assert client.post(draft_url(query), {"judge": judge.id}).status_code == 403
    assert not DefinitionDraft.objects.exists()


def test_an_admin_asks_for_a_draft_and_sees_it_pending_then_done(client, query, judge,
                                                                 django_capture_on_commit_callbacks):
    admin = login(client, query, "admin")
    with django_capture_on_commit_callbacks() as callbacks:
        response = client.post(draft_url(query), {"judge": judge.id}, follow=True)
    assert response.redirect_chain == [(page_url(query) + "#drafting", 302)]
    assert len(callbacks) == 1  # the worker task
    draft = DefinitionDraft.objects.get()
    assert (draft.query, draft.judge, draft.refine, draft.requested_by) == (query, judge, False, admin)
    html = response.content.decode()
    assert "Asked gpt-drafter for a draft." in html
    assert f'data-draft-request="{draft.id}" data-state="pending"' in html and "waiting for the model" in html
    # While a request is pending its list polls the page, which answers htmx with the list alone.
    assert re.search(r'<div id="drafts" hx-get="' + re.escape(page_url(query)) + r'" hx-trigger="every 3s"', html)
    poll = client.get(page_url(query), headers={"HX-Request": "true"}).content.decode()
    assert "<html" not in poll and 'hx-trigger="every 3s"' in poll and 'id="history"' not in poll

    # The worker writes the draft: the next poll stops polling and brings the history with the draft version.
    version = RelevanceDefinitionFactory(query=query, text=DRAFT_TEXT, is_draft=True, origin="llm_draft",
                                         drafted_by=judge)
    DefinitionDraft.objects.filter(id=draft.id).update(finished_at=timezone.now(), definition=version)
    poll = client.get(page_url(query), headers={"HX-Request": "true"}).content.decode()
    assert "<html" not in poll and "every 3s" not in poll
    assert f'<a href="#version-{version.version}">draft version {version.version}</a>' in poll
    assert '<section id="history" hx-swap-oob="true">' in poll and "LLM draft — not current" in poll
    # ...and the note under the current definition, which now has a draft waiting to tell of, and the number
    # the edit form's next save will get.
    note = poll.split('<div id="unreviewed" hx-swap-oob="true">')[1].split("</div>")[0]
    assert f"Version {version.version} is an LLM draft waiting for review" in note
    assert f'<span id="next-version" hx-swap-oob="true">{version.version + 1}</span>' in poll


def test_refusals_are_shown_and_store_nothing(client, query, judge):
    login(client, query, "admin")
    refine = client.post(draft_url(query), {"judge": judge.id, "refine": "on"}, follow=True).content.decode()
    assert "no passage of query &#x27;q1&#x27; is labelled relevant by the experts yet" in refine
    imported = JudgeFactory(project=query.project, name="from-file")
    wrong = client.post(draft_url(query), {"judge": imported.id}, follow=True).content.decode()
    assert "Choose one of the project&#x27;s judges that write text" in wrong
    assert not DefinitionDraft.objects.exists()


def test_an_admin_asks_for_a_refined_draft(client, query, judge, django_capture_on_commit_callbacks):
    login(client, query, "admin")
    LabelFactory(pair=PairFactory(project=query.project, query=query), grade=2)
    with django_capture_on_commit_callbacks() as callbacks:
        html = client.post(draft_url(query), {"judge": judge.id, "refine": "on"}, follow=True).content.decode()
    assert "Asked gpt-drafter for a refined draft." in html and len(callbacks) == 1
    assert DefinitionDraft.objects.get().refine is True
    assert "refine from labelled examples" in html


def test_a_failed_request_shows_its_error_and_what_the_model_answered(client, query, judge):
    login(client, query, "admin")
    DefinitionDraft.objects.create(
        query=query, judge=judge, finished_at=timezone.now(), raw_output="Net zero <script>is</script> nice.",
        error="the model's answer is not a definition: the answer has no list of examples",
    )
    html = client.get(page_url(query)).content.decode()
    assert 'data-state="failed"' in html and "every 3s" not in html
    assert "the model&#x27;s answer is not a definition: the answer has no list of examples" in html
    assert "Net zero &lt;script&gt;is&lt;/script&gt; nice." in html and "<script>is" not in html


def test_the_history_marks_a_draft_as_not_current_and_the_review_link_prefills_it(client, query, judge):
    login(client, query, "admin")
    version = drafted_version(query, judge, origin="llm_refined")
    html = client.get(page_url(query)).content.decode()
    # The current definition is still version 1, and the history says so.
    assert 'data-current-version="1"' in html and "Version 2 is an LLM draft waiting for review" in html
    draft_entry = html.split('<li id="version-2" class="version-draft">')[1].split("</li>")[0]
    assert "LLM draft — not current" in draft_entry and "data-current" not in draft_entry
    assert "gpt-drafter (drafted by an LLM from expert-labelled examples)" in draft_entry
    assert "<ins>" in draft_entry  # its diff against version 1
    review = f"{page_url(query)}?from={version.id}#edit"
    assert f'href="{review}"' in draft_entry and "Review and make current" in draft_entry
    assert "data-current>current</span>" in html.split('<li id="version-1">')[1].split("</li>")[0]
    # The edit form still starts from the current text...
    assert re.search(r'<textarea [^>]*name="text"[^>]*>Targets for emissions.</textarea>', html)
    # ...and from the draft's when reviewing it, with the draft it is based on.
    reviewing = client.get(page_url(query), {"from": version.id}).content.decode()
    escaped = DRAFT_TEXT.replace("<", "&lt;").replace(">", "&gt;")
    assert re.search(r'<textarea [^>]*name="text"[^>]*>' + re.escape(escaped) + "</textarea>", reviewing)
    assert f'<input type="hidden" name="based_on" value="{version.id}">' in reviewing
    assert "Review LLM draft version 2" in reviewing and "Save as the current definition" in reviewing
    # Only a draft of this query can be reviewed: anything else leaves the normal edit form.
    for other in (query.definitions.get(version=1).id, drafted_version(QueryFactory(), judge).id, "x"):
        plain = client.get(page_url(query), {"from": other}).content.decode()
        assert 'name="based_on"' not in plain and ">Targets for emissions.</textarea>" in plain


def test_experts_see_drafts_in_the_history_without_the_review_link(client, query, judge):
    login(client, query, "expert")
    version = drafted_version(query, judge)
    html = client.get(page_url(query)).content.decode()
    assert "LLM draft — not current" in html and "Review and make current" not in html
    assert 'name="based_on"' not in client.get(page_url(query), {"from": version.id}).content.decode()


def test_saving_the_review_makes_a_new_current_version_based_on_the_draft(client, query, judge):
    admin = login(client, query, "admin")
    version = drafted_version(query, judge)
    edited = DRAFT_TEXT.replace("A net-zero year", "A net-zero target year")
    response = client.post(page_url(query), {"text": edited, "based_on": version.id}, follow=True)
    html = response.content.decode()
    saved = current_definition(query=query)
    assert (saved.version, saved.text, saved.is_draft, saved.origin, saved.based_on, saved.drafted_by,
            saved.author) == (3, edited, False, "llm_draft", version, judge, admin)
    assert "Saved version 3 from LLM draft version 2: it is the current definition now." in html
    assert 'data-current-version="3"' in html and "reviewed from LLM draft version 2 by gpt-drafter" in html
    assert "waiting for review" not in html
    draft_entry = html.split('<li id="version-2" class="version-draft">')[1].split("</li>")[0]
    assert "Saved as version 3." in draft_entry
    # The new version's diff shows what the reviewer changed in the draft.
    assert "<ins>target </ins>" in html.split('<li id="version-3">')[1]


def test_a_review_of_something_that_is_not_a_draft_of_this_query_is_refused(client, query, judge):
    login(client, query, "admin")
    v1 = query.definitions.get(version=1)
    elsewhere = drafted_version(QueryFactory(project=query.project), judge)
    for based_on, message in ((v1.id, "version 1 is not a draft of query &#x27;q1&#x27;"),
                              (elsewhere.id, "the draft being reviewed is not a version of this query"),
                              ("nope", "the draft being reviewed is not a version of this query")):
        response = client.post(page_url(query), {"text": "New text.", "based_on": based_on})
        assert response.status_code == 400 and message in response.content.decode()
        assert ">New text.</textarea>" in response.content.decode()
    assert query.definitions.count() == 1


def test_a_second_draft_is_compared_with_the_definition_in_use_not_with_the_first_draft(client, query, judge):
    login(client, query, "viewer")
    drafted_version(query, judge, text="First draft.")
    drafted_version(query, judge, text="Targets for emissions and offsets.")
    html = client.get(page_url(query)).content.decode()
    entry = html.split('<li id="version-3" class="version-draft">')[1].split("</li>")[0]
    assert "words against version 1</span>" in entry and 'aria-label="changes from version 1 to 3"' in entry
    assert "Targets for emissions<ins> and offsets</ins>." in entry
    assert "against version" not in html.split('<li id="version-2" class="version-draft">')[1].split("</li>")[0]


def test_a_request_no_worker_answers_says_to_check_the_worker(client, query, judge):
    login(client, query, "admin")
    fresh = DefinitionDraft.objects.create(query=query, judge=judge)
    html = client.get(page_url(query)).content.decode()
    assert 'data-state="pending"' in html and "data-stalled" not in html
    DefinitionDraft.objects.filter(id=fresh.id).update(created_at=timezone.now() - timedelta(minutes=5))
    html = client.get(page_url(query), headers={"HX-Request": "true"}).content.decode()
    entry = html.split(f'data-draft-request="{fresh.id}"')[1].split("</li>")[0]
    assert "data-stalled" in entry and "Asked 5\xa0minutes ago and not answered yet" in entry
    assert "check that one is running" in entry and 'hx-trigger="every 3s"' in html  # it keeps polling

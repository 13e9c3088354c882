"""LLM-drafted definitions end to end on the sample project that `make demo` loads (ClimRetrieve, 16 queries):
`draft_definitions` drafts every query; an expert's relevant labels feed a refined draft that an admin asks for
in a real browser and a real Celery worker writes; the admin reviews it and only then is a new version current.
The judge is an OpenAI-compatible server on 127.0.0.1 that answers in the two-part shape from what it is sent
(the bundled SmolLM2-135M answers in that shape for 14 of the 16 queries: tests/commands holds it to the rules,
not to a count)."""
from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command

from labeling.models import DefinitionDraft, Label, Project, RelevanceDefinition
from labeling.selectors.definitions import current_definition
from labeling.services.bundle_import import bundle_import
from labeling.services.judges import judge_create
from labeling.services.labels import label_submit
from models_llm.drafting import EXAMPLES_HEADING
from tests.browser import log_in, needs_chromium
from tests.factories import LeaseFactory, MembershipFactory, UserFactory
from tests.models_llm.fake_openai import FakeOpenAI, Reply, completion
from tests.polling import wait_for
from tests.scoring_fixtures import SAMPLE
from tests.endpoints import declare_endpoint

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True), needs_chromium]

PASSAGE = re.compile(r"<passage (\d+)>\n(.*?)\n</passage \1>", re.S)


def drafter(body: dict) -> Reply:
    """Answer the request (the last message) with a definition: its question, then one example per passage it
    was shown (the passage's first words), so a refined draft shows what it learnt from."""
    request = body["messages"][-1]["content"]
    question = re.search(r"^Question: (.*)$", request, re.M).group(1)
    examples = ["A statement in the report that answers the question directly"] + [
        f"What relevant passage {number} reports: {' '.join(text.split()[:6])}"
        for number, text in PASSAGE.findall(request)
    ]
    content = (f"Meaning: The question asks: {question}\n\n{EXAMPLES_HEADING}\n"
               + "\n".join(f"{i}. {example}" for i, example in enumerate(examples, start=1)))
    return Reply(body=completion(content, prompt_tokens=len(request.split()), completion_tokens=len(content.split())))


@pytest.fixture
def server():
    with FakeOpenAI(default=drafter) as fake:
        yield fake


def test_the_sample_is_drafted_then_refined_from_expert_labels_and_nothing_is_current_until_reviewed(
    server, worker, browser, live_server
):
    bundle_import(path=SAMPLE, project_slug="climretrieve", all_pairs=True)
    project = Project.objects.get(slug="climretrieve")
    judge = judge_create(project=project, name="drafter", backend="openai", model="scripted", method="ask",
                         endpoint=declare_endpoint(server.base_url))
    admin, expert = UserFactory(username="ada"), UserFactory(username="eve")
    MembershipFactory(project=project, user=admin, role="admin")
    MembershipFactory(project=project, user=expert, role="expert")
    queries = list(project.queries.order_by("id"))
    imported = {query.id: current_definition(query=query) for query in queries}
    assert len(queries) == 16 and all(imported.values())

    # 1. Every query drafted from the query alone (DIRAS "generic"): a draft version 2, nothing current.
    out = io.StringIO()
    call_command("draft_definitions", "--project", project.slug, "--judge", judge.name, stdout=out)
    assert out.getvalue().splitlines() == [f"{query.external_id}: draft version 2" for query in queries]
    for query, request in zip(queries, server.bodies, strict=True):
        assert request["messages"][-1]["content"].startswith(f"Question: {query.text}\n")
        draft = query.definitions.get(version=2)
        assert (draft.is_draft, draft.origin, draft.drafted_by) == (True, "llm_draft", judge)
        assert draft.text.startswith(f"The question asks: {query.text}\n\n{EXAMPLES_HEADING}\n1. ")
        assert current_definition(query=query) == imported[query.id]

    # 2. An expert labels two passages of the first query relevant and one not.
    first = queries[0]
    pairs = list(project.pairs.filter(query=first).select_related("passage").order_by("id")[:3])
    for pair, grade in zip(pairs, (2, 0, 3)):
        LeaseFactory(pair=pair, annotator=expert)  # the queue gave it to them
        label_submit(project=project, annotator=expert, pair_id=pair.id, grade=grade)
    relevant = [pairs[2].passage, pairs[0].passage]  # newest label first

    # 3. The admin asks for a refined draft on the definition page; the worker writes it; the page polls.
    page, errors = log_in(browser, live_server, "ada")
    url = f"{live_server.url}/projects/{project.slug}/queries/{first.id}/definition/"
    page.goto(url)
    assert page.locator("[data-current-version]").get_attribute("data-current-version") == "1"
    page.select_option("select[name=judge]", label=judge.name)
    page.check("input[name=refine]")
    asked = len(server.bodies)
    page.click("form.draft-form button[type=submit]")
    page.wait_for_selector("text=Asked drafter for a refined draft.")
    refine = DefinitionDraft.objects.get(query=first, refine=True)
    wait_for(lambda: DefinitionDraft.objects.get(id=refine.id).finished_at is not None, "no worker drafted")
    # Pending when the page was drawn (it polls every 3 s), or already done: either way it ends done.
    page.wait_for_selector(f"[data-draft-request='{refine.id}'][data-state=done]", timeout=15_000)
    page.wait_for_selector("#version-3.version-draft")  # the history comes with the poll that saw it done

    # The model saw the imported (current) definition, not the unreviewed draft, and the two relevant passages.
    (sent,) = server.bodies[asked:]
    request = sent["messages"][-1]["content"]
    assert f"<definition>\n{imported[first.id].text.strip()}\n</definition>" in request
    assert [text for _, text in PASSAGE.findall(request)] == [p.text.strip()[:1500].rstrip() + (
        " [...]" if len(p.text.strip()) > 1500 else "") for p in relevant]
    assert pairs[1].passage.text.strip()[:200] not in request
    refined = RelevanceDefinition.objects.get(query=first, version=3)
    assert (refined.is_draft, refined.origin, refined.drafted_by) == (True, "llm_refined", judge)
    assert refined.text.count("What relevant passage") == 2
    assert current_definition(query=first) == imported[first.id]

    # The history marks both drafts as not current, and diffs the refined one against version 1 (in use).
    entry = page.locator("#version-3")
    assert "LLM draft — not current" in entry.inner_text()
    assert "against version 1" in entry.locator(".diff-stat").inner_text()
    assert entry.locator(".diff ins").count() > 0 and entry.locator(".diff del").count() > 0
    assert page.locator("#version-2 [data-draft]").count() == 1 and page.locator("[data-current]").count() == 1
    assert page.locator("#version-1 [data-current]").count() == 1
    assert "Versions 2, 3 are LLM drafts waiting for review" in page.locator("[data-unreviewed]").inner_text()

    # 4. The admin reviews the refined draft, edits it and saves: now, and only now, a new version is current.
    entry.locator("text=Review and make current").click()
    page.wait_for_selector("[data-reviewing='3']")
    textarea = page.locator("textarea[name=text]")
    assert textarea.input_value() == refined.text
    textarea.fill(refined.text + "\n4. Reviewed by an analyst")
    page.click("button:has-text('Save as the current definition')")
    page.wait_for_selector("[data-current-version='4']")
    assert "Saved version 4 from LLM draft version 3" in page.content()
    assert errors == []
    page.close()

    saved = current_definition(query=first)
    assert (saved.version, saved.is_draft, saved.origin, saved.based_on, saved.drafted_by, saved.author) == (
        4, False, "llm_refined", refined, judge, admin)
    assert saved.text == refined.text + "\n4. Reviewed by an analyst"
    for query in queries[1:]:
        assert current_definition(query=query) == imported[query.id]
    assert Label.objects.filter(annotator=expert).count() == 3

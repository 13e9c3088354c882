"""DisastIR's query generation (3.4) end to end against a local OpenAI-compatible server (tests/models_llm/
fake_openai.py): the job asks the judge's endpoint twice per passage and intent, stores the queries as a new query
set with their generated positives and seed passages in the pool, links the twin a human wrote from the same passage
for the same intent, keeps an answer it cannot read as a problem (no query made up from it), and its dry run
estimates the calls and the cost without asking anything. The command, the API and the page's form run it too."""
from __future__ import annotations

import json
import random
import re
from dataclasses import replace
from io import StringIO

import pytest
from celery.contrib.testing.worker import start_worker
from celery.signals import task_postrun
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from annotator.celery import app
from labeling.exceptions import Conflict
from labeling.models import Membership, Pair, PairSource, Passage, Query, QueryGenerationJob
from labeling.selectors.query_sets import query_sets
from labeling.services.judges import judge_create
from labeling.services.query_generation import (
    query_generation_create,
    query_generation_estimate,
    query_generation_fail,
    query_generation_plan,
    query_generation_run,
)
from labeling.tasks import query_generation_task
from models_llm.cost import approximate_token_count
from models_llm.query_generation import estimate_messages, preset
from models_llm.types import Generation
from tests.endpoints import declare_endpoint
from tests.factories import (
    JudgeFactory,
    MembershipFactory,
    PassageFactory,
    ProjectFactory,
    QueryFactory,
    UserFactory,
)
from tests.models_llm.fake_openai import FakeOpenAI, Reply, completion
from tests.polling import wait_for

pytestmark = pytest.mark.django_db

PASSAGES = {
    "p1": ("Flood gauges at the river trigger evacuation when the water passes 4 m.", {"event": "flood"}),
    "p2": ("GARBLED: the relief fund pays households within ten days of the storm.", {"event": "storm"}),
    "p3": ("Cholera vaccination began in the camps a week after the earthquake.", {"event": "flood"}),
}


def stub(body: dict) -> Reply:
    """Answer as an LLM following the prompts would, from what it is sent: a list of needs for a brainstorm, a
    claim and its document for the FC query stage, a question for QAdoc. A passage marked GARBLED gets prose for
    its FC query, which is not the JSON asked for."""
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    passage = user.removeprefix("Paragraph: ")
    if system.startswith("Brainstorm"):
        return Reply(body=completion(json.dumps([f"need about {passage.split()[0]}", "a second need"]), 40, 12))
    if "fact-checking" in system:
        if passage.startswith("GARBLED"):
            return Reply(body=completion("I think the claim would be that funds arrive quickly.", 50, 11))
        task = re.search(r"fact-checking retrieval task: (.*?)\. Your mission", system).group(1)
        answer = {"claim": f"Claim from {passage.split()[0]} ({task})", "positive_document": f"Evidence: {passage}"}
        return Reply(body=completion(json.dumps(answer), 60, 30))
    return Reply(body=completion(json.dumps({"user_query": f"What does {passage.split()[0]} say?"}), 55, 8))


@pytest.fixture
def server():
    with FakeOpenAI(default=stub) as fake:
        yield fake


@pytest.fixture
def project(server):
    project = ProjectFactory(slug="gen")
    for ext, (text, metadata) in PASSAGES.items():
        PassageFactory(project=project, external_id=ext, text=text, metadata=metadata)
    # An expert wrote an FC query from p1 (LVHQ, App. F): the generated one from p1 becomes its twin.
    QueryFactory(project=project, external_id="h1", text="Do gauges trigger evacuations?",
                 metadata={"query_set": "human", "intent": "FC", "seed_passage": "p1"})
    judge_create(project=project, name="writer", backend="openai", model="stub", method="ask",
                 endpoint=declare_endpoint(server.base_url), price_in=0.15, price_out=0.6)
    return project


def test_the_job_stores_a_new_set_with_generated_positives_and_keeps_a_parse_error(project, server):
    judge = project.judges.get(name="writer")
    plan = query_generation_plan(project=project, judge=judge, query_set="llm", intents=["FC", "QAdoc"],
                                 passages=["p1", "p2"])
    job = query_generation_create(project=project, plan=plan, user=None)
    job = query_generation_run(job_id=job.id)

    assert (job.status, job.total, job.done, job.created) == ("done", 4, 4, 3)
    # Two calls per unit: p1 FC, p1 QAdoc, p2 FC (its query stage answered prose), p2 QAdoc.
    assert job.calls == 8 and len(server.bodies) == 8
    assert (job.prompt_tokens, job.completion_tokens) == (40 + 60 + 40 + 55 + 40 + 50 + 40 + 55,
                                                          12 + 30 + 12 + 8 + 12 + 11 + 12 + 8)
    [problem] = job.problems
    assert (problem["passage"], problem["intent"], problem["stage"]) == ("p2", "FC", "query")
    assert "no JSON object" in problem["error"] and problem["raw"].startswith("I think the claim")

    queries = {q.external_id: q for q in Query.objects.filter(project=project, metadata__query_set="llm")}
    assert set(queries) == {"llm-1", "llm-2", "llm-4"}  # the unit that failed (p2 FC, 3rd) wrote nothing
    fc = queries["llm-1"]
    need = fc.metadata["information_need"]
    assert need in ("need about Flood", "a second need") and fc.text == f"Claim from Flood ({need})"
    assert (fc.metadata["intent"], fc.metadata["seed_passage"], fc.metadata["twin"]) == ("FC", "p1", "h1")
    # The query stage was sent the need and the placeholder values it drew, as Table 7's prompt asks.
    choices = fc.metadata["generated_by"]["choices"]
    sent = server.bodies[1]["messages"][0]["content"]
    assert f"task: {need}. " in sent and f"The claim should be {choices['query_length']}, {choices['clarity']}." in sent
    # FC's generated positive is a new passage, in the pool with the seed passage; no grade is made up for it.
    positive = Passage.objects.get(project=project, metadata__generated_for="llm-1")
    assert positive.text == "Evidence: " + PASSAGES["p1"][0] and positive.metadata["generated"] is True
    # Its id names neither the query nor what it is: an expert labels the pair blind (test_blind_first).
    assert "llm" not in positive.external_id and "positive" not in positive.external_id
    pairs = {pair.passage.external_id: pair for pair in Pair.objects.filter(query=fc).select_related("passage")}
    assert set(pairs) == {"p1", positive.external_id}
    assert PairSource.objects.get(pair=pairs[positive.external_id]).system == "generated-positive"
    assert PairSource.objects.get(pair=pairs["p1"]).system == "seed-passage"
    assert pairs[positive.external_id].reference_grade is None
    # QAdoc's positive is the seed document itself.
    qadoc = Pair.objects.get(query=queries["llm-4"])
    assert qadoc.passage.external_id == "p2" and queries["llm-4"].text == "What does GARBLED: say?"
    assert PairSource.objects.get(pair=qadoc).system == "generated-positive"

    sets = query_sets(project)
    assert sets.sets["llm"] == ("llm-1", "llm-2", "llm-4") and sets.twins["h1"] == {"llm-1"}

    # A finished job asks nothing again; the set exists now, so a second generation into it is refused.
    assert query_generation_run(job_id=job.id).calls == 8 and len(server.bodies) == 8
    with pytest.raises(Conflict, match="query set 'llm' exists already"):
        query_generation_plan(project=project, judge=judge, query_set="llm", passages=["p3"])


def test_a_retried_job_goes_on_from_the_unit_it_stopped_at(project, server):
    judge = project.judges.get(name="writer")
    plan = query_generation_plan(project=project, judge=judge, query_set="llm", intents=["QAdoc"],
                                 passages=["p1", "p3"])
    job = query_generation_create(project=project, plan=plan, user=None)
    calls = []

    def flaky(messages, max_new_tokens):
        calls.append(messages)
        if len(calls) == 3:
            raise ConnectionError("the server went away")
        return Generation(text=stub({"messages": messages}).body["choices"][0]["message"]["content"])

    with pytest.raises(ConnectionError):
        query_generation_run(job_id=job.id, generate=flaky)
    assert QueryGenerationJob.objects.get(id=job.id).done == 1
    job = query_generation_run(job_id=job.id, generate=flaky)
    assert (job.status, job.done, job.created) == ("done", 2, 2)
    assert Query.objects.filter(project=project, metadata__query_set="llm").count() == 2


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_task_delivered_again_while_its_job_runs_asks_the_model_once(project, server, private_broker):
    """Redis delivers a task again when it runs past the visibility timeout, and a generation can run for hours: the
    second delivery finds the job held by a live worker and leaves it be, so no paid call is made twice."""
    server.default = lambda body: replace(stub(body), delay=0.3)  # a slow model: the job runs for about 2 s
    admin = UserFactory()
    MembershipFactory(project=project, user=admin, role=Membership.Role.ADMIN)
    api = APIClient()
    api.force_authenticate(admin)
    ended: list[str] = []

    def count_end(sender, task_id, **_):
        if sender.name == query_generation_task.name:
            ended.append(task_id)

    task_postrun.connect(count_end, weak=False)
    try:
        with start_worker(app, pool="threads", concurrency=2, perform_ping_check=False, shutdown_timeout=30):
            started = api.post(reverse("api:query-generation-list", args=[project.slug]),
                               {"judge": "writer", "query_set": "llm", "intents": ["QAdoc"],
                                "passages": ["p1", "p2", "p3"]}, format="json")
            assert started.status_code == 202
            job_id = started.json()["id"]
            wait_for(lambda: server.bodies, "the first delivery asked nothing", seconds=30, every=0.05)
            query_generation_task.apply_async((job_id,))  # the same task delivered again while it runs
            wait_for(lambda: len(ended) == 2, "the two deliveries did not both end", seconds=60, every=0.05)
    finally:
        task_postrun.disconnect(count_end)
    found = api.get(reverse("api:query-generation-detail", args=[project.slug, job_id])).json()
    # Three QAdoc units of two calls each, once: a brainstorm (40 + 12 tokens) and a query (55 + 8 tokens).
    assert (found["status"], found["done"], found["created"]) == ("done", 3, 3)
    assert len(server.bodies) == found["calls"] == 6
    assert (found["prompt_tokens"], found["completion_tokens"]) == (3 * (40 + 55), 3 * (12 + 8))
    assert found["cost_usd"] == pytest.approx((285 * 0.15 + 60 * 0.6) / 1_000_000)
    assert QueryGenerationJob.objects.get(id=job_id).attempts == 1


def test_the_dry_run_estimates_and_asks_nothing(project, server):
    judge = project.judges.get(name="writer")
    plan = query_generation_plan(project=project, judge=judge, query_set="llm", intents=["FC"], where=("event",
                                                                                                     "flood"))
    assert plan.passages == ("p1", "p3")
    estimate = query_generation_estimate(project=project, plan=plan)
    prompts = preset("FC")
    expected_prompt, expected_completion = 0, 0
    for ext in plan.passages:
        need, query, completion_tokens = estimate_messages(prompts, PASSAGES[ext][0])
        expected_prompt += approximate_token_count(need) + approximate_token_count(query)
        expected_completion += completion_tokens
    assert (estimate.units, estimate.tokens.calls) == (2, 4)
    assert (estimate.tokens.prompt_tokens, estimate.tokens.completion_tokens) == (expected_prompt, expected_completion)
    assert estimate.cost_usd == pytest.approx((expected_prompt * 0.15 + expected_completion * 0.6) / 1e6)
    out = StringIO()
    call_command("generate_queries", project="gen", judge="writer", query_set="llm", intent=["FC"],
                 where="event=flood", dry_run=True, stdout=out)
    assert "2 passage x intent units: 4 calls" in out.getvalue() and "Dry run: nothing was asked." in out.getvalue()
    assert server.bodies == [] and not QueryGenerationJob.objects.exists()


def test_the_command_runs_it_and_refuses_what_it_cannot_do(project, server):
    out = StringIO()
    call_command("generate_queries", project="gen", judge="writer", query_set="llm", intent=["FC"], sample=2, seed=1,
                 stdout=out)
    text = out.getvalue()
    assert "2 passages drawn at random (seed 1)" in text and "Query set 'llm': " in text
    drawn = random.Random(1).sample(list(PASSAGES), 2)  # the passages in id order, drawn as the plan draws them
    assert QueryGenerationJob.objects.get().parameters["passages"] == drawn
    with pytest.raises(CommandError, match="choose the passages one way"):
        call_command("generate_queries", project="gen", judge="writer", query_set="x", sample=1, where="event=flood")
    with pytest.raises(CommandError, match="no passage 'p9'"):
        call_command("generate_queries", project="gen", judge="writer", query_set="x", passage=["p9"])
    with pytest.raises(CommandError, match="positive_grade"):
        call_command("generate_queries", project="gen", judge="writer", query_set="x", sample=1, positive_grade=7)


def test_the_api_estimates_then_starts_a_job(project, server, django_capture_on_commit_callbacks):
    admin = UserFactory()
    MembershipFactory(project=project, user=admin, role=Membership.Role.ADMIN)
    api = APIClient()
    api.force_authenticate(admin)
    url = reverse("api:query-generation-list", args=[project.slug])
    body = {"judge": "writer", "query_set": "llm", "intents": ["FC"], "passages": ["p1"], "dry_run": True}
    estimate = api.post(url, body, format="json")
    assert estimate.status_code == 200 and estimate.json()["units"] == 1 and estimate.json()["calls"] == 2
    assert not QueryGenerationJob.objects.exists()
    flood = {**body, "passages": None, "where": "event=flood"}
    del flood["passages"]
    assert api.post(url, flood, format="json").json()["units"] == 2  # p1 and p3
    assert api.post(url, {**flood, "where": "event"}, format="json").status_code == 400
    with django_capture_on_commit_callbacks(execute=False) as queued:
        started = api.post(url, {**body, "dry_run": False}, format="json")
    assert started.status_code == 202 and len(queued) == 1
    job = QueryGenerationJob.objects.get()
    query_generation_run(job_id=job.id)
    found = api.get(reverse("api:query-generation-detail", args=[project.slug, job.id])).json()
    assert (found["status"], found["created"], found["problems"]) == ("done", 1, [])
    assert api.get(url).json()[0]["id"] == job.id
    refused = api.post(url, {**body, "intents": ["Web"]}, format="json")
    assert refused.status_code == 400


def test_the_systems_page_estimates_starts_and_lists_a_generation(project, server, client,
                                                                   django_capture_on_commit_callbacks):
    admin = UserFactory()
    MembershipFactory(project=project, user=admin, role=Membership.Role.ADMIN)
    client.force_login(admin)
    url = reverse("labeling:query_generation_start", args=[project.slug])
    form = {"judge": "writer", "query_set": "llm", "intents": ["FC", "QA"], "sample": "", "seed": "0",
            "where": "event=flood", "prompts": "", "positive_grade": ""}
    html = client.post(url, {**form, "estimate": "1"}).content.decode()
    assert "data-generation-estimate" in html and "<strong>4</strong> passage x intent units" in html
    assert server.bodies == [] and not QueryGenerationJob.objects.exists()
    refused = client.post(url, {**form, "where": ""})
    assert refused.status_code == 400 and "give a sample size or a metadata value" in refused.content.decode()
    with django_capture_on_commit_callbacks(execute=False) as queued:
        started = client.post(url, {**form, "intents": ["FC"], "where": "", "sample": "2"})
    assert started.status_code == 302 and len(queued) == 1
    job = QueryGenerationJob.objects.get()
    assert job.parameters["passages"] == random.Random(0).sample(list(PASSAGES), 2)
    query_generation_run(job_id=job.id)
    viewer = UserFactory()
    MembershipFactory(project=project, user=viewer, role=Membership.Role.VIEWER)
    client.force_login(viewer)
    page = client.get(reverse("labeling:systems", args=[project.slug])).content.decode()
    row = page[page.index(f'data-generation="{job.id}"'):]
    row = row[:row.index("</tr>")]
    job.refresh_from_db()
    assert f"{job.done} / {job.total}" in row and f'<td class="num">{job.created}</td>' in row
    assert "data-generation-form" not in page  # the form is the admins'


def test_a_cancelled_job_stops_before_its_next_unit_and_keeps_what_it_wrote(project, server, client):
    admin = UserFactory()
    MembershipFactory(project=project, user=admin, role=Membership.Role.ADMIN)
    api = APIClient()
    api.force_authenticate(admin)
    judge = project.judges.get(name="writer")
    plan = query_generation_plan(project=project, judge=judge, query_set="llm", intents=["QAdoc"],
                                 passages=["p1", "p3", "p2"])
    job = query_generation_create(project=project, plan=plan, user=None)
    cancel = reverse("api:query-generation-cancel", args=[project.slug, job.id])
    calls = []

    def generate(messages, max_new_tokens):
        calls.append(messages)
        if len(calls) == 2:  # the first unit's query stage: the admin cancels while it is asked
            answered = api.post(cancel)
            assert answered.status_code == 200 and answered.json()["status"] == "cancelled"
        return Generation(text=stub({"messages": messages}).body["choices"][0]["message"]["content"])

    job = query_generation_run(job_id=job.id, generate=generate)
    assert (job.status, job.done, job.created, len(calls)) == ("cancelled", 1, 1, 2)
    assert list(Query.objects.filter(project=project, metadata__query_set="llm").values_list("external_id",
                                                                                              flat=True)) == ["llm-1"]
    # Cancelling again, or running it again, changes nothing.
    assert api.post(cancel).json()["status"] == "cancelled"
    assert query_generation_run(job_id=job.id, generate=generate).done == 1 and len(calls) == 2

    # The page: admins get a Cancel button on an unfinished job only; it cancels a queued job before it asks.
    queued = query_generation_create(project=project, plan=query_generation_plan(
        project=project, judge=judge, query_set="llm2", intents=["QA"], passages=["p3"]), user=None)
    client.force_login(admin)
    page = client.get(reverse("labeling:systems", args=[project.slug])).content.decode()
    rows = {found: page[page.index(f'data-generation="{found}"'):] for found in (job.id, queued.id)}
    rows = {found: row[:row.index("</tr>")] for found, row in rows.items()}
    assert "data-generation-cancel" in rows[queued.id] and "data-generation-cancel" not in rows[job.id]
    response = client.post(reverse("labeling:query_generation_cancel", args=[project.slug, queued.id]))
    assert response.status_code == 302
    assert query_generation_run(job_id=queued.id).status == "cancelled" and server.bodies == []


def test_without_a_judge_that_writes_the_page_says_how_to_add_one(client):
    project = ProjectFactory(slug="bare")
    admin = UserFactory()
    MembershipFactory(project=project, user=admin, role=Membership.Role.ADMIN)
    JudgeFactory(project=project, name="minilm", backend="embedding", parameters={"method": "embedding"})
    client.force_login(admin)
    page = client.get(reverse("labeling:systems", args=[project.slug])).content.decode()
    assert "data-no-generator" in page and "data-generation-form" not in page


def _member(project, role):
    user = UserFactory(username=role)
    MembershipFactory(project=project, user=user, role=role)
    api = APIClient()
    api.force_authenticate(user)
    return user, api


def test_an_expert_cannot_tell_which_generated_pair_holds_a_reference_grade(project, server, client):
    judge = project.judges.get(name="writer")
    plan = query_generation_plan(project=project, judge=judge, query_set="llm", intents=["FC", "QAdoc"],
                                 passages=["p1"], positive_grade=2)
    job = query_generation_run(job_id=query_generation_create(project=project, plan=plan, user=None).id)
    fc, qadoc = Query.objects.filter(project=project, metadata__query_set="llm").order_by("id")
    urls = {"pairs": reverse("api:pair-list", args=[project.slug]),
            "queries": reverse("api:query-list", args=[project.slug]),
            "passages": reverse("api:passage-list", args=[project.slug]),
            "job": reverse("api:query-generation-detail", args=[project.slug, job.id])}
    pages = [reverse("labeling:browse_query", args=[project.slug, query.id]) for query in (fc, qadoc)] + [
        reverse("labeling:browse_pair", args=[project.slug, pair.id]) for pair in Pair.objects.filter(
            query__in=(fc, qadoc))]

    expert, api = _member(project, Membership.Role.EXPERT)
    answers = {name: api.get(url).json() for name, url in urls.items()}
    generated = [pair for pair in answers["pairs"]["results"] if pair["query"] in ("llm-1", "llm-2")]
    assert len(generated) == 3 and {(pair["reference_grade"], pair["reference_source"]) for pair in generated} == {
        (None, "")}
    assert [pair["sources"] for pair in generated] == [[], [], []]
    assert all("seed_passage" not in query["metadata"] for query in answers["queries"]["results"])
    [positive] = Passage.objects.filter(project=project, metadata__generated=True)
    shown = next(p for p in answers["passages"]["results"] if p["external_id"] == positive.external_id)
    assert shown["metadata"] == {}
    assert set(answers["job"]["parameters"]) == {"intents", "prompts", "seed", "selection"}
    client.force_login(expert)
    for page in pages:
        html = client.get(page).content.decode()
        assert "generated-positive" not in html and "seed-passage" not in html and "seed_passage" not in html
        # Nor is the expert told a story about the hidden sources: the page says what it says of any pair.
        assert "imported into the pool without one" not in html

    # Admins and viewers see where each pair came from and the grade it was given.
    for role in (Membership.Role.VIEWER, Membership.Role.ADMIN):
        user, api = _member(project, role)
        pairs = api.get(urls["pairs"], {"query": "llm-1"}).json()["results"]
        assert {(pair["reference_grade"], pair["sources"][0]["system"]) for pair in pairs} == {
            (2, "generated-positive"), (None, "seed-passage")}
        assert api.get(urls["job"]).json()["parameters"]["positive_grade"] == 2
        client.force_login(user)
        assert "generated-positive" in client.get(pages[0]).content.decode()


def test_the_remote_models_answers_and_a_failures_text_are_for_project_admins(project, server, client):
    judge = project.judges.get(name="writer")
    plan = query_generation_plan(project=project, judge=judge, query_set="llm", intents=["FC"], passages=["p2"])
    job = query_generation_run(job_id=query_generation_create(project=project, plan=plan, user=None).id)
    assert job.problems[0]["raw"].startswith("I think the claim")
    failed = query_generation_create(project=project, plan=query_generation_plan(
        project=project, judge=judge, query_set="llm2", intents=["FC"], passages=["p1"]), user=None)
    query_generation_fail(job_id=failed.id, error="HTTP 502 from the endpoint: upstream /srv/models/writer down")
    urls = [reverse("api:query-generation-list", args=[project.slug])] + [
        reverse("api:query-generation-detail", args=[project.slug, found.id]) for found in (job, failed)]
    systems = reverse("labeling:systems", args=[project.slug])

    for role in (Membership.Role.EXPERT, Membership.Role.VIEWER):
        user, api = _member(project, role)
        text = "".join(api.get(url).content.decode() for url in urls)
        client.force_login(user)
        text += client.get(systems).content.decode()
        assert "I think the claim" not in text and "/srv/models" not in text
        detail = api.get(urls[2]).json()
        assert detail["error"] == "the query generation failed (a project admin sees the reason)"
        # What was wrong with the answer is the app's own words: every member sees it.
        assert api.get(urls[1]).json()["problems"][0]["error"] == "no JSON object in the answer"

    admin, api = _member(project, Membership.Role.ADMIN)
    assert api.get(urls[1]).json()["problems"][0]["raw"].startswith("I think the claim")
    assert "/srv/models/writer" in api.get(urls[2]).json()["error"]
    client.force_login(admin)
    assert "/srv/models/writer" in client.get(systems).content.decode()

"""Blind first: an expert who requests every page and endpoint of the app (full pages, htmx fragments, the API)
never sees a reference grade, another expert's label or a judge's P of an item they have not labelled, nor what
tells them: the sources and metadata that mark a generated positive (which query generation may grade), the queue
that served an item. Once they have labelled it, they see the judge's P only where the project reveals it. Admins
and viewers see all of it."""
from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from labeling.models import Judgment, Label, Lease, Pair, QueryGenerationJob
from labeling.services.query_generation import query_generation_run
from models_llm.types import Generation
from tests.factories import JudgmentFactory, PassageFactory
from tests.url_matrix import ADMIN, EXPERT, VIEWER, all_routes, build_world

pytestmark = pytest.mark.django_db

REFERENCE_SOURCE = "qrels/blind-marker.tsv"
OTHERS_NOTE = "note-of-another-expert"
# The judge's P of the world's three pairs: the expert labelled the first, two other experts the second.
P_VALUES = (0.9137, 0.4262, 0.1391)


def _p_patterns(p: float) -> list[re.Pattern]:
    # A P as the API writes it and as the pages round it, not glued to a longer number ("10.91" is not 0.91).
    return [re.compile(rf"(?<![\d.]){re.escape(text)}") for text in {repr(p), f"{p:.3f}", f"{p:.2f}"}]


def _shows_p(text: str, p: float) -> bool:
    return any(pattern.search(text) for pattern in _p_patterns(p))


# The marks of a generated positive as the API and the pages write them: its pool sources, the metadata keys of the
# query (its seed passage) and of the generated passage, the old "-positive" passage ids.
GENERATION_MARKS = ("generated-positive", "seed-passage", "-positive", "seed_passage", "generated_for")
# The job's grade for its positives (the API schema names the field: its value tells), and a metadata key
# `generated`, as JSON ("generated": true) and as the browse page lists it (generated</span>: True).
POSITIVE_GRADE = re.compile(r"""positive_grade["']?\s*:\s*\d""")
GENERATED_KEY = re.compile(r"""\bgenerated(?:["']|</span>)\s*:""")
# The judge's P of the generated pairs: the FC positive, its seed passage, the QAdoc positive.
GENERATED_P = (0.5417, 0.3583, 0.6283)
# The queue that served the claimed item, as the API and the workspace would say it.
SERVED_BY = re.compile(r"""["']queue["']:\s*["']uncertain|<em>uncertain</em>"""
                       r"""|["']validation_sample["']:\s*(?:true|false)""")


def _writer(messages, max_new_tokens):
    """An LLM following the generation prompts: needs, then an FC claim with its document, or a QAdoc question."""
    system = messages[0]["content"]
    if system.startswith("Brainstorm"):
        return Generation(text=json.dumps(["how high the river may rise"]))
    if "fact-checking" in system:
        return Generation(text=json.dumps({"claim": "Gauges trigger evacuations at 4 m.",
                                           "positive_document": "The evacuation starts when the gauge reads 4 m."}))
    return Generation(text=json.dumps({"user_query": "When does the evacuation start?"}))


@pytest.fixture
def world():
    world = build_world(with_report=False)
    pairs = list(world.project.pairs.order_by("id"))
    Pair.objects.filter(project=world.project).update(reference_grade=2, reference_source=REFERENCE_SOURCE)
    for pair, p in zip(pairs, P_VALUES):
        Judgment.objects.filter(pair=pair).update(p_relevant=p)
    Label.objects.filter(pair__project=world.project).exclude(annotator=world.users[EXPERT]).update(note=OTHERS_NOTE)
    world.project.queue_judge = world.judge
    # Graded pairs served again (re-annotation, as DIRAS App. M): the expert's workspace holds items whose reference
    # grade must stay hidden (without it the queues serve only pairs without gold, and these are all graded).
    world.project.queue_graded = True
    world.project.save(update_fields=["queue_judge", "queue_graded"])
    return world


@pytest.fixture
def generated(world):
    """An LLM query generation that graded its positives 2 (FC: a new passage beside its seed; QAdoc: the seed
    itself), the judge's P of the pairs it wrote, and the FC positive claimed by the expert from the uncertain
    queue. Returns the URL arguments that show what it wrote: each query with its positive, and the job."""
    seed = PassageFactory(project=world.project, external_id="d-flood", text="Gauges on the river read 4 m.")
    job = QueryGenerationJob.objects.create(
        project=world.project, judge=world.judge, query_set="llm", total=2,
        parameters={"intents": ["FC", "QAdoc"], "prompts": {}, "passages": [seed.external_id], "seed": 0,
                    "positive_grade": 2, "selection": "1 named passages"})
    assert query_generation_run(job_id=job.id, generate=_writer).created == 2
    fc, qadoc = world.project.queries.filter(metadata__query_set="llm").order_by("id")
    fc_positive = fc.pairs.exclude(passage=seed).get()
    for pair, p in zip((fc_positive, fc.pairs.get(passage=seed), qadoc.pairs.get()), GENERATED_P):
        JudgmentFactory(pair=pair, judge=world.judge, p_relevant=p)
    now = timezone.now()
    Lease.objects.create(pair=fc_positive, annotator=world.users[EXPERT], queue="uncertain", claimed_at=now,
                         expires_at=now + timedelta(hours=1))
    return [{"query_id": query.id, "query_external_id": query.external_id, "pair_id": pair.id,
             "generation_id": job.id} for query, pair in ((fc, fc_positive), (qadoc, qadoc.pairs.get()))]


def _text(response) -> str:
    # A training set's JSONL export and the qrels stream their lines.
    return b"".join(response.streaming_content if response.streaming else [response.content]).decode()


def _everything_a_member_can_get(client, world, others: list[dict] = ()) -> list[tuple[str, str]]:
    """(what, body) of a GET of every route of the app and the API, full page and htmx fragment; the routes that
    name a query, pair or job again with each of `others` (URL arguments)."""
    urls = []
    for route in all_routes():
        kwargs = world.kwargs(route)
        urls.append((route, world.url(route)))
        for other in others:
            if set(kwargs) & set(other):
                urls.append((route, reverse(route.name, kwargs={name: other.get(name, value)
                                                                for name, value in kwargs.items()})))
    seen = []
    for route, url in urls:
        seen.append((url, _text(client.get(url))))
        if not route.is_api:
            seen.append((f"{url} (htmx)", _text(client.get(url, headers={"HX-Request": "true"}))))
    by_definition = reverse("labeling:validation", args=[world.project.slug])
    response = client.get(by_definition, headers={"HX-Request": "true", "HX-Target": "by-definition"})
    seen.append((f"{by_definition} (by-definition)", response.content.decode()))
    return seen


def _leaks(seen: list[tuple[str, str]], p_values: tuple[float, ...]) -> list[str]:
    found = []
    for what, body in seen:
        if REFERENCE_SOURCE in body:
            found.append(f"{what}: a reference grade's source")
        if OTHERS_NOTE in body:
            found.append(f"{what}: another expert's note")
        found += [f"{what}: judge P {p}" for p in p_values if _shows_p(body, p)]
        found += [f"{what}: {mark!r}, a mark of a generated positive" for mark in GENERATION_MARKS if mark in body]
        if POSITIVE_GRADE.search(body):
            found.append(f"{what}: the grade of the generated positives")
        if GENERATED_KEY.search(body):
            found.append(f"{what}: the metadata key 'generated'")
        if SERVED_BY.search(body):
            found.append(f"{what}: the queue that served an item")
    return found


def test_an_expert_sees_no_reference_grade_other_label_or_judge_p_anywhere(client, world, generated):
    client.force_login(world.users[EXPERT])
    assert _leaks(_everything_a_member_can_get(client, world, generated), P_VALUES + GENERATED_P) == []

    api = APIClient()
    api.force_authenticate(world.users[EXPERT])
    pairs = api.get(reverse("api:pair-list", args=[world.project.slug])).json()["results"]
    assert len(pairs) == 3 + 3
    assert {(pair["reference_grade"], pair["reference_source"]) for pair in pairs} == {(None, "")}
    labels = api.get(reverse("api:label-list", args=[world.project.slug])).json()["results"]
    assert {label["annotator"] for label in labels} == {EXPERT}
    for name in ("api:validation", "api:judge-metrics-by-definition"):
        route = next(route for route in all_routes() if route.name == name)
        assert api.get(world.url(route)).status_code == 403


def test_after_labelling_an_expert_sees_the_judges_p_of_that_item_only_where_the_project_reveals_it(client, world):
    client.force_login(world.users[EXPERT])
    workspace = reverse("labeling:workspace", args=[world.project.slug])
    submit = reverse("labeling:workspace_submit", args=[world.project.slug])
    html = client.get(workspace, headers={"HX-Request": "true"}).content.decode()
    fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', html))
    labelled = Pair.objects.get(id=fields["pair_id"])
    pairs = list(world.project.pairs.order_by("id"))
    p_labelled = P_VALUES[pairs.index(labelled)]
    # The P of the items the expert has not labelled (the world's expert labelled its first pair before).
    others = tuple(p for pair, p in zip(pairs, P_VALUES)
                   if pair != labelled and not pair.labels.filter(annotator=world.users[EXPERT]).exists())

    blind = client.post(submit, {**fields, "grade": "1"}, headers={"HX-Request": "true"}).content.decode()
    assert _leaks([("submit", blind)], P_VALUES) == []

    world.project.reveal_llm_after_submit = True
    world.project.save(update_fields=["reveal_llm_after_submit"])
    again = client.post(submit, {**fields, "grade": "2", "client_key": "again"}, headers={"HX-Request": "true"})
    assert _shows_p(again.content.decode(), p_labelled)
    assert _leaks([("submit", again.content.decode())], others) == []
    # Revealing the judge's P after submitting reveals nothing else, and nothing on other pages.
    assert _leaks(_everything_a_member_can_get(client, world), others) == []
    assert _leaks(_everything_a_member_can_get(client, world), ()) == []


@pytest.mark.parametrize("role", [VIEWER, ADMIN])
def test_viewers_and_admins_still_see_reference_grades_labels_and_p(client, world, generated, role):
    client.force_login(world.users[role])
    text = "\n".join(body for _, body in _everything_a_member_can_get(client, world, generated))
    assert REFERENCE_SOURCE in text and OTHERS_NOTE in text
    assert all(_shows_p(text, p) for p in P_VALUES + GENERATED_P)
    assert all(mark in text for mark in ("generated-positive", "seed-passage", "seed_passage", "generated_for"))
    assert POSITIVE_GRADE.search(text) and GENERATED_KEY.search(text)

    api = APIClient()
    api.force_authenticate(world.users[role])
    pairs = api.get(reverse("api:pair-list", args=[world.project.slug])).json()["results"]
    assert {(pair["reference_grade"], pair["reference_source"]) for pair in pairs} == {
        (2, REFERENCE_SOURCE), (2, "generated-positive"), (None, "")}
    labels = api.get(reverse("api:label-list", args=[world.project.slug])).json()["results"]
    assert {label["annotator"] for label in labels} == {EXPERT, "alice", "bob"}
    assert api.get(reverse("api:validation", args=[world.project.slug])).status_code == 200

"""Blind first: an expert who requests every page and endpoint of the app (full pages, htmx fragments, the API)
never sees a reference grade, another expert's label or a judge's P of an item they have not labelled; once they
have labelled it, they see the judge's P only where the project reveals it. Admins and viewers see all three."""
from __future__ import annotations

import re

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from labeling.models import Judgment, Label, Pair
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


@pytest.fixture
def world():
    world = build_world(with_report=False)
    pairs = list(world.project.pairs.order_by("id"))
    Pair.objects.filter(project=world.project).update(reference_grade=2, reference_source=REFERENCE_SOURCE)
    for pair, p in zip(pairs, P_VALUES):
        Judgment.objects.filter(pair=pair).update(p_relevant=p)
    Label.objects.filter(pair__project=world.project).exclude(annotator=world.users[EXPERT]).update(note=OTHERS_NOTE)
    world.project.queue_judge = world.judge
    world.project.save(update_fields=["queue_judge"])
    return world


def _text(response) -> str:
    # A training set's JSONL export and the qrels stream their lines.
    return b"".join(response.streaming_content if response.streaming else [response.content]).decode()


def _everything_a_member_can_get(client, world) -> list[tuple[str, str]]:
    """(what, body) of a GET of every route of the app and the API, full page and htmx fragment."""
    seen = []
    for route in all_routes():
        url = world.url(route)
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
    return found


def test_an_expert_sees_no_reference_grade_other_label_or_judge_p_anywhere(client, world):
    client.force_login(world.users[EXPERT])
    assert _leaks(_everything_a_member_can_get(client, world), P_VALUES) == []

    api = APIClient()
    api.force_authenticate(world.users[EXPERT])
    pairs = api.get(reverse("api:pair-list", args=[world.project.slug])).json()["results"]
    assert len(pairs) == 3
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
def test_viewers_and_admins_still_see_reference_grades_labels_and_p(client, world, role):
    client.force_login(world.users[role])
    text = "\n".join(body for _, body in _everything_a_member_can_get(client, world))
    assert REFERENCE_SOURCE in text and OTHERS_NOTE in text
    assert all(_shows_p(text, p) for p in P_VALUES)

    api = APIClient()
    api.force_authenticate(world.users[role])
    pairs = api.get(reverse("api:pair-list", args=[world.project.slug])).json()["results"]
    assert {(pair["reference_grade"], pair["reference_source"]) for pair in pairs} == {(2, REFERENCE_SOURCE)}
    labels = api.get(reverse("api:label-list", args=[world.project.slug])).json()["results"]
    assert {label["annotator"] for label in labels} == {EXPERT, "alice", "bob"}
    assert api.get(reverse("api:validation", args=[world.project.slug])).status_code == 200

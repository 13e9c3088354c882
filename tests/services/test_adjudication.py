"""adjudication_set: the gold label it stores, what it supersedes, and the requests it refuses untouched."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from labeling.gold import LabelView, gold_grade
from labeling.models import Label, ValidationResult
from labeling.services import validation
from labeling.services.adjudication import AdjudicationError, adjudication_set
from tests.factories import (
    LabelFactory,
    PairFactory,
    ProjectFactory,
    QueryFactory,
    RelevanceDefinitionFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def pair():
    project = ProjectFactory()
    query = QueryFactory(project=project)
    RelevanceDefinitionFactory(query=query, text="v1")
    RelevanceDefinitionFactory(query=query, text="v2")
    pair = PairFactory(project=project, query=query)
    LabelFactory(pair=pair, annotator=UserFactory(username="alice"), grade=0)
    LabelFactory(pair=pair, annotator=UserFactory(username="bob"), grade=2)
    return pair


def current(pair) -> list[tuple[str, str, int]]:
    rows = Label.objects.filter(pair=pair, superseded_at__isnull=True).order_by("id")
    return [(label.annotator.username, label.role, label.grade) for label in rows]


def gold_of(pair) -> int | None:
    labels = Label.objects.filter(pair=pair, superseded_at__isnull=True)
    return gold_grade(pair.reference_grade, [LabelView(grade=x.grade, role=x.role, label_id=x.id) for x in labels])


def test_the_adjudicator_label_becomes_the_gold_grade_under_the_current_definition(
        pair, monkeypatch, django_capture_on_commit_callbacks):
    sent: list[int] = []
    monkeypatch.setattr(validation.validation_refresh_task, "apply_async", lambda args, **_: sent.append(*args))
    boss = UserFactory(username="boss")
    assert gold_of(pair) is None  # 0 against 2: unresolved
    now = timezone.now()
    with django_capture_on_commit_callbacks(execute=True):
        label = adjudication_set(project=pair.project, adjudicator=boss, pair_id=pair.id, grade=1, note="half", now=now)
    assert (label.role, label.grade, label.note, label.created_at, label.definition.version) == (
        "adjudicator", 1, "half", now, 2
    )
    assert current(pair) == [("alice", "annotator", 0), ("bob", "annotator", 2), ("boss", "adjudicator", 1)]
    assert gold_of(pair) == 1
    # The dashboards are told to recompute the gold set.
    assert sent == [pair.project.id]
    assert ValidationResult.objects.get(project=pair.project).is_stale


def test_re_adjudication_by_anyone_supersedes_the_previous_gold(pair):
    first, second = UserFactory(username="boss"), UserFactory(username="chief")
    earlier = timezone.now() - timedelta(minutes=5)
    old = adjudication_set(project=pair.project, adjudicator=first, pair_id=pair.id, grade=1, now=earlier)
    adjudication_set(project=pair.project, adjudicator=second, pair_id=pair.id, grade=2)
    assert current(pair) == [("alice", "annotator", 0), ("bob", "annotator", 2), ("chief", "adjudicator", 2)]
    old.refresh_from_db()
    assert old.superseded_at is not None and not old.undone
    assert gold_of(pair) == 2
    assert Label.objects.filter(pair=pair).count() == 4  # history kept


def test_an_admin_who_labelled_the_pair_has_their_own_label_superseded(pair):
    alice = UserFactory(username="alice")
    adjudication_set(project=pair.project, adjudicator=alice, pair_id=pair.id, grade=2)
    assert current(pair) == [("bob", "annotator", 2), ("alice", "adjudicator", 2)]


@pytest.mark.parametrize("grade", [3, -1, "1", True, None])
def test_a_grade_off_the_scale_is_refused_and_nothing_changes(pair, grade):
    before = list(Label.objects.order_by("id").values())
    with pytest.raises(AdjudicationError, match=r"not on this project's scale; the grades are \[0, 1, 2\]"):
        adjudication_set(project=pair.project, adjudicator=UserFactory(), pair_id=pair.id, grade=grade)
    assert list(Label.objects.order_by("id").values()) == before


def test_a_pair_of_another_project_is_refused_and_nothing_changes(pair):
    other = PairFactory()
    LabelFactory(pair=other, grade=0)
    adjudication_set(project=pair.project, adjudicator=UserFactory(username="boss"), pair_id=pair.id, grade=1)
    before = list(Label.objects.order_by("id").values())
    with pytest.raises(AdjudicationError, match=f"item {other.id} is not in project"):
        adjudication_set(project=pair.project, adjudicator=UserFactory(username="boss"), pair_id=other.id, grade=1)
    assert list(Label.objects.order_by("id").values()) == before


def test_a_note_past_the_limit_is_refused(pair):
    with pytest.raises(AdjudicationError, match="the limit is 10,000"):
        adjudication_set(project=pair.project, adjudicator=UserFactory(), pair_id=pair.id, grade=1, note="x" * 10_001)
    assert not Label.objects.filter(role=Label.Role.ADJUDICATOR).exists()

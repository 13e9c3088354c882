"""The session summary's grade breakdown: each item the expert labelled in the session counted once, under the
grade of their first label on it in the session; labels from before the session and other experts' not at all."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from labeling.selectors.sessions import GradeCount, session_summary
from tests.factories import LabelFactory, MembershipFactory, PairFactory, ProjectFactory, QueryFactory, UserFactory

pytestmark = pytest.mark.django_db

SCALE = {"grades": [{"value": 0, "name": "off topic", "gain": 0}, {"value": 1, "name": "mentions it", "gain": 0.3},
                    {"value": 2, "name": "answers", "gain": 1}, {"value": 5, "name": "the key passage", "gain": 2}],
         "relevant_from": 2}


def test_the_breakdown_counts_each_session_item_once_under_its_first_grade_in_the_session():
    project = ProjectFactory(scale=SCALE)
    query = QueryFactory(project=project)
    pairs = [PairFactory(project=project, query=query) for _ in range(7)]
    alice, bob = UserFactory(username="alice"), UserFactory(username="bob")
    for user in (alice, bob):
        MembershipFactory(project=project, user=user, role="expert")
    start = timezone.now() - timedelta(hours=1)

    def at(minutes: int):
        return start + timedelta(minutes=minutes)

    # Before the session: pairs[0] (relabelled in it, so counted with its session grade) and pairs[6] (not counted).
    LabelFactory(pair=pairs[0], annotator=alice, grade=5, created_at=at(-30), superseded_at=at(1))
    LabelFactory(pair=pairs[6], annotator=alice, grade=5, created_at=at(-20))
    LabelFactory(pair=pairs[0], annotator=alice, grade=0, created_at=at(1), time_spent_seconds=0.4)
    for pair, grade, minute in zip(pairs[1:4], (2, 2, 5), (2, 3, 4)):
        LabelFactory(pair=pair, annotator=alice, grade=grade, created_at=at(minute), time_spent_seconds=0.2)
    # pairs[4]: labelled 2, undone, labelled 1: the first grade in the session stays.
    LabelFactory(pair=pairs[4], annotator=alice, grade=2, created_at=at(5), superseded_at=at(6), undone=True,
                 time_spent_seconds=0.3)
    LabelFactory(pair=pairs[4], annotator=alice, grade=1, created_at=at(6), time_spent_seconds=9)
    # pairs[5]: labelled 0 then undone and left: still an item of the session.
    LabelFactory(pair=pairs[5], annotator=alice, grade=0, created_at=at(7), superseded_at=at(8), undone=True)
    for pair in pairs:
        LabelFactory(pair=pair, annotator=bob, grade=1, created_at=at(9))

    summary = session_summary(project=project, annotator=alice, role="expert", started_at=start)

    # Session items: pairs[0..5]; first grades in the session 0, 2, 2, 5, 2, 0.
    assert summary.items == 6
    assert summary.by_grade == (GradeCount(0, "off topic", 2), GradeCount(1, "mentions it", 0),
                                GradeCount(2, "answers", 3), GradeCount(5, "the key passage", 1))
    # Times of the first label in the session of each item (pairs[5] has none): 0.4, 0.2, 0.2, 0.2, 0.3.
    assert summary.median_seconds == pytest.approx(0.2)
    assert summary.total_seconds == pytest.approx(1.3)


def test_an_empty_session_has_every_grade_at_zero():
    project = ProjectFactory(scale=SCALE)
    alice = UserFactory()
    summary = session_summary(project=project, annotator=alice, role="expert", started_at=timezone.now())
    assert (summary.items, [g.items for g in summary.by_grade]) == (0, [0, 0, 0, 0])

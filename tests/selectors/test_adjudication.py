"""Which pairs the adjudication page lists, under which tab, in which order and with which details, on
crafted labels; the conflict flag is checked against models_llm's is_uncertain, the rule it implements."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from labeling.models import Judgment, Label
from labeling.selectors.adjudication import adjudication_counts, adjudication_details, adjudication_items
from labeling.services.adjudication import adjudication_set
from models_llm.metrics import is_uncertain
from tests.factories import (
    JudgeFactory,
    JudgmentFactory,
    LabelFactory,
    PairFactory,
    ProjectFactory,
    QueryFactory,
    RelevanceDefinitionFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

FOUR_GRADES = {
    "grades": [
        {"value": 0, "name": "irrelevant", "gain": 0},
        {"value": 1, "name": "related", "gain": 0.3},
        {"value": 2, "name": "partial", "gain": 0.6},
        {"value": 3, "name": "perfect", "gain": 1},
    ],
    "relevant_from": 2,
}


def label(pair, username: str, grade: int, **fields) -> Label:
    return LabelFactory(pair=pair, annotator=UserFactory(username=username), grade=grade, **fields)


@pytest.fixture
def crafted():
    """A 0..3 scale. q1 is created before q2, so its pairs sort first among equals."""
    project = ProjectFactory(scale=FOUR_GRADES)
    q1, q2 = QueryFactory(project=project), QueryFactory(project=project)
    pairs = {name: PairFactory(project=project, query=q2 if name in ("zero_top", "mild_high") else q1)
             for name in ("zero_top", "mild_high", "mild_low", "two_mid", "agree", "single", "superseded",
                          "undone", "adjudicated_only")}
    label(pairs["zero_top"], "alice", 0)
    label(pairs["zero_top"], "bob", 3)
    label(pairs["mild_high"], "alice", 2)
    label(pairs["mild_high"], "bob", 3)
    label(pairs["mild_low"], "alice", 0)
    label(pairs["mild_low"], "bob", 1)
    label(pairs["two_mid"], "alice", 1)
    label(pairs["two_mid"], "bob", 2)
    label(pairs["agree"], "alice", 2)
    label(pairs["agree"], "bob", 2)
    label(pairs["single"], "alice", 3)
    # Alice changed her mind: her superseded 0 must not make a conflict with Bob's 3.
    label(pairs["superseded"], "alice", 0, superseded_at=timezone.now())
    label(pairs["superseded"], "alice", 3)
    label(pairs["superseded"], "bob", 3)
    # Carol withdrew her 0 (undo).
    label(pairs["undone"], "alice", 3)
    label(pairs["undone"], "bob", 3)
    label(pairs["undone"], "carol", 0, superseded_at=timezone.now(), undone=True)
    # An adjudicator label is not an expert's opinion: one expert label alone is no disagreement.
    label(pairs["adjudicated_only"], "alice", 3)
    label(pairs["adjudicated_only"], "boss", 0, role=Label.Role.ADJUDICATOR)
    return project, pairs


def listed(project, kind, state="unresolved"):
    return [item.pair.id for item in adjudication_items(project=project, kind=kind, state=state).items]


def test_tabs_list_conflicts_milder_disagreements_and_both_conflicts_first_then_by_query(crafted):
    project, pairs = crafted
    # By hand on the 0..3 scale: {0,3} and {1,2} are conflicts (0 and top; two intermediate grades);
    # {0,1} and {2,3} differ with one intermediate grade and not both ends, so they are milder.
    conflicts = [pairs["two_mid"].id, pairs["zero_top"].id]  # q1 before q2
    milder = [pairs["mild_low"].id, pairs["mild_high"].id]
    assert listed(project, "conflict") == conflicts
    assert listed(project, "disagreement") == milder
    assert listed(project, "all") == conflicts + milder
    assert adjudication_counts(project=project) == {"conflict": 2, "disagreement": 2, "all": 4}


def test_the_database_conflict_flag_is_the_uncertain_rule_of_models_llm(crafted):
    project, _ = crafted
    for item in adjudication_items(project=project, kind="all").items:
        grades = [row.grade for row in item.labels]
        assert item.conflict == is_uncertain(grades, top_grade=3), grades
    conflict_ids = set(listed(project, "conflict"))
    assert {i.pair.id for i in adjudication_items(project=project, kind="all").items if i.conflict} == conflict_ids


def test_a_zero_and_a_one_on_the_default_three_grade_scale_is_a_disagreement_not_a_conflict():
    project = ProjectFactory()
    mild, conflict = PairFactory(project=project), PairFactory(project=project)
    label(mild, "alice", 0)
    label(mild, "bob", 1)
    label(conflict, "alice", 0)
    label(conflict, "bob", 2)
    assert listed(project, "conflict") == [conflict.id]
    assert listed(project, "disagreement") == [mild.id]
    assert is_uncertain([0, 1], top_grade=2) is False


def test_resolved_filter_follows_the_current_adjudicator_label(crafted):
    project, pairs = crafted
    boss = UserFactory(username="boss")
    adjudication_set(project=project, adjudicator=boss, pair_id=pairs["zero_top"].id, grade=3)
    # A superseded gold does not resolve a pair.
    label(pairs["two_mid"], "former-admin", 1, role=Label.Role.ADJUDICATOR, superseded_at=timezone.now())
    assert listed(project, "conflict", "unresolved") == [pairs["two_mid"].id]
    assert listed(project, "conflict", "resolved") == [pairs["zero_top"].id]
    assert listed(project, "conflict", "all") == [pairs["two_mid"].id, pairs["zero_top"].id]
    assert adjudication_counts(project=project, state="unresolved") == {"conflict": 1, "disagreement": 2, "all": 3}
    assert adjudication_counts(project=project, state="resolved") == {"conflict": 1, "disagreement": 0, "all": 1}


def test_an_item_carries_labels_with_grade_names_each_judges_newest_p_and_the_gold():
    project = ProjectFactory()
    query = QueryFactory(project=project, text="Which emission targets?")
    old_definition = RelevanceDefinitionFactory(query=query, text="old")
    new_definition = RelevanceDefinitionFactory(query=query, text="new")
    pair = PairFactory(project=project, query=query)
    label(pair, "alice", 0, note="no numbers", unsure=True, time_spent_seconds=12.5, definition=old_definition)
    label(pair, "bob", 2, definition=new_definition)
    gpt, mini, broken = (JudgeFactory(project=project, name=name) for name in ("gpt", "mini", "broken"))
    earlier = timezone.now() - timedelta(hours=1)
    JudgmentFactory(pair=pair, judge=gpt, definition=old_definition, p_relevant=0.2, created_at=earlier)
    JudgmentFactory(pair=pair, judge=gpt, definition=new_definition, p_relevant=0.9, method="tok")
    JudgmentFactory(pair=pair, judge=mini, p_relevant=0.4, method="embedding")
    JudgmentFactory(pair=pair, judge=broken, status=Judgment.Status.FAILED, p_relevant=None)
    adjudication_set(project=project, adjudicator=UserFactory(username="boss"), pair_id=pair.id, grade=1,
                     note="numbers but no year")

    (item,) = adjudication_items(project=project, kind="conflict", state="resolved").items
    rows = [(r.username, r.grade, r.grade_name, r.note, r.unsure, r.time_spent_seconds, r.definition_version)
            for r in item.labels]
    assert rows == [
        ("alice", 0, "irrelevant", "no numbers", True, 12.5, 1),
        ("bob", 2, "relevant", "", False, None, 2),
    ]
    assert [(j.judge, j.p, j.method) for j in item.judges] == [("gpt", 0.9, "tok"), ("mini", 0.4, "embedding")]
    assert (item.gold.username, item.gold.grade, item.gold.grade_name, item.gold.note) == (
        "boss", 1, "partially relevant", "numbers but no year"
    )
    assert item.conflict is True
    assert item.current_definition_version == 2  # so the page can flag Alice's label as made under v1


def test_pages_hold_fifty_items_and_the_query_count_does_not_grow_with_the_page():
    project = ProjectFactory()
    judge = JudgeFactory(project=project)
    pairs = [PairFactory(project=project) for _ in range(53)]
    for pair in pairs:
        label(pair, "alice", 0)
        label(pair, "bob", 2)
        JudgmentFactory(pair=pair, judge=judge)
    first = adjudication_items(project=project)
    assert (len(first.items), first.page.paginator.num_pages) == (50, 2)
    last = adjudication_items(project=project, page=2)
    assert [item.pair.id for item in first.items + last.items] == sorted(p.id for p in pairs)

    def queries_for(n: int) -> int:
        with CaptureQueriesContext(connection) as captured:
            adjudication_items(project=project, per_page=n)
        return len(captured)

    assert queries_for(2) == queries_for(50)


def test_details_skip_pairs_of_other_projects():
    project, other = ProjectFactory(), ProjectFactory()
    mine, theirs = PairFactory(project=project), PairFactory(project=other)
    assert [item.pair.id for item in adjudication_details(project=project, pair_ids=[theirs.id, mine.id])] == [mine.id]

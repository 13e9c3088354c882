"""The browse selectors on crafted data: the SQL gold grade against labeling.gold.gold_grade (the Python rule) on
random label sets, each filter against a hand computation, the keyset cursor walked both ways, calibrated P
against the Platt formula written out here, stale flags, blind first per item, and a fixed number of SQL
queries whatever the page size."""
from __future__ import annotations

import math
import random
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from labeling.gold import LabelView, gold_grade
from labeling.models import JudgeCalibration, Judgment, Label, Membership, Pair
from labeling.selectors.browse import (
    NO_GOLD,
    BrowseError,
    BrowseFilters,
    browse_filters_parse,
    browse_page,
    filtered_pairs,
    gold_grade_sql,
)
from labeling.selectors.browse_pair import pair_detail
from tests.factories import (
    JudgeFactory,
    JudgmentFactory,
    LabelFactory,
    PairFactory,
    PairSourceFactory,
    PassageFactory,
    ProjectFactory,
    QueryFactory,
    RelevanceDefinitionFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

SCALE = {"grades": [{"value": 0, "name": "no", "gain": 0}, {"value": 1, "name": "partly", "gain": 0.5},
                    {"value": 2, "name": "yes", "gain": 1}], "relevant_from": 1}


@pytest.fixture
def project():
    return ProjectFactory(scale=SCALE)


def _python_gold(pair: Pair) -> int | None:
    labels = Label.objects.filter(pair=pair, superseded_at__isnull=True)
    return gold_grade(pair.reference_grade, [LabelView(grade=l.grade, role=l.role, label_id=l.id) for l in labels])


def test_the_sql_gold_grade_is_the_python_rule_on_random_label_sets(project):
    rng = random.Random(7)
    query = QueryFactory(project=project)
    users = [UserFactory(username=f"u{i}") for i in range(4)]
    now = timezone.now()
    for _ in range(80):
        pair = PairFactory(project=project, query=query,
                           reference_grade=rng.choice([None, None, None, 0, 2]))
        for user in rng.sample(users, rng.randint(0, 3)):
            role = Label.Role.ADJUDICATOR if rng.random() < 0.15 else Label.Role.ANNOTATOR
            if rng.random() < 0.3:  # an older label it replaced: never part of gold
                LabelFactory(pair=pair, annotator=user, grade=rng.randint(0, 2), role=role, created_at=now,
                             superseded_at=now)
            LabelFactory(pair=pair, annotator=user, grade=rng.randint(0, 2), role=role, created_at=now)
    sql = dict(Pair.objects.filter(project=project).annotate(gold=gold_grade_sql()).values_list("id", "gold"))
    python = {pair.id: _python_gold(pair) for pair in Pair.objects.filter(project=project)}
    assert sql == python
    assert len(set(python.values())) == 4  # 0, 1, 2 and None all occur: the comparison covers every branch


@pytest.fixture
def crafted(project):
    """One query, eight pairs in pool order with a judge whose P is known per pair; definition v2 is current."""
    query = QueryFactory(project=project)
    v1 = RelevanceDefinitionFactory(query=query)
    v2 = RelevanceDefinitionFactory(query=query)
    judge = JudgeFactory(project=project, name="llm")
    alice, bob = UserFactory(username="alice"), UserFactory(username="bob")
    now = timezone.now()
    texts = ["Emission TARGETS for 2030", "nothing here", "net zero targets", "coal", "targets again", "x", "y", "z"]
    pairs = [PairFactory(project=project, query=query, passage=PassageFactory(project=project, title="", text=text))
             for text in texts]
    # (reference, alice, bob, P under v1, P under v2)
    plan = [(2, None, None, 0.9, 0.2), (None, 0, 0, 0.7, None), (None, 2, 0, None, 0.6), (None, 1, 1, 0.4, 0.45),
            (0, None, None, 0.95, None), (None, None, None, None, None), (None, 2, None, 0.1, 0.05),
            (None, 0, 2, 0.5, 0.5)]
    for pair, (reference, a, b, p1, p2) in zip(pairs, plan):
        Pair.objects.filter(id=pair.id).update(reference_grade=reference)
        for user, grade in ((alice, a), (bob, b)):
            if grade is not None:
                LabelFactory(pair=pair, annotator=user, grade=grade, created_at=now)
        for definition, p in ((v1, p1), (v2, p2)):
            if p is not None:
                JudgmentFactory(pair=pair, judge=judge, definition=definition, p_relevant=p, created_at=now)
    return {"query": query, "judge": judge, "pairs": pairs, "plan": plan, "v1": v1, "v2": v2,
            "alice": alice, "bob": bob}


def _ids(project, crafted, **filters) -> list[int]:
    found = filtered_pairs(project=project, query=crafted["query"], filters=BrowseFilters(**filters))
    return list(found.order_by("id").values_list("id", flat=True))


def test_each_filter_against_a_hand_computation(project, crafted):
    pairs, judge = crafted["pairs"], crafted["judge"]
    # Gold by hand: the reference, else agreeing annotators (no adjudicator here).
    gold = [2, 0, None, 1, 0, None, 2, None]
    assert _ids(project, crafted, gold=2) == [pairs[i].id for i in (0, 6)]
    assert _ids(project, crafted, gold=0) == [pairs[i].id for i in (1, 4)]
    assert _ids(project, crafted, gold=NO_GOLD) == [pairs[i].id for i, g in enumerate(gold) if g is None]
    # The judge's P is the one under the newest version it judged: v2 where there is one, else v1.
    p = [0.2, 0.7, 0.6, 0.45, 0.95, None, 0.05, 0.5]
    expected = [pairs[i].id for i, value in enumerate(p) if value is not None and 0.45 <= value <= 0.7]
    assert _ids(project, crafted, judge=judge, p_min=0.45, p_max=0.7) == expected
    assert _ids(project, crafted, judge=judge, p_min=0.9) == [pairs[4].id]
    assert _ids(project, crafted, disagreement="experts") == [pairs[i].id for i in (2, 7)]
    # Judge vs gold at 0.5: relevant from grade 1.
    judge_vs_gold = [i for i in range(8) if gold[i] is not None and p[i] is not None
                     and (gold[i] >= 1) != (p[i] >= 0.5)]
    assert judge_vs_gold == [0, 1, 3, 4, 6]
    assert _ids(project, crafted, judge=judge, disagreement="judge") == [pairs[i].id for i in judge_vs_gold]
    assert _ids(project, crafted, judge=judge, disagreement="judge", threshold=0.1) == [pairs[i].id for i in (1, 4, 6)]
    # icontains: any case, in the title or the text.
    assert _ids(project, crafted, search="targets") == [pairs[i].id for i in (0, 2, 4)]
    assert _ids(project, crafted, search="TARGETS", gold=0) == [pairs[4].id]


def test_the_filters_parse_and_refuse_what_they_cannot_use(project, crafted):
    judges = [crafted["judge"]]
    parsed = browse_filters_parse(project=project, params={"gold": "2", "p_min": "0.3", "q": " net "}, judges=judges)
    assert (parsed.gold, parsed.p_min, parsed.search, parsed.judge) == (2, 0.3, "net", crafted["judge"])
    for bad in ({"gold": "7"}, {"p_min": "1.5"}, {"p_max": "abc"}, {"disagreement": "maybe"}, {"judge": "nobody"}):
        with pytest.raises(BrowseError):
            browse_filters_parse(project=project, params=bad, judges=judges)


def _page(project, crafted, user, role, params, **filters):
    return browse_page(project=project, query=crafted["query"], user=user, role=role,
                       filters=BrowseFilters(judge=crafted["judge"], **filters), judges=[crafted["judge"]],
                       params=params)


def test_the_cursor_walks_every_filtered_pair_once_forwards_and_back(project, crafted):
    admin = UserFactory(username="admin")
    expected = _ids(project, crafted, judge=crafted["judge"], p_min=0.1)
    assert len(expected) == 6
    pages, params = [], {"n": "4"}
    while True:
        page = _page(project, crafted, admin, "admin", params, p_min=0.1)
        pages.append([row.pair.id for row in page.rows])
        assert (page.previous_before is None) == (len(pages) == 1)
        if page.next_after is None:
            break
        params = {"n": "4", "after": str(page.next_after)}
    assert pages == [expected[:4], expected[4:]]
    back = _page(project, crafted, admin, "admin", {"n": "4", "before": str(pages[1][0])}, p_min=0.1)
    assert [row.pair.id for row in back.rows] == expected[:4]
    assert back.previous_before is None and back.next_after == expected[3]
    with pytest.raises(BrowseError):
        _page(project, crafted, admin, "admin", {"after": "0"})
    with pytest.raises(BrowseError):
        _page(project, crafted, admin, "admin", {"n": "10000"})


def test_calibrated_p_is_the_platt_map_and_stale_flags_follow_the_current_definition(project, crafted):
    judge, pairs = crafted["judge"], crafted["pairs"]
    JudgeCalibration.objects.create(judge=judge, method="platt", params={"a": 2.0, "b": -1.0}, cv={}, n=10,
                                    n_relevant=5, fitted_on={}, created_at=timezone.now() - timedelta(days=1))
    JudgeCalibration.objects.create(judge=judge, method="platt", params={"a": 1.5, "b": 0.25}, cv={}, n=10,
                                    n_relevant=5, fitted_on={})
    page = _page(project, crafted, UserFactory(username="viewer"), "viewer", {})
    assert page.calibrated == {"llm"}
    cells = {row.pair.id: row.judges[0] for row in page.rows}
    for pair, p in zip(pairs, [0.2, 0.7, 0.6, 0.45, 0.95, None, 0.05, 0.5]):
        cell = cells[pair.id]
        if p is None:
            assert cell is None
            continue
        logit = math.log(p / (1 - p))
        assert cell.p == pytest.approx(p)
        assert cell.p_calibrated == pytest.approx(1 / (1 + math.exp(-(1.5 * logit + 0.25))))  # the newest fit
    # Pairs 1 and 4 were judged under v1 only: stale; the others have a v2 judgment.
    assert {pair.id for pair in pairs if cells[pair.id] is not None and cells[pair.id].stale} == {pairs[1].id, pairs[4].id}


def test_a_page_costs_the_same_queries_whatever_its_size(project):
    query = QueryFactory(project=project)
    RelevanceDefinitionFactory(query=query)
    judges = [JudgeFactory(project=project, name=f"j{i}") for i in range(2)]
    users = [UserFactory(username=f"e{i}") for i in range(2)]
    now = timezone.now()
    for i in range(60):
        pair = PairFactory(project=project, query=query)
        PairSourceFactory(pair=pair, system="bm25", rank=i + 1)
        for user in users:
            LabelFactory(pair=pair, annotator=user, grade=i % 3, created_at=now)
        for judge in judges:
            JudgmentFactory(pair=pair, judge=judge, p_relevant=(i % 10) / 10, created_at=now)
    admin = UserFactory(username="admin")
    counts = {}
    for n in (5, 60):
        with CaptureQueriesContext(connection) as captured:
            page = browse_page(project=project, query=query, user=admin, role="admin",
                               filters=BrowseFilters(judge=judges[0], gold=0), judges=judges, params={"n": str(n)})
        assert len(page.rows) == min(n, 20) and all(len(row.labels) == 2 for row in page.rows)
        counts[n] = len(captured)
    assert counts[5] == counts[60] <= 7


def test_an_expert_sees_only_their_own_labels_and_the_p_of_what_they_labelled_where_revealed(project, crafted):
    alice, pairs = crafted["alice"], crafted["pairs"]
    Membership.objects.create(project=project, user=alice, role="expert")
    page = _page(project, crafted, alice, "expert", {})
    assert page.judges == () and all(row.judges == () and row.gold is None for row in page.rows)
    assert {cell.annotator for row in page.rows for cell in row.labels} == {"alice"}
    with pytest.raises(BrowseError):
        _page(project, crafted, alice, "expert", {}, gold=2)
    project.reveal_llm_after_submit = True
    project.save()
    page = _page(project, crafted, alice, "expert", {})
    shown = {row.pair.id for row in page.rows if row.judges}
    assert shown == {pair.id for pair in pairs if Label.objects.filter(pair=pair, annotator=alice).exists()}
    detail = pair_detail(project=project, pair_id=pairs[2].id, user=alice, role="expert")
    assert [entry.label.annotator.username for entry in detail.labels] == ["alice"]
    assert detail.gold is None and detail.judgments  # labelled by alice, and the project reveals P
    unlabelled = pair_detail(project=project, pair_id=pairs[0].id, user=alice, role="expert")
    assert unlabelled.judgments == () and unlabelled.gold is None


def test_a_pair_in_full_for_an_admin_history_judgments_and_sources(project, crafted):
    pair, alice = crafted["pairs"][2], crafted["alice"]
    Label.objects.filter(pair=pair, annotator=alice).update(superseded_at=timezone.now())
    LabelFactory(pair=pair, annotator=alice, grade=1, note="changed my mind", created_at=timezone.now())
    Judgment.objects.filter(pair=pair).update(raw_output="[Guess]: Yes")
    PairSourceFactory(pair=pair, system="bm25", rank=3)
    detail = pair_detail(project=project, pair_id=pair.id, user=UserFactory(username="root"), role="admin")
    assert [(e.label.annotator.username, e.label.grade, e.current) for e in detail.labels] == [
        ("alice", 2, False), ("alice", 1, True), ("bob", 0, True)]
    assert detail.gold is None  # alice 1, bob 0: they do not agree
    assert [(e.judgment.definition.version, e.stale, e.judgment.raw_output) for e in detail.judgments] == [
        (crafted["v2"].version, False, "[Guess]: Yes")]
    assert [(s.system, s.rank) for s in detail.sources] == [("bm25", 3)]

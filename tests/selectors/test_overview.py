"""The overview's next steps (labeling.selectors.overview), per role, on a small project whose every count is worked
out by hand below; and the gold-grade count against labeling.gold's rule applied pair by pair in Python."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from labeling.gold import LabelView, gold_grade
from labeling.models import Invitation, Judgment, Label, Pair, Run, ScoringJob
from labeling.selectors.overview import StepCount, StepState, gold_grade_count, project_overview
from labeling.selectors.projects import project_counts
from tests.factories import (
    JudgeFactory,
    JudgmentFactory,
    LabelFactory,
    MembershipFactory,
    PairFactory,
    PassageFactory,
    ProjectFactory,
    QueryFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    """2 queries, 3 passages, 5 pairs (p0 has a reference grade 2). Judge a has ok judgments of p0 and p1, judge b of
    p1 and a failed one of p2: 2 pairs judged. Experts alice and bob; invitations: one open, one expired, one used,
    one revoked. Labels: alice 2 on p0; alice 1 and bob 1 on p3 (they agree); alice 0 and bob 2 on p4 (0 and the
    top grade: a conflict); boss adjudicates p2 as 1; alice's first label on p3 (0) was superseded."""
    project = ProjectFactory()
    queries = [QueryFactory(project=project) for _ in range(2)]
    passages = [PassageFactory(project=project) for _ in range(3)]
    cells = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]
    pairs = [PairFactory(project=project, query=queries[q], passage=passages[d]) for q, d in cells]
    Pair.objects.filter(pk=pairs[0].pk).update(reference_grade=2)
    a, b = JudgeFactory(project=project, name="a"), JudgeFactory(project=project, name="b")
    JudgmentFactory(pair=pairs[0], judge=a)
    JudgmentFactory(pair=pairs[1], judge=a)
    JudgmentFactory(pair=pairs[1], judge=b)
    JudgmentFactory(pair=pairs[2], judge=b, status=Judgment.Status.FAILED, p_relevant=None)
    users = {name: UserFactory(username=name) for name in ("boss", "alice", "bob", "vera")}
    for name, role in (("boss", "admin"), ("alice", "expert"), ("bob", "expert"), ("vera", "viewer")):
        MembershipFactory(project=project, user=users[name], role=role)
    now = timezone.now()
    for n, (used, revoked, expires) in enumerate([(None, None, now + timedelta(days=1)),
                                                  (None, None, now - timedelta(minutes=1)),
                                                  (now, None, now + timedelta(days=1)),
                                                  (None, now, now + timedelta(days=1))]):
        Invitation.objects.create(project=project, username=f"invitee-{n}", role="expert", token_sha256=f"{n:064d}",
                                  created_at=now, expires_at=expires, used_at=used, revoked_at=revoked)
    LabelFactory(pair=pairs[3], annotator=users["alice"], grade=0, superseded_at=now)
    for pair, name, grade in ((0, "alice", 2), (3, "alice", 1), (3, "bob", 1), (4, "alice", 0), (4, "bob", 2)):
        LabelFactory(pair=pairs[pair], annotator=users[name], grade=grade)
    LabelFactory(pair=pairs[2], annotator=users["boss"], grade=1, role=Label.Role.ADJUDICATOR)
    return project, pairs, users


def _overview(project, user, role):
    counts = project_counts(project_ids=[project.id])[project.id]
    return project_overview(project=project, user=user, role=role, counts=counts, now=timezone.now())


def _by_key(overview):
    return {step.key: step for step in overview.steps}


def _numbers(step):
    """(value, of, noun) of each count, the noun as shown: singular for 1 (of 1)."""
    return [(count.value, count.of, count.label) for count in step.counts]


def test_gold_grades_are_the_reference_adjudicated_and_agreed_pairs(world):
    project, _, _ = world
    # By hand: p0 (reference 2), p2 (adjudicated 1), p3 (alice and bob agree on 1); p4's experts disagree, p1 has
    # no label.
    assert gold_grade_count(project=project) == 3
    # labeling.gold's rule, pair by pair.
    python = 0
    for pair in Pair.objects.filter(project=project):
        views = [LabelView(grade=label.grade, role=label.role, label_id=label.id)
                 for label in Label.objects.filter(pair=pair, superseded_at__isnull=True)]
        python += gold_grade(pair.reference_grade, views) is not None
    assert python == 3


def test_an_admin_sees_each_setup_step_with_its_state_counts_and_page(world):
    project, pairs, users = world
    overview = _overview(project, users["boss"], "admin")
    assert overview.gold_grades == 3
    assert [step.key for step in overview.steps] == ["import", "judge", "score", "invite", "label", "export"]
    steps = _by_key(overview)
    assert (steps["import"].state, _numbers(steps["import"])) == (
        StepState.DONE, [(2, None, "queries"), (3, None, "passages"), (5, None, "pairs")])
    assert (steps["judge"].state, _numbers(steps["judge"])) == (StepState.DONE, [(2, None, "judges")])
    # p0 and p1 have an ok judgment; p2's only one failed.
    assert (steps["score"].state, _numbers(steps["score"])) == (
        StepState.TO_DO, [(2, 5, "pairs judged by a judge")])
    assert (steps["invite"].state, _numbers(steps["invite"])) == (
        StepState.DONE, [(2, None, "experts"), (1, None, "invitation pending")])
    # 6 current labels (alice's superseded one is not), p4 a conflict: reviewing is to do, on the adjudication page.
    assert (steps["label"].state, _numbers(steps["label"])) == (
        StepState.TO_DO, [(6, None, "labels"), (3, 5, "pairs with a gold grade"), (1, None, "conflict to adjudicate")])
    assert (steps["label"].url_name, steps["label"].action) == ("labeling:adjudication", "Adjudicate")
    assert (steps["export"].state, steps["export"].url_name, steps["export"].anchor) == (
        StepState.READY, "labeling:project_detail", "#export")

    # Adjudicating p4 ends the conflicts; judge a scoring p2, p3 and p4 completes the pool.
    LabelFactory(pair=pairs[4], annotator=users["boss"], grade=2, role=Label.Role.ADJUDICATOR)
    for pair in pairs[2:]:
        JudgmentFactory(pair=pair, judge=project.judges.get(name="a"))
    steps = _by_key(_overview(project, users["boss"], "admin"))
    assert (steps["score"].state, _numbers(steps["score"])) == (StepState.DONE, [(5, 5, "pairs judged by a judge")])
    # No conflict left, but p1 has no gold grade and the project sets no stopping target: labelling goes on.
    assert steps["label"].state == StepState.TO_DO
    assert _numbers(steps["label"]) == [(7, None, "labels"), (4, 5, "pairs with a gold grade"),
                                        (0, None, "conflicts to adjudicate")]
    assert steps["label"].target == "Done when every pair has a gold grade, or set a stopping target in Settings."
    assert (steps["label"].url_name, steps["label"].action) == ("labeling:workspace", "Label")
    # alice and bob agree on p1: every pair of the pool is graded.
    for name in ("alice", "bob"):
        LabelFactory(pair=pairs[1], annotator=users[name], grade=0)
    steps = _by_key(_overview(project, users["boss"], "admin"))
    assert (steps["label"].state, _numbers(steps["label"])[1]) == (StepState.DONE, (5, 5, "pairs with a gold grade"))


def test_scoring_runs_while_a_job_is_unfinished_and_labelling_is_counted_against_the_stopping_target(world):
    project, pairs, users = world
    judge = project.judges.get(name="a")
    # Two jobs a worker is on (721 of 812 and 10 of 40 scored so far) and one that ended.
    ScoringJob.objects.create(project=project, judge=judge, scope="all", total=812, done=721)
    ScoringJob.objects.create(project=project, judge=project.judges.get(name="b"), scope="all", total=40, done=10,
                              status=ScoringJob.Status.PENDING)
    ScoringJob.objects.create(project=project, judge=judge, scope="all", total=5, done=5,
                              status=ScoringJob.Status.DONE, finished_at=timezone.now())
    steps = _by_key(_overview(project, users["boss"], "admin"))
    assert (steps["score"].state, _numbers(steps["score"])) == (
        StepState.RUNNING, [(2, 5, "pairs judged by a judge"), (2, None, "jobs running"), (731, 852, "pairs scored")])
    # Even with the whole pool judged, a running job (re-scoring) is running, not done.
    for pair in pairs[2:]:
        JudgmentFactory(pair=pair, judge=judge)
    assert _by_key(_overview(project, users["boss"], "admin"))["score"].state == StepState.RUNNING
    ScoringJob.objects.filter(finished_at__isnull=True).update(status=ScoringJob.Status.DONE,
                                                               finished_at=timezone.now())
    assert _by_key(_overview(project, users["boss"], "admin"))["score"].state == StepState.DONE

    # A budget of 8 labels is the stopping target: with 6 current labels (and p4's conflict adjudicated) labelling
    # is to do, with 3 of 5 pairs graded; at 8 it is done, with p1 still ungraded.
    LabelFactory(pair=pairs[4], annotator=users["boss"], grade=2, role=Label.Role.ADJUDICATOR)
    project.stop_budget = 8
    project.save(update_fields=["stop_budget"])
    label = _by_key(_overview(project, users["boss"], "admin"))["label"]
    assert (label.state, label.target) == (StepState.TO_DO, "Done when the project's stopping target is met (not yet).")
    LabelFactory(pair=pairs[2], annotator=users["alice"], grade=1)
    label = _by_key(_overview(project, users["boss"], "admin"))["label"]
    assert (label.state, _numbers(label)[:2], label.target) == (
        StepState.DONE, [(8, None, "labels"), (4, 5, "pairs with a gold grade")],
        "Done when the project's stopping target is met (met).")


def test_a_new_project_has_every_admin_step_to_do_and_nothing_to_export():
    project = ProjectFactory()
    boss = UserFactory(username="boss")
    MembershipFactory(project=project, user=boss, role="admin")
    overview = _overview(project, boss, "admin")
    assert overview.gold_grades == 0
    assert [(step.key, step.state) for step in overview.steps] == [
        ("import", StepState.TO_DO), ("judge", StepState.TO_DO), ("score", StepState.TO_DO),
        ("invite", StepState.TO_DO), ("label", StepState.TO_DO), ("export", StepState.WAITING)]


def test_an_expert_is_shown_the_items_waiting_and_their_own_labels_but_no_gold_count(world):
    project, pairs, users = world
    overview = _overview(project, users["alice"], "expert")
    # Blind first: the gold count would tell alice when her label agreed with bob's.
    assert overview.gold_grades is None
    steps = _by_key(overview)
    assert list(steps) == ["annotate", "my-labels"]
    # One expert label per item (the project's default k): p1 has no label, p2 only boss's adjudication (not an
    # expert's label), p0, p3 and p4 have alice's own. 2 items wait for her.
    assert (steps["annotate"].state, _numbers(steps["annotate"])) == (
        StepState.TO_DO, [(2, None, "items waiting for you")])
    assert steps["annotate"].url_name == "labeling:workspace"
    # Her current labels: p0, p3, p4 (the superseded one on p3 not counted), all given today.
    assert (steps["my-labels"].state, _numbers(steps["my-labels"])) == (
        StepState.DONE, [(3, None, "labels"), (3, None, "today")])

    for pair in pairs[1:3]:
        LabelFactory(pair=pair, annotator=users["alice"], grade=1)
    steps = _by_key(_overview(project, users["alice"], "expert"))
    assert (steps["annotate"].state, _numbers(steps["annotate"])) == (
        StepState.DONE, [(0, None, "items waiting for you")])

    newcomer = UserFactory(username="carol")
    MembershipFactory(project=project, user=newcomer, role="expert")
    steps = _by_key(_overview(project, newcomer, "expert"))
    # Every item has its one label now: nothing waits, and carol has labelled nothing.
    assert [(step.state, _numbers(step)) for step in steps.values()] == [
        (StepState.TO_DO, [(0, None, "items waiting for you")]),
        (StepState.TO_DO, [(0, None, "labels"), (0, None, "today")]),
    ]


def test_a_viewer_is_shown_what_they_can_read(world):
    project, _, users = world
    overview = _overview(project, users["vera"], "viewer")
    steps = _by_key(overview)
    assert list(steps) == ["validation", "systems"]
    assert (steps["validation"].state, _numbers(steps["validation"])) == (
        StepState.READY, [(3, None, "gold grades"), (2, None, "judges"), (2, None, "pairs judged")])
    assert (steps["systems"].state, _numbers(steps["systems"])) == (StepState.WAITING, [(0, None, "runs")])
    Run.objects.create(project=project, name="bm25", kind="imported")
    assert _by_key(_overview(project, users["vera"], "viewer"))["systems"].state == StepState.READY


def test_a_count_names_its_noun_for_the_number_it_follows():
    forms = ("pair judged", "pairs judged")
    assert [StepCount(value, *forms, of=of).label for value, of in ((1, None), (0, None), (2, None), (1, 5), (0, 1))] \
        == ["pair judged", "pairs judged", "pairs judged", "pairs judged", "pair judged"]
    assert StepCount(1, *forms, capped=True).label == "pairs judged"  # "1+ pairs"

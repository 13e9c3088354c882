"""A replay's inputs read from a project (#50), the live queue's orders equal to the replay's pure ones, and
`manage.py replay`: what it refuses and why, what it says about partial truth and partial judges, and that it
leaves every table of the project as it was."""
from __future__ import annotations

import json
from io import StringIO

import numpy as np
import pytest
from django.apps import apps
from django.core.management import CommandError, call_command
from django.core.serializers import serialize
from django.utils import timezone

from labeling.models import Judgment, Membership, Pair, Run, RunEntry
from labeling.selectors.queues import eligible_pairs, queue_candidates
from labeling.selectors.replay import ReplayInputError, replay_inputs
from labeling.services.releases import release_create
from models_llm.replay.selection import (
    decile_orders,
    disagreement,
    disagreement_order,
    random_order,
    uncertain_order,
)
from tests.factories import (
    JudgeFactory,
    JudgmentFactory,
    MembershipFactory,
    PairFactory,
    ProjectFactory,
    QueryFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def graded_world():
    """40 pairs over two queries, every one with a reference grade (a quarter relevant); judge `full` scored every
    pair (some P tied), `partial` the first ten, `none` nothing; ties in P and keys exercise the tie-break."""
    rng = np.random.default_rng(2)
    project = ProjectFactory(slug="graded")
    full = JudgeFactory(project=project, name="full")
    partial = JudgeFactory(project=project, name="partial")
    JudgeFactory(project=project, name="none")
    pairs = []
    for q in range(2):
        query = QueryFactory(project=project, external_id=f"q{q}")
        pairs += [PairFactory(project=project, query=query) for _ in range(20)]
    for i, pair in enumerate(pairs):
        Pair.objects.filter(id=pair.id).update(sample_key=float(np.round(rng.random(), 1)),
                                               reference_grade=int(i % 4 == 0))
        JudgmentFactory(pair=pair, judge=full, p_relevant=float(np.round(rng.random(), 1)))
        if i < 10:
            JudgmentFactory(pair=pair, judge=partial, p_relevant=float(rng.random()))
    return project, pairs


def test_the_inputs_are_the_projects_arrays_and_a_partial_judge_is_said(graded_world):
    project, pairs = graded_world
    inputs = replay_inputs(project=project, judges=["full", "partial"])
    assert inputs.pool.pair_ids.tolist() == sorted(p.id for p in pairs)
    assert inputs.pool.truth.tolist() == [int(i % 4 == 0) for i in range(40)]
    assert sorted(set(inputs.pool.query.tolist())) == [0, 1]
    full, partial = inputs.judges
    assert np.isnan(partial.raw_p).sum() == 30 and not np.isnan(full.raw_p).any()
    assert any("'partial' scored 10 of the 40 pairs" in note for note in inputs.notes)
    assert len(inputs.compare) == 2  # `none` scored nothing: nothing to compare


def test_what_a_replay_cannot_be_run_on_is_refused_with_the_reason(graded_world):
    project, pairs = graded_world
    with pytest.raises(ReplayInputError, match="'none' has scored none"):
        replay_inputs(project=project, judges=["none"])
    with pytest.raises(ReplayInputError, match="its judges: full, none, partial"):
        replay_inputs(project=project, judges=["nope"])
    with pytest.raises(ReplayInputError, match="truth must be one of"):
        replay_inputs(project=project, judges=["full"], truth="gold")
    Pair.objects.filter(id__in=[pairs[1].id, pairs[2].id]).update(reference_grade=None)
    with pytest.raises(ReplayInputError, match="2 of the 40 pairs have no reference grade.*'trec'"):
        replay_inputs(project=project, judges=["full"])
    trec = replay_inputs(project=project, judges=["full"], truth="trec")
    assert trec.pool.truth[1] == 0 and any("count as irrelevant" in note for note in trec.notes)


def test_a_frozen_release_is_a_truth_and_stays_what_was_frozen(graded_world):
    project, pairs = graded_world
    admin = UserFactory()
    MembershipFactory(project=project, user=admin, role=Membership.Role.ADMIN)
    release_create(project=project, by=admin, name="v1")
    Pair.objects.filter(id=pairs[1].id).update(reference_grade=1)  # graded again after the freeze
    frozen = replay_inputs(project=project, judges=["full"], truth="release:v1")
    assert frozen.pool.truth.tolist() == [int(i % 4 == 0) for i in range(40)]
    assert "the frozen release 'v1'" in frozen.notes[0]
    assert replay_inputs(project=project, judges=["full"]).pool.truth[1] == 1
    with pytest.raises(ReplayInputError, match="no release 'v2' \\(its releases: v1\\)"):
        replay_inputs(project=project, judges=["full"], truth="release:v2")
    with pytest.raises(ReplayInputError, match="release-trec:NAME"):
        replay_inputs(project=project, judges=["full"], truth="release:")
    Pair.objects.filter(id=pairs[2].id).update(reference_grade=None)
    release_create(project=project, by=admin, name="v2")
    with pytest.raises(ReplayInputError, match="1 of the 40 pairs have no grade in release 'v2'.*'release-trec:v2'"):
        replay_inputs(project=project, judges=["full"], truth="release:v2")
    assert replay_inputs(project=project, judges=["full"], truth="release-trec:v2").pool.truth[2] == 0


def test_the_live_queues_serve_in_the_replays_order(graded_world):
    """The live queue's database orders and the replay's pure ones, on a pool with ties in P and in the keys."""
    project, _ = graded_world
    Pair.objects.filter(project=project).update(reference_grade=None)  # gold unknown: every pair may be served
    project.queue_judge = project.judges.get(name="full")
    project.save(update_fields=["queue_judge"])
    inputs = replay_inputs(project=project, judges=["full"], truth="trec")
    expert, now = UserFactory(), timezone.now()
    eligible = eligible_pairs(project=project, annotator=expert, now=now)
    ids = inputs.pool.pair_ids

    def live(strategy):
        return queue_candidates(project=project, annotator=expert, strategy=strategy, now=now, limit=40,
                                eligible=eligible)

    assert live("uncertain") == ids[uncertain_order(inputs.judges[0].raw_p, ids)].tolist()
    assert live("random") == ids[random_order(inputs.pool.key, ids)].tolist()
    spread = disagreement(np.vstack(inputs.compare), inputs.pool.within)
    assert live("disagreement") == ids[disagreement_order(spread, ids)].tolist()
    # no stratified label yet: the lowest decile that has pairs, in the random order
    first = next(order for order in decile_orders(inputs.judges[0].raw_p, inputs.pool.key, ids) if order.size)
    assert live("stratified") == ids[first].tolist()


def test_the_projects_runs_are_compared_by_their_top_10(graded_world):
    project, pairs = graded_world
    inputs = replay_inputs(project=project, judges=["full"])
    assert inputs.runs is None and any("needs two or more" in note for note in inputs.notes)
    for name, order in (("forward", pairs), ("backward", pairs[::-1])):
        run = Run.objects.create(project=project, name=name, kind="imported")
        for query_id in {pair.query_id for pair in pairs}:
            mine = [pair for pair in order if pair.query_id == query_id]
            RunEntry.objects.bulk_create(RunEntry(run=run, query_id=query_id, passage_id=pair.passage_id, rank=rank,
                                                  score=100.0 - rank) for rank, pair in enumerate(mine, 1))
    inputs = replay_inputs(project=project, judges=["full"])
    assert inputs.runs.names == ["backward", "forward"]
    position = {pair_id: index for index, pair_id in enumerate(inputs.pool.pair_ids.tolist())}
    first_query = [pair for pair in pairs if pair.query_id == pairs[0].query_id]
    assert inputs.runs.rank[1, position[first_query[0].id]] == 1  # forward: its first pair first
    assert inputs.runs.rank[0, position[first_query[0].id]] == 0  # backward: 20th, below its top 10
    assert inputs.runs.rank[0, position[first_query[-1].id]] == 1
    assert (inputs.runs.rank > 0).sum() == 2 * 2 * 10


def _tables() -> str:
    """Every row of every model of the app, serialised: what "the project as it was" means here."""
    return serialize("json", [row for model in apps.get_app_config("labeling").get_models()
                              for row in model.objects.order_by("pk")])


def test_the_command_prints_the_summary_and_changes_nothing(graded_world):
    project, _ = graded_world
    before = _tables()
    out = StringIO()
    call_command("replay", "--project", "graded", "--judge", "full", "--batch", "5", "--rounds", "3", "--seeds",
                 "2", "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert report["truth"] == "reference" and len(report["arms"]) == 2
    arm = report["arms"][0]
    assert arm["judge"] == "full" and arm["labels"] == [0, 5, 10, 15] and arm["seeds"] == [0, 1]
    table = StringIO()
    call_command("replay", "--project", "graded", "--judge", "full", "--judge", "partial", "--mix",
                 "stratified=1", "--batch", "5", "--rounds", "2", "--seeds", "1", stdout=table)
    assert "stratified=1  full" in table.getvalue() and "'partial' scored 10" in table.getvalue()
    assert _tables() == before
    assert Judgment.objects.filter(judge__project=project).count() == 50


@pytest.mark.parametrize(("args", "message"), [
    (["--mix", "uncertain:80"], "each part is STRATEGY=SHARE"),
    (["--mix", "conflict=1"], "mix"),
    (["--seeds", "0"], "seeds must be a whole number from 1"),
    (["--judge", "none"], "has scored none"),
])
def test_the_command_names_what_is_wrong(graded_world, args, message):
    with pytest.raises(CommandError, match=message):
        call_command("replay", "--project", "graded", "--judge", "full", *args, stdout=StringIO())

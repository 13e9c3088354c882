"""A replay is the loop (#50): three rounds run for real through the API, with an expert who answers the truth, and
the replay of seed 0 on the same pool give the same batches in the same order, the same calibrators and the same
completeness estimates and stopping probability."""
from __future__ import annotations

import numpy as np
import pytest
from rest_framework.test import APIClient

from labeling.models import JudgeCalibration, Label, LabellingRound, Membership, Pair
from labeling.selectors.completeness_report import RoundNumbers
from labeling.services.rounds import round_run
from models_llm.replay.engine import ReplayJudge, ReplayPool, ReplaySettings, replay
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
ROUNDS, BATCH = 3, 10


def api_for(project, role) -> APIClient:
    user = UserFactory()
    MembershipFactory(project=project, user=user, role=role)
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def truth_world():
    """Two queries x 40 pairs; about a quarter relevant; an informative judge whose P is too low (a calibrator has
    something to fix); a spare judge so that the disagreement queue has two to compare."""
    rng = np.random.default_rng(11)
    project = ProjectFactory(slug="replayed")
    judge = JudgeFactory(project=project, name="queue-judge")
    other = JudgeFactory(project=project, name="other-judge")
    pairs, truth = [], []
    for q in range(2):
        query = QueryFactory(project=project, external_id=f"q{q}")
        for _ in range(40):
            pairs.append(PairFactory(project=project, query=query))
    keys = rng.random(len(pairs))
    relevant = rng.random(len(pairs)) < 0.25
    raw = 1 / (1 + np.exp(-(2.5 * (2 * relevant - 1) + rng.normal(0, 1.2, len(pairs)) - 1.5)))
    for pair, key, r, p in zip(pairs, keys, relevant, np.round(raw, 4)):
        Pair.objects.filter(id=pair.id).update(sample_key=float(key))
        JudgmentFactory(pair=pair, judge=judge, p_relevant=float(p))
        JudgmentFactory(pair=pair, judge=other, p_relevant=float(rng.random()))
        truth.append(int(r))
    return project, judge, other, pairs, np.asarray(truth)


@pytest.mark.parametrize("targeted", ["uncertain", "disagreement"])
def test_a_replay_of_seed_0_gives_the_batches_calibrators_and_estimates_of_the_same_rounds_run_for_real(
        truth_world, targeted):
    project, judge, other, pairs, truth = truth_world
    grade_of = {pair.id: int(t) for pair, t in zip(pairs, truth)}
    admin, expert = api_for(project, Membership.Role.ADMIN), api_for(project, Membership.Role.EXPERT)
    real = []
    for number in range(1, ROUNDS + 1):
        response = admin.post(f"/api/projects/{project.slug}/rounds/", {"judge": judge.name, "budget": BATCH,
                                                                       "mix": {targeted: 1}, "random_share": 0.2},
                            format="json")
        assert response.status_code == 201, response.content
        batch = []
        for _ in range(BATCH):
            item = expert.get(f"/api/projects/{project.slug}/queue/next/")
            assert item.status_code == 200, item.content
            pair_id = item.json()["pair_id"]
            answer = expert.post(f"/api/projects/{project.slug}/labels/", {"pair_id": pair_id,
                                                                           "grade": grade_of[pair_id]}, format="json")
            assert answer.status_code == 201, answer.content
            batch.append(pair_id)
        found = LabellingRound.objects.get(project=project, number=number)
        assert found.status == "running"
        done = round_run(round_id=found.id)  # the worker's part
        assert done.status == "done", done.error
        calibration = JudgeCalibration.objects.filter(judge=judge).order_by("-id").first()
        real.append((batch, calibration, RoundNumbers.from_dict(done.numbers)))

    rows = list(Pair.objects.filter(project=project).order_by("id").values_list("id", "sample_key", "query_id"))
    queries = sorted({q for _, _, q in rows})
    pool = ReplayPool(pair_ids=np.asarray([r[0] for r in rows]), key=np.asarray([r[1] for r in rows]),
                      truth=np.asarray([grade_of[r[0]] for r in rows]), relevant_from=1,
                      query=np.asarray([queries.index(r[2]) for r in rows]))

    def raw(of):
        by_pair = dict(of.judgments.values_list("pair_id", "p_relevant"))
        return np.asarray([by_pair[r[0]] for r in rows])

    settings = ReplaySettings(mixes=[{targeted: 80, "random": 20}], batch=BATCH, rounds=ROUNDS, seeds=(0,))
    (run,) = replay(pool, [ReplayJudge(judge.name, raw(judge))], settings, compare=[raw(judge), raw(other)])
    for state, (batch, calibration, numbers) in zip(run.states[1:], real, strict=True):
        assert list(state.batch) == batch
        assert state.served == {targeted: 8, "random": 2}
        if calibration is None:  # too few of a kind for a fit yet: the replay has none either
            assert state.calibrator is None and state.refit_note
            continue
        assert state.calibrator["method"] == calibration.method
        for key, value in calibration.params.items():
            assert state.calibrator["params"][key] == pytest.approx(value, abs=1e-12)
        after = numbers.after.pool
        assert state.verified_relevant == after.verified_relevant
        assert state.model == pytest.approx((after.model["total"], after.model["low"], after.model["high"]))
        assert state.design == pytest.approx((after.design["total"], after.design["low"], after.design["high"]))
        assert state.stop_probability == pytest.approx(numbers.after.stopping.probability)
    assert real[-1][1] is not None, "the last round refitted a calibrator (the comparison above is not empty)"
    # and the expert's labels are the truth, nothing more
    assert Label.objects.filter(pair__project=project).count() == ROUNDS * BATCH

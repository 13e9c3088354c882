"""The replay on synthetic pools whose truth is known (#50): the selection rules against hand computations, uncertainty
sampling against random order where the judge is informative and where it is noise, the estimates' coverage and
the stop's true recall for a calibrated and a miscalibrated judge, bad settings refused."""
from __future__ import annotations

import numpy as np
import pytest

from models_llm.replay.engine import (
    REPLAY_MAX_PAIR_ROUNDS,
    ReplayError,
    ReplayJudge,
    ReplayPool,
    ReplaySettings,
    replay,
    replay_one,
)
from models_llm.replay.selection import (
    decile_orders,
    disagreement,
    disagreement_order,
    mix_order,
    random_order,
    uncertain_order,
)
from models_llm.replay.summary import summarise


def test_the_orders_are_the_queues_rules():
    ids = np.array([10, 11, 12, 13, 14])
    p = np.array([0.9, 0.45, np.nan, 0.55, 0.1])
    # |P - 0.5|: 0.4, 0.05, -, 0.05, 0.4; ties by pair id; the unjudged pair is never served
    assert uncertain_order(p, ids).tolist() == [1, 3, 0, 4]
    assert random_order(np.array([0.3, 0.1, 0.9, 0.1, 0.5]), ids).tolist() == [1, 3, 0, 4, 2]
    spread = disagreement(np.array([[0.9, 0.2, np.nan, 0.5, 0.1], [0.1, 0.3, 0.7, 0.5, np.nan]]),
                          within=np.array([0.0, 0.0, 0.4, 0.0, 0.2]))
    # two judges: the range (0.8, 0.1, -, 0); one judge only: the ensemble's own spread
    assert spread == pytest.approx([0.8, 0.1, 0.4, 0.0, 0.2])
    assert disagreement_order(spread, ids).tolist() == [0, 2, 4, 1]
    deciles = decile_orders(np.array([0.05, 1.0, 0.95, 0.1, np.nan]), np.array([0.5, 0.1, 0.2, 0.3, 0.4]),
                            np.arange(5))
    assert deciles[0].tolist() == [0] and deciles[1].tolist() == [3] and deciles[9].tolist() == [1, 2]


def test_the_mix_serves_each_strategy_its_share():
    served: dict[str, int] = {}
    sequence = []
    for _ in range(10):
        name = mix_order({"uncertain": 80, "random": 20}, served)[0]
        served[name] = served.get(name, 0) + 1
        sequence.append(name)
    assert sequence.count("random") == 2 and sequence[:5].count("random") == 1


def pool_and_judges(seed: int, n: int = 2000, share: float = 0.1, shift: float = 0.0):
    """A pool with `share` relevant; judges: `informative` (logistic in the truth, its P shifted down by `shift`
    on the logit scale: miscalibrated when shift > 0) and `noise` (uniform, unrelated to the truth)."""
    rng = np.random.default_rng(seed)
    truth = (rng.random(n) < share).astype(int)
    logit = 3.0 * (2 * truth - 1) + rng.normal(0, 1.5, n) - shift
    pool = ReplayPool(pair_ids=np.arange(1, n + 1), key=rng.random(n), truth=truth, relevant_from=1)
    return pool, ReplayJudge("informative", 1 / (1 + np.exp(-logit))), ReplayJudge("noise", rng.random(n))


def test_uncertainty_sampling_beats_random_order_where_the_judge_is_informative_and_not_where_it_is_noise():
    """5 % relevant, a judge whose P is far too low: its qrels miss most relevant pairs until a calibrator is fitted,
    and a fit needs 5 relevant gold pairs, which the uncertain queue finds at once and random order slowly."""
    n = 3000
    pool, informative, noise = pool_and_judges(3, n=n, share=0.05, shift=3.5)
    settings = ReplaySettings(mixes=[{"uncertain": 80, "random": 20}, {"random": 100}], batch=10, rounds=12,
                              seeds=tuple(range(6)), model_draws=100)
    arms = {(tuple(arm.mix), arm.judge): arm for arm in summarise(replay(pool, [informative, noise], settings), n)}

    def median_labels(mix, judge):  # not reached within the replay: counted as one batch past its end
        per_seed = arms[(mix, judge)].reached["exported_recall"].per_seed
        return float(np.median([120 + 10 if labels is None else labels for labels in per_seed]))

    assert arms[(("random",), "informative")].curves["exported_recall"][0].mean < 0.6  # before any label
    assert median_labels(("uncertain", "random"), "informative") + 30 <= median_labels(("random",), "informative")
    for mix in (("uncertain", "random"), ("random",)):
        assert arms[(mix, "noise")].reached["exported_recall"].reached == 0
        assert arms[(mix, "noise")].curves["auroc"][-1].mean == pytest.approx(0.5, abs=0.06)


def test_a_calibrated_judges_interval_covers_the_true_count_and_the_stop_has_the_recall_it_promised():
    """With a calibrated judge (P = the true probability of relevance) the model-based 90 % interval covers the true
    R about 90 % of the time, and where the rule stops (P(recall >= 0.5) >= 0.9) the true recall is at least
    0.5 in about 90 % of seeds or more (the loop's own simulation tests check the rule the same way)."""
    rng = np.random.default_rng(5)
    n = 600
    p = rng.beta(0.4, 2.5, n)
    truth = (rng.random(n) < p).astype(int)
    pool = ReplayPool(pair_ids=np.arange(n), key=rng.random(n), truth=truth, relevant_from=1)
    settings = ReplaySettings(mixes=[{"uncertain": 50, "random": 50}], batch=40, rounds=8, refit=False,
                              target=0.5, alpha=0.1, seeds=tuple(range(20)))
    runs = replay(pool, [ReplayJudge("calibrated", p)], settings)
    covered = [state.covered("model") for run in runs for state in run.states]
    assert 0.8 <= np.mean(covered) <= 1.0
    stops = [next((s for s in run.states if s.stopped), None) for run in runs]
    stopped = [s for s in stops if s is not None]
    assert len(stopped) >= 10
    assert np.mean([s.true_recall >= 0.5 for s in stopped]) >= 0.8


def test_a_miscalibrated_judge_without_refit_is_overconfident_and_the_refit_mends_it():
    pool, informative, _ = pool_and_judges(9, n=1500, shift=3.0)
    kept = replay(pool, [informative], ReplaySettings(mixes=[{"random": 100}], batch=50, rounds=6, refit=False,
                                                      seeds=(0, 1), model_draws=200))
    refit = replay(pool, [informative], ReplaySettings(mixes=[{"random": 100}], batch=50, rounds=6, refit=True,
                                                       seeds=(0, 1), model_draws=200))
    kept_cover = np.mean([s.covered("model") for run in kept for s in run.states[1:]])
    refit_cover = np.mean([s.covered("model") for run in refit for s in run.states[3:]])
    assert kept_cover < 0.2 and refit_cover >= 0.5
    assert all(s.calibrator is None for run in kept for s in run.states)


def test_seed_0_serves_the_pools_own_random_order_and_other_seeds_another():
    pool, informative, _ = pool_and_judges(1, n=300)
    settings = ReplaySettings(mixes=[{"random": 100}], batch=10, rounds=2, seeds=(0, 1), model_draws=50)
    first, second = replay(pool, [informative], settings)
    served = list(first.states[1].batch) + list(first.states[2].batch)
    assert served == pool.pair_ids[np.argsort(pool.key)][:20].tolist()
    assert second.states[1].batch != first.states[1].batch
    labelled = [pid for state in first.states for pid in state.batch]
    assert len(labelled) == len(set(labelled)) == 20


def test_a_replay_ends_when_its_queues_are_empty_and_never_labels_a_pair_twice():
    pool, informative, _ = pool_and_judges(2, n=30)
    states = replay_one(pool, informative, {"uncertain": 100}, ReplaySettings(
        mixes=[{"uncertain": 100}], batch=8, rounds=10, model_draws=50), seed=0)
    assert [s.labels for s in states] == [0, 8, 16, 24, 30]
    labelled = [pid for state in states for pid in state.batch]
    assert sorted(labelled) == pool.pair_ids.tolist()
    assert states[-1].verified_relevant == int(pool.truth.sum()) and states[-1].true_recall in (1.0, None)


def test_degenerate_truth_and_judges_give_undefined_measures_not_numbers():
    n = 50
    pool = ReplayPool(pair_ids=np.arange(n), key=np.linspace(0, 1, n, endpoint=False), truth=np.zeros(n, int),
                      relevant_from=1)
    constant = ReplayJudge("constant", np.full(n, 0.3))
    (run,) = replay(pool, [constant], ReplaySettings(mixes=[{"random": 100}], batch=10, rounds=2, model_draws=50))
    assert all(s.auroc is None and s.true_recall is None for s in run.states)  # no relevant pair: undefined
    arm = summarise([run], n)[0]
    assert arm.reached["verified_recall"].mean is None and arm.wss95 is None


def test_bad_settings_and_sizes_are_refused_with_the_reason():
    pool, informative, _ = pool_and_judges(4, n=100)
    with pytest.raises(ReplayError, match="mix"):
        ReplaySettings(mixes=[{"conflict": 1}], batch=5, rounds=2)
    with pytest.raises(ReplayError, match="batch and rounds"):
        ReplaySettings(mixes=[{"random": 1}], batch=0, rounds=2)
    with pytest.raises(ReplayError, match="seeds"):
        ReplaySettings(mixes=[{"random": 1}], batch=5, rounds=2, seeds=(1, 1))
    with pytest.raises(ReplayError, match="one P"):
        replay(pool, [ReplayJudge("short", np.zeros(3))], ReplaySettings(mixes=[{"random": 1}], batch=5, rounds=1))
    with pytest.raises(ReplayError, match="pair-rounds"):
        replay(pool, [informative], ReplaySettings(mixes=[{"random": 1}], batch=5,
                                                   rounds=REPLAY_MAX_PAIR_ROUNDS // 100, seeds=(0,)))
    with pytest.raises(ReplayError, match="true grade"):
        ReplayPool(pair_ids=np.arange(3), key=np.zeros(3), truth=np.array([0, -1, 1]), relevant_from=1)

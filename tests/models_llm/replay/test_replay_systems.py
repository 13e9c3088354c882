"""The replay's systems question (#50): the runs' nDCG@10 equals trec_eval's (pytrec_eval) on the same qrels, tau
is 1 when the exported qrels are the truth, and a judge that is noise ranks the runs worse than one that knows."""
from __future__ import annotations

import numpy as np
import pytest
import pytrec_eval
from scipy import stats

from models_llm.replay.engine import ReplayJudge, ReplayPool, ReplaySettings, replay
from models_llm.replay.summary import summarise
from models_llm.replay.systems import ReplayRuns, ReplayRunsError, RunScorer, systems_agreement


def world(seed: int = 0, queries: int = 6, per_query: int = 30, systems: int = 5):
    """A pool of queries x per_query pairs; runs of growing skill: run s puts each relevant pair's score up by s."""
    rng = np.random.default_rng(seed)
    n = queries * per_query
    query = np.repeat(np.arange(queries), per_query)
    truth = (rng.random(n) < 0.2).astype(int)
    rank = np.zeros((systems, n), dtype=np.int64)
    for s in range(systems):
        score = rng.normal(0, 1, n) + 0.8 * s * truth
        for q in range(queries):
            rows = np.flatnonzero(query == q)
            order = rows[np.argsort(-score[rows], kind="stable")]
            rank[s, order[:20]] = np.arange(1, 21)  # each run returns its top 20
    return truth, query, ReplayRuns([f"run{s}" for s in range(systems)], rank, query)


def test_the_runs_ndcg_at_10_is_trec_evals():
    truth, query, runs = world()
    relevant = np.random.default_rng(1).random(truth.size) < 0.3
    ours = RunScorer(runs).scores(relevant)
    qrels = {f"q{q}": {f"d{i}": int(relevant[i]) for i in np.flatnonzero(query == q)} for q in set(query.tolist())}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"})
    for r, name in enumerate(runs.names):
        ranked = runs.rank[r] > 0
        run = {f"q{q}": {f"d{i}": float(100 - runs.rank[r, i]) for i in np.flatnonzero((query == q) & ranked)}
               for q in set(query.tolist())}
        per_query = evaluator.evaluate(run)
        assert ours[r] == pytest.approx(np.mean([per_query[q]["ndcg_cut_10"] for q in qrels]), abs=1e-12), name


def test_tau_is_one_on_the_truth_and_undefined_when_every_run_ties():
    truth, _, runs = world()
    scores = RunScorer(runs).scores(truth.astype(bool))
    same = systems_agreement(scores, scores)
    assert same.kendall_tau == pytest.approx(1.0) and same.tau_ap == pytest.approx(1.0)
    reverse = systems_agreement(scores, -scores)
    assert reverse.kendall_tau == pytest.approx(stats.kendalltau(scores, -scores).statistic)
    assert systems_agreement(scores, np.zeros_like(scores)) == systems_agreement(np.ones(5), scores)
    assert systems_agreement(scores, np.zeros_like(scores)).kendall_tau is None
    with pytest.raises(ReplayRunsError, match="two runs"):
        ReplayRuns(["one"], np.zeros((1, 3), dtype=np.int64), np.zeros(3, dtype=np.int64))


def test_the_exported_qrels_of_a_judge_that_knows_keep_the_runs_order_and_a_noise_judges_do_not_at_first():
    truth, query, runs = world(seed=3, queries=10)
    n = truth.size
    rng = np.random.default_rng(4)
    pool = ReplayPool(pair_ids=np.arange(n), key=rng.random(n), truth=truth, relevant_from=1, query=query)
    knows = ReplayJudge("knows", np.clip(truth * 0.8 + 0.1 + rng.normal(0, 0.05, n), 0, 1))
    noise = ReplayJudge("noise", rng.random(n))
    settings = ReplaySettings(mixes=[{"random": 100}], batch=30, rounds=2, refit=False, seeds=(0, 1, 2),
                              model_draws=50)
    arms = {arm.judge: arm for arm in summarise(replay(pool, [knows, noise], settings, runs=runs), n)}
    assert arms["knows"].curves["kendall_tau"][0].mean == pytest.approx(1.0)
    assert arms["knows"].reached["kendall_tau"].per_seed == [0, 0, 0]
    assert arms["noise"].curves["kendall_tau"][0].mean < 0.6

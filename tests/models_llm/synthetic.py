"""Seeded synthetic judges for the metric tests (gold grades drawn from a hidden probability of relevance,
a judge whose P follows it with noise) and the rank_eval reference computed the way DIRAS's script does."""
from __future__ import annotations

import numpy as np
from rank_eval import Qrels, Run, evaluate

from models_llm.metrics import JudgeData, ScaleSpec

SCALE = ScaleSpec(gains={0: 0.0, 1: 0.5, 2: 1.0}, relevant_from=1)


def random_judge(seed: int = 0, n: int = 2000, queries: int = 25, *, coarse: bool = False,
                 interleaved: bool = True) -> JudgeData:
    """Pairs of `queries` queries; `coarse` rounds P to one decimal (verbalized confidence, many ties);
    `interleaved` mixes the queries' rows so that pool order is not query order. About a third of the
    pairs have a guess, a third a stated confidence."""
    rng = np.random.default_rng(seed)
    query = rng.integers(0, queries, n) * 7 + 3  # query ids need not be 0..k-1
    if not interleaved:
        query = np.sort(query)
    truth = rng.random(n)
    gold = np.where(rng.random(n) < truth, rng.integers(1, 3, n), 0)
    p = np.clip(truth + rng.normal(0.0, 0.25, n), 0.0, 1.0)
    if coarse:
        p = np.round(p, 1)
    guess = np.where(rng.random(n) < 0.33, (rng.random(n) < p).astype(float), np.nan)
    confidence = np.where(rng.random(n) < 0.33, rng.random(n), np.nan)
    intent = rng.choice(np.array(["facts", "advice", "howto", None], dtype=object), queries)
    return JudgeData(
        query=query, gold=gold, p=p, guess=guess, confidence=confidence, uncertain=rng.random(n) < 0.15,
        groups={"intent": intent[(query - 3) // 7]},
    )


def judge(query, gold, p, *, guess=None, confidence=None, uncertain=None, groups=None) -> JudgeData:
    """A JudgeData from short lists (no guesses or stated confidences unless given)."""
    n = len(p)
    return JudgeData(
        query=np.asarray(query), gold=np.asarray(gold), p=np.asarray(p, float),
        guess=np.full(n, np.nan) if guess is None else np.asarray(guess, float),
        confidence=np.full(n, np.nan) if confidence is None else np.asarray(confidence, float),
        uncertain=np.zeros(n, bool) if uncertain is None else np.asarray(uncertain, bool),
        groups=groups or {},
    )


def rank_eval_reference(data, scale=SCALE) -> dict[str, np.ndarray]:
    """Per-query scores the way DIRAS's script gets them: Qrels/Run filled query by query with the pairs
    in pool order. Gains 0, 0.5, 1 go in as the integers 0, 1, 2 (rank_eval keeps int qrels)."""
    ids, graded, binary, scores, q_ids = [], [], [], [], []
    for k, q in enumerate(dict.fromkeys(data.query.tolist())):
        rows = np.flatnonzero(data.query == q)
        q_ids.append(f"q{k:05d}")
        ids.append([f"d{i}" for i in rows])
        graded.append([int(round(2 * scale.gains[g])) for g in data.gold[rows]])
        binary.append([int(g >= scale.relevant_from) for g in data.gold[rows]])
        scores.append(data.p[rows].tolist())
    qrels, qrels_binary, run = Qrels(), Qrels(), Run()
    qrels.add_multi(q_ids, ids, graded)
    qrels_binary.add_multi(q_ids, ids, binary)
    run.add_multi(q_ids, ids, scores)
    # Qrels/Run hold the queries in order of first appearance (q00000, q00001, ...); reorder them by query
    # id, the order of the per-query arrays under test.
    order = np.argsort(list(dict.fromkeys(data.query.tolist())))
    out = evaluate(qrels, run, ["ndcg", "ndcg@10"], return_mean=False)
    out.update(evaluate(qrels_binary, run, ["map", "map@10"], return_mean=False))
    return {metric: values[order] for metric, values in out.items()}

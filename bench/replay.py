"""Replay speed (#50): 10 seeds x 20 rounds x 25 labels on a 7,136-pair pool (the sample project's size, 16 queries)
with two judges, the target being under 5 minutes on this 2-core machine. Pure models_llm, no database: the replay's
work is the engine's (selection, calibrator refit, estimates with 1,000 posterior draws, the judge's quality and the
systems' tau over 6 runs), which is what a Replay job runs once it has read the project's arrays.

    .venv/bin/python bench/replay.py [--seeds 10] [--rounds 20] [--batch 25] [--mixes 2]

Prints the wall time, the time per measured state, and PASS/MISS against the target.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]

import numpy as np  # noqa: E402

from models_llm.replay.engine import ReplayJudge, ReplayPool, ReplaySettings, replay  # noqa: E402
from models_llm.replay.summary import summarise  # noqa: E402
from models_llm.replay.systems import ReplayRuns  # noqa: E402

TARGET_S = 300.0
MIXES = [{"uncertain": 80, "random": 20}, {"random": 100}, {"disagreement": 80, "random": 20},
         {"stratified": 100}]


def world(n: int = 7136, queries: int = 16, runs: int = 6, seed: int = 0):
    rng = np.random.default_rng(seed)
    query = np.sort(rng.integers(0, queries, n))
    truth = (rng.random(n) < 595 / n).astype(int)
    pool = ReplayPool(pair_ids=np.arange(1, n + 1), key=rng.random(n), truth=truth, relevant_from=1, query=query)
    logit = 2.5 * (2 * truth - 1) + rng.normal(0, 1.5, n)
    judges = [ReplayJudge("informative", 1 / (1 + np.exp(-(logit - 2.0)))),
              ReplayJudge("weaker", 1 / (1 + np.exp(-(0.5 * logit + rng.normal(0, 1.5, n)))))]
    rank = np.zeros((runs, n), dtype=np.int64)
    for s in range(runs):
        score = rng.normal(0, 1, n) + 0.5 * s * truth
        for q in range(queries):
            rows = np.flatnonzero(query == q)
            top = rows[np.argsort(-score[rows])][:10]
            rank[s, top] = np.arange(1, top.size + 1)
    return pool, judges, ReplayRuns([f"run{s}" for s in range(runs)], rank, query)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--batch", type=int, default=25)
    parser.add_argument("--mixes", type=int, default=2, help="how many of the mixes to replay (1-4)")
    args = parser.parse_args()
    pool, judges, runs = world()
    settings = ReplaySettings(mixes=MIXES[:args.mixes], batch=args.batch, rounds=args.rounds,
                              seeds=tuple(range(args.seeds)))
    start = time.perf_counter()
    done = replay(pool, judges, settings, runs=runs)
    replayed = time.perf_counter() - start
    arms = summarise(done, pool.pair_ids.size)
    total = time.perf_counter() - start
    states = sum(len(run.states) for run in done)
    print(f"pool {pool.pair_ids.size:,} pairs, {len(judges)} judges, {len(runs.names)} runs; "
          f"{args.seeds} seeds x {args.rounds} rounds x {args.batch} labels x {args.mixes} mixes")
    print(f"replay {replayed:.1f} s, summary {total - replayed:.2f} s, {states:,} states measured, "
          f"{1000 * replayed / states:.1f} ms per state")
    for arm in arms:
        reached = arm.reached["exported_recall"]
        print(f"  {arm.mix} {arm.judge}: exported recall 0.9 after {reached.mean} labels "
              f"({reached.reached}/{len(reached.per_seed)} seeds); model interval covers R "
              f"{arm.coverage['model']:.0%}")
    ratio = total / TARGET_S
    print(f"{'PASS' if total < TARGET_S else 'MISS'}: {total:.1f} s of the {TARGET_S:.0f} s target "
          f"(ratio {ratio:.2f})")


if __name__ == "__main__":
    main()

"""Pairs/s of the embedding judge (the bundled all-MiniLM-L6-v2) before and after it embedded each distinct text
once (#48), on the ClimRetrieve sample's queries (with their definitions) and passages.

A measurement, not a test: it prints the figures and PASS/MISS, and always exits 0 once it has run.

    .venv/bin/python bench/embedding_judge.py                 # the first 1,000 pairs, query by query, on CPU
    .venv/bin/python bench/embedding_judge.py --pairs 7136    # all of them
    .venv/bin/python bench/embedding_judge.py --device cuda

The pairs are taken query by query, in parts of SCORING_WRITE_PAIRS (8), as a scoring chunk hands them to the
scorer. It measures, one after the other, each after a warm-up call:
  (a) before: each part embedded by sentence-transformers directly, its query and its passages in one batch,
      the query again in every part (what the judge did before #48, reproduced here only),
  (b) after: the product's EmbeddingScorer called part by part, which embeds each distinct text once,
  (c) after, with stored passages: the same with the passages' vectors given as the dense retriever stores them
      (their embedding, the retriever's cost, is timed apart and not counted),
and prints pairs/s, the ratios (b)/(a) and (c)/(a), PASS/MISS for (b)/(a) >= 5, and the largest difference
between the P of (a) and those of (b) and (c).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# bench/queue.py would shadow the standard library's queue module for a script run from bench/.
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]

import numpy as np  # noqa: E402
import torch  # noqa: E402
from sentence_transformers import SentenceTransformer  # noqa: E402

from models_llm.backends.embedding import EmbeddingScorer, passage_text, query_text  # noqa: E402
from models_llm.bundled import minilm_folder  # noqa: E402
from models_llm.retrieval.dense import DenseEncoder  # noqa: E402
from models_llm.types import JudgeConfig, PairInput  # noqa: E402

SAMPLE = ROOT / "data" / "climretrieve"
PART = 8  # settings.SCORING_WRITE_PAIRS' default
TARGET_RATIO = 5.0
# Loads the model's weights and kernels before timing, with texts outside the sample: nothing is kept for it.
WARM_UP = PairInput(pair_id=-1, query="A warm-up question?", passage="A warm-up paragraph.")


def sample_pairs(limit: int) -> list[PairInput]:
    queries = [json.loads(line) for line in (SAMPLE / "queries.jsonl").read_text().splitlines()]
    corpus = [json.loads(line) for line in (SAMPLE / "corpus.jsonl").read_text().splitlines()]
    pairs = [PairInput(pair_id=len(corpus) * qi + pi, query=q["text"], definition=q.get("definition"),
                       passage=d["text"], title=d.get("title", ""))
             for qi, q in enumerate(queries) for pi, d in enumerate(corpus)]
    return pairs[:limit]


def parts(pairs: list[PairInput]) -> list[list[PairInput]]:
    """Parts of PART pairs that never mix queries, as chunks (one query each) are written."""
    out: list[list[PairInput]] = []
    for pair in pairs:
        if out and len(out[-1]) < PART and out[-1][0].query == pair.query:
            out[-1].append(pair)
        else:
            out.append([pair])
    return out


def before(model: SentenceTransformer, batch_size: int, pairs: list[PairInput]) -> list[float]:
    """The judge before #48: one batch per part, its query and passages, nothing kept between parts."""
    p = []
    for part in parts(pairs):
        sides = [(query_text(pair, True), passage_text(pair)) for pair in part]
        texts = list(dict.fromkeys(text for side in sides for text in side))
        vectors = dict(zip(texts, model.encode(texts, batch_size=batch_size, normalize_embeddings=True,
                                               convert_to_numpy=True, show_progress_bar=False).astype(np.float64)))
        p += [(float(vectors[q] @ vectors[d]) + 1.0) / 2.0 for q, d in sides]
    return p


def after(scorer: EmbeddingScorer, pairs: list[PairInput], known: dict | None = None) -> list[float]:
    return [verdict.p for part in parts(pairs) for verdict in scorer.score(part, known=known)]


def timed(label: str, run, n: int) -> tuple[list[float], float]:
    started = time.perf_counter()
    p = run()
    seconds = time.perf_counter() - started
    print(f"{label:<48} {n:>6} pairs {seconds:>8.2f} s {n / seconds:>9.1f} pairs/s", flush=True)
    return p, n / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-size", type=int, default=JudgeConfig.batch_size)
    args = parser.parse_args()
    folder = minilm_folder()
    pairs = sample_pairs(args.pairs)
    n_texts = len({query_text(p, True) for p in pairs} | {passage_text(p) for p in pairs})
    n_queries = len({query_text(p, True) for p in pairs})
    n_old = sum(len({query_text(p, True) for p in part} | {passage_text(p) for p in part}) for part in parts(pairs))
    print(f"{platform.node()}: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; torch "
          f"{torch.__version__}, {torch.get_num_threads()} threads; device {args.device}; batch size "
          f"{args.batch_size}; {len(pairs)} pairs in {len(parts(pairs))} parts of <= {PART}, {n_texts} distinct texts")
    print(f"texts embedded: (a) {n_old}, (b) {n_texts}, (c) {n_queries}")

    model = SentenceTransformer(str(folder), device=args.device, local_files_only=True)
    before(model, args.batch_size, pairs[:PART])  # warm-up
    old, old_rate = timed("(a) before: per part, query re-embedded", lambda: before(model, args.batch_size, pairs),
                          len(pairs))

    config = JudgeConfig(backend="embedding", method="embedding", model=str(folder), device=args.device,
                         batch_size=args.batch_size)
    scorer = EmbeddingScorer(config)
    scorer.score([WARM_UP])
    new, new_rate = timed("(b) after: each distinct text once", lambda: after(scorer, pairs), len(pairs))
    scorer.close()

    retriever = DenseEncoder(folder, device=args.device, batch_size=64)
    texts = sorted({passage_text(p) for p in pairs})
    started = time.perf_counter()
    known = dict(zip(texts, retriever.encode(texts)))
    print(f"    (the dense retriever embedding the {len(texts)} passages to store them: "
          f"{time.perf_counter() - started:.2f} s, not counted below)")
    scorer = EmbeddingScorer(config)
    scorer.score([WARM_UP])
    stored, stored_rate = timed("(c) after, passages stored by the retriever", lambda: after(scorer, pairs, known),
                                len(pairs))
    scorer.close()

    ratio = new_rate / old_rate
    print(f"(b)/(a) = {ratio:.1f} x ({'PASS' if ratio >= TARGET_RATIO else 'MISS'}: target {TARGET_RATIO:.0f} x); "
          f"(c)/(a) = {stored_rate / old_rate:.1f} x")
    print(f"largest |P difference| from (a): (b) {np.max(np.abs(np.subtract(new, old))):.2e}, "
          f"(c) {np.max(np.abs(np.subtract(stored, old))):.2e}")


if __name__ == "__main__":
    main()

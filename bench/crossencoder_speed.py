"""Pairs/s of a cross-encoder judge against SmolLM2-135M Tok on the same ClimRetrieve pairs (#32: target >= 30x).

A measurement, not a test: it prints the figures and PASS/MISS, and always exits 0 once it has run.

    .venv/bin/python bench/crossencoder_speed.py [--queries 4] [--passages 16] [--max-length 256] [--device cpu]
        [--base FOLDER]

The cross-encoder is the bundled all-MiniLM-L6-v2 under a one-logit head (seeded, untrained: a trained head of the
same shape costs the same time), or with --base a re-ranker folder the operator fetched (an ms-marco MiniLM
cross-encoder, a bge-reranker), scored by the crossencoder backend with the definition in front of the question,
cut to --max-length tokens. SmolLM2 Tok is the hf backend as the workers run it (shared prefix per query, batched
paragraphs). Each scorer is loaded and warmed on one pair first; the timed pass scores every pair once.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# bench/queue.py would shadow the standard library's queue module for a script run from bench/.
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from sentence_transformers import CrossEncoder

from bench.scoring import load_pairs
from models_llm.backends import ScorerConfigError, load_scorer
from models_llm.bundled import minilm_folder, smollm2_folder
from models_llm.types import JudgeConfig

TARGET_RATIO = 30.0


def timed(scorer, pairs) -> float:
    scorer.score(pairs[:1])  # warm-up: lazy loading, first kernels
    started = time.perf_counter()
    verdicts = scorer.score(pairs)
    seconds = time.perf_counter() - started
    assert all(v.status == "ok" for v in verdicts), [v.error for v in verdicts if v.status != "ok"][:3]
    return len(pairs) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=4)
    parser.add_argument("--passages", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--base", type=Path, help="a cross-encoder or re-ranker folder to time (default: the bundled "
                        "all-MiniLM-L6-v2 under a new one-logit head)")
    args = parser.parse_args()
    pairs = load_pairs(args.queries, args.passages)
    if args.base:
        folder, name = args.base, args.base.name
    else:
        folder, name = Path(tempfile.mkdtemp(prefix="crossencoder-")) / "minilm-head", "all-MiniLM-L6-v2 + head"
        torch.manual_seed(0)
        CrossEncoder(str(minilm_folder()), num_labels=1, local_files_only=True, device="cpu").save_pretrained(
            str(folder))
    try:
        cross = load_scorer(JudgeConfig(backend="crossencoder", method="crossencoder", model=str(folder),
                                        max_length=args.max_length, device=args.device, batch_size=16))
    except ScorerConfigError as exc:
        sys.exit(f"--base {folder}: {exc}")
    tok = load_scorer(JudgeConfig(backend="hf", method="tok", model=str(smollm2_folder(ROOT / "var")),
                                  device=args.device))
    cross_rate = timed(cross, pairs)
    tok_rate = timed(tok, pairs)
    ratio = cross_rate / tok_rate
    print(f"{len(pairs)} pairs ({args.queries} queries x up to {args.passages} judged ClimRetrieve passages, full "
          f"texts), {args.device}, {os.cpu_count()} CPUs, torch {torch.__version__}, {platform.python_version()}")
    print("| judge | pairs/s |")
    print("|---|---|")
    print(f"| crossencoder ({name}, max_length {args.max_length}) | {cross_rate:.1f} |")
    print(f"| SmolLM2-135M Tok (hf backend) | {tok_rate:.2f} |")
    print(f"crossencoder / Tok = {ratio:.1f}x: {'PASS' if ratio >= TARGET_RATIO else 'MISS'} (target {TARGET_RATIO:.0f}x)")


if __name__ == "__main__":
    main()

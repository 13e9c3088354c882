"""A cross-encoder student trained on DIRAS's general-QA files on this machine's CPU (#32): all-MiniLM-L6-v2 with a new
one-logit head learns GPT-4's P(relevant) from ../shared/data/diras-distill/ (ASQA, QAMPARI, RAG-Bench: 5,200
answers) through CrossEncoderTrainer, and is judged on the questions held out (15 % of them, whole questions).

A measurement, not a test: it prints the figures and writes them to bench/out/crossencoder_student.json. Reported,
with GPT-4's guess (its P >= 0.5) on the held-out examples as the reference: AUROC, ECE (10 equal-width bins) and
Brier of the student, of the untrained head it started from and of the MiniLM embedding judge; the training
examples/s and wall time (target: two epochs in under 30 minutes here).

    .venv/bin/python bench/crossencoder_student.py [--epochs 2] [--learning-rate 3e-5] [--batch-size 16]
        [--max-length 256] [--warmup-ratio 0.1] [--limit N] [--no-definition] [--data ../shared/data/diras-distill]
        [--base FOLDER]

--base: the folder the student starts from (default: the bundled all-MiniLM-L6-v2 with a new head), such as a
relevance-trained re-ranker the operator fetched (an ms-marco MiniLM cross-encoder), the base the recipe expects.

The settings are models_llm.finetune.crossencoder_student.CrossEncoderSettings' defaults except where an option
says; --limit trains on the first N training examples (a quick try)."""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from models_llm.backends import load_scorer
from models_llm.bundled import minilm_folder
from models_llm.finetune.crossencoder_student import (
    CrossEncoderSettings,
    FinetuneError,
    SoftPair,
    crossencoder_finetune,
    diras_fields,
    soft_pair_query,
)
from models_llm.finetune.evaluation import agreement
from models_llm.finetune.files import read_file_examples
from models_llm.finetune.split import split_groups
from models_llm.types import JudgeConfig, PairInput

FILES = ("asqa_train_data.csv", "qampari_train_data.csv", "rag_bench_train_data.csv")


def read_all(folder: Path) -> list[tuple[str, object]]:
    examples = []
    for name in FILES:
        with (folder / name).open(encoding="utf-8", newline="") as handle:
            read = read_file_examples(handle, name=name, skip_bad=True)
        print(f"{name}: {len(read.examples)} examples ({read.layout}), {len(read.skipped)} rows skipped")
        examples += [(name, example) for example in read.examples]
    return examples


def describe(label: str, p: list[float], reference: list[int]) -> dict:
    found = agreement(p, reference)
    row = {"judge": label, "n": found.n, "auroc": found.auroc, "ece": found.ece, "brier": found.brier,
           "accuracy": found.accuracy}
    print(f"| {label} | {found.auroc:.3f} | {found.ece:.3f} | {found.brier:.3f} | {found.accuracy:.3f} |", flush=True)
    return row


def crossencoder_p(folder: str, pairs: list[SoftPair], max_length: int) -> list[float]:
    scorer = load_scorer(JudgeConfig(backend="crossencoder", method="crossencoder", model=folder,
                                     max_length=max_length, batch_size=32))
    from models_llm.backends.crossencoder import probabilities

    return probabilities(scorer.logits([(pair.query, pair.passage) for pair in pairs])).tolist()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "diras-distill")
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--learning-rate", type=float, default=CrossEncoderSettings.learning_rate)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--warmup-ratio", type=float, default=CrossEncoderSettings.warmup_ratio)
    parser.add_argument("--held-out", type=float, default=0.15, help="share of the questions held out")
    parser.add_argument("--limit", type=int, default=0, help="train on the first N training examples only")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--base", type=Path, help="the base folder (default: the bundled all-MiniLM-L6-v2)")
    parser.add_argument("--no-definition", action="store_true",
                        help="the query side is the question alone (DIRAS's definition is the same on every example)")
    args = parser.parse_args()

    settings = CrossEncoderSettings(epochs=args.epochs, learning_rate=args.learning_rate, batch_size=args.batch_size,
                                    max_length=args.max_length, warmup_ratio=args.warmup_ratio, seed=args.seed,
                                    save_steps=1_000_000, use_definition=not args.no_definition)
    examples = read_all(args.data)
    held = split_groups([f"{name}:{example.group}" for name, example in examples], args.held_out, args.seed)
    train, test, unreadable = [], [], 0
    for name, example in examples:
        try:
            definition, question, paragraph = diras_fields(example.user)
        except FinetuneError:
            unreadable += 1
            continue
        pair = SoftPair(query=soft_pair_query(question, definition, settings), passage=paragraph, target=example.p)
        (test if f"{name}:{example.group}" in held else train).append((pair, question, definition))
    if args.limit:
        train = train[:args.limit]
    print(f"{len(train)} training examples, {len(test)} held out ({len(held)} questions), {unreadable} prompts "
          f"not in DIRAS's layout; {os.cpu_count()} CPUs, torch {torch.__version__}, {torch.get_num_threads()} "
          "threads", flush=True)

    work = Path(tempfile.mkdtemp(prefix="crossencoder-student-"))
    started = time.monotonic()
    try:
        result = crossencoder_finetune(
            base_folder=str(args.base or minilm_folder()), pairs=[pair for pair, _, _ in train],
            work_dir=str(work / "work"), model_dir=str(work / "student"), settings=settings,
            initial_dir=str(work / "initial"))
    except FinetuneError as exc:
        sys.exit(f"the student could not train: {exc}")
    wall = time.monotonic() - started
    per_s = len(train) * args.epochs / result.seconds
    print(f"trained {result.steps} steps on {len(train)} examples x {args.epochs:g} epochs in {wall / 60:.1f} min "
          f"({per_s:.2f} examples/s; the Trainer says {result.examples_per_s:.2f}); target: two epochs in under 30 "
          f"minutes: {'PASS' if args.epochs >= 2 and wall < 1800 and not args.limit else 'n/a' if args.limit else 'MISS'}",
          flush=True)

    pairs = [pair for pair, _, _ in test]
    reference = [int(pair.target >= 0.5) for pair in pairs]
    print("| judge (held-out, GPT-4's guess as reference) | AUROC | ECE | Brier | accuracy |\n|---|---|---|---|---|")
    rows = [describe("cross-encoder student", crossencoder_p(str(work / "student"), pairs, args.max_length),
                     reference),
            describe(f"its start ({args.base.name}'s head)" if args.base else
                     "untrained head (all-MiniLM-L6-v2 + new head)",
                     crossencoder_p(str(work / "initial"), pairs, args.max_length), reference)]
    embedding = load_scorer(JudgeConfig(backend="embedding", method="embedding", model=str(minilm_folder())))
    verdicts = embedding.score([PairInput(pair_id=i, query=question, passage=pair.passage, definition=definition)
                                for i, (pair, question, definition) in enumerate(test)])
    rows.append(describe("MiniLM embedding judge", [v.p for v in verdicts], reference))
    out = ROOT / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / "crossencoder_student.json").write_text(json.dumps({
        "settings": settings.as_dict(), "train": len(train), "held_out": len(test), "steps": result.steps,
        "wall_s": wall, "examples_per_s": per_s, "losses": result.losses[::10], "judges": rows}, indent=2))


if __name__ == "__main__":
    main()

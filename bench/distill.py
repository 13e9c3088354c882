"""DIRAS distillation on this machine's CPU: SmolLM2-135M-Instruct fine-tuned with LoRA on GPT-4's answers from
DIRAS's instruction-tuning files (ASQA, QAMPARI, RAG-Bench: ../shared/data/diras-distill/), for as many examples
as fit in a time budget (30 minutes by default), then judged with Tok on a held-out split of the same files.

A measurement, not a test: it prints the figures and writes them to bench/out/distill.json. Reported, with GPT-4's
guess as the reference on the held-out examples (split by question: no question on both sides): AUROC, ECE (10
equal-width bins) and Brier of the base model and of the student, the training examples/s and the loss curve.

    DEBUG=1 .venv/bin/python bench/distill.py [--minutes 30] [--held-out 300] [--data ../shared/data/diras-distill]

The hyper-parameters are DIRAS App. F's (models_llm.finetune.lora.LoraSettings) except where an option says."""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[0] = str(ROOT)  # not bench/: its queue.py would shadow the standard library's
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "annotator.settings")
os.environ.setdefault("DEBUG", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import django  # noqa: E402

django.setup()

import torch  # noqa: E402
from django.conf import settings  # noqa: E402

from models_llm.bundled import smollm2_folder  # noqa: E402
from models_llm.finetune.chat import ChatExample, DistillFormatError, encode  # noqa: E402
from models_llm.finetune.evaluation import agreement, tok_probabilities  # noqa: E402
from models_llm.finetune.files import read_file_examples  # noqa: E402
from models_llm.finetune.lora import LoraSettings, finetune  # noqa: E402
from models_llm.finetune.lora_training import load_adapter  # noqa: E402
from models_llm.finetune.split import split_groups  # noqa: E402

FILES = ("asqa_train_data.csv", "qampari_train_data.csv", "rag_bench_train_data.csv")


def read_all(folder: Path) -> list:
    examples = []
    for name in FILES:
        with (folder / name).open(encoding="utf-8", newline="") as handle:
            read = read_file_examples(handle, name=name, skip_bad=True)
        print(f"{name}: {len(read.examples)} examples ({read.layout}), {len(read.skipped)} rows skipped"
              + (f": first {read.skipped[0]}" if read.skipped else ""))
        examples += [(name, example) for example in read.examples]
    return examples


def held_out_split(examples: list, count: int, seed: int) -> tuple[list, list]:
    """(train, held_out): whole questions held out until about `count` examples are."""
    groups = [f"{name}:{example.group}" for name, example in examples]
    share = min(0.5, count / len(examples))
    held = split_groups(groups, share, seed)
    train = [example for group, (_, example) in zip(groups, examples) if group not in held]
    held_out = [example for group, (_, example) in zip(groups, examples) if group in held]
    return train, held_out


def score(base: str, adapter: str | None, examples: list[ChatExample]) -> tuple[list[float], float]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base, local_files_only=True)
    model = (load_adapter(base, adapter) if adapter else
             AutoModelForCausalLM.from_pretrained(base, local_files_only=True, dtype=torch.float32)).eval()
    started = time.monotonic()
    p = tok_probabilities(model, tokenizer, examples, batch_size=4)
    return p, time.monotonic() - started


def fits(tokenizer, example: ChatExample, max_length: int) -> bool:
    """The whole example (prompt and answer, uncut) is at most max_length tokens: a CPU budget keeps short ones."""
    try:
        return len(encode(tokenizer, example, source_max=10**9).input_ids) <= max_length
    except DistillFormatError:
        return False


def describe(label: str, p: list[float], reference: list[int]) -> dict:
    found = agreement(p, reference)
    fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    print(f"{label:>8}: n {found.n}  AUROC {fmt(found.auroc)}  ECE {fmt(found.ece)}  Brier {fmt(found.brier)}  "
          f"accuracy {fmt(found.accuracy)}  mean P {sum(p) / len(p):.3f}")
    return found.__dict__


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "diras-distill")
    parser.add_argument("--minutes", type=float, default=30.0, help="training time budget")
    parser.add_argument("--held-out", type=int, default=300, help="about this many held-out examples")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32, help="effective batch (DIRAS: 32; a CPU budget of "
                                                                    "minutes gets more optimizer steps from 8)")
    parser.add_argument("--max-length", type=int, default=768)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    base = str(smollm2_folder(settings.VAR_DIR))
    print(f"base {base}; torch {torch.__version__}, {torch.get_num_threads()} threads; load {os.getloadavg()}")
    examples = read_all(args.data)
    train, held_out = held_out_split(examples, args.held_out, args.seed)
    random.Random(args.seed).shuffle(train)
    reference = [int(example.p >= 0.5) for example in held_out]
    print(f"train pool {len(train)} examples, held out {len(held_out)} ({sum(reference)} GPT-4 Yes)")
    chats = lambda rows: [ChatExample(system=r.system, user=r.user, answer=r.answer) for r in rows]  # noqa: E731
    results: dict = {"held_out": len(held_out), "held_out_yes": sum(reference), "minutes": args.minutes}

    base_p, seconds = score(base, None, chats(held_out))
    print(f"base model Tok on the held-out examples: {len(held_out) / seconds:.1f} examples/s")
    results["base"] = describe("base", base_p, reference)

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base, local_files_only=True)
    fitting = [row for row in train if fits(tokenizer, ChatExample(row.system, row.user, row.answer), args.max_length)]
    print(f"{len(fitting)} of {len(train)} training examples fit in {args.max_length} tokens")
    lora = LoraSettings(micro_batch=args.micro_batch, batch_size=args.batch_size, epochs=1.0, source_max_length=args.max_length,
                        save_steps=1_000_000,
                        seed=args.seed)
    print(f"settings: {lora.as_dict()}")
    curve: list[tuple[int, float]] = []

    def progress(p) -> bool:
        curve.append((p.step, p.loss))
        eta = f"{p.eta_s / 60:.0f} min to the end of the epoch" if p.eta_s else ""
        print(f"  step {p.step}/{p.total_steps} loss {p.loss:.4f} {p.examples_per_s or 0:.2f} examples/s {eta}",
              flush=True)
        return True

    with tempfile.TemporaryDirectory() as work:
        result = finetune(base_folder=base, examples=chats(fitting), work_dir=f"{work}/run",
                          adapter_dir=f"{work}/adapter", settings=lora, on_progress=progress,
                          stop_after_s=args.minutes * 60)
        trained = result.steps * lora.batch_size
        print(f"trained {result.steps} steps = {trained} examples in {result.seconds / 60:.1f} min: "
              f"{trained / result.seconds:.2f} training examples/s; load {os.getloadavg()}")
        student_p, _ = score(base, f"{work}/adapter", chats(held_out))
    results["training"] = {"steps": result.steps, "examples": trained, "seconds": round(result.seconds, 1),
                           "examples_per_s": round(trained / result.seconds, 3), "loss_curve": curve,
                           "settings": lora.as_dict()}
    results["student"] = describe("student", student_p, reference)
    print("loss curve (every 5th step): " + ", ".join(f"{s}:{l:.3f}" for s, l in curve[::5]))
    out = ROOT / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / "distill.json").write_text(json.dumps(results, indent=1))
    print(f"written to {out / 'distill.json'}")


if __name__ == "__main__":
    main()

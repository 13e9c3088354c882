"""Pairs/s of the hf backend against the plain ways of judging, on real ClimRetrieve queries and passages.

A measurement, not a test: it prints the figures and PASS/MISS, and always exits 0 once it has run.

    .venv/bin/python bench/scoring.py                        # SmolLM2-135M-Instruct on CPU
    .venv/bin/python bench/scoring.py --device cuda --random-llama8b --peak-tflops 989   # H100 SXM

It measures, one after the other on the same pairs:
  (a) naive: one `generate()` per pair writing the Ask answer (what DIRAS's and UMBRELA's scripts do),
  (b) Tok, one full forward pass per pair (no cache, no batching),
  (c) Tok with the shared prefix computed once per query and the paragraphs batched (the backend's `score`),
and prints pairs/s, the ratios (c)/(a) and (c)/(b), PASS/MISS for (c)/(a) >= 3, and how far (b) and (c) agree.
`--random-llama8b` judges with a randomly initialised Llama-3-8B-shaped model in bf16 (SmolLM2's tokenizer),
runs (a) and (c) only, and also prints each as a fraction of the GPU's dense bf16 peak.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# bench/queue.py would shadow the standard library's queue module for a script run from bench/.
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]

import torch  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, PreTrainedTokenizerBase  # noqa: E402

from models_llm.backends.hf import HFScorer  # noqa: E402
from models_llm.bundled import smollm2_folder  # noqa: E402
from models_llm.types import JudgeConfig, PairInput, Verdict  # noqa: E402

TARGET_RATIO = 3.0
# Llama-3-8B's shape (8.03B parameters).
LLAMA8B = {
    "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 8192, "rope_theta": 500000.0,
    "tie_word_embeddings": False,
}
DATA = ROOT / "data" / "climretrieve"


def load_pairs(queries: int, passages: int) -> list[PairInput]:
    """`passages` passages judged for each of the first `queries` queries (with their definitions)."""
    rows = [json.loads(line) for line in (DATA / "queries.jsonl").read_text().splitlines() if line.strip()]
    corpus = {}
    for line in (DATA / "corpus.jsonl").read_text().splitlines():
        if line.strip():
            doc = json.loads(line)
            corpus[doc["_id"]] = doc
    judged: dict[str, list[str]] = {}
    for line in (DATA / "judgments.jsonl").read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            docs = judged.setdefault(row["query_id"], [])
            if row["doc_id"] not in docs:
                docs.append(row["doc_id"])
    pairs = []
    for query in rows[:queries]:
        for doc_id in judged.get(query["_id"], [])[:passages]:
            doc = corpus[doc_id]
            definition, title = query.get("definition"), doc.get("title", "")
            pairs.append(PairInput(len(pairs), query["text"], doc["text"], definition, title))
    return pairs


def random_llama8b(device: str, folder: Path) -> tuple[torch.nn.Module, PreTrainedTokenizerBase]:

    config = LlamaConfig(**LLAMA8B)
    torch.manual_seed(0)
    with torch.device(device):  # initialised on the GPU: 16 GB of random weights, no disk
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    return model, AutoTokenizer.from_pretrained(folder, local_files_only=True)


def timed(
    run: Callable[[Sequence[PairInput]], list[Verdict]], pairs: list[PairInput], device: str
) -> tuple[float, list[Verdict]]:
    """(pairs/s, verdicts) of one run over `pairs`, after a warm-up on two of them."""
    run(pairs[:2])  # warm-up: first calls allocate and pick kernels
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    started = time.perf_counter()
    verdicts = run(pairs)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return len(pairs) / (time.perf_counter() - started), verdicts


def machine(device: str) -> str:
    if device.startswith("cuda"):
        return f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}"
    cpu = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        lines = cpuinfo.read_text().splitlines()
        names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
        cpu = names[0] if names else cpu
    return f"{cpu}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}, torch {torch.__version__}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=2)
    parser.add_argument("--passages", type=int, default=16, help="passages per query")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=16,
                        help="(a)'s answer budget: '[Guess]: Yes\\n[Confidence]: 0.85' and the end token are 16")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--random-llama8b", action="store_true", help="a random Llama-3-8B-shaped model in bf16")
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="GPU dense bf16 peak (989 for H100 SXM)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"],
                        help="SmolLM2's dtype (the random Llama is always bf16)")
    parser.add_argument("--var-dir", type=Path, default=ROOT / "var")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    folder = smollm2_folder(args.var_dir)
    pairs = load_pairs(args.queries, args.passages)
    if args.random_llama8b:
        model, tokenizer = random_llama8b(args.device, folder)
        dtype, name = "bfloat16", "random Llama-3-8B-shaped (bf16)"
    else:
        model = tokenizer = None
        dtype, name = args.dtype, f"SmolLM2-135M-Instruct ({args.dtype})"
    config = JudgeConfig(backend="hf", model=str(folder) if model is None else "random-llama8b", device=args.device,
                         dtype=dtype, batch_size=args.batch_size, max_new_tokens=args.max_new_tokens)
    scorer = HFScorer(config, model=model, tokenizer=tokenizer)
    parameters = sum(p.numel() for p in scorer.model.parameters())
    encoded = [scorer.encode(pair, "tok") for pair in pairs]
    prompt_tokens = sum(len(e.ids) for e in encoded) / len(pairs)
    prefixes = {e.prefix for e in encoded}
    run_tokens = (sum(len(e.own) for e in encoded) + sum(len(p) for p in prefixes)) / len(pairs)

    print(f"machine: {machine(args.device)}; torch threads: {torch.get_num_threads()}")
    print(f"model: {name}, {parameters / 1e6:,.0f}M parameters, on {args.device}")
    print(f"pairs: {len(pairs)} ({args.queries} queries x {args.passages} passages); Tok prompt "
          f"{prompt_tokens:.0f} tokens/pair, of which {run_tokens:.0f} run with the prefix cache; "
          f"batch size {args.batch_size}; (a) answers up to {args.max_new_tokens} tokens")

    naive, asked = timed(scorer.score_generate_naive, pairs, args.device)
    completion = sum(v.completion_tokens or 0 for v in asked) / len(asked)
    print(f"(a) naive generate() per pair:         {naive:8.2f} pairs/s   ({completion:.1f} answer tokens/pair, "
          f"{sum(v.status == 'ok' for v in asked)}/{len(asked)} parsed)")
    if not args.random_llama8b:
        plain, plain_verdicts = timed(scorer.score_tok_plain, pairs, args.device)
        print(f"(b) Tok, one forward pass per pair:    {plain:8.2f} pairs/s")
    cached, verdicts = timed(scorer.score, pairs, args.device)
    print(f"(c) Tok, prefix cache + batches:       {cached:8.2f} pairs/s")

    ratio = cached / naive
    print(f"(c)/(a) = {ratio:.2f}  target >= {TARGET_RATIO:g}: {'PASS' if ratio >= TARGET_RATIO else 'MISS'}")
    if not args.random_llama8b:
        worst = max(abs(v.p - w.p) for v, w in zip(verdicts, plain_verdicts))
        print(f"(c)/(b) = {cached / plain:.2f}  (largest |P(c) - P(b)| = {worst:.1e})")
    if args.device.startswith("cuda"):
        # The limit: every pair's whole prompt through all parameters (2 FLOPs per parameter and token) at
        # the GPU's dense bf16 peak. The prefix cache skips part of that work, so (c) is also given per the
        # tokens it actually runs.
        limit = args.peak_tflops * 1e12 / (2 * parameters * prompt_tokens)
        print(f"physical limit: {limit:.1f} pairs/s ({prompt_tokens:.0f} prompt tokens/pair, "
              f"{args.peak_tflops:g} TFLOP/s)")
        print(f"(a) {naive / limit:.1%} of it; (c) {cached / limit:.1%} of it, "
              f"{cached * 2 * parameters * run_tokens / (args.peak_tflops * 1e12):.1%} of peak on the tokens it runs")
    scorer.close()


if __name__ == "__main__":
    main()

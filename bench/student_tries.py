"""Variants of the cross-encoder student tried against the quality target of #32 (bench/README.md, "Tries toward the
quality target"): each trains on the first N of DIRAS's general-QA training examples and reports AUROC, ECE and Brier
on the held-out questions as bench/crossencoder_student.py does (GPT-4's guess as the reference). A measurement
for the next try, not a product path: the variants live here until one is worth a setting of the student.

    .venv/bin/python bench/student_tries.py VARIANT [--limit 1000] [--epochs 1] [--learning-rate 3e-5]

VARIANT:
  pooler-identity   the cross-encoder student with BERT's pooler set to the identity (all-MiniLM-L6-v2's pooler was
                    never trained: its weights have std 0.009 and a zero bias, so tanh(W CLS) starts near 0)
  head-lr           pooler-identity, and the pooler and head learn at --head-learning-rate (default 1e-3)
  mean-pooling      a cross-encoder of the encoder's mean-pooled tokens and a linear head (the pooling
                    all-MiniLM-L6-v2 was trained with), built from sentence-transformers modules
  bi-cosine         not a cross-encoder: all-MiniLM-L6-v2 fine-tuned as a bi-encoder so that cos = 2P - 1 (the
                    embedding judge's P = (cos + 1) / 2), CosineSimilarityLoss
  bi-cosent         the bi-encoder with CoSENTLoss (a ranking loss on the teacher's P)
The query side is the question alone for the bi-encoders, definition + question for the cross-encoders."""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

import models_llm.distill.crossencoder_student as student
from models_llm.bundled import minilm_folder

_spec = importlib.util.spec_from_file_location("crossencoder_bench", ROOT / "bench" / "crossencoder_student.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

CROSS = ("pooler-identity", "head-lr", "mean-pooling")
BI = ("bi-cosine", "bi-cosent")


def _pooler_identity(model) -> None:
    pooler = model.model.base_model.pooler.dense
    with torch.no_grad():
        pooler.weight.copy_(torch.eye(pooler.weight.shape[0]))
        pooler.bias.zero_()


def _patch_cross(variant: str, head_lr: float) -> None:
    from sentence_transformers import CrossEncoder
    from sentence_transformers.base.modules import Dense, Transformer
    from sentence_transformers.cross_encoder import CrossEncoderTrainer
    from sentence_transformers.sentence_transformer.modules import Pooling

    plain = student.load_student_encoder

    def load(base_folder, settings, device):
        if variant == "mean-pooling":
            local = {"local_files_only": True}
            encoder = Transformer(base_folder, max_seq_length=settings.max_length, model_kwargs=local,
                                  processor_kwargs=local, config_kwargs=local)
            width = encoder.get_embedding_dimension()
            return CrossEncoder(modules=[encoder, Pooling(width, pooling_mode="mean"),
                                         Dense(width, 1, activation_function=None, module_output_name="scores")],
                                device=device, num_labels=1, max_length=settings.max_length)
        model = plain(base_folder, settings, device)
        _pooler_identity(model)
        return model

    student.load_student_encoder = load
    if variant != "head-lr":
        return

    def create_optimizer(self):
        if self.optimizer is None:
            groups = []
            for is_head in (False, True):
                named = [(n, p) for n, p in self.model.named_parameters()
                         if p.requires_grad and (("classifier" in n or "pooler" in n) == is_head)]
                rate = head_lr if is_head else self.args.learning_rate
                for decays in (True, False):
                    chosen = [p for n, p in named if ("bias" in n or "LayerNorm" in n) != decays]
                    groups.append({"params": chosen, "lr": rate,
                                   "weight_decay": self.args.weight_decay if decays else 0.0})
            self.optimizer = torch.optim.AdamW(groups)
        return self.optimizer

    CrossEncoderTrainer.create_optimizer = create_optimizer


def _examples(limit: int, seed: int):
    examples = bench.read_all(ROOT.parent / "shared" / "data" / "diras-distill")
    held = bench.split_groups([f"{name}:{example.group}" for name, example in examples], 0.15, seed)
    train, test = [], []
    for name, example in examples:
        try:
            definition, question, paragraph = bench.diras_fields(example.user)
        except bench.FinetuneError:
            continue
        (test if f"{name}:{example.group}" in held else train).append((definition, question, paragraph, example.p))
    return (train[:limit] if limit else train), test


def _cross(variant: str, args, train, test) -> None:
    from sentence_transformers import CrossEncoder

    _patch_cross(variant, args.head_learning_rate)
    settings = student.CrossEncoderSettings(epochs=args.epochs, learning_rate=args.learning_rate,
                                            save_steps=1_000_000, seed=args.seed)
    pair = lambda d, q, p, t: student.SoftPair(query=student.soft_pair_query(q, d, settings), passage=p, target=t)
    work = Path(tempfile.mkdtemp(prefix="student-try-"))
    started = time.monotonic()
    student.crossencoder_finetune(base_folder=str(minilm_folder()), pairs=[pair(*row) for row in train],
                                  work_dir=str(work / "work"), model_dir=str(work / "student"), settings=settings,
                                  initial_dir=str(work / "initial"))
    print(f"trained {len(train)} x {args.epochs:g} epochs in {(time.monotonic() - started) / 60:.1f} min", flush=True)
    held = [pair(*row) for row in test]
    reference = [int(item.target >= 0.5) for item in held]
    for label, folder in ((variant, work / "student"), ("its untrained start", work / "initial")):
        model = CrossEncoder(str(folder), local_files_only=True, max_length=settings.max_length)
        p = model.predict([(item.query, item.passage) for item in held], batch_size=32,
                          activation_fn=torch.nn.Sigmoid(), show_progress_bar=False)
        bench.describe(label, [float(x) for x in p], reference)


def _bi(variant: str, args, train, test) -> None:
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer import losses

    model = SentenceTransformer(str(minilm_folder()), device="cpu", local_files_only=True)
    model.max_seq_length = 256
    reference = [int(t >= 0.5) for *_, t in test]

    def describe(label: str) -> None:
        queries = model.encode([q for _, q, _, _ in test], batch_size=32, convert_to_tensor=True,
                               normalize_embeddings=True)
        passages = model.encode([p for _, _, p, _ in test], batch_size=32, convert_to_tensor=True,
                                normalize_embeddings=True)
        bench.describe(label, [(c + 1) / 2 for c in (queries * passages).sum(-1).tolist()], reference)

    describe("bi-encoder before training (question alone)")
    cosine = variant == "bi-cosine"
    data = Dataset.from_dict({"sentence1": [q for _, q, _, _ in train], "sentence2": [p for _, _, p, _ in train],
                              "score": [2 * t - 1 if cosine else t for *_, t in train]})
    loss = losses.CosineSimilarityLoss(model) if cosine else losses.CoSENTLoss(model)
    training = SentenceTransformerTrainingArguments(
        output_dir=tempfile.mkdtemp(prefix="student-try-"), per_device_train_batch_size=16,
        learning_rate=args.learning_rate, warmup_steps=0.1, num_train_epochs=args.epochs, use_cpu=True,
        report_to="none", disable_tqdm=True, save_strategy="no", seed=args.seed, data_seed=args.seed)
    started = time.monotonic()
    SentenceTransformerTrainer(model=model, args=training, train_dataset=data, loss=loss).train()
    print(f"trained {len(train)} x {args.epochs:g} epochs in {(time.monotonic() - started) / 60:.1f} min", flush=True)
    describe(variant)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("variant", choices=CROSS + BI)
    parser.add_argument("--limit", type=int, default=1000, help="the first N training examples (0: all)")
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--learning-rate", type=float, default=3e-5)
    parser.add_argument("--head-learning-rate", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    train, test = _examples(args.limit, args.seed)
    print(f"{len(train)} training examples, {len(test)} held out", flush=True)
    print("| judge (held-out, GPT-4's guess as reference) | AUROC | ECE | Brier | accuracy |\n|---|---|---|---|---|",
          flush=True)
    (_cross if args.variant in CROSS else _bi)(args.variant, args, train, test)


if __name__ == "__main__":
    main()

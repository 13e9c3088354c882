"""Variants of the cross-encoder student tried against the quality target of #32 (bench/README.md, "Tries toward the
quality target"): each trains on the first N of DIRAS's general-QA training examples and reports AUROC, ECE and Brier
on the held-out questions as bench/crossencoder_student.py does (GPT-4's guess as the reference). A measurement
for the next try, not a product path: the variants live here until one is worth a setting of the student.

    .venv/bin/python bench/student_tries.py VARIANT [--limit 1000] [--epochs 1] [--learning-rate 3e-5]

VARIANT:
  pooler-identity   the cross-encoder student with BERT's pooler set to the identity (all-MiniLM-L6-v2's pooler was
                    never trained: its weights have std 0.009 and a zero bias, so tanh(W CLS) starts near 0)
  head-lr           pooler-identity, and the pooler and head learn at --head-learning-rate (default 1e-3)
  negatives         head-lr, and each training example brings --negatives paragraphs of other questions with target 0
                    (a random negative: DIRAS's questions are distinct, so another question's paragraph is taken
                    as not relevant; a training device, never a stored label)
  residual          head-lr with a zero head, learning the residual over the embedding judge: P = sigmoid(z + a cos + b),
                    cos the MiniLM embedding judge's (question alone), a and b Platt's fit on the training targets;
                    it starts as the recalibrated embedding judge
  residual-plain    residual without head-lr's changes (BERT's pooler as it is, one learning rate)
  class-balance     the plain recipe with positives weighted by the training targets' negatives / positives
                    (sum(1 - t) / sum(t)) in the BCE (torch's pos_weight)
  label-smoothing   the plain recipe with targets t (1 - e) + e / 2, e = --smoothing (default 0.1)
  mean-pooling      a cross-encoder of the encoder's mean-pooled tokens and a linear head (the pooling
                    all-MiniLM-L6-v2 was trained with), built from sentence-transformers modules
  bi-cosine         not a cross-encoder: all-MiniLM-L6-v2 fine-tuned as a bi-encoder so that cos = 2P - 1 (the
                    embedding judge's P = (cos + 1) / 2), CosineSimilarityLoss
  bi-cosent         the bi-encoder with CoSENTLoss (a ranking loss on the teacher's P)
  features          no network trained: a logistic regression (soft targets as weights) on frozen features, the
                    embedding judge's cosine (question alone) alone and with an IDF-weighted overlap of the
                    question's words with the paragraph (sum of log(N / (1 + df)) over the question's distinct
                    words that are in the paragraph, df over the N paragraphs): is there signal beyond the cosine?
The query side is the question alone for the bi-encoders, definition + question for the cross-encoders."""
from __future__ import annotations

import argparse
import importlib.util
import math
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

import models_llm.finetune.crossencoder_student as student
import models_llm.finetune.crossencoder_training as training
from models_llm.bundled import minilm_folder

_spec = importlib.util.spec_from_file_location("crossencoder_bench", ROOT / "bench" / "crossencoder_student.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

CROSS = ("pooler-identity", "head-lr", "mean-pooling", "negatives", "residual", "residual-plain", "class-balance",
         "label-smoothing")
BI = ("bi-cosine", "bi-cosent")
FEATURES = ("features",)


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

    plain = training.load_student_encoder

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
        if variant in ("class-balance", "label-smoothing"):
            return model
        if variant != "residual-plain":
            _pooler_identity(model)
        if variant.startswith("residual"):
            with torch.no_grad():
                model.model.classifier.weight.zero_()
                model.model.classifier.bias.zero_()
        return model

    training.load_student_encoder = load
    if variant not in ("head-lr", "negatives", "residual"):
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
    if variant == "negatives":
        import random

        chooser = random.Random(args.seed)
        extra, others = [], {}
        for definition, question, _, _ in train:
            if question not in others:  # the other questions' rows, listed once per question
                others[question] = [row for row in train if row[1] != question]
            extra += [(definition, question, chooser.choice(others[question])[2], 0.0) for _ in range(args.negatives)]
        train = train + extra
        print(f"{len(extra)} random negatives added", flush=True)
    if variant == "label-smoothing":
        train = [(d, q, p, t * (1 - args.smoothing) + args.smoothing / 2) for d, q, p, t in train]
    if variant == "class-balance":
        positive_weight = sum(1 - t for *_, t in train) / max(sum(t for *_, t in train), 1e-9)
        print(f"positives weighted {positive_weight:.2f}", flush=True)
        _patch_loss(positive_weight=positive_weight)
    offsets = _residual_offsets(settings, pair, train, test) if variant.startswith("residual") else {}
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
        z = model.predict([(item.query, item.passage) for item in held], batch_size=32,
                          activation_fn=torch.nn.Identity(), show_progress_bar=False)
        z = [float(x) + offsets.get((item.query, item.passage), 0.0) for x, item in zip(z, held)]
        bench.describe(label, [1.0 / (1.0 + math.exp(-x)) for x in z], reference)


def _patch_loss(*, offsets: dict | None = None, positive_weight: float | None = None) -> None:
    """The student's weighted BCE with an offset added to each pair's logit (`offsets`: (query side, passage) ->
    a cos + b) or torch's pos_weight (a positive target's term counts `positive_weight` times)."""
    from sentence_transformers.util import batch_to_device

    class PatchedLoss(training.WeightedBinaryCrossEntropyLoss):
        def forward(self, inputs, labels, prompt=None, task=None):
            rows = torch.stack(list(labels)) if isinstance(labels, list | tuple) else labels
            rows = rows.view(-1, 2).float().to(self.model.device)
            features = self.model.preprocess(list(zip(inputs[0], inputs[1])), prompt=prompt, task=task)
            logits = self.model(batch_to_device(features, self.model.device))["scores"].view(-1)
            if offsets is not None:
                logits = logits + torch.tensor([offsets[pair] for pair in zip(inputs[0], inputs[1])],
                                               device=logits.device)
            weight = None if positive_weight is None else torch.tensor(positive_weight, device=logits.device)
            losses = torch.nn.functional.binary_cross_entropy_with_logits(logits, rows[:, 0], reduction="none",
                                                                          pos_weight=weight)
            return (losses * rows[:, 1]).sum() / rows[:, 1].sum().clamp_min(1e-12)

    training.weighted_bce_loss = PatchedLoss


def _minilm(max_length: int = 256):
    """The bundled all-MiniLM-L6-v2 as a sentence-transformers model, cut at `max_length` tokens."""
    from sentence_transformers import SentenceTransformer

    encoder = SentenceTransformer(str(minilm_folder()), device="cpu", local_files_only=True)
    encoder.max_seq_length = max_length
    return encoder


def _cosines(rows, encoder):
    """`encoder`'s cosine (question alone against the paragraph) of each (definition, question, paragraph, target)
    row: the embedding judge's, for the bundled MiniLM."""
    import numpy as np

    questions = sorted({q for _, q, _, _ in rows})
    by_question = dict(zip(questions, encoder.encode(questions, batch_size=32, normalize_embeddings=True)))
    passages = encoder.encode([p for _, _, p, _ in rows], batch_size=32, normalize_embeddings=True)
    return np.array([float(by_question[q] @ v) for (_, q, _, _), v in zip(rows, passages)])


def _soft_fit(x, train, c: float = 1.0):
    """A logistic regression (inverse regularisation `c`) of the training rows' features x[:len(train)] on their
    soft targets (each row twice: relevant with weight t, not with weight 1 - t)."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    n, targets = len(train), np.array([t for *_, t in train])
    return LogisticRegression(C=c, max_iter=1000).fit(
        np.r_[x[:n], x[:n]], np.r_[np.ones(n), np.zeros(n)], sample_weight=np.r_[targets, 1 - targets])


def _residual_offsets(settings, pair, train, test) -> dict:
    """(query side, passage) -> a cos + b for every pair, Platt's fit of the embedding judge's cosine (question
    alone) on the training targets (soft labels as weights); the loss adds it to the student's logit."""
    rows = train + test
    cosine = _cosines(rows, _minilm(settings.max_length))
    platt = _soft_fit(cosine[:, None], train, c=1e6)  # Platt's fit, unregularised
    a, b = float(platt.coef_[0, 0]), float(platt.intercept_[0])
    print(f"Platt on the embedding judge's cosine: a {a:.3f}, b {b:.3f}", flush=True)
    offsets = {}
    for row, c in zip(rows, cosine):
        item = pair(*row)
        offsets[(item.query, item.passage)] = a * float(c) + b
    _patch_loss(offsets=offsets)
    return offsets


def _bi(variant: str, args, train, test) -> None:
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.sentence_transformer import losses

    model = _minilm()
    reference = [int(t >= 0.5) for *_, t in test]

    def describe(label: str) -> None:
        bench.describe(label, [(float(c) + 1) / 2 for c in _cosines(test, model)], reference)

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


def _features(variant: str, args, train, test) -> None:
    import re

    import numpy as np

    rows, n = train + test, len(train)
    cosine = _cosines(rows, _minilm())
    words = lambda text: set(re.findall(r"[a-z0-9]+", text.lower()))
    paragraph_words = [words(p) for _, _, p, _ in rows]
    df: dict[str, int] = {}
    for found in paragraph_words:
        for word in found:
            df[word] = df.get(word, 0) + 1
    overlap = np.array([sum(math.log(len(rows) / (1 + df.get(w, 0))) for w in words(q) if w in found)
                        for (_, q, _, _), found in zip(rows, paragraph_words)])
    reference = [int(t >= 0.5) for *_, t in test]
    for label, x in (("embedding judge, Platt on the training targets", cosine[:, None]),
                     ("cosine and IDF overlap, logistic regression", np.c_[cosine, overlap])):
        z = (x - x[:n].mean(0)) / (x[:n].std(0) + 1e-12)
        bench.describe(label, [float(p) for p in _soft_fit(z, train).predict_proba(z[n:])[:, 1]], reference)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("variant", choices=CROSS + BI + FEATURES)
    parser.add_argument("--limit", type=int, default=1000, help="the first N training examples (0: all)")
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--learning-rate", type=float, default=3e-5)
    parser.add_argument("--head-learning-rate", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoothing", type=float, default=0.1, help="label smoothing's e")
    parser.add_argument("--negatives", type=int, default=1, help="random negatives per training example")
    args = parser.parse_args()
    train, test = _examples(args.limit, args.seed)
    print(f"{len(train)} training examples, {len(test)} held out", flush=True)
    print("| judge (held-out, GPT-4's guess as reference) | AUROC | ECE | Brier | accuracy |\n|---|---|---|---|---|",
          flush=True)
    run = _cross if args.variant in CROSS else _bi if args.variant in BI else _features
    run(args.variant, args, train, test)


if __name__ == "__main__":
    main()

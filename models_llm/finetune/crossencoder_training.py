"""The cross-encoder student's training and speed probe (crossencoder_student's entry points call them), through
sentence-transformers' CrossEncoderTrainer with the weighted binary cross-entropy of crossencoder_student's module
docstring."""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a student is built from a local folder only, never a download

import torch
from datasets import Dataset
from sentence_transformers import CrossEncoder
from sentence_transformers.cross_encoder import CrossEncoderTrainer, CrossEncoderTrainingArguments
from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss
from sentence_transformers.util import batch_to_device
from torch import Tensor
from transformers import set_seed

from models_llm.finetune.crossencoder_student import CrossEncoderSettings, SoftPair
from models_llm.finetune.lora import FinetuneError, FinetuneResult, Progress, checkpoint_step
from models_llm.finetune.training import (
    ProgressReport,
    probe_device,
    timed_backward,
    train_and_save,
    training_failures,
)


class WeightedBinaryCrossEntropyLoss(BinaryCrossEntropyLoss):
    """sentence-transformers' BinaryCrossEntropyLoss with a weight per example: each label is (target, weight), the
    loss the weighted mean of the examples' BCE on the logit (crossencoder_student's module docstring's L)."""

    def forward(self, inputs: list[list[str]], labels: Tensor | list[Tensor], prompt: str | None = None,
                task: str | None = None) -> Tensor:
        if len(inputs) != 2:
            raise ValueError(f"expected (query, passage) columns, got {len(inputs)} columns")
        rows = torch.stack(list(labels)) if isinstance(labels, list | tuple) else labels
        rows = rows.view(-1, 2).float().to(self.model.device)
        features = self.model.preprocess(list(zip(inputs[0], inputs[1])), prompt=prompt, task=task)
        logits = self.model(batch_to_device(features, self.model.device))["scores"].view(-1)
        losses = torch.nn.functional.binary_cross_entropy_with_logits(logits, rows[:, 0], reduction="none")
        return (losses * rows[:, 1]).sum() / rows[:, 1].sum().clamp_min(1e-12)


def weighted_bce_loss(model):
    """The training loss for `model` (a CrossEncoder with one logit): WeightedBinaryCrossEntropyLoss."""
    return WeightedBinaryCrossEntropyLoss(model)


def load_student_encoder(base_folder: str, settings: CrossEncoderSettings, device: str):
    """The CrossEncoder to train: a cross-encoder folder with a one-logit head as it is, or an encoder folder (a
    sentence-transformers or plain transformers encoder) with a new one-logit head, drawn from the seeded
    generator. FinetuneError for a folder that does not load or whose head has two or more logits."""
    folder = Path(base_folder)
    if not (folder / "config.json").is_file():
        raise FinetuneError(f"base model folder {folder} does not exist or holds no config.json")
    try:
        model = CrossEncoder(str(folder), num_labels=1, max_length=settings.max_length, local_files_only=True,
                             device=device)
    except (OSError, ValueError, RuntimeError) as exc:
        raise FinetuneError(f"{folder} is not an encoder a cross-encoder student can start from: {exc}"[:500]
                            ) from None
    if model.num_labels != 1:
        raise FinetuneError(f"{folder} has a head of {model.num_labels} logits; the student learns one logit")
    return model


def train(
    *, base_folder: str, pairs: Sequence[SoftPair], work_dir: str, model_dir: str, settings: CrossEncoderSettings,
    device: str, resume_from: str | None, on_progress: Callable[[Progress], bool] | None,
    on_checkpoint: Callable[[int, Path], None] | None, stop_after_s: float | None, initial_dir: str | None,
) -> FinetuneResult:
    """crossencoder_student.crossencoder_finetune's training, given pairs it checked."""
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise FinetuneError(f"device {device!r} asked for, but torch sees no CUDA device")
    with training_failures(device, knobs="batch_size or max_length", written="the model"):
        return _train(base_folder, pairs, work_dir, model_dir, settings, device, resume_from, on_progress,
                      on_checkpoint, stop_after_s, initial_dir)


def _train(base_folder, pairs, work_dir, model_dir, settings, device, resume_from, on_progress, on_checkpoint,
           stop_after_s, initial_dir) -> FinetuneResult:
    set_seed(settings.seed)  # the new head is drawn when the model loads: seed first
    model = load_student_encoder(base_folder, settings, device)
    if initial_dir:
        Path(initial_dir).mkdir(parents=True, exist_ok=True)
        model.save_pretrained(initial_dir)
    dataset = Dataset.from_dict({
        "query": [pair.query for pair in pairs],
        "passage": [pair.passage for pair in pairs],
        "label": [[float(pair.target), float(pair.weight)] for pair in pairs],
    })
    on_gpu = device.startswith("cuda")
    args = CrossEncoderTrainingArguments(
        output_dir=work_dir,
        per_device_train_batch_size=settings.batch_size,
        learning_rate=settings.learning_rate,
        lr_scheduler_type=settings.scheduler,
        warmup_steps=settings.warmup_ratio,  # below 1: a share of the training steps
        weight_decay=settings.weight_decay,
        num_train_epochs=settings.epochs,
        max_steps=settings.max_steps or -1,
        logging_steps=1,
        save_strategy="steps",
        save_steps=settings.save_steps,
        save_total_limit=1,
        seed=settings.seed,
        data_seed=settings.seed,
        use_cpu=not on_gpu,
        bf16=on_gpu and torch.cuda.is_bf16_supported(),
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    start_step = checkpoint_step(resume_from) if resume_from else 0
    report = ProgressReport(on_progress, on_checkpoint, settings.batch_size, 1, start_step, stop_after_s)
    trainer = CrossEncoderTrainer(model=model, args=args, train_dataset=dataset, loss=weighted_bce_loss(model),
                                  callbacks=[report])
    return train_and_save(trainer, report, resume_from=resume_from, out_dir=model_dir, examples=len(pairs),
                          start_step=start_step)


def probe(base_folder: str, pairs: Sequence[SoftPair], settings: CrossEncoderSettings, device: str,
          *, batches: int) -> float:
    """crossencoder_student.crossencoder_probe's timing, given at least one pair."""
    probe_device(device)
    set_seed(settings.seed)
    model = load_student_encoder(base_folder, settings, device)
    model.train()
    loss = weighted_bce_loss(model)

    def loss_of(index: int) -> Tensor:
        rows = [pairs[(index * settings.batch_size + i) % len(pairs)] for i in range(settings.batch_size)]
        labels = torch.tensor([[row.target, row.weight] for row in rows])
        return loss([[row.query for row in rows], [row.passage for row in rows]], labels)

    seconds = timed_backward(model, loss_of, batches, device)
    return settings.batch_size * batches / max(seconds, 1e-6)

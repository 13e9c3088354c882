"""A cross-encoder student (#32): an encoder with a one-logit head learns the teacher's P(relevant) as a soft
target, through sentence-transformers' `CrossEncoderTrainer` (the loop, optimizer, schedule and checkpoints are the
library's; nothing here is a training loop). Where an expert labelled a pair, the caller gives the expert's binary
answer as the target instead, with its own weight. The student is a `crossencoder` judge
(models_llm/backends/crossencoder.py): P is the sigmoid of its logit.

The loss is binary cross-entropy on the logit with soft targets, averaged with per-example weights:

    L = sum_i w_i * BCE(sigmoid(z_i), y_i) / sum_i w_i,   BCE(p, y) = -(y log p + (1 - y) log(1 - p))

which with every w_i = 1 is sentence-transformers' `BinaryCrossEntropyLoss` (torch's BCEWithLogitsLoss, mean).

Why a cross-encoder on a CPU: an all-MiniLM-L6-v2-sized encoder (22M parameters) reads a 256-token pair in about a
tenth of a second on two cores and trains at several pairs a second, where the LoRA student of SmolLM2-135M trains at
0.31 examples/s (bench/README.md)."""
from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a student is built from a local folder only, never a download

import torch
from torch import Tensor

from models_llm.distill.finetune import (
    SCHEDULERS,
    FinetuneError,
    FinetuneResult,
    FinetuneStopped,
    Progress,
    ProgressReport,
    checkpoint_step,
    probe_device,
    timed_backward,
    training_failures,
)
from models_llm.types import CROSSENCODER_SEPARATOR


@dataclass(frozen=True)
class CrossEncoderSettings:
    """A cross-encoder student's training settings. The defaults are the recipe measured in bench/README.md
    ("Cross-encoder student"): learning rate 3e-5 with a linear decay after a 10% warm-up, weight decay 0.01, batch
    16, two epochs, 256 tokens. `expert_weight`: the weight of a pair an expert labelled (its target is the expert's
    binary answer) against a teacher's pair (weight 1). `use_definition`, `separator`: the query side is the
    relevance definition, the separator, then the question (as the judge built from the student reads it)."""

    learning_rate: float = 3e-5
    warmup_ratio: float = 0.1
    scheduler: str = "linear"
    weight_decay: float = 0.01
    batch_size: int = 16
    epochs: float = 2.0
    max_steps: int = 0
    max_length: int = 256
    save_steps: int = 50
    seed: int = 0
    expert_weight: float = 1.0
    use_definition: bool = True
    separator: str = CROSSENCODER_SEPARATOR

    def __post_init__(self) -> None:
        checks = (
            (0.0 < self.learning_rate <= 1.0, "the learning rate must be in (0, 1]"),
            (0.0 <= self.warmup_ratio < 1.0, "the warm-up ratio must be in [0, 1)"),
            (self.scheduler in SCHEDULERS, f"the scheduler must be one of {', '.join(SCHEDULERS)}"),
            (self.weight_decay >= 0, "weight decay must be >= 0"),
            (1 <= self.batch_size <= 4096, "the batch size must be 1 to 4096"),
            (0 < self.epochs <= 100, "epochs must be in (0, 100]"),
            (0 <= self.max_steps <= 1_000_000, "max steps must be 0 (none) to 1,000,000"),
            (16 <= self.max_length <= 8192, "the maximum length must be 16 to 8192 tokens"),
            (1 <= self.save_steps <= 1_000_000, "save steps must be >= 1"),
            (0.0 <= self.expert_weight <= 1000.0 and not math.isnan(self.expert_weight),
             "the expert weight must be 0 to 1000"),
            (0 < len(self.separator) <= 50 and "\x00" not in self.separator, "the separator must be 1 to 50 characters"),
        )
        for ok, message in checks:
            if not ok:
                raise FinetuneError(message)

    @classmethod
    def from_dict(cls, values: dict) -> CrossEncoderSettings:
        """Settings from stored JSON; FinetuneError names an unknown or mistyped one."""
        known = {field.name for field in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise FinetuneError(f"unknown cross-encoder student settings {unknown}; known: {sorted(known)}")
        converted = {}
        for name, value in values.items():
            kind = type(getattr(cls(), name))
            if kind is bool and not isinstance(value, bool):
                raise FinetuneError(f"cross-encoder student setting {name} must be true or false, got {value!r}")
            if kind is not str and isinstance(value, str):
                raise FinetuneError(f"cross-encoder student setting {name} must be a number, got {value!r}")
            try:
                converted[name] = kind(value)
            except (TypeError, ValueError):
                raise FinetuneError(f"cross-encoder student setting {name}: {value!r} is not a {kind.__name__}"
                                    ) from None
        return cls(**converted)

    def as_dict(self) -> dict:
        return asdict(self)

    def total_steps(self, examples: int) -> int:
        """Optimizer steps for `examples` training examples (the Trainer's count: batches per epoch x epochs)."""
        if self.max_steps:
            return self.max_steps
        return math.ceil(self.epochs * max(1, math.ceil(examples / self.batch_size)))


@dataclass(frozen=True)
class SoftPair:
    """One training pair: the query side (definition, separator, question) and the passage side as the judge reads
    them, the target in [0, 1] (the teacher's P, or an expert's 0 / 1) and the example's weight."""

    query: str
    passage: str
    target: float
    weight: float = 1.0


_DIRAS_FIELDS = re.compile(
    r'<background_information>:\s*"(?P<definition>.*?)"\s*\n<question>:\s*"(?P<question>.*?)"\s*\n'
    r'<paragraph>:\s*"(?P<paragraph>.*)"\s*\n\s*\n', re.DOTALL)


def diras_fields(user: str) -> tuple[str, str, str]:
    """(definition, question, paragraph) of a DIRAS user turn (its `<background_information>`, `<question>` and
    `<paragraph>` lines, as DIRAS's files and models_llm.distill.files.diras_user write them); FinetuneError when
    the turn is not in that layout (a cross-encoder student needs the three apart)."""
    found = _DIRAS_FIELDS.search(user)
    if found is None or not found["question"].strip() or not found["paragraph"].strip():
        raise FinetuneError("the prompt is not in DIRAS's layout (<background_information>, <question>, <paragraph>"
                            " lines): a cross-encoder student needs question and passage apart")
    return found["definition"].strip(), found["question"].strip(), found["paragraph"].strip()


def soft_pair_query(question: str, definition: str | None, settings: CrossEncoderSettings) -> str:
    """The query side the student learns and its judge reads (the backend's query_side)."""
    if settings.use_definition and definition and definition.strip():
        return f"{definition.strip()}{settings.separator}{question}"
    return question


def _loss_class():
    from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss
    from sentence_transformers.util import batch_to_device

    class WeightedBinaryCrossEntropyLoss(BinaryCrossEntropyLoss):
        """sentence-transformers' BinaryCrossEntropyLoss with a weight per example: each label is (target,
        weight), the loss the weighted mean of the examples' BCE on the logit (the module docstring's L)."""

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

    return WeightedBinaryCrossEntropyLoss


def weighted_bce_loss(model):
    """The training loss for `model` (a CrossEncoder with one logit): WeightedBinaryCrossEntropyLoss."""
    return _loss_class()(model)


def load_student_encoder(base_folder: str, settings: CrossEncoderSettings, device: str):
    """The CrossEncoder to train: a cross-encoder folder with a one-logit head as it is, or an encoder folder (a
    sentence-transformers or plain transformers encoder) with a new one-logit head, drawn from the seeded
    generator. FinetuneError for a folder that does not load or whose head has two or more logits."""
    from sentence_transformers import CrossEncoder

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


def crossencoder_finetune(
    *, base_folder: str, pairs: Sequence[SoftPair], work_dir: str, model_dir: str,
    settings: CrossEncoderSettings = CrossEncoderSettings(), device: str = "cpu", resume_from: str | None = None,
    on_progress: Callable[[Progress], bool] | None = None, on_checkpoint: Callable[[int, Path], None] | None = None,
    stop_after_s: float | None = None, initial_dir: str | None = None,
) -> FinetuneResult:
    """Train a cross-encoder student on `pairs` and save it (a CrossEncoder folder, loadable by the crossencoder
    backend) in `model_dir`. As models_llm.distill.finetune.finetune: checkpoints (weights, optimizer, schedule,
    RNG) in `work_dir`/checkpoint-STEP every settings.save_steps steps, passed to `on_checkpoint`; `resume_from` a
    checkpoint folder; `on_progress` stops training by returning False (FinetuneStopped, nothing saved);
    `stop_after_s` ends it early with the model saved. `initial_dir`: where to save the model before any step (the
    untrained head, the side-by-side's base judge). FinetuneResult.adapter_dir is `model_dir`."""
    if not pairs:
        raise FinetuneError("no training pairs")
    for index, pair in enumerate(pairs):
        if not 0.0 <= pair.target <= 1.0 or not 0.0 <= pair.weight or math.isnan(pair.target + pair.weight):
            raise FinetuneError(f"training pair {index + 1}: target {pair.target!r} or weight {pair.weight!r} out "
                                "of range")
    if sum(pair.weight for pair in pairs) <= 0:
        raise FinetuneError("every training pair has weight 0: nothing to learn")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise FinetuneError(f"device {device!r} asked for, but torch sees no CUDA device")
    with training_failures(device, knobs="batch_size or max_length", written="the model"):
        return _train(base_folder, pairs, work_dir, model_dir, settings, device, resume_from, on_progress,
                      on_checkpoint, stop_after_s, initial_dir)


def _train(base_folder, pairs, work_dir, model_dir, settings, device, resume_from, on_progress, on_checkpoint,
           stop_after_s, initial_dir) -> FinetuneResult:
    from datasets import Dataset
    from sentence_transformers.cross_encoder import CrossEncoderTrainer, CrossEncoderTrainingArguments
    from transformers import set_seed

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
    started = time.monotonic()
    output = trainer.train(resume_from_checkpoint=resume_from)
    if report.stopped:
        raise FinetuneStopped(f"stopped at step {trainer.state.global_step}")
    seconds = time.monotonic() - started
    Path(model_dir).mkdir(parents=True, exist_ok=True)
    model.save_pretrained(model_dir)
    return FinetuneResult(
        adapter_dir=model_dir, steps=output.global_step, losses=tuple(report.losses), examples=len(pairs),
        seconds=seconds, examples_per_s=float(output.metrics.get("train_samples_per_second", 0.0)),
        resumed_from_step=start_step or None,
    )


def crossencoder_probe(base_folder: str, pairs: Sequence[SoftPair], settings: CrossEncoderSettings, device: str,
                       *, batches: int = 2) -> float:
    """A first guess of the training speed, in pairs per second, before this base has trained here: `batches` + 1
    batches of `pairs` go forward and backward through the student as the training builds it (the first, a
    warm-up, is not timed; the optimizer's step is left out)."""
    if not pairs:
        raise FinetuneError("no pair to time")
    probe_device(device)
    from transformers import set_seed

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

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
0.31 examples/s (bench/README.md).

The training itself is crossencoder_training's, imported by the entry points only: the processes that merely read or
validate settings never load torch."""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from models_llm.finetune.lora import SCHEDULERS, FinetuneError, FinetuneResult, Progress
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
    `<paragraph>` lines, as DIRAS's files and models_llm.finetune.files.diras_user write them); FinetuneError when
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


def crossencoder_finetune(
    *, base_folder: str, pairs: Sequence[SoftPair], work_dir: str, model_dir: str,
    settings: CrossEncoderSettings = CrossEncoderSettings(), device: str = "cpu", resume_from: str | None = None,
    on_progress: Callable[[Progress], bool] | None = None, on_checkpoint: Callable[[int, Path], None] | None = None,
    stop_after_s: float | None = None, initial_dir: str | None = None,
) -> FinetuneResult:
    """Train a cross-encoder student on `pairs` and save it (a CrossEncoder folder, loadable by the crossencoder
    backend) in `model_dir`. As models_llm.finetune.lora.finetune: checkpoints (weights, optimizer, schedule,
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
    from models_llm.finetune import crossencoder_training

    return crossencoder_training.train(
        base_folder=base_folder, pairs=pairs, work_dir=work_dir, model_dir=model_dir, settings=settings, device=device,
        resume_from=resume_from, on_progress=on_progress, on_checkpoint=on_checkpoint, stop_after_s=stop_after_s,
        initial_dir=initial_dir)


def crossencoder_probe(base_folder: str, pairs: Sequence[SoftPair], settings: CrossEncoderSettings, device: str,
                       *, batches: int = 2) -> float:
    """A first guess of the training speed, in pairs per second, before this base has trained here: `batches` + 1
    batches of `pairs` go forward and backward through the student as the training builds it (the first, a
    warm-up, is not timed; the optimizer's step is left out)."""
    if not pairs:
        raise FinetuneError("no pair to time")
    from models_llm.finetune import crossencoder_training

    return crossencoder_training.probe(base_folder, pairs, settings, device, batches=batches)

"""LoRA fine-tuning of a student on a teacher's answers (DIRAS section 3.2, App. F): the settings (DIRAS's
hyper-parameters), progress and result a worker (labeling/services/finetune.py) hands on, and the entry points it
calls. The training itself (the transformers Trainer and peft) is lora_training's, imported by the entry points
only: the processes that merely read or validate settings (every web process) never load torch."""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from models_llm.finetune.chat import SOURCE_MAX_LENGTH, TARGET_MAX_LENGTH, ChatExample


class FinetuneError(ValueError):
    """Fine-tuning that cannot run or stopped on a resource (settings out of range, memory, disk): the reason."""


class FinetuneStopped(Exception):
    """The caller asked the training to stop (a cancelled job, a worker going away): no adapter is written."""


SCHEDULERS = ("constant_with_warmup", "linear", "cosine")


@dataclass(frozen=True)
class LoraSettings:
    """DIRAS App. F's settings as defaults: LoRA r 64, alpha 16, dropout 0.1 on all linear layers; learning rate
    2e-4, constant after a 3% warm-up; Adam beta2 0.999; gradient norm clipped at 0.3; no weight decay; an
    effective batch of 32 (micro batches of `micro_batch` accumulated); 2 epochs; a source (prompt) max length of
    2048 tokens and a target (answer) max length of 512, a longer prompt having its passage cut (chat.encode).
    `max_steps` > 0 stops earlier. `quantize_4bit`: QLoRA (4-bit NF4 base) when CUDA and bitsandbytes are there;
    ignored otherwise.
    `top_layers` > 0 puts the adapter on the model's last that many transformer layers only (0: all, as DIRAS): the
    backward pass then stops at the lowest adapted layer, so a step costs little more than a forward pass."""

    r: int = 64
    alpha: int = 16
    dropout: float = 0.1
    target_modules: str = "all-linear"
    learning_rate: float = 2e-4
    warmup_ratio: float = 0.03
    scheduler: str = "constant_with_warmup"
    adam_beta2: float = 0.999
    max_grad_norm: float = 0.3
    weight_decay: float = 0.0
    batch_size: int = 32
    micro_batch: int = 4
    epochs: float = 2.0
    max_steps: int = 0
    source_max_length: int = SOURCE_MAX_LENGTH
    target_max_length: int = TARGET_MAX_LENGTH
    save_steps: int = 20
    seed: int = 0
    quantize_4bit: bool = True
    gradient_checkpointing: bool = False
    top_layers: int = 0

    def __post_init__(self) -> None:
        checks = (
            (1 <= self.r <= 1024, "r must be 1 to 1024"),
            (self.alpha > 0, "alpha must be > 0"),
            (0.0 <= self.dropout < 1.0, "dropout must be in [0, 1)"),
            (0.0 < self.learning_rate <= 1.0, "the learning rate must be in (0, 1]"),
            (0.0 <= self.warmup_ratio < 1.0, "the warm-up ratio must be in [0, 1)"),
            (0.0 < self.adam_beta2 < 1.0, "Adam beta2 must be in (0, 1)"),
            (self.max_grad_norm > 0, "the max gradient norm must be > 0"),
            (self.weight_decay >= 0, "weight decay must be >= 0"),
            (1 <= self.micro_batch <= self.batch_size <= 4096, "need 1 <= micro batch <= batch size <= 4096"),
            (self.batch_size % self.micro_batch == 0, "the batch size must be a multiple of the micro batch"),
            (0 < self.epochs <= 100, "epochs must be in (0, 100]"),
            (0 <= self.max_steps <= 1_000_000, "max steps must be 0 (none) to 1,000,000"),
            (16 <= self.source_max_length <= 131_072, "the source max length must be 16 to 131072 tokens"),
            (1 <= self.target_max_length <= 131_072, "the target max length must be 1 to 131072 tokens"),
            (1 <= self.save_steps <= 1_000_000, "save steps must be >= 1"),
            (0 <= self.top_layers <= 1024, "top layers must be 0 (all) to 1024"),
            (not self.top_layers or self.target_modules == "all-linear",
             "top layers needs the target modules 'all-linear'"),
            (self.scheduler in SCHEDULERS, f"the scheduler must be one of {', '.join(SCHEDULERS)}"),
        )
        for ok, message in checks:
            if not ok:
                raise FinetuneError(message)

    @classmethod
    def from_dict(cls, values: dict) -> LoraSettings:
        """Settings from stored JSON; FinetuneError names an unknown or mistyped one. `max_length` (the one length
        of jobs made before App. F's two, the whole example's) is read as the source max length: every example it
        let through fits that source length."""
        values = dict(values)
        if "max_length" in values:
            if "source_max_length" in values:
                raise FinetuneError("give source_max_length or max_length (its old name), not both")
            values["source_max_length"] = values.pop("max_length")
        known = {field.name: field for field in fields(cls)}
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise FinetuneError(f"unknown fine-tuning settings {unknown}; known: {sorted(known)}")
        try:
            return cls(**{name: type(getattr(cls(), name))(value) for name, value in values.items()})
        except (TypeError, ValueError) as exc:
            if isinstance(exc, FinetuneError):
                raise
            raise FinetuneError(f"fine-tuning settings: {exc}") from None

    def as_dict(self) -> dict:
        return asdict(self)

    def total_steps(self, examples: int) -> int:
        """Optimizer steps for `examples` training examples (the Trainer's own count for these settings)."""
        if self.max_steps:
            return self.max_steps
        micro_batches = math.ceil(examples / self.micro_batch)
        per_epoch = max(1, math.ceil(micro_batches / (self.batch_size // self.micro_batch)))
        return math.ceil(self.epochs * per_epoch)


@dataclass(frozen=True)
class Progress:
    """Where training stands after an optimizer step: `loss` is the last logged training loss (None before one)."""

    step: int
    total_steps: int
    loss: float | None
    eta_s: float | None
    examples_per_s: float | None


@dataclass(frozen=True)
class FinetuneResult:
    """`truncated`: training examples whose passage was cut for the prompt to fit the source max length."""

    adapter_dir: str
    steps: int
    losses: tuple[tuple[int, float], ...]
    examples: int
    seconds: float
    examples_per_s: float
    resumed_from_step: int | None
    truncated: int = 0


def checkpoint_step(folder: str) -> int:
    """The step a Trainer checkpoint folder (checkpoint-STEP, with its trainer_state.json) was saved at."""
    name = Path(folder).name
    if not name.startswith("checkpoint-") or not name[len("checkpoint-"):].isdigit():
        raise FinetuneError(f"{folder} is not a Trainer checkpoint folder (checkpoint-STEP)")
    if not (Path(folder) / "trainer_state.json").is_file():
        raise FinetuneError(f"{folder} holds no trainer_state.json: not a complete checkpoint")
    return int(name[len("checkpoint-"):])




def finetune(
    *, base_folder: str, examples: Sequence[ChatExample], work_dir: str, adapter_dir: str,
    settings: LoraSettings = LoraSettings(), device: str = "cpu", resume_from: str | None = None,
    on_progress: Callable[[Progress], bool] | None = None, on_checkpoint: Callable[[int, Path], None] | None = None,
    stop_after_s: float | None = None, on_encoded: Callable[[int, int], None] | None = None,
) -> FinetuneResult:
    """Fine-tune a LoRA adapter for `base_folder` on `examples` and save it (adapter weights and config only) in
    `adapter_dir`. Checkpoints (adapter, optimizer, schedule, RNG states) go to `work_dir`/checkpoint-STEP every
    settings.save_steps steps and are passed to `on_checkpoint`; `resume_from` (a checkpoint folder) goes on from
    there. `on_progress` hears every optimizer step and stops training by returning False (FinetuneStopped, no
    adapter written); `stop_after_s` ends training (adapter written) at the first step past that many seconds.
    `on_encoded(examples, truncated)` hears, before the first step, how many examples were encoded and how many of
    them had their passage cut to fit the source max length. Running out of memory or disk is a FinetuneError
    saying so."""
    if not examples:
        raise FinetuneError("no training examples")
    from models_llm.finetune import lora_training

    return lora_training.train(
        base_folder=base_folder, examples=examples, work_dir=work_dir, adapter_dir=adapter_dir, settings=settings,
        device=device, resume_from=resume_from, on_progress=on_progress, on_checkpoint=on_checkpoint,
        stop_after_s=stop_after_s, on_encoded=on_encoded)


def training_probe(base_folder: str, examples: Sequence[ChatExample], settings: LoraSettings, device: str,
                   *, micro_batches: int = 2) -> float:
    """A first guess of the training speed, in examples per second, before any fine-tuning of this base model has
    run here: the student is built as the training builds it (LoRA, gradient checkpointing as set) and
    `micro_batches` + 1 micro batches of `examples` go forward and backward; the first (warm-up) is not timed. The
    optimizer's step is left out: with LoRA it moves a fraction of a percent of the weights."""
    if not examples:
        raise FinetuneError("no example to time")
    from models_llm.finetune import lora_training

    return lora_training.probe(base_folder, examples, settings, device, micro_batches=micro_batches)

"""LoRA fine-tuning of a student on a teacher's answers (DIRAS section 3.2, App. F), with the transformers Trainer
and peft: the training loop, the optimizer, the schedule, gradient accumulation, clipping and checkpoints are the
library's. This module chooses DIRAS's hyper-parameters, feeds chat examples with the loss on the answer only, and
reports progress, checkpoints and failures to whoever runs it (a worker: labeling/services/finetune.py)."""
from __future__ import annotations

import contextlib
import errno
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a student is built from a local folder only, never a download

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    TrainerCallback,
    TrainerControl,
    TrainerState,
    TrainingArguments,
    set_seed,
)

from models_llm.distill.answer_loss import AnswerLossTrainer, answer_loss, head_trims
from models_llm.distill.chat import (
    IGNORE,
    SOURCE_MAX_LENGTH,
    TARGET_MAX_LENGTH,
    ChatExample,
    DistillFormatError,
    EncodedExample,
    encode,
)


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


class _Examples(torch.utils.data.Dataset):
    def __init__(self, encoded: Sequence[EncodedExample]) -> None:
        self.encoded = list(encoded)

    def __len__(self) -> int:
        return len(self.encoded)

    def __getitem__(self, index: int) -> dict[str, list[int]]:
        example = self.encoded[index]
        return {"input_ids": list(example.input_ids), "labels": list(example.labels)}


class _Collator:
    """Right-pads a micro batch: pad id on the inputs (masked), IGNORE on the labels."""

    def __init__(self, pad_id: int) -> None:
        self.pad_id = pad_id

    def __call__(self, rows: list[dict[str, list[int]]]) -> dict[str, torch.Tensor]:
        width = max(len(row["input_ids"]) for row in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        labels = torch.full((len(rows), width), IGNORE, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            n = len(row["input_ids"])
            ids[i, :n] = torch.tensor(row["input_ids"])
            labels[i, :n] = torch.tensor(row["labels"])
            mask[i, :n] = 1
        return {"input_ids": ids, "labels": labels, "attention_mask": mask}


class ProgressReport(TrainerCallback):
    """Passes each optimizer step's loss and each checkpoint to the caller; stops the Trainer when `on_progress`
    says."""

    def __init__(self, on_progress: Callable[[Progress], bool] | None,
                 on_checkpoint: Callable[[int, Path], None] | None, micro_batch: int, accumulation: int,
                 start_step: int, stop_after_s: float | None) -> None:
        self.on_progress, self.on_checkpoint = on_progress, on_checkpoint
        self.examples_per_step = micro_batch * accumulation
        self.losses: list[tuple[int, float]] = []
        self.start_step = start_step
        self.started = time.monotonic()
        self.deadline = self.started + stop_after_s if stop_after_s else None
        self.stopped = False

    def on_log(self, args, state: TrainerState, control: TrainerControl, logs=None, **kwargs) -> None:
        # The Trainer logs every step (logging_steps=1) after the step's end: here the step's loss is known.
        if not logs or "loss" not in logs:
            return
        self.losses.append((state.global_step, float(logs["loss"])))
        done = state.global_step - self.start_step
        elapsed = time.monotonic() - self.started
        rate = done / elapsed if elapsed > 0 and done > 0 else None
        progress = Progress(
            step=state.global_step, total_steps=state.max_steps, loss=self.losses[-1][1],
            eta_s=(state.max_steps - state.global_step) / rate if rate else None,
            examples_per_s=rate * self.examples_per_step if rate else None,
        )
        if self.on_progress is not None and not self.on_progress(progress):
            self.stopped = True
            control.should_training_stop = True
            control.should_save = False
        elif self.deadline is not None and time.monotonic() >= self.deadline:
            control.should_training_stop = True  # a time budget: ends like max_steps, the adapter is written

    def on_save(self, args, state: TrainerState, control: TrainerControl, **kwargs) -> None:
        if self.on_checkpoint is not None and not self.stopped:
            self.on_checkpoint(state.global_step, Path(args.output_dir) / f"checkpoint-{state.global_step}")


def load_student_base(base_folder: str, settings: LoraSettings, device: str):
    """(model, tokenizer, quantized) for fine-tuning: the base model, 4-bit when asked for and CUDA and
    bitsandbytes are there, with a LoRA adapter on all linear layers (of the top `settings.top_layers` layers when
    set; FinetuneError when the model has fewer)."""
    folder = Path(base_folder)
    if not (folder / "config.json").is_file():
        raise FinetuneError(f"base model folder {folder} does not exist or holds no config.json")
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    if not getattr(tokenizer, "chat_template", None):
        raise FinetuneError(f"{folder}: the student needs a tokenizer with a chat template")
    quantize = settings.quantize_4bit and device.startswith("cuda") and torch.cuda.is_available() and _has_bnb()
    extra: dict = {}
    if quantize:
        from transformers import BitsAndBytesConfig

        extra["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16,
            bnb_4bit_use_double_quant=True,
        )
    # On a GPU the base weights are bf16 (an 8B model: 16 GB, not 32); the LoRA weights peft adds stay float32.
    on_gpu = device.startswith("cuda") and torch.cuda.is_available()
    dtype = torch.bfloat16 if on_gpu and torch.cuda.is_bf16_supported() else torch.float32
    model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, dtype=dtype, **extra)
    if quantize:
        from peft import prepare_model_for_kbit_training

        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=settings.gradient_checkpointing)
    targets, layers = settings.target_modules, None
    if settings.top_layers:
        count = model.config.num_hidden_layers
        if settings.top_layers > count:
            raise FinetuneError(f"top_layers is {settings.top_layers} but {folder.name} has {count} layers")
        # peft takes a layer range only with target modules named one by one, not "all-linear": the names of the
        # linear layers, the output layer left out as "all-linear" does.
        head = model.get_output_embeddings()
        targets = sorted({name.rsplit(".", 1)[-1] for name, module in model.named_modules()
                          if isinstance(module, torch.nn.Linear) and module is not head})
        layers = list(range(count - settings.top_layers, count))
    lora = LoraConfig(r=settings.r, lora_alpha=settings.alpha, lora_dropout=settings.dropout, target_modules=targets,
                      layers_to_transform=layers, task_type="CAUSAL_LM", bias="none")
    return get_peft_model(model, lora), tokenizer, quantize


def _has_bnb() -> bool:
    try:
        import bitsandbytes  # noqa: F401
    except ImportError:
        return False
    return True


def encode_all(tokenizer, examples: Sequence[ChatExample], settings: LoraSettings) -> list[EncodedExample]:
    """Every example encoded to the settings' source and target max lengths (chat.encode: a passage cut to fit is
    counted by the example's `truncated`, not refused); FinetuneError names the first that cannot be (by its
    position)."""
    encoded = []
    for index, example in enumerate(examples):
        try:
            encoded.append(encode(tokenizer, example, settings.source_max_length, settings.target_max_length))
        except DistillFormatError as exc:
            raise FinetuneError(f"training example {index + 1}: {exc}") from None
    return encoded


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
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise FinetuneError(f"device {device!r} asked for, but torch sees no CUDA device")
    with training_failures(device, knobs="micro_batch or source_max_length", written="the adapter"):
        return _finetune(base_folder, examples, work_dir, adapter_dir, settings, device, resume_from, on_progress,
                         on_checkpoint, stop_after_s, on_encoded)


@contextlib.contextmanager
def training_failures(device: str, *, knobs: str, written: str) -> Iterator[None]:
    """Running out of memory (torch's error or the allocator's RuntimeError) or disk (ENOSPC, EDQUOT) while training
    becomes a FinetuneError saying so and which settings (`knobs`) to lower; anything else passes through."""
    try:
        yield
    except torch.OutOfMemoryError as exc:
        raise FinetuneError(f"out of memory on {device} ({str(exc)[:200]}): lower {knobs}, or use a larger device"
                            ) from None
    except RuntimeError as exc:
        if "can't allocate memory" in str(exc) or "out of memory" in str(exc).lower():
            raise FinetuneError(f"out of memory on {device} ({str(exc)[:200]}): lower {knobs}") from None
        raise
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise FinetuneError(f"the disk is full writing checkpoints or {written} ({exc})") from None
        raise


def _finetune(base_folder, examples, work_dir, adapter_dir, settings, device, resume_from, on_progress,
              on_checkpoint, stop_after_s, on_encoded) -> FinetuneResult:
    # peft draws the LoRA A matrices from torch's global generator when the adapter is added, before the Trainer
    # seeds anything: seed first, or the student depends on whatever ran earlier in the process.
    set_seed(settings.seed)
    model, tokenizer, _ = load_student_base(base_folder, settings, device)
    encoded = encode_all(tokenizer, examples, settings)
    truncated = sum(example.truncated for example in encoded)
    if on_encoded is not None:
        on_encoded(len(encoded), truncated)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    accumulation = settings.batch_size // settings.micro_batch
    args = TrainingArguments(
        output_dir=work_dir,
        per_device_train_batch_size=settings.micro_batch,
        gradient_accumulation_steps=accumulation,
        learning_rate=settings.learning_rate,
        lr_scheduler_type=settings.scheduler,
        warmup_steps=settings.warmup_ratio,  # below 1: a share of the training steps
        adam_beta2=settings.adam_beta2,
        max_grad_norm=settings.max_grad_norm,
        weight_decay=settings.weight_decay,
        num_train_epochs=settings.epochs,
        max_steps=settings.max_steps or -1,
        optim="adamw_torch",
        logging_steps=1,
        save_strategy="steps",
        save_steps=settings.save_steps,
        save_total_limit=1,
        seed=settings.seed,
        data_seed=settings.seed,
        use_cpu=not device.startswith("cuda"),
        bf16=device.startswith("cuda") and torch.cuda.is_bf16_supported(),
        activation_checkpointing=settings.gradient_checkpointing,
        remove_unused_columns=False,
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    start_step = checkpoint_step(resume_from) if resume_from else 0
    report = ProgressReport(on_progress, on_checkpoint, settings.micro_batch, accumulation, start_step, stop_after_s)
    trainer = AnswerLossTrainer(model=model, args=args, train_dataset=_Examples(encoded),
                                data_collator=_Collator(pad_id), callbacks=[report])
    started = time.monotonic()
    output = trainer.train(resume_from_checkpoint=resume_from)
    if report.stopped:
        raise FinetuneStopped(f"stopped at step {trainer.state.global_step}")
    seconds = time.monotonic() - started
    Path(adapter_dir).mkdir(parents=True, exist_ok=True)
    model.save_pretrained(adapter_dir)
    return FinetuneResult(
        adapter_dir=adapter_dir, steps=output.global_step, losses=tuple(report.losses), examples=len(encoded),
        seconds=seconds, examples_per_s=float(output.metrics.get("train_samples_per_second", 0.0)),
        resumed_from_step=start_step or None, truncated=truncated,
    )


def checkpoint_step(folder: str) -> int:
    """The step a Trainer checkpoint folder (checkpoint-STEP, with its trainer_state.json) was saved at."""
    name = Path(folder).name
    if not name.startswith("checkpoint-") or not name[len("checkpoint-"):].isdigit():
        raise FinetuneError(f"{folder} is not a Trainer checkpoint folder (checkpoint-STEP)")
    if not (Path(folder) / "trainer_state.json").is_file():
        raise FinetuneError(f"{folder} holds no trainer_state.json: not a complete checkpoint")
    return int(name[len("checkpoint-"):])


def load_adapter(base_folder: str, adapter_dir: str) -> PeftModel:
    """The base model with a saved adapter, for inference (what the hf backend does with Judge.adapter)."""
    model = AutoModelForCausalLM.from_pretrained(base_folder, local_files_only=True, dtype=torch.float32)
    return PeftModel.from_pretrained(model, adapter_dir)


def probe_device(device: str) -> None:
    """A probe times training on this machine: FinetuneError when it asks for a CUDA device there is none of."""
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise FinetuneError(f"this machine has no CUDA device to time the training on {device} (the first job "
                            "there measures it)")


def timed_backward(model, loss_of: Callable[[int], torch.Tensor], batches: int, device: str) -> float:
    """Seconds that batches 1..`batches` take forward and backward (`loss_of(index)` builds batch `index`'s loss);
    batch 0 is a warm-up, run but not timed. Gradients are dropped after each; the optimizer never steps."""
    seconds = 0.0
    for index in range(batches + 1):
        started = time.monotonic()
        loss_of(index).backward()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        if index:
            seconds += time.monotonic() - started
        model.zero_grad(set_to_none=True)
    return seconds


def training_probe(base_folder: str, examples: Sequence[ChatExample], settings: LoraSettings, device: str,
                   *, micro_batches: int = 2) -> float:
    """A first guess of the training speed, in examples per second, before any fine-tuning of this base model has
    run here: the student is built as the training builds it (LoRA, gradient checkpointing as set) and
    `micro_batches` + 1 micro batches of `examples` go forward and backward; the first (warm-up) is not timed. The
    optimizer's step is left out: with LoRA it moves a fraction of a percent of the weights."""
    if not examples:
        raise FinetuneError("no example to time")
    probe_device(device)
    set_seed(settings.seed)
    model, tokenizer, _ = load_student_base(base_folder, settings, device)
    if settings.gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.enable_input_require_grads()
    model.train()
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    needed = settings.micro_batch * (micro_batches + 1)
    chosen = [examples[i % len(examples)] for i in range(needed)]
    encoded = encode_all(tokenizer, chosen, settings)
    collate, trims = _Collator(pad_id), head_trims(model)
    target = torch.device(device if device.startswith("cuda") and torch.cuda.is_available() else "cpu")
    model.to(target)

    def loss_of(index: int) -> torch.Tensor:
        rows = encoded[index * settings.micro_batch:(index + 1) * settings.micro_batch]
        batch = {key: value.to(target) for key, value in collate(
            [{"input_ids": list(row.input_ids), "labels": list(row.labels)} for row in rows]).items()}
        return answer_loss(model, batch) if trims else model(**batch).loss  # as the training does

    seconds = timed_backward(model, loss_of, micro_batches, device)
    return settings.micro_batch * micro_batches / max(seconds, 1e-6)

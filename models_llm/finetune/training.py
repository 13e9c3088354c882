"""What both students' training shares (the LoRA student's, lora_training; the cross-encoder student's,
crossencoder_training): the Trainer callback that reports progress and checkpoints, running out of memory or disk
as a FinetuneError, and the timed forward and backward passes of a speed probe. Imported with torch, by them only."""
from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a student is built from a local folder only, never a download

import torch
from transformers import TrainerCallback, TrainerControl, TrainerState

from models_llm.finetune.lora import FinetuneError, FinetuneResult, FinetuneStopped, Progress


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


def train_and_save(trainer, report: ProgressReport, *, resume_from: str | None, out_dir: str, examples: int,
                   start_step: int, truncated: int = 0) -> FinetuneResult:
    """Run a Trainer (a checkpoint's run goes on from it), stop with FinetuneStopped when `report` stopped it, else
    save the trained model (an adapter, or the cross-encoder) to `out_dir` and say what the run did."""
    started = time.monotonic()
    output = trainer.train(resume_from_checkpoint=resume_from)
    if report.stopped:
        raise FinetuneStopped(f"stopped at step {trainer.state.global_step}")
    seconds = time.monotonic() - started
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    trainer.model.save_pretrained(out_dir)
    return FinetuneResult(
        adapter_dir=out_dir, steps=output.global_step, losses=tuple(report.losses), examples=examples,
        seconds=seconds, examples_per_s=float(output.metrics.get("train_samples_per_second", 0.0)),
        resumed_from_step=start_step or None, truncated=truncated,
    )

"""The LoRA student's training and speed probe (finetune's entry points call them), with the transformers Trainer
and peft: the training loop, the optimizer, the schedule, gradient accumulation, clipping and checkpoints are the
library's. This module builds the student, feeds it chat examples with the loss on the answer only and turns the
Trainer's output into a FinetuneResult."""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a student is built from a local folder only, never a download

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainingArguments, set_seed

from models_llm.finetune.answer_loss import AnswerLossTrainer, answer_loss, head_trims
from models_llm.finetune.chat import IGNORE, ChatExample, DistillFormatError, EncodedExample, encode
from models_llm.finetune.lora import (
    FinetuneError,
    FinetuneResult,
    LoraSettings,
    Progress,
    checkpoint_step,
)
from models_llm.finetune.training import (
    ProgressReport,
    probe_device,
    timed_backward,
    train_and_save,
    training_failures,
)


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


def train(
    *, base_folder: str, examples: Sequence[ChatExample], work_dir: str, adapter_dir: str, settings: LoraSettings,
    device: str, resume_from: str | None, on_progress: Callable[[Progress], bool] | None,
    on_checkpoint: Callable[[int, Path], None] | None, stop_after_s: float | None,
    on_encoded: Callable[[int, int], None] | None,
) -> FinetuneResult:
    """finetune.finetune's training, given at least one example."""
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise FinetuneError(f"device {device!r} asked for, but torch sees no CUDA device")
    with training_failures(device, knobs="micro_batch or source_max_length", written="the adapter"):
        return _finetune(base_folder, examples, work_dir, adapter_dir, settings, device, resume_from, on_progress,
                         on_checkpoint, stop_after_s, on_encoded)


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
    return train_and_save(trainer, report, resume_from=resume_from, out_dir=adapter_dir, examples=len(encoded),
                          start_step=start_step, truncated=truncated)


def load_adapter(base_folder: str, adapter_dir: str) -> PeftModel:
    """The base model with a saved adapter, for inference (what the hf backend does with Judge.adapter)."""
    model = AutoModelForCausalLM.from_pretrained(base_folder, local_files_only=True, dtype=torch.float32)
    return PeftModel.from_pretrained(model, adapter_dir)


def probe(base_folder: str, examples: Sequence[ChatExample], settings: LoraSettings, device: str,
          *, micro_batches: int) -> float:
    """finetune.training_probe's timing, given at least one example."""
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

"""The training loss on the answer tokens, with the model's head run only where an answer token is predicted: a
prompt position has no label, yet the default causal-LM loss projects every one onto the whole vocabulary."""
from __future__ import annotations

import inspect

import torch
from peft import PeftModel
from transformers import Trainer

from models_llm.finetune.chat import IGNORE


def head_trims(model: torch.nn.Module) -> bool:
    """Whether the model can run its head on chosen positions only (transformers' `logits_to_keep`)."""
    inner = model.get_base_model() if isinstance(model, PeftModel) else model
    return "logits_to_keep" in inspect.signature(inner.forward).parameters


def answer_loss(model: torch.nn.Module, batch: dict[str, torch.Tensor],
                num_items: torch.Tensor | int | None = None) -> torch.Tensor:
    """Cross-entropy of the labelled tokens of a right-padded batch (IGNORE elsewhere), as the model's own loss:
    summed over the tokens and divided by `num_items` (the labelled tokens of the whole accumulated batch, as the
    Trainer counts them) or, without it, by this batch's. The logits are computed only at the positions that
    predict a label of some row: DIRAS's prompts run to a thousand tokens before an answer of about fifteen, and a
    logit row over a 50k-150k vocabulary per prompt token costs a small student a fifth of its step and a large one
    gigabytes of memory."""
    targets = torch.nn.functional.pad(batch["labels"][:, 1:], (0, 1), value=IGNORE)  # position i predicts i + 1
    keep = (targets != IGNORE).any(dim=0).nonzero().squeeze(1)
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], logits_to_keep=keep).logits
    total = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), targets[:, keep].flatten(),
                                              ignore_index=IGNORE, reduction="sum")
    return total / (num_items if num_items is not None else (targets != IGNORE).sum())


class AnswerLossTrainer(Trainer):
    """The Trainer with answer_loss where the model can trim its head (the model's own loss where it cannot)."""

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if return_outputs or not head_trims(self.accelerator.unwrap_model(model)):
            return super().compute_loss(model, inputs, return_outputs=return_outputs,
                                        num_items_in_batch=num_items_in_batch)
        # Divided by the Trainer's count when it made one (the Trainer then takes the loss as scaled for gradient
        # accumulation), else a per-batch mean that the Trainer divides by the accumulation steps, as it does with
        # the model's own loss.
        return answer_loss(model, inputs, num_items_in_batch)

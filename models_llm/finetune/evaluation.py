"""How close a judge's P is to a reference's binary answer (the teacher's guess, or the experts' gold): the
numbers the side-by-side of base model, student and teacher shows, and bench/distill.py reports."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.metrics import roc_auc_score

from models_llm.metrics.calibration_error import brier, ece


@dataclass(frozen=True)
class Agreement:
    """AUROC (None when the reference has one class only), ECE (10 equal-width bins, DIRAS's), Brier and the
    accuracy of P >= 0.5, over `n` pairs."""

    n: int
    auroc: float | None
    ece: float | None
    brier: float | None
    accuracy: float | None


def agreement(p, reference) -> Agreement:
    """`p` (P(relevant) per pair) against `reference` (0/1 per pair)."""
    p, y = np.asarray(p, dtype=float), np.asarray(reference, dtype=int)
    if p.shape != y.shape:
        raise ValueError(f"{p.size} probabilities for {y.size} reference answers")
    if p.size == 0:
        return Agreement(n=0, auroc=None, ece=None, brier=None, accuracy=None)
    auroc = float(roc_auc_score(y, p)) if 0 < y.sum() < y.size else None
    return Agreement(n=int(p.size), auroc=auroc, ece=ece(p, y), brier=brier(p, y),
                     accuracy=float(np.mean((p >= 0.5) == (y == 1))))


def tok_probabilities(model, tokenizer, examples, *, batch_size: int = 4) -> list[float]:
    """Tok on prepared chat examples (their prompt only; the answer is ignored): P(Yes) / (P(Yes) + P(No)) of the
    token after the prompt in the tokenizer's chat template followed by "[Guess]:", as the hf backend reads it
    for a pair. For examples whose prompt is not the product's (an imported file's)."""
    import torch

    from models_llm.backends.hf import spelling_ids, yes_probability
    from models_llm.prompts import TOK_ANSWER_PREFIX

    yes_ids, no_ids = spelling_ids(tokenizer, "yes"), spelling_ids(tokenizer, "no")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    texts = [tokenizer.apply_chat_template(example.messages(), add_generation_prompt=True, tokenize=False)
             + TOK_ANSWER_PREFIX for example in examples]
    out: list[float] = []
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            rows = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts[start:start + batch_size]]
            width = max(len(row) for row in rows)
            ids = torch.full((len(rows), width), pad, dtype=torch.long)
            mask = torch.zeros((len(rows), width), dtype=torch.long)
            for i, row in enumerate(rows):
                ids[i, : len(row)], mask[i, : len(row)] = torch.tensor(row), 1
            logits = model(input_ids=ids, attention_mask=mask).logits
            out += [yes_probability(logits[i, len(row) - 1], yes_ids, no_ids)[0] for i, row in enumerate(rows)]
    return out

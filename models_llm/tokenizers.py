"""A model folder's tokenizer without its weights: to count a judge's prompt tokens for a dry run, and to render
training examples in a student's chat template. transformers is imported inside load_tokenizer, so importing this
module (as every web process does) loads neither it nor torch."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from models_llm.backends import ScorerConfigError


def load_tokenizer(folder: str | Path) -> Any:
    """The tokenizer of a model folder, read from the folder only (nothing is downloaded); transformers' OSError or
    ValueError when the folder holds none that loads."""
    from transformers import AutoTokenizer  # heavy (transformers, torch): loaded when a tokenizer is

    return AutoTokenizer.from_pretrained(folder, local_files_only=True)


def chat_token_counter(model_folder: str) -> Callable[[Sequence[dict[str, str]]], int]:
    """Count the prompt tokens of chat messages as HFScorer.generate_chat would send them, with only the
    tokenizer of `model_folder` loaded (no model weights): for dry-run estimates. ScorerConfigError when the
    folder holds no loadable tokenizer."""
    try:
        tokenizer = load_tokenizer(model_folder)
    except (OSError, ValueError) as exc:
        raise ScorerConfigError(f"the model folder {model_folder} holds no loadable tokenizer ({exc})"[:500]) from None

    def count(messages: Sequence[dict[str, str]]) -> int:
        text = tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    return count

"""The `crossencoder` backend: a small encoder reads the query and the passage together and gives one score per
pair (a re-ranker: ms-marco MiniLM cross-encoders, bge-reranker and the like, or a cross-encoder student distilled
from a teacher's P). Any sentence-transformers `CrossEncoder` folder or Hugging Face sequence-classification folder
under the operator's model roots; loaded from the folder only (nothing is downloaded).

P(relevant) from the head's logits: the sigmoid of a one-logit head, the softmax of the positive class (index 1)
of a two-logit head (`head` in `describe()`, which the judge records). A folder whose model has no classification
head (a plain encoder: a head would be made up at random) or a head of more than two classes is refused.

The query side is the question, or with `use_definition` the relevance definition, `separator` (default " [SEP] ",
which BERT-style tokenizers read as their separator token), then the question; the passage side is the title line
(if any) and the passage, as the other backends show them. Query and passage together are cut to `max_length`
tokens (the passage's end goes first). `prompt_tokens` counts what the model read."""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from models_llm.backends import ScorerConfigError
from models_llm.retrieval.dense import passage_text as retrieval_passage_text
from models_llm.types import JudgeConfig, PairInput, Verdict

HEADS = {1: "sigmoid of one logit", 2: "softmax of the positive class (index 1) of two logits"}


def query_side(pair: PairInput, use_definition: bool, separator: str) -> str:
    """The question, after the relevance definition and the separator when the definition is used."""
    if use_definition and pair.definition and pair.definition.strip():
        return f"{pair.definition.strip()}{separator}{pair.query}"
    return pair.query


def passage_side(pair: PairInput) -> str:
    """The title line (if any) and the passage, as the other backends show them."""
    return retrieval_passage_text(pair.title, pair.passage)


def probabilities(logits: np.ndarray) -> np.ndarray:
    """P(relevant) per row of a head's logits: (n,) or (n, 1) through the sigmoid, (n, 2) through the softmax's
    second column. float64, computed stably."""
    logits = np.asarray(logits, dtype=np.float64)
    if logits.ndim == 1 or logits.shape[1] == 1:
        x = logits.reshape(-1)
        return np.where(x >= 0, 1.0 / (1.0 + np.exp(-np.abs(x))), np.exp(-np.abs(x)) / (1.0 + np.exp(-np.abs(x))))
    if logits.shape[1] == 2:
        shifted = logits - logits.max(axis=1, keepdims=True)
        exp = np.exp(shifted)
        return exp[:, 1] / exp.sum(axis=1)
    raise ValueError(f"a head of {logits.shape[1]} logits has no single relevant class")


def head_problem(folder: Path) -> str | None:
    """Why the folder cannot be a cross-encoder judge, read from its config.json alone (None: it names a
    sequence-classification model): a plain encoder's head would be made up at random."""
    try:
        architectures = list(json.loads((Path(folder) / "config.json").read_text()).get("architectures") or [])
    except (OSError, ValueError, AttributeError) as exc:
        return f"{folder} has no readable config.json: {exc}"[:500]
    if not any(str(name).endswith("ForSequenceClassification") for name in architectures):
        return (f"{folder} is an encoder without a relevance head (config.json names no ...ForSequenceClassification "
                "architecture): its head would be random. Use a cross-encoder or re-ranker folder, or fine-tune a "
                "cross-encoder student from it first")
    return None


class CrossEncoderScorer:
    """Scores pairs with a cross-encoder's head; see the module docstring."""

    def __init__(self, config: JudgeConfig) -> None:
        if config.backend != "crossencoder":
            raise ScorerConfigError(f"CrossEncoderScorer needs the crossencoder backend, got {config.backend!r}")
        folder = Path(config.model)
        if not folder.is_dir():
            raise ScorerConfigError(f"cross-encoder folder {folder} does not exist")
        # Heavy (torch, sentence-transformers): loaded by the processes that score, not by those that check a folder.
        import torch
        from sentence_transformers import CrossEncoder

        dtype = getattr(torch, config.dtype, None)
        if not isinstance(dtype, torch.dtype):
            raise ScorerConfigError(f"unknown dtype {config.dtype!r}")
        problem = head_problem(folder)
        if problem:
            raise ScorerConfigError(problem)
        try:
            self.model: CrossEncoder | None = CrossEncoder(
                str(folder), device=config.device, local_files_only=True, max_length=config.max_length,
                model_kwargs={"dtype": dtype})
        except (OSError, ValueError, RuntimeError) as exc:
            raise ScorerConfigError(f"{folder} is not a loadable cross-encoder: {exc}"[:500]) from None
        labels = self.model.num_labels
        if labels not in HEADS:
            raise ScorerConfigError(f"{folder} has a head of {labels} classes: P(relevant) needs one logit or two")
        self.config = config
        self.labels = labels
        self.identity = torch.nn.Identity()  # the head's raw logits, not sentence-transformers' default activation

    def describe(self) -> dict:
        """What the judge records: the head and how P is read from it, the separator, the length cut."""
        return {"head": HEADS[self.labels], "num_labels": self.labels, "separator": self.config.separator,
                "max_length": self.config.max_length}

    def logits(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """The head's raw logits for (query side, passage side) pairs: (n,) or (n, 2)."""
        if self.model is None:
            raise RuntimeError("this scorer is closed")
        if not pairs:
            return np.zeros((0,) if self.labels == 1 else (0, self.labels))
        return np.asarray(self.model.predict(list(pairs), batch_size=self.config.batch_size,
                                             activation_fn=self.identity, apply_softmax=False,
                                             convert_to_numpy=True, show_progress_bar=False), dtype=np.float64)

    def token_counts(self, pairs: Sequence[tuple[str, str]]) -> list[int]:
        """Tokens the model reads per pair (special tokens included, after the cut to max_length)."""
        if self.model is None:
            raise RuntimeError("this scorer is closed")
        tokenizer = self.model.tokenizer
        encoded = tokenizer([q for q, _ in pairs], [p for _, p in pairs], truncation="longest_first",
                            max_length=self.config.max_length)
        return [len(ids) for ids in encoded["input_ids"]]

    def score(self, pairs: Sequence[PairInput]) -> list[Verdict]:
        """One verdict per pair, in input order."""
        sides = [(query_side(pair, self.config.use_definition, self.config.separator), passage_side(pair))
                 for pair in pairs]
        logits = self.logits(sides)
        p = probabilities(logits)
        tokens = self.token_counts(sides) if sides else []
        verdicts = []
        for index, pair in enumerate(pairs):
            row = logits[index]
            raw = f"logit={float(row):.4f}" if self.labels == 1 else f"logits=[{row[0]:.4f}, {row[1]:.4f}]"
            verdicts.append(Verdict(pair_id=pair.pair_id, status="ok", method="crossencoder", p=float(p[index]),
                                    raw_output=raw, prompt_tokens=tokens[index], completion_tokens=0))
        return verdicts

    def close(self) -> None:
        """Release the model."""
        self.model = None

"""The `embedding` backend, the DIRAS baseline: the cosine similarity between the query (with the relevance
definition when `use_definition`) and the paragraph, embedded by a sentence-transformers model folder.

The folder is read with plain transformers (AutoTokenizer/AutoModel): `modules.json` names the Transformer
module's folder, its `sentence_bert_config.json` the maximum sequence length, the Pooling module's
`config.json` the pooling (CLS, mean, max, mean/sqrt(length), concatenated in sentence-transformers' order
when several are set), and a Normalize module makes the embeddings unit length. A folder without
`modules.json` is taken as a plain encoder: mean pooling, normalised.

P = (cos + 1) / 2 clipped to [0, 1]. It is a monotone rescaling of the cosine, not a probability: to be
recalibrated (models_llm.calibration) before it is read as one."""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoModel, AutoTokenizer

from models_llm.backends import ScorerConfigError
from models_llm.retrieval.dense import passage_text as retrieval_passage_text
from models_llm.retrieval.dense import query_text as retrieval_query_text
from models_llm.types import JudgeConfig, PairInput, Verdict

# sentence-transformers' Pooling flags, in the order it concatenates them.
_POOLING_MODES = ("cls_token", "max_tokens", "mean_tokens", "mean_sqrt_len_tokens")


def _read_json(path: Path) -> dict[str, Any] | list[Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ScorerConfigError(f"cannot read {path}: {exc}") from None


def _layout(folder: Path) -> tuple[Path, tuple[str, ...], bool, int | None]:
    """(transformer folder, pooling modes, normalise?, max sequence length) of a sentence-transformers
    folder."""
    modules_file = folder / "modules.json"
    if not modules_file.exists():
        return folder, ("mean_tokens",), True, None
    modules = _read_json(modules_file)
    by_kind = {str(m.get("type", "")).rsplit(".", 1)[-1]: folder / m.get("path", "") for m in modules}
    if "Transformer" not in by_kind or "Pooling" not in by_kind:
        raise ScorerConfigError(f"{modules_file} needs a Transformer and a Pooling module, has {sorted(by_kind)}")
    transformer = by_kind["Transformer"]
    pooling = _read_json(by_kind["Pooling"] / "config.json")
    modes = tuple(mode for mode in _POOLING_MODES if pooling.get(f"pooling_mode_{mode}"))
    unsupported = sorted(key for key, on in pooling.items()
                         if key.startswith("pooling_mode_") and on and key[len("pooling_mode_"):] not in modes)
    if unsupported or not modes:
        raise ScorerConfigError(f"unsupported pooling in {by_kind['Pooling']}: {unsupported or 'none set'}")
    max_length = None
    bert_config = transformer / "sentence_bert_config.json"
    if bert_config.exists():
        max_length = _read_json(bert_config).get("max_seq_length")
    return transformer, modes, "Normalize" in by_kind, max_length


def pool(token_embeddings: torch.Tensor, attention_mask: torch.Tensor, modes: tuple[str, ...]) -> torch.Tensor:
    """Sentence embeddings from token embeddings (batch, tokens, dim), padding masked out, the `modes`
    concatenated."""
    mask = attention_mask.unsqueeze(-1).to(token_embeddings.dtype)
    parts = []
    for mode in modes:
        if mode == "cls_token":
            parts.append(token_embeddings[:, 0])
        elif mode == "max_tokens":
            parts.append(token_embeddings.masked_fill(mask == 0, -1e9).max(dim=1).values)
        else:
            summed = (token_embeddings * mask).sum(dim=1)
            counts = mask.sum(dim=1).clamp(min=1e-9)
            parts.append(summed / (counts if mode == "mean_tokens" else counts.sqrt()))
    return torch.cat(parts, dim=-1)


def query_text(pair: PairInput, use_definition: bool) -> str:
    """The query side: the question, then the definition when it is used (the rule dense retrieval shares)."""
    return retrieval_query_text(pair.query, pair.definition, use_definition)


def passage_text(pair: PairInput) -> str:
    """The paragraph side: the title line (if any) and the paragraph, as in the LLM prompts."""
    return retrieval_passage_text(pair.title, pair.passage)


class EmbeddingScorer:
    """Scores pairs by embedding cosine similarity; see the module docstring."""

    def __init__(self, config: JudgeConfig) -> None:
        if config.backend != "embedding":
            raise ScorerConfigError(f"EmbeddingScorer needs the embedding backend, got {config.backend!r}")
        folder = Path(config.model)
        if not folder.is_dir():
            raise ScorerConfigError(f"embedding model folder {folder} does not exist")
        dtype = getattr(torch, config.dtype, None)
        if not isinstance(dtype, torch.dtype):
            raise ScorerConfigError(f"unknown dtype {config.dtype!r}")
        self.config = config
        transformer, self.modes, self.normalize, max_length = _layout(folder)
        self.tokenizer = AutoTokenizer.from_pretrained(transformer, local_files_only=True)
        self.max_length = max_length or min(self.tokenizer.model_max_length, 512)
        self.model = AutoModel.from_pretrained(transformer, dtype=dtype, local_files_only=True).to(config.device).eval()

    def embed(self, texts: list[str]) -> np.ndarray:
        """Sentence embeddings (len(texts), dim) as float64, in `config.batch_size` batches."""
        batches = []
        for start in range(0, len(texts), max(1, self.config.batch_size)):
            encoded = self.tokenizer(texts[start:start + self.config.batch_size], padding=True, truncation=True,
                                     max_length=self.max_length, return_tensors="pt").to(self.config.device)
            with torch.inference_mode():
                tokens = self.model(**encoded).last_hidden_state
                pooled = pool(tokens, encoded["attention_mask"], self.modes)
                if self.normalize:
                    pooled = torch.nn.functional.normalize(pooled, p=2, dim=-1)
            batches.append(pooled.float().cpu().numpy().astype(np.float64))
        return np.concatenate(batches) if batches else np.zeros((0, 0))

    def score(self, pairs: Sequence[PairInput]) -> list[Verdict]:
        """One verdict per pair, in input order; each distinct text is embedded once."""
        sides = [(query_text(pair, self.config.use_definition), passage_text(pair)) for pair in pairs]
        texts = list(dict.fromkeys(text for side in sides for text in side))
        vectors = dict(zip(texts, self.embed(texts)))
        verdicts = []
        for pair, (query, passage) in zip(pairs, sides):
            a, b = vectors[query], vectors[passage]
            cosine = float(a @ b / max(float(np.linalg.norm(a) * np.linalg.norm(b)), 1e-12))
            verdicts.append(Verdict(pair_id=pair.pair_id, status="ok", method="embedding",
                                    p=min(1.0, max(0.0, (cosine + 1.0) / 2.0)), raw_output=f"cosine={cosine:.4f}"))
        return verdicts

    def close(self) -> None:
        """Release the model."""
        self.model = None
        self.tokenizer = None

"""The `embedding` backend, the DIRAS baseline: the cosine similarity between the query (with the relevance
definition when `use_definition`) and the paragraph, embedded by a sentence-transformers model folder.

The folder is loaded by sentence-transformers itself (offline, from the folder: its modules, maximum sequence
length, pooling and normalisation), through the encoder dense retrieval uses (models_llm.retrieval.dense), so the
judge and the retriever embed a text alike.

P = (cos + 1) / 2 clipped to [0, 1]. It is a monotone rescaling of the cosine, not a probability: to be
recalibrated (models_llm.calibration) before it is read as one."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from models_llm.backends import ScorerConfigError
from models_llm.retrieval.dense import DenseEncoder
from models_llm.retrieval.dense import passage_text as retrieval_passage_text
from models_llm.retrieval.dense import query_text as retrieval_query_text
from models_llm.types import JudgeConfig, PairInput, Verdict


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
        if not isinstance(getattr(torch, config.dtype, None), torch.dtype):
            raise ScorerConfigError(f"unknown dtype {config.dtype!r}")
        self.config = config
        self.encoder: DenseEncoder | None = DenseEncoder(folder, device=config.device, batch_size=config.batch_size,
                                                         dtype=config.dtype)
        try:
            self.encoder.dimension  # noqa: B018 - load now: a folder that is no model fails here, not mid-job
        except (OSError, ValueError) as exc:
            raise ScorerConfigError(f"{folder} is not a loadable sentence-transformers model: {exc}"[:500]) from None

    def embed(self, texts: list[str]) -> np.ndarray:
        """Sentence embeddings (len(texts), dim), unit length, as float64."""
        if self.encoder is None:
            raise RuntimeError("this scorer is closed")
        return self.encoder.encode(texts).astype(np.float64)

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
        self.encoder = None

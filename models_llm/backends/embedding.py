"""The `embedding` backend, the DIRAS baseline: the cosine similarity between the query (with the relevance
definition when `use_definition`) and the paragraph, embedded by a sentence-transformers model folder.

The folder is loaded by sentence-transformers itself (offline, from the folder: its modules, maximum sequence
length, pooling and normalisation), through the encoder dense retrieval uses (models_llm.retrieval.dense), so the
judge and the retriever embed a text alike.

A pool is queries times passages, so each text comes back many times: a call embeds each distinct text it lacks
once, in batches, and the scorer keeps the last TEXT_CACHE_SIZE embeddings between calls (a chunk's parts share
their query; a query's chunks share the passages of the next query's). Vectors the caller already has (the dense
retriever's stored passage embeddings, made by the same model from the same text) are not embedded again.

P = (cos + 1) / 2 clipped to [0, 1]. It is a monotone rescaling of the cosine, not a probability: to be
recalibrated (models_llm.calibration) before it is read as one."""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import torch

from models_llm.backends import ScorerConfigError
from models_llm.retrieval.dense import DenseEncoder
from models_llm.retrieval.dense import passage_text as retrieval_passage_text
from models_llm.retrieval.dense import query_text as retrieval_query_text
from models_llm.types import JudgeConfig, PairInput, Verdict

# Embeddings kept between calls, the least recently used dropped first: 4,096 MiniLM vectors are 12 MiB, and hold
# a sample project's every text (ClimRetrieve: 16 queries and 446 passages).
TEXT_CACHE_SIZE = 4096


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
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_lock = threading.Lock()  # a worker process keeps one scorer, which threads may share
        try:
            self.encoder.dimension  # noqa: B018 - load now: a folder that is no model fails here, not mid-job
        except (OSError, ValueError) as exc:
            raise ScorerConfigError(f"{folder} is not a loadable sentence-transformers model: {exc}"[:500]) from None

    @property
    def model_name(self) -> str:
        """The name the model's stored embeddings are kept under (DenseEncoder.name: its folder's name and
        contents)."""
        if self.encoder is None:
            raise RuntimeError("this scorer is closed")
        return self.encoder.name

    def embed(self, texts: list[str]) -> np.ndarray:
        """Sentence embeddings (len(texts), dim), unit length, as float64."""
        if self.encoder is None:
            raise RuntimeError("this scorer is closed")
        return self.encoder.encode(texts).astype(np.float64)

    def score(self, pairs: Sequence[PairInput], *, known: Mapping[str, np.ndarray] | None = None) -> list[Verdict]:
        """One verdict per pair, in input order. Each distinct text is embedded once, and not at all when it is
        kept from an earlier call or in `known` (embedded text -> its unit vector from this same model)."""
        known = known or {}
        sides = [(query_text(pair, self.config.use_definition), passage_text(pair)) for pair in pairs]
        texts = list(dict.fromkeys(text for side in sides for text in side))
        vectors = {text: known[text] for text in texts if text in known}
        with self._cache_lock:
            for text in texts:
                if text not in vectors and text in self._cache:
                    self._cache.move_to_end(text)
                    vectors[text] = self._cache[text]
        missing = [text for text in texts if text not in vectors]
        if missing:
            embedded = self.embed(missing)
            with self._cache_lock:
                for text, vector in zip(missing, embedded):
                    vectors[text] = self._cache[text] = vector
                while len(self._cache) > TEXT_CACHE_SIZE:
                    self._cache.popitem(last=False)
        verdicts = []
        for pair, (query, passage) in zip(pairs, sides):
            a, b = np.asarray(vectors[query], np.float64), np.asarray(vectors[passage], np.float64)
            cosine = float(a @ b / max(float(np.linalg.norm(a) * np.linalg.norm(b)), 1e-12))
            verdicts.append(Verdict(pair_id=pair.pair_id, status="ok", method="embedding",
                                    p=min(1.0, max(0.0, (cosine + 1.0) / 2.0)), raw_output=f"cosine={cosine:.4f}"))
        return verdicts

    def close(self) -> None:
        """Release the model and the kept embeddings."""
        self.encoder = None
        with self._cache_lock:
            self._cache.clear()

"""Dense runs: passages and queries embedded by a sentence-transformers folder, ranked by cosine similarity.

Exact search (a blocked matrix product) is the default; a usearch HNSW graph is used from HNSW_MIN_PASSAGES
passages on. The graph rarely pays for itself in one run: measured on 20,000 clustered 384-dimension unit
vectors, one CPU core, exact search took 0.7 ms a query, building the graph 1.6 ms a passage and searching it
(ef 512, recall@10 0.97) 13 ms a query. Exact search and building both grow linearly with the passages, so
even on a huge corpus the build is repaid only after some 45,000 queries, more than a test collection has.
Hence the high threshold, a million passages: there an exact query costs about 36 ms against the graph's
barely growing 13 ms, and a very large query set (70,000 and up) is faster with the graph; below it exact
search is both faster and exact.

HNSW settings: usearch's connectivity (M 16) and insertion breadth (efConstruction 128), since building is
the expensive part (M 32 with efConstruction 200 built 3.4 times slower for 7 points of recall@10); search
breadth (ef) 512, or twice the depth if larger, since the recall measured above was 0.81 at ef 128. The graph
is built on all cores, so its shape (and, rarely, a hit near the cut-off) may differ between two builds; the
scores returned are always the exact cosines of the hits found."""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from usearch.index import Index, Matches

from models_llm.retrieval.hits import Hits, ProgressFn, check_depth, no_hits, top_positions

HNSW_MIN_PASSAGES = 1_000_000
HNSW_CONNECTIVITY = 16
HNSW_EXPANSION_ADD = 128
HNSW_EXPANSION_SEARCH = 512
# Scores held at once by the exact search (float32: 64 MiB), whatever the number of passages.
EXACT_BLOCK_SCORES = 1 << 24
# Queries searched in the graph between two progress calls.
APPROXIMATE_BLOCK_QUERIES = 1024
# Files below this size (configurations, vocabularies) enter a model's name by content, larger ones (weights)
# by size: hashing gigabytes of weights on every run would cost seconds for a name.
_HASHED_BY_CONTENT = 1 << 20


def query_text(question: str, definition: str | None, use_definition: bool) -> str:
    """The query side of a query embedding: the question, then the relevance definition when it is used.
    The embedding judge (models_llm.backends.embedding) embeds its queries with this same rule."""
    if use_definition and definition and definition.strip():
        return f"{question.strip()}\n{definition.strip()}"
    return question.strip()


def passage_text(title: str, text: str) -> str:
    """The passage side that is retrieved and embedded: the title line (if any), then the text, as the LLM
    prompts show it. The embedding judge embeds its passages with this same rule."""
    return f"{title.strip()}\n{text.strip()}" if title.strip() else text.strip()


def best_device() -> str:
    """cuda when torch sees a CUDA device, else cpu: where an encoder runs when the caller has no preference."""
    import torch  # heavy: loaded by the processes that embed, not by those that import this module

    return "cuda" if torch.cuda.is_available() else "cpu"


class DenseEncoder:
    """A sentence-transformers model folder, loaded on first use, giving unit-length float32 embeddings."""

    def __init__(self, folder: Path, *, device: str = "cpu", batch_size: int = 64, dtype: str = "float32") -> None:
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise ValueError(f"embedding model folder {self.folder} does not exist")
        self.device = device
        self.batch_size = max(1, batch_size)
        self.dtype = dtype

    @cached_property
    def name(self) -> str:
        """A stable name for cache keys: the folder's name and a hash of what is in it (not where it is)."""
        digest = hashlib.sha256()
        for path in sorted(p for p in self.folder.rglob("*") if p.is_file()):
            size = path.stat().st_size
            digest.update(f"{path.relative_to(self.folder).as_posix()}\0{size}\0".encode())
            if size < _HASHED_BY_CONTENT:
                digest.update(path.read_bytes())
        return f"{self.folder.name}-{digest.hexdigest()[:16]}"

    @cached_property
    def _model(self) -> Any:
        # Heavy (torch, transformers): loaded only by the processes that embed.
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(str(self.folder), device=self.device, local_files_only=True,
                                   model_kwargs={"dtype": self.dtype})

    @property
    def dimension(self) -> int:
        return int(self._model.get_embedding_dimension())

    def encode(self, texts: Sequence[str], *, progress: ProgressFn | None = None) -> np.ndarray:
        """float32 (len(texts), dimension) unit vectors, in input order."""
        chunk = self.batch_size * 16
        parts = [np.zeros((0, self.dimension), np.float32)]
        for start in range(0, len(texts), chunk):
            parts.append(self._model.encode(list(texts[start:start + chunk]), batch_size=self.batch_size,
                                            normalize_embeddings=True, convert_to_numpy=True,
                                            show_progress_bar=False).astype(np.float32))
            if progress is not None:
                progress(min(start + chunk, len(texts)), len(texts))
        return np.ascontiguousarray(np.concatenate(parts))


def _exact(passages: np.ndarray, queries: np.ndarray, depth: int, progress: ProgressFn | None) -> Hits:
    indices, scores = [], []
    rows = max(1, EXACT_BLOCK_SCORES // len(passages))
    for start in range(0, len(queries), rows):
        block = queries[start:start + rows] @ passages.T
        for row in block:
            best = top_positions(row, depth)
            indices.append(best)
            scores.append(row[best].astype(np.float64))
        if progress is not None:
            progress(len(indices), len(queries))
    return Hits(indices=indices, scores=scores)


def _approximate(passages: np.ndarray, queries: np.ndarray, depth: int, progress: ProgressFn | None) -> Hits:
    index = Index(ndim=passages.shape[1], metric="cos", dtype="f32", connectivity=HNSW_CONNECTIVITY,
                  expansion_add=HNSW_EXPANSION_ADD, expansion_search=max(HNSW_EXPANSION_SEARCH, 2 * depth))
    # copy=False: the graph points into `passages`, which outlives it, instead of holding a second copy.
    index.add(np.arange(len(passages), dtype=np.uint64), passages, copy=False)
    indices, scores = [], []
    for start in range(0, len(queries), APPROXIMATE_BLOCK_QUERIES):
        block = queries[start:start + APPROXIMATE_BLOCK_QUERIES]
        found = index.search(block, count=min(depth, len(passages)))
        for query, matches in zip(block, [found] if isinstance(found, Matches) else list(found)):
            keys = matches.keys.astype(np.int64)
            # Exact cosines of the candidates, ranked by the same rule as the exact search.
            exact = passages[keys].astype(np.float64) @ query.astype(np.float64)
            order = np.lexsort((keys, -exact))
            indices.append(keys[order])
            scores.append(exact[order])
        if progress is not None:
            progress(len(indices), len(queries))
    return Hits(indices=indices, scores=scores)


def dense_search(passages: np.ndarray, queries: np.ndarray, *, depth: int, approximate: bool | None = None,
                 progress: ProgressFn | None = None) -> Hits:
    """The `depth` passages (rows of `passages`) closest to each row of `queries`, both unit vectors, by
    cosine (their dot product); exact below HNSW_MIN_PASSAGES passages unless `approximate` says otherwise.
    Equal scores rank by corpus position."""
    check_depth(depth)
    passages = np.ascontiguousarray(passages, dtype=np.float32)
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    if passages.ndim != 2 or queries.ndim != 2 or (len(passages) and passages.shape[1] != queries.shape[1]):
        raise ValueError(f"passages {passages.shape} and queries {queries.shape} must be matrices of one width")
    if not len(passages) or not len(queries):
        return no_hits(len(queries))
    if approximate is None:
        approximate = len(passages) >= HNSW_MIN_PASSAGES
    return (_approximate if approximate else _exact)(passages, queries, depth, progress)

"""Judging backends behind one interface: `load_scorer(config)` gives a Scorer whose `score(pairs)` returns one
Verdict per pair, in input order."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from models_llm.types import JudgeConfig, PairInput, Verdict


class TransientScoringError(RuntimeError):
    """A failure worth retrying later (a rate limit, a server that is briefly down): the caller retries the
    whole chunk instead of storing failed verdicts."""


class ScorerConfigError(ValueError):
    """A configuration the backend cannot run (a missing model folder, an unknown dtype or device); the
    message names the offending value."""


class Scorer(Protocol):
    def score(self, pairs: Sequence[PairInput]) -> list[Verdict]: ...

    def close(self) -> None: ...


def load_scorer(config: JudgeConfig) -> Scorer:
    """The scorer for `config.backend`, with its model loaded."""
    # Imported here, not at module level: each backend pulls its own heavy optional dependencies (torch and
    # transformers, an HTTP client, sentence-transformers) and a worker needs only the ones it runs.
    if config.backend == "hf":
        from models_llm.backends.hf import HFScorer

        return HFScorer(config)
    if config.backend == "openai":
        from models_llm.backends.openai import OpenAIScorer

        return OpenAIScorer(config)
    if config.backend == "embedding":
        from models_llm.backends.embedding import EmbeddingScorer

        return EmbeddingScorer(config)
    if config.backend == "crossencoder":
        from models_llm.backends.crossencoder import CrossEncoderScorer

        return CrossEncoderScorer(config)
    raise ScorerConfigError(f"unknown backend {config.backend!r}")

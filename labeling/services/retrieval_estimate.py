"""What a retrieval job will take here, before it is started: the wall time of a BM25, dense or cascade run on
this project and this machine, from timed probes of the parts that grow with the project.

- BM25 (and a cascade's first stage): indexing and searching the whole corpus when it has at most
  BM25_PROBE_PASSAGES passages (what the job does, timed), else a sample of that many passages searched by every
  query, scaled by corpus size over sample size (both grow about linearly with the passages).
- Dense encoding (dense, and a cascade's candidates): the passages the embedding cache lacks for this encoder
  (labeling.services.retrieval_embeddings: new passages, or changed text), at the seconds per passage of ENCODE_PROBE
  passages drawn from them, plus every query at the seconds per query of a probe of ENCODE_PROBE queries; the
  encoder's loading, timed, is added once. A cascade embeds only BM25's candidates: those the timed BM25 retrieved
  when it ran on the whole corpus, else at most queries x first_depth passages, of which the cache lacks the
  corpus's share.
- Re-rank stages: the pairs each stage scores (queries x the previous stage's size, at most), at the judge's
  measured pairs per second (labeling.selectors.throughput), else timed here on RERANK_PROBE pairs of the project
  after one warm-up pair, its loading timed and added once.
- Not counted: the nearest-neighbour search (a matrix product, or HNSW above HNSW_MIN_PASSAGES) and writing the
  run's rows, both small beside encoding; the worker's own start-up.

The probes run on a worker, as the Systems page's estimate job (labeling.services.estimates), never in a web request:
they load the encoder and re-rankers. bench/estimate_time.py compares the estimate with the job."""
from __future__ import annotations

import random
import time
from dataclasses import asdict, dataclass

import numpy as np

from labeling.models import Estimate, Project, RunKind
from labeling.selectors.throughput import judge_throughput
from labeling.services.retrieval import (
    retrieval_bm25_params,
    retrieval_corpus,
    retrieval_encoder,
    retrieval_parameters,
)
from labeling.services.retrieval_embeddings import embeddings_missing
from labeling.services.retrieval_errors import RetrievalError
from labeling.services.retrieval_rerank import RerankTexts, rerank_judge, rerank_p, rerank_scorer
from models_llm.retrieval.bm25 import bm25_retrieve

BM25_PROBE_PASSAGES = 5_000
ENCODE_PROBE = 32
RERANK_PROBE = 16
SEED = 0


@dataclass(frozen=True)
class RetrievalEstimate:
    """The parts of a retrieval job's wall time, in seconds (None: the retriever has no such part)."""

    retriever: str
    queries: int
    passages: int
    to_encode: int  # passages the encoder embeds (the cache lacks them); a cascade's bound
    bm25_s: float | None
    encode_s: float | None
    load_s: float | None
    basis: str
    rerank_pairs: int = 0  # pairs the re-rank stages score, at most
    rerank_s: float | None = None  # their judges' loading and scoring

    @property
    def wall_s(self) -> float:
        return sum(part for part in (self.bm25_s, self.encode_s, self.load_s, self.rerank_s) if part is not None)


def _bm25_seconds(texts: list[str], queries: list[str], params: dict, depth: int
                  ) -> tuple[float, str, np.ndarray | None]:
    """(seconds, what they rest on, the corpus positions BM25 retrieves within `depth` for some query: None when
    timed on a sample)."""
    sample = texts if len(texts) <= BM25_PROBE_PASSAGES else random.Random(SEED).sample(texts, BM25_PROBE_PASSAGES)
    started = time.perf_counter()
    hits = bm25_retrieve(sample, queries, depth=min(depth, len(sample)), params=retrieval_bm25_params(params))
    seconds = time.perf_counter() - started
    if len(sample) == len(texts):
        retrieved = np.unique(np.concatenate([np.zeros(0, np.int64), *hits.indices]))
        return seconds, "BM25 timed on the whole corpus", retrieved
    return (seconds * len(texts) / len(sample), f"BM25 timed on {len(sample):,} of {len(texts):,} passages, scaled",
            None)


def retrieval_estimate(
    *, project: Project, retriever: str, depth: int | None = None, use_definition: bool = False,
    k1: float | None = None, b: float | None = None, first_depth: int | None = None, keep: int | None = None,
    model: str | None = None, rerank: list[dict] | None = None, crisis: dict | None = None,
) -> RetrievalEstimate:
    """The expected wall time of retrieval_create's job with these arguments (RetrievalError for what it would
    refuse, and for the crisis double cascade, which it does not cover), from probes timed here; nothing is
    stored."""
    params = retrieval_estimate_check(project=project, arguments=dict(
        retriever=retriever, depth=depth, use_definition=use_definition, k1=k1, b=b, first_depth=first_depth,
        keep=keep, model=model, rerank=rerank, crisis=crisis))
    corpus = retrieval_corpus(project, use_definition=use_definition)
    n_queries, n_passages = len(corpus.query_ids), len(corpus.passage_ids)
    bm25_s = encode_s = load_s = candidates = None
    basis = []
    if retriever in (RunKind.BM25, RunKind.CASCADE):
        bm25_s, said, candidates = _bm25_seconds(corpus.passage_texts, corpus.query_texts, params,
                                     params["depth"] if retriever == RunKind.BM25 else params["first_depth"])
        basis.append(said)
    to_encode = 0
    if retriever in (RunKind.DENSE, RunKind.CASCADE):
        started = time.perf_counter()
        encoder = retrieval_encoder(params.get("model"))
        encoder.encode(["warm-up"])  # the model loads lazily: its first call counts as loading
        load_s = time.perf_counter() - started
        missing = embeddings_missing(project=project, encoder=encoder,
                                     passages=list(zip(corpus.passage_ids, corpus.passage_texts)))
        to_encode = len(missing)
        if retriever == RunKind.CASCADE and candidates is not None:
            to_encode = int(np.isin(candidates, missing).sum())  # BM25's own candidates, the cache's lacks
        elif retriever == RunKind.CASCADE:
            to_encode = min(to_encode, round(n_queries * params["first_depth"] * len(missing) / n_passages))
        rng = random.Random(SEED)
        probe = [corpus.passage_texts[i] for i in rng.sample(list(missing), min(ENCODE_PROBE, len(missing)))]
        questions = rng.sample(corpus.query_texts, min(ENCODE_PROBE, n_queries))
        started = time.perf_counter()
        encoder.encode(probe)
        per_passage = (time.perf_counter() - started) / len(probe) if probe else 0.0
        started = time.perf_counter()
        encoder.encode(questions)
        per_query = (time.perf_counter() - started) / len(questions)
        encode_s = to_encode * per_passage + n_queries * per_query
        cached = n_passages - len(missing)
        basis.append(f"encoding timed on {len(probe)} passages and {len(questions)} queries on {encoder.device}"
                     + (f"; {cached:,} passages embedded before" if cached else ""))
    rerank_pairs, rerank_s = 0, None
    size = params["keep"] if retriever == RunKind.CASCADE else params["depth"]
    for stage in params.get("rerank", []):
        pairs = n_queries * min(size, n_passages)
        seconds, said = _rerank_seconds(project, stage, corpus.query_ids, corpus.passage_ids, pairs)
        rerank_pairs, rerank_s = rerank_pairs + pairs, (rerank_s or 0.0) + seconds
        basis.append(said)
        size = stage["keep"]
    return RetrievalEstimate(retriever=retriever, queries=n_queries, passages=n_passages, to_encode=to_encode,
                             bm25_s=bm25_s, encode_s=encode_s, load_s=load_s, basis="; ".join(basis),
                             rerank_pairs=rerank_pairs, rerank_s=rerank_s)


def retrieval_estimate_check(*, project: Project, arguments: dict) -> dict:
    """The job's parameters retrieval_estimate would time; RetrievalError for what retrieval_create would refuse
    and for the crisis double cascade, which the estimate does not cover. Cheap: no model is loaded."""
    if arguments.get("crisis") is not None:
        raise RetrievalError("the estimate does not cover the crisis double cascade yet: run it on a sample "
                             "project, whose run records each stage's time")
    return retrieval_parameters(project=project, **{key: value for key, value in arguments.items() if key != "crisis"})


def retrieval_estimate_make(row: Estimate) -> dict:
    """On the worker: retrieval_estimate with the row's arguments (the Systems page's form), as stored."""
    return asdict(retrieval_estimate(project=row.project, **row.arguments))


def retrieval_estimate_read(row: Estimate) -> RetrievalEstimate:
    """The estimate a done row holds."""
    return RetrievalEstimate(**row.result)


def _rerank_seconds(project: Project, stage: dict, query_ids: list[int], passage_ids: list[int], pairs: int
                    ) -> tuple[float, str]:
    """(seconds the stage's judge takes on `pairs` pairs, what they rest on): its measured speed, else a probe of
    RERANK_PROBE pairs drawn from the project (seeded) after a warm-up pair, plus its loading."""
    judge, config = rerank_judge(project=project, stage=stage)
    measured = judge_throughput(judge)
    if measured is not None:
        return measured.seconds(pairs), f"re-ranking by {judge.name} {measured.text}"
    rng = random.Random(SEED)
    drawn = [(rng.choice(query_ids), rng.choice(passage_ids)) for _ in range(RERANK_PROBE + 1)]
    texts = RerankTexts({query_id for query_id, _ in drawn})
    started = time.perf_counter()
    scorer = rerank_scorer(judge, config)
    try:
        rerank_p(scorer, judge, texts, drawn[:1])  # a lazy model loads on its first call: counted as loading
        load_s = time.perf_counter() - started
        started = time.perf_counter()
        rerank_p(scorer, judge, texts, drawn[1:])
        per_pair = (time.perf_counter() - started) / RERANK_PROBE
    finally:
        scorer.close()
    return (load_s + pairs * per_pair,
            f"re-ranking by {judge.name} timed on {RERANK_PROBE} pairs on {config.device}, its loading included")

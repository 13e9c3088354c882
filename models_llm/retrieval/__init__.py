"""Retrieval runs: BM25 (bm25s), dense (sentence-transformers, exact or HNSW search), their cascade and re-ranking
by a judge's P. Their evaluation against qrels is models_llm.systems."""
from models_llm.retrieval.bm25 import BM25Params, bm25_retrieve
from models_llm.retrieval.cascade import cascade_rerank
from models_llm.retrieval.dense import HNSW_MIN_PASSAGES, DenseEncoder, dense_search, query_text
from models_llm.retrieval.hits import Hits, ProgressFn
from models_llm.retrieval.rerank import judge_rerank

__all__ = [
    "HNSW_MIN_PASSAGES",
    "BM25Params",
    "DenseEncoder",
    "Hits",
    "ProgressFn",
    "bm25_retrieve",
    "cascade_rerank",
    "dense_search",
    "judge_rerank",
    "query_text",
]

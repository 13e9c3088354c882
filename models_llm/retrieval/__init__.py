"""Retrieval runs: BM25 (bm25s), dense (sentence-transformers, exact or HNSW search), their cascade and re-ranking
by a judge's P; their evaluation (trec_eval's measures, expected measures under calibrated P) and system-ranking
agreement."""
from models_llm.retrieval.agreement import COEFFICIENTS, Agreement, query_set_agreement, system_agreement, tau_ap
from models_llm.retrieval.bm25 import BM25Params, bm25_retrieve
from models_llm.retrieval.cascade import cascade_rerank
from models_llm.retrieval.dense import HNSW_MIN_PASSAGES, DenseEncoder, dense_search, query_text
from models_llm.retrieval.evaluation import (
    EXPECTED_MEASURES,
    MEASURES,
    ExpectedEvaluator,
    ExpectedScores,
    QrelsEvaluator,
    QueryScores,
    evaluate_expected,
    evaluate_run,
    trec_order,
)
from models_llm.retrieval.hits import Hits, ProgressFn
from models_llm.retrieval.pair_tau import PairTau, QueryTau, pair_kendall_tau
from models_llm.retrieval.rerank import judge_rerank

__all__ = [
    "COEFFICIENTS",
    "EXPECTED_MEASURES",
    "HNSW_MIN_PASSAGES",
    "MEASURES",
    "Agreement",
    "BM25Params",
    "DenseEncoder",
    "ExpectedEvaluator",
    "ExpectedScores",
    "Hits",
    "PairTau",
    "ProgressFn",
    "QrelsEvaluator",
    "QueryScores",
    "QueryTau",
    "bm25_retrieve",
    "cascade_rerank",
    "dense_search",
    "evaluate_expected",
    "evaluate_run",
    "judge_rerank",
    "pair_kendall_tau",
    "query_set_agreement",
    "query_text",
    "system_agreement",
    "tau_ap",
    "trec_order",
]

"""Systems (retrieval runs) evaluated against qrels: trec_eval's measures and expected measures under calibrated P,
measures on a sampled pool, paired significance tests, pair-level Kendall tau, and system-ranking agreement."""
from models_llm.systems.agreement import COEFFICIENTS, Agreement, query_set_agreement, system_agreement, tau_ap
from models_llm.systems.evaluation import (
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
from models_llm.systems.pair_tau import PairTau, QueryTau, pair_kendall_tau

__all__ = [
    "COEFFICIENTS",
    "EXPECTED_MEASURES",
    "MEASURES",
    "Agreement",
    "ExpectedEvaluator",
    "ExpectedScores",
    "PairTau",
    "QrelsEvaluator",
    "QueryScores",
    "QueryTau",
    "evaluate_expected",
    "evaluate_run",
    "pair_kendall_tau",
    "query_set_agreement",
    "system_agreement",
    "tau_ap",
    "trec_order",
]

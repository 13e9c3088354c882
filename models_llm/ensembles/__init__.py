"""DisastIR-style ensemble judging: per search intent, three prompt strategies (direct, cot, multi) with JSON
answers, combined into a mean 0-3 (STS 0-5) score and P = mean / max. See docs/ensembles.md."""
from models_llm.ensembles.answers import json_object, score_read, yes_no_read
from models_llm.ensembles.driver import (
    EnsembleResult, Generate, StepOutput, StrategyOutcome, ensemble_combine, ensemble_score, strategies_for,
    strategy_run,
)
from models_llm.ensembles.intents import (
    DEFAULT_INTENT, INTENTS, STRATEGIES, CriterionMeanings, EnsembleConfigError, Intent, intent_get, strategies_check,
)
from models_llm.ensembles.strategies import (
    STEPS, Attributes, Criteria, Messages, Step, allowed_final_scores, criteria_after,
)

__all__ = [
    "DEFAULT_INTENT", "INTENTS", "STEPS", "STRATEGIES", "Attributes", "Criteria", "CriterionMeanings",
    "EnsembleConfigError", "EnsembleResult", "Generate", "Intent", "Messages", "Step", "StepOutput",
    "StrategyOutcome", "allowed_final_scores", "criteria_after", "ensemble_combine", "ensemble_score",
    "intent_get", "json_object", "score_read", "strategies_check", "strategies_for", "strategy_run", "yes_no_read",
]

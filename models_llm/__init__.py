"""Plain-Python LLM judging and evaluation: numbers and dataclasses in, numbers and dataclasses out.

Nothing here imports Django or `labeling`; `labeling` adapts its rows to these functions."""
from models_llm.ensembles import EnsembleConfigError, EnsembleResult, ensemble_score

__all__ = ["EnsembleConfigError", "EnsembleResult", "ensemble_score"]

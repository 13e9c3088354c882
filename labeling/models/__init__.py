"""The domain's tables, one module per concept: projects and the pool, labels and leases, judging."""
from labeling.models.judging import Judge, JudgeCalibration, Judgment, ScoringChunk, ScoringJob, ValidationResult
from labeling.models.labels import Label, Lease
from labeling.models.project import Membership, Pair, PairSource, Passage, Project, Query, RelevanceDefinition

__all__ = [
    "Judge", "JudgeCalibration", "Judgment", "Label", "Lease", "Membership", "Pair", "PairSource", "Passage",
    "Project", "Query", "RelevanceDefinition", "ScoringChunk", "ScoringJob", "ValidationResult",
]

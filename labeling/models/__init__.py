"""The domain's tables, one module per concept: projects and the pool, labels and leases, judging."""
from labeling.models.judging import (
    DefinitionDraft,
    Judge,
    JudgeCalibration,
    Judgment,
    MemberOutput,
    ScoringChunk,
    ScoringJob,
    ValidationResult,
)
from labeling.models.labels import Label, Lease
from labeling.models.project import Membership, Pair, PairSource, Passage, Project, Query, RelevanceDefinition

__all__ = [
    "DefinitionDraft", "Judge", "JudgeCalibration", "Judgment", "Label", "Lease", "Membership", "MemberOutput",
    "Pair", "PairSource", "Passage", "Project", "Query", "RelevanceDefinition", "ScoringChunk", "ScoringJob",
    "ValidationResult",
]

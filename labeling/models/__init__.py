"""The domain's tables, one module per concept: projects and the pool, labels and leases, judging, retrieval runs, systems results, and the
shape every background job shares."""
from labeling.models.audit import AuditJob, AuditKind
from labeling.models.bundles import BundleImportJob
from labeling.models.drafting import DefinitionDraft
from labeling.models.estimates import Estimate
from labeling.models.finetune import FineTuneJob, TrainingExample, TrainingSet
from labeling.models.invitations import Invitation
from labeling.models.jobs import MAX_ERROR_CHARS, Job, MeteredJob
from labeling.models.judges import Judge, JudgeCalibration
from labeling.models.judgments import Judgment, MemberOutput
from labeling.models.labels import Label, Lease
from labeling.models.project import Membership, Pair, PairSource, Passage, Project, Query, RelevanceDefinition
from labeling.models.query_generation import QueryGenerationJob
from labeling.models.releases import QrelsRelease
from labeling.models.replay import ReplayJob
from labeling.models.retrieval import (
    PassageEmbeddings,
    RetrievalJob,
    Run,
    RunEntry,
    RunKind,
)
from labeling.models.rounds import LabellingRound
from labeling.models.scoring import ScoringChunk, ScoringJob
from labeling.models.systems import SystemsResult
from labeling.models.validation import ValidationResult

__all__ = [
    "MAX_ERROR_CHARS", "AuditJob", "AuditKind", "BundleImportJob", "DefinitionDraft", "Estimate", "FineTuneJob", "Job", "Judge", "JudgeCalibration",
    "Invitation", "Judgment", "LabellingRound", "Label", "Lease",
    "Membership", "MemberOutput", "MeteredJob", "Pair", "PairSource", "Passage", "Project", "QrelsRelease", "Query", "QueryGenerationJob",
    "PassageEmbeddings", "RelevanceDefinition", "ReplayJob", "RetrievalJob", "Run", "RunEntry", "RunKind", "ScoringChunk",
    "ScoringJob", "SystemsResult", "TrainingExample", "TrainingSet", "ValidationResult",
]

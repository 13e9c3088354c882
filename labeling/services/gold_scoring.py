"""New gold pairs scored as they appear: an expert's label on a pair a judge never scored makes the pair gold, and
that judge partial on the Validation page until it scores it. The worker's validation refresh first starts, for each
judge with a model of its own that has scored the project, a selection job over the gold pairs it has never judged,
ahead of the project's other scoring (GOLD_PRIORITY), then computes the report, whose partial marks say how many gold
pairs are missing and how many of them are queued. The judge's judgments then ask for the next refresh, which finds
it complete."""
from __future__ import annotations

import numpy as np

from labeling.models import Judge, Judgment, Project, ScoringJob, ValidationResult
from labeling.selectors.scoring import judges_with_judgments, queued_pairs
from labeling.selectors.streams import CHUNK
from labeling.selectors.validation import gold_grades
from labeling.services.scoring import ScoringError, scoring_request
from labeling.services.scoring_dispatch import PRIORITY_MAX
from labeling.services.validation import validation_refresh

# The few pairs an expert just made gold are what the Validation page waits for: they go ahead of the project's
# bulk scoring (a job's share of its project's turns follows its priority, scoring_dispatch.py).
GOLD_PRIORITY = PRIORITY_MAX


def _ever_judged(judge: Judge) -> np.ndarray:
    """The ids of the pairs the judge has any judgment of (ok or failed, under any definition)."""
    rows = Judgment.objects.filter(judge=judge).values_list("pair_id", flat=True).iterator(chunk_size=CHUNK)
    return np.unique(np.fromiter(rows, dtype=np.int64))


def gold_scoring_request(*, project: Project) -> list[ScoringJob]:
    """Start a selection job at GOLD_PRIORITY for each judge with a model of its own (neither imported nor an
    ensemble of judges) that has scored the project and has never judged some of its gold pairs, over those of them
    that none of its running jobs has queued. Only pairs it never judged: a failed or stale judgment is left to the
    Judges page's re-scoring, so that a pair the judge cannot score is not sent again at every label. A judge whose
    configuration no longer works is left partial. Returns the jobs started."""
    judges = [judge for judge in judges_with_judgments(project=project)
              if not judge.is_imported and not judge.is_ensemble]
    gold = gold_grades(project).pair_ids if judges else np.zeros(0, np.int64)
    if not gold.size:
        return []
    queued = queued_pairs(judge_ids=[judge.id for judge in judges])
    started = []
    for judge in judges:
        waiting = np.fromiter(queued[judge.id], dtype=np.int64, count=len(queued[judge.id]))
        fresh = gold[~np.isin(gold, _ever_judged(judge)) & ~np.isin(gold, waiting)]
        if not fresh.size:
            continue
        try:
            job, created = scoring_request(project=project, judge=judge, scope=ScoringJob.Scope.SELECTION,
                                           pair_ids=fresh.tolist(), priority=GOLD_PRIORITY)
        except ScoringError:
            continue
        if created:
            started.append(job)
    return started


def validation_run(*, project_id: int) -> ValidationResult | None:
    """The worker's validation refresh: the new gold pairs queued for scoring (gold_scoring_request), then the report
    recomputed (validation_refresh), so that its partial marks say they are queued."""
    project = Project.objects.filter(id=project_id).first()
    if project is not None:
        gold_scoring_request(project=project)
    return validation_refresh(project_id=project_id)

"""Handing a labelling round that waits for its student's retrain back to a worker. Apart from services/rounds.py,
which starts the retrain (rounds -> finetune), because the fine-tuning and scoring services call it when their jobs
end (finetune, scoring -> rounds_wake)."""
from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from labeling.models import FineTuneJob, LabellingRound, ScoringJob
from labeling.tasks import round_finish_task


def round_wake(*, finetune_id: int | None = None, judge_id: int | None = None) -> list[int]:
    """Called when a fine-tuning job ends (`finetune_id`) or a judge's scoring job ends (`judge_id`): a round that
    waits for that retrain is handed back to a worker once its wait is over (the retrain failed or was cancelled,
    or its student is trained and has no scoring job left to finish), running and held by no worker, its time
    limit counted from now. Returns the ids of the rounds handed back."""
    waiting = LabellingRound.objects.filter(status=LabellingRound.Status.RUNNING, waiting_since__isnull=False)
    if finetune_id is not None:
        waiting = waiting.filter(finetune_id=finetune_id)
    elif judge_id is not None:
        waiting = waiting.filter(finetune__student_id=judge_id)
    else:
        return []
    woken = []
    for found in waiting.select_related("finetune"):
        job = found.finetune
        if job.finished_at is None:
            continue
        if job.status == FineTuneJob.Status.DONE and (
                job.student_id is None or not ScoringJob.objects.filter(judge_id=job.student_id).exists()
                or ScoringJob.objects.filter(judge_id=job.student_id, finished_at__isnull=True).exists()):
            continue
        if LabellingRound.objects.filter(id=found.id, waiting_since__isnull=False).update(
                waiting_since=None, started_at=timezone.now(), heartbeat_at=None, attempts=0):
            transaction.on_commit(lambda round_id=found.id: round_finish_task.delay(round_id))
            woken.append(found.id)
    return woken

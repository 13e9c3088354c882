"""How fast a judge's model scores, and a fine-tuning trains, on this deployment: measured from past work.

Scoring: every chunk records the seconds its model spent on the parts it wrote and the pairs they covered
(`ScoringChunk.busy_seconds`, `timed_pairs`; a worker's first part with a judge, which loads the model, is not
timed) and where it ran (`device`). A judge's throughput is the pairs over the seconds of its newest timed chunks
on its device; a judge with none borrows the measure of another judge of the same model, backend and device.
Fine-tuning: each finished job stores its examples per second; a new one is estimated from the newest of the same
base model and device. Estimates turn these into wall time (labeling/services/throughput.py measures a first guess
when there is nothing to read)."""
from __future__ import annotations

from dataclasses import dataclass

from labeling.llm_adapter import judge_device
from labeling.models import FineTuneJob, Judge, ScoringChunk

# The newest chunks a judge's throughput is read from: recent enough to follow a change of machine or settings.
RECENT_CHUNKS = 200
RECENT_FINETUNES = 5


@dataclass(frozen=True)
class Throughput:
    """Items (pairs, or training examples) per second of one worker process, and what the figure rests on."""

    per_s: float
    items: int  # items the measure covers
    device: str
    basis: str  # "measured" (this judge), "measured, same model" (another judge), "probe" (a timed first guess)

    def seconds(self, items: int, *, workers: int = 1) -> float:
        return items / self.per_s / max(1, workers)

    @property
    def text(self) -> str:
        what = {"measured": "measured over its last {n} scored pairs",
                "measured, same model": "measured over {n} pairs another judge of the same model scored",
                "probe": "from a timed probe of {n} pairs",
                "measured training": "measured over the last fine-tuning of this base model ({n} examples)",
                "probe training": "from a timed probe of {n} examples going forward and backward",
                }[self.basis]
        return f"{what.format(n=f'{self.items:,}')} on {self.device}"


def _from_chunks(chunks) -> tuple[float, int] | None:
    rows = list(chunks.filter(timed_pairs__gt=0).order_by("-id").values_list("busy_seconds", "timed_pairs")
                [:RECENT_CHUNKS])
    seconds, pairs = sum(r[0] for r in rows), sum(r[1] for r in rows)
    if not pairs or seconds <= 0:
        return None
    return pairs / seconds, pairs


def judge_throughput(judge: Judge) -> Throughput | None:
    """The judge's measured pairs per second on its device, or another same-model judge's; None when neither has
    scored a timed part yet."""
    device = judge_device(judge)
    measured = _from_chunks(ScoringChunk.objects.filter(job__judge=judge, device=device))
    if measured:
        return Throughput(per_s=measured[0], items=measured[1], device=device, basis="measured")
    if judge.is_imported or judge.is_ensemble:
        return None
    twins = Judge.objects.filter(backend=judge.backend, model=judge.model).exclude(id=judge.id)
    same = [twin.id for twin in twins if (twin.parameters or {}).get("method") == (judge.parameters or {}).get("method")
            and judge_device(twin) == device]
    measured = _from_chunks(ScoringChunk.objects.filter(job__judge_id__in=same, device=device)) if same else None
    if measured:
        return Throughput(per_s=measured[0], items=measured[1], device=device, basis="measured, same model")
    return None


def finetune_throughput(*, base_model: str, device: str, student_kind: str = "lora") -> Throughput | None:
    """Training examples per second of the newest finished fine-tunings of `base_model` on `device` into a student
    of `student_kind`."""
    jobs = [job for job in FineTuneJob.objects.filter(base_model=base_model, examples_per_s__gt=0,
                                                      student_kind=student_kind,
                                                      status=FineTuneJob.Status.DONE).order_by("-id")
            [:RECENT_FINETUNES * 4] if str((job.hyperparameters or {}).get("device") or "cpu") == device]
    jobs = jobs[:RECENT_FINETUNES]
    if not jobs:
        return None
    rates = sorted(job.examples_per_s for job in jobs)
    return Throughput(per_s=rates[len(rates) // 2], items=sum(job.examples for job in jobs), device=device,
                      basis="measured training")

"""A real Celery worker process fine-tuning a student is killed with SIGKILL after its first checkpoint; the job is
resumed and the next worker goes on from that checkpoint (fetched from storage), not from step 0."""
import signal
import time

import pytest
from django.conf import settings as django_settings

from labeling.models import FineTuneJob
from labeling.services.finetune import FinetuneJobError, finetune_request, finetune_resume
from tests.finetune_fixtures import base_folder, rule_project
from tests.services.test_finetune_crossencoder import QUICK as CROSSENCODER
from tests.workers.test_scoring import broker, start_worker  # noqa: F401 - the broker fixture, the worker process

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]
SETTINGS = {"r": 8, "alpha": 16, "dropout": 0.0, "learning_rate": 5e-4, "batch_size": 4, "micro_batch": 4,
            "max_steps": 8, "warmup_ratio": 0.0, "save_steps": 2}
# A cross-encoder student's steps are a tenth of a second: at 256 tokens and one checkpoint (the model and its
# optimizer state, about 270 MB) every two steps, the worker is still training when the test sees the first one.
STUDENTS = {
    "lora": ({"base_model": base_folder()}, SETTINGS),
    "crossencoder": ({"base_model": "", "student": "crossencoder"},
                     {**CROSSENCODER, "batch_size": 4, "max_steps": 8, "save_steps": 2, "max_length": 256}),
}


def wait_for(job: FineTuneJob, condition, timeout: float, log) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if condition(job):
            return
        time.sleep(0.3)
    pytest.fail(f"timed out: job {job.status} step {job.step}/{job.total_steps} checkpoint {job.checkpoint_step}; "
                f"worker log:\n{log.read_text()[-3000:]}")


@pytest.mark.parametrize("kind", STUDENTS)
def test_a_killed_fine_tuning_worker_is_resumed_from_its_checkpoint(kind, tmp_path, broker, settings):  # noqa: F811
    project, teacher, training_set = rule_project(tmp_path / "bundle")
    env = {**broker, "MEDIA_ROOT": str(django_settings.MEDIA_ROOT), "ADAPTER_CACHE_DIR": str(tmp_path / "cache")}
    base, hyperparameters = STUDENTS[kind]
    job = finetune_request(project=project, training_set=training_set, teacher=teacher, student_name="student",
                           hyperparameters=hyperparameters, **base)
    first_log, second_log = tmp_path / "worker1.log", tmp_path / "worker2.log"
    first = start_worker(env, first_log)
    try:
        wait_for(job, lambda j: j.checkpoint_step >= 2, 300, first_log)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    job.refresh_from_db()
    killed_at, checkpoint = job.step, job.checkpoint_step
    assert job.status == FineTuneJob.Status.RUNNING and checkpoint >= 2 and killed_at < 8, "finished before the kill"
    assert job.student is None

    # While the dead worker's heartbeat is fresh the job is not taken from it; once stale, it is queued again.
    with pytest.raises(FinetuneJobError, match="running"):
        finetune_resume(job=job)
    settings.FINETUNE_STALL_SECONDS = 1
    time.sleep(1.5)
    second = start_worker({**env, "FINETUNE_STALL_SECONDS": "1"}, second_log)
    try:
        finetune_resume(job=job)
        wait_for(job, lambda j: j.finished_at is not None, 300, second_log)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=60)
    assert job.status == FineTuneJob.Status.DONE, job.error
    assert job.resumed_from_step == checkpoint and job.attempts == 2 and job.step == 8
    steps = [step for step, _ in job.loss_history]
    # The curve goes on from the checkpoint: had the second worker started from step 0, steps would repeat.
    assert steps == list(range(1, 9)), steps
    assert job.student is not None and job.adapter
    assert job.student.backend == ("crossencoder" if kind == "crossencoder" else "hf")

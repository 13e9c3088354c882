"""The one declaration of every kind of background work (labeling/job_kinds.py): a kind added without it, a task
that is not routed, a service that is not there or a docs table left behind is caught here, not by a worker."""
from __future__ import annotations

import inspect
from pathlib import Path

from django.apps import apps
from django.conf import settings

from labeling import tasks
from labeling.job_kinds import JOB_KINDS, JobKind
from labeling.models import Job
from labeling.tasks import HARD_GRACE_SECONDS

ARCHITECTURE = Path(settings.BASE_DIR) / "docs" / "architecture.md"


def test_every_job_model_is_a_declared_kind():
    models = {model for model in apps.get_app_config("labeling").get_models() if issubclass(model, Job)}
    assert models == {kind.model for kind in JOB_KINDS}
    assert len({kind.name for kind in JOB_KINDS}) == len(JOB_KINDS)


def test_every_kind_has_its_task_routed_to_its_queue_with_its_limits():
    for kind in JOB_KINDS:
        task = getattr(tasks, kind.task)
        assert settings.CELERY_TASK_ROUTES[task.name] == {"queue": getattr(settings, kind.queue)}, kind.name
        assert (task.soft_time_limit, task.time_limit) == (kind.time_limit, kind.time_limit + HARD_GRACE_SECONDS)
        assert (task.max_retries, bool(task.reject_on_worker_lost)) == (kind.max_retries, kind.reject_on_worker_lost)
        assert list(inspect.signature(task.run).parameters) == [kind.key], kind.name


def test_every_declared_service_exists_and_takes_what_it_is_given():
    for kind in JOB_KINDS:
        assert kind.request.endswith("_request"), kind.name
        assert {"error", kind.key} <= set(inspect.signature(kind.service("fail")).parameters), kind.name
        assert kind.key in inspect.signature(kind.service("run")).parameters, kind.name
        for role in ("resume", "cancel", "give_up"):
            if getattr(kind, role) is not None:
                assert "job" in inspect.signature(kind.service(role)).parameters, (kind.name, role)
        assert kind.stall_setting is None or kind.stall_seconds > 0
        assert kind.debounce_setting is None or kind.debounce_seconds >= 0


def _code(path: str | None) -> str:
    return "" if path is None else f"`{path}`"


def _row(kind: JobKind) -> str:
    after_lost = ("its chunks queued again (`scoring_chunks.scoring_sweep`)" if kind.stall_setting is None
                  else f"resumed by `{kind.resume}`" if kind.resume else "given up")
    limits = f"`{kind.limit_setting}`" + (f", `{kind.stall_setting}`" if kind.stall_setting else "")
    return (f"| {kind.name} | `{kind.model.__name__}` | `{kind.request}` / `{kind.run}` / `{kind.fail}` | "
            f"{_code(kind.cancel)} | `{kind.task}` (`{kind.queue}`) | {limits} | {after_lost} |")


def test_the_architecture_docs_table_is_the_registry():
    table = "\n".join([
        "| kind | row | request / run / fail (in `labeling/services/`) | cancel | task (queue) | time limit, stall "
        "| a lost worker's job |",
        "|---|---|---|---|---|---|---|",
        *(_row(kind) for kind in JOB_KINDS),
    ])
    assert table in ARCHITECTURE.read_text(), f"docs/architecture.md should hold this table:\n{table}"

"""`manage.py audit_multicondition`: a run's report at once (table and JSON), a judge's dry run and queued audit,
a real worker's audit waited for, and the refusals named on the command line."""
from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from labeling.models import AuditJob, Project
from labeling.selectors.audit_multicondition import run_multicondition_report
from labeling.services.bundle_import import bundle_import
from tests.scoring_fixtures import minilm_judge
from tests.selectors.test_audit_multicondition import hand_run, tiny_project

EXAMPLE = Path(__file__).resolve().parents[2] / "data" / "multicondition-example"


def _run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("audit_multicondition", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def _example() -> Project:
    bundle_import(path=EXAMPLE, project_slug="mc")
    project = Project.objects.get(slug="mc")
    minilm_judge(project)
    return project


@pytest.mark.django_db
def test_a_run_s_report_as_a_table_and_as_json():
    run = hand_run(*tiny_project())
    text, _ = _run("--project", "mc", "--run", "hand")
    lines = text.splitlines()
    assert lines[0] == ("Multi-condition tests of run:hand: 2 items in 2 domain(s) (books, law), k = 1..2, "
                        "1 comparison(s) skipped (a score missing).")
    # Task 1's instruction table: per domain, then the average and its mean
    # (tests/selectors/test_audit_multicondition.py).
    start = lines.index("  instruction queries")
    assert [line.split() for line in lines[start + 1:start + 5]] == [
        ["k=1", "k=2", "mean"], ["books", "1.00", "0.00"], ["law", "0.00", "1.00"], ["average", "0.50", "0.50", "0.50"]]
    assert ("  Verdict: no data. Not measured: a run's scores are fixed: its documents cannot be re-scored "
            "padded.") in lines
    data = json.loads(_run("--project", "mc", "--run", "hand", "--json")[0])
    assert data == run_multicondition_report(run)


@pytest.mark.django_db
def test_refusals_are_named():
    hand_run(*tiny_project())
    with pytest.raises(CommandError, match="has no run 'nope'.*hand"):
        _run("--project", "mc", "--run", "nope")
    with pytest.raises(CommandError, match="--dry-run, --no-wait, --pads and --filler are for --judge"):
        _run("--project", "mc", "--run", "hand", "--dry-run")
    with pytest.raises(CommandError, match="no judge|minilm"):
        _run("--project", "mc", "--judge", "minilm")
    minilm_judge(Project.objects.get(slug="mc"))
    with pytest.raises(CommandError, match="--pads must be word counts"):
        _run("--project", "mc", "--judge", "minilm", "--pads", "a,b")
    with pytest.raises(CommandError, match="pads must be a list of word counts"):
        _run("--project", "mc", "--judge", "minilm", "--pads", "0")


@pytest.mark.django_db
def test_a_judge_s_dry_run_asks_nothing_and_no_wait_queues_the_audit():
    _example()
    text, _ = _run("--project", "mc", "--judge", "minilm", "--dry-run")
    assert "Dry run of the multi-condition audit of 'minilm' (pads [512, 1024]): 240 probe(s)" in text
    assert "An embedding judge: no prompt, no token." in text and not AuditJob.objects.exists()
    text, _ = _run("--project", "mc", "--judge", "minilm", "--dry-run", "--pads", "none")
    assert "(pads []): 168 probe(s)" in text  # 28 per item without Task 4
    text, err = _run("--project", "mc", "--judge", "minilm", "--no-wait", "--pads", "256", "--filler", "Filler here.")
    job = AuditJob.objects.get()
    assert text == "" and f"Audit {job.id}: 204 probe(s) queued for the workers." in err  # 34 per item, one pad
    assert (job.kind, job.parameters, job.status) == ("multicondition", {"pads": [256], "filler": "Filler here."}, "pending")


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_judge_s_audit_is_waited_for_on_a_real_worker(worker):
    _example()
    text, err = _run("--project", "mc", "--judge", "minilm", "--json", "--pads", "512")
    report = json.loads(text)
    job = AuditJob.objects.get()
    assert job.status == "done" and report == job.report and report["subject"] == "judge:minilm"
    assert list(report["task4"]["pads"]) == ["0", "512"]
    assert "204/204 probes scored (done)" in err

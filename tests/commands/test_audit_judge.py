"""`manage.py audit_judge`: the dry run asks nothing, --no-wait queues the audit and prints its id, a real worker's
audit is waited for and printed as a table or JSON, and bad input is named on the command line."""
from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from labeling.models import AuditJob
from tests.scoring_fixtures import minilm_judge, smollm2_judge
from tests.services.test_audit_perturbation import project  # noqa: F401 (the fixture)


def _run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("audit_judge", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.mark.django_db
def test_refusals_are_named(project):  # noqa: F811
    with pytest.raises(CommandError, match="no judge|minilm"):
        _run("--project", "audited", "--judge", "minilm")
    minilm_judge(project)
    with pytest.raises(CommandError, match="'flattery'"):
        _run("--project", "audited", "--judge", "minilm", "--tests", "length,flattery")
    with pytest.raises(CommandError, match="sample must be a whole number from 1"):
        _run("--project", "audited", "--judge", "minilm", "--sample", "0")
    assert not AuditJob.objects.exists()


@pytest.mark.django_db
def test_dry_run_asks_nothing_and_no_wait_prints_the_job(project):  # noqa: F811
    minilm_judge(project)
    smollm2_judge(project, price_in=1.0, price_out=2.0)
    text, _ = _run("--project", "audited", "--judge", "minilm", "--dry-run", "--sample", "4", "--tests",
                   "definition,consistency")
    # 4 items: 4 originals, 8 sampled consistency probes, a definition probe for each item whose query has one
    assert "Dry run of the perturbation audit of 'minilm' (sample 4, seed 0, tests definition,consistency)" in text
    assert "An embedding judge: no prompt, no token." in text and not AuditJob.objects.exists()
    text, _ = _run("--project", "audited", "--judge", "smollm2-tok", "--dry-run", "--sample", "2", "--tests",
                   "consistency")
    assert "6 probe(s), 4 of them sampled" in text and "counted with the model's tokenizer" in text
    assert "Estimated cost at the judge's prices: $" in text
    text, err = _run("--project", "audited", "--judge", "minilm", "--no-wait", "--sample", "3", "--seed", "2")
    job = AuditJob.objects.get()
    assert text.strip() == str(job.id) and f"Audit {job.id}: {job.total} probe(s) of 'minilm' queued" in err
    assert (job.kind, job.status) == ("perturbation", "pending")
    assert job.parameters == {"sample": 3, "seed": 2, "tests": ["length", "stuffing", "injection", "definition",
                                                                  "consistency"]}


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_an_audit_is_waited_for_on_a_real_worker_and_printed(project, worker):  # noqa: F811
    minilm_judge(project)
    text, err = _run("--project", "audited", "--judge", "minilm", "--sample", "4", "--tests", "definition,consistency")
    job = AuditJob.objects.get()
    assert job.status == "done" and f"{job.total}/{job.total} probes scored (done)" in err
    lines = text.splitlines()
    assert lines[0] == (f"Perturbation audit of minilm: 4 gold pair(s) (sample 4, seed 0), decisions at P >= 0.5. "
                        f"Verdict: {job.report['verdict']}.")
    rows = {line.split()[0]: line.split() for line in lines[2:4]}
    consistency = next(row for row in job.report["rows"] if row["test"] == "consistency")
    assert rows["consistency"][:4] == ["consistency", "4", "0", f"{consistency['mean_delta']:+.3f}"]
    assert f"  {consistency['why']}" in lines and "  Note: the judge samples nothing" in "\n".join(lines)
    # The JSON is the stored report, as the page and the API read it.
    job.delete()
    text, _ = _run("--project", "audited", "--judge", "minilm", "--sample", "2", "--tests", "consistency", "--json")
    assert json.loads(text) == AuditJob.objects.get().report

"""The perturbation audit end to end through a real Celery worker on the ClimRetrieve sample: the demo's two judges
(MiniLM embeddings, SmolLM2-135M-Instruct Tok) audited, MiniLM with every test on 8 gold pairs and SmolLM2 with every
test but length on 2 (on a CPU a passage padded to 1024 words costs SmolLM2 about 10 s, and the padding is the same
text for every judge: MiniLM's rows check it here); each job is done with its rows, and the variants never became
pairs or judgments."""
import pytest

from labeling.models import AuditJob, Judgment, Pair, Project
from labeling.services.audit import audit_request
from labeling.services.bundle_import import bundle_import
from tests.polling import wait_for
from tests.scoring_fixtures import SAMPLE, minilm_judge, smollm2_judge

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]
ROWS = ["length512", "length1024", "stuffing", "injection", "definition", "consistency"]


def test_minilm_and_smollm2_are_audited_by_a_worker(worker, settings):
    settings.AUDIT_BATCH = 8
    bundle_import(path=SAMPLE, project_slug="clim")
    project = Project.objects.get(slug="clim")
    judges = [minilm_judge(project), smollm2_judge(project)]
    pairs, judgments = Pair.objects.count(), Judgment.objects.count()
    samples = [8, 2]
    tests = [None, ["stuffing", "injection", "definition", "consistency"]]
    jobs = [audit_request(project=project, judge=judge, kind=AuditJob.Kind.PERTURBATION,
                          parameters={"sample": sample, "seed": 0, **({"tests": chosen} if chosen else {})})
            for judge, sample, chosen in zip(judges, samples, tests)]
    for job in jobs:
        wait_for(lambda job=job: AuditJob.objects.get(id=job.id).finished_at is not None,
                 f"audit {job.id} did not finish", seconds=300, every=0.5)
    for job, sample, rows in zip(jobs, samples, [ROWS, ROWS[2:]]):
        job.refresh_from_db()
        assert (job.status, job.done, job.error) == (AuditJob.Status.DONE, job.total, "")
        report = job.report
        assert [row["test"] for row in report["rows"]] == rows and report["items"] == sample
        for row in report["rows"]:
            assert row["n"] + row["failed"] <= sample and row["verdict"] in ("robust", "watch", "sensitive", "no data")
        consistency = report["rows"][-1]
        # neither judge generates text: the two answers are the same computation (batched with other prompts: equal
        # up to float rounding)
        assert consistency["mean_delta"] == pytest.approx(0, abs=1e-5) and "samples nothing" in consistency["note"]
    assert (Pair.objects.count(), Judgment.objects.count()) == (pairs, judgments)
    assert jobs[1].calls == jobs[1].total and jobs[1].prompt_tokens > 0  # one Tok call per probe

"""retrieve: --inline writes the run in the command's own process and reports it, --skip-existing makes a setup
script's second run a no-op, a queued job waits for the workers, and refused arguments are command errors."""
import io
import re

import pytest
from django.core.management import CommandError, call_command

from labeling.models import RetrievalJob, Run
from tests.scoring_fixtures import small_scoring_project

pytestmark = pytest.mark.django_db


def run(*args: str) -> list[str]:
    out = io.StringIO()
    call_command("retrieve", *args, stdout=out)
    return out.getvalue().splitlines()


@pytest.fixture
def project(tmp_path):
    return small_scoring_project(tmp_path / "b", queries=3, passages=20)


def test_inline_writes_the_run_here_and_skip_existing_leaves_it(project):
    lines = run("--project", project.slug, "--retriever", "bm25", "--name", "bm25", "--depth", "5", "--inline")
    job = RetrievalJob.objects.get()
    assert lines[0] == f"Job {job.id}: bm25 run 'bm25', running here."
    assert re.fullmatch(rf"Job {job.id} done: run 'bm25', 3 queries, (\d+) entries, depth 5, [\d.]+ s\.", lines[1])
    run_row = Run.objects.get(name="bm25")
    assert (job.status, job.run_id, run_row.queries, run_row.depth) == ("done", run_row.id, 3, 5)
    assert f"{run_row.entries} entries" in lines[1]

    again = ["--project", project.slug, "--retriever", "bm25", "--name", "bm25", "--inline"]
    assert run(*again, "--skip-existing") == ["Run 'bm25' exists, skipped."]
    with pytest.raises(CommandError, match="has a run named 'bm25' already"):
        run(*again)
    assert (RetrievalJob.objects.count(), Run.objects.count()) == (1, 1)


def test_without_inline_the_job_is_queued_for_the_workers(project):
    lines = run("--project", project.slug, "--retriever", "cascade", "--name", "c", "--first-depth", "10",
                "--keep", "5", "--use-definition")
    job = RetrievalJob.objects.get()
    assert lines == [f"Job {job.id}: cascade run 'c' queued for the workers."]
    assert (job.status, job.parameters) == ("pending", {"use_definition": True, "first_depth": 10, "keep": 5})


def test_an_inline_job_that_fails_is_a_command_error(project):
    project.passages.all().delete()
    with pytest.raises(CommandError, match=r"Job \d+ failed: .*nothing to retrieve"):
        run("--project", project.slug, "--retriever", "bm25", "--name", "empty", "--inline")
    assert RetrievalJob.objects.get().status == "failed"


@pytest.mark.parametrize(("args", "message"), [
    (["--retriever", "bm25", "--depth", "0"], "depth must be 1 to 10000"),
    (["--retriever", "dense", "--k1", "1.2"], "k1 and b are BM25's"),
    (["--retriever", "cascade", "--first-depth", "10"], "keep <= first depth"),
])
def test_refused_arguments_are_command_errors(project, args, message):
    with pytest.raises(CommandError, match=message):
        run("--project", project.slug, "--name", "x", *args)
    assert not RetrievalJob.objects.exists()

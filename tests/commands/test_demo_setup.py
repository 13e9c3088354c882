"""demo_setup, the slow half of `make demo` that bin/demo runs behind the live server, with a real worker: the runs
bm25 and dense and minilm's scoring of every pair (ahead of the slow judge) are queued and waited for, saying so;
only then is SmolLM2 set up and its scoring queued. Run again, it changes nothing that is done."""
from io import StringIO

import pytest
from django.core.management import call_command

from labeling.models import Judge, RetrievalJob, Run, ScoringJob
from tests.scoring_fixtures import small_scoring_project

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def run(slug: str) -> list[str]:
    out = StringIO()
    call_command("demo_setup", "--project", slug, "--poll", "0.2", stdout=out)
    return out.getvalue().splitlines()


def counts() -> tuple[int, ...]:
    return tuple(model.objects.count() for model in (Run, RetrievalJob, Judge, ScoringJob))


def test_the_runs_and_minilm_come_first_then_smollm2_and_a_second_run_changes_nothing(tmp_path, worker, settings):
    settings.SCORING_WRITE_PAIRS = 2  # SmolLM2's timed probe: 2 pairs are enough to time here
    settings.SCORING_CHUNK_PAIRS = 2  # SmolLM2's chunks the worker may start before the test ends stay short
    project = small_scoring_project(tmp_path / "b", queries=2, passages=6)
    lines = run(project.slug)

    runs = {run.name: run for run in Run.objects.all()}
    assert set(runs) == {"bm25", "dense"} and all(run.queries == 2 for run in runs.values())
    minilm = ScoringJob.objects.get(judge__name="minilm")
    assert (minilm.status, minilm.done, minilm.total, minilm.priority) == ("done", 12, 12, 4)
    # SmolLM2 was set up only once the runs and minilm were done, so its scoring could not slow them.
    smollm2 = ScoringJob.objects.get(judge__name="smollm2-tok")
    assert smollm2.created_at >= max(minilm.finished_at, *(job.finished_at for job in RetrievalJob.objects.all()))
    assert project.__class__.objects.get(id=project.id).queue_judge.name == "smollm2-tok"
    waiting = next(i for i, line in enumerate(lines) if line.startswith("demo: waiting for"))
    assert lines[waiting] == ("demo: waiting for run 'bm25', run 'dense', minilm's scoring before setting up SmolLM2 "
                              "(progress on the Systems and Judges pages)")
    assert all(line.startswith(("Job ", "Created judge 'minilm'", "minilm: job")) for line in lines[:waiting])
    ended = [line for line in lines if " done after " in line]
    assert len(ended) == 3 and any(line.startswith("demo: minilm's scoring done after") for line in ended)
    assert lines[-1] == "demo: set-up done"

    before = counts()
    again = run(project.slug)
    assert counts() == before
    assert again[:3] == ["Run 'bm25' exists.", "Run 'dense' exists.", "minilm: every pair is scored."]
    assert not any(line.startswith("demo: waiting") for line in again)

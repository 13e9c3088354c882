"""demo_judges: the demo's judges, their scoring queued, and SmolLM2 made the queue judge unless an admin chose
one, so that the uncertain queue ranks pairs after the demo's scoring."""
from io import StringIO

import pytest
from django.core.management import call_command

from labeling.models import Judge, Project, ScoringJob
from labeling.selectors.queue_settings import queue_settings_summary
from tests.scoring_fixtures import small_scoring_project

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def short_probes(settings):
    """The estimates' timed probe scores SCORING_WRITE_PAIRS pairs with each judge: 2 are enough to time here."""
    settings.SCORING_WRITE_PAIRS = 2


def run(slug: str) -> str:
    out = StringIO()
    call_command("demo_judges", "--project", slug, stdout=out)
    return out.getvalue()


def test_the_llm_judge_becomes_the_queue_judge_once(tmp_path):
    project = small_scoring_project(tmp_path / "b", queries=1, passages=3)
    assert project.queue_judge is None
    out = run(project.slug)
    project.refresh_from_db()
    assert project.queue_judge.name == "smollm2-tok" and "Queue judge set to 'smollm2-tok'" in out
    # The uncertain queue no longer says "no queue judge set".
    assert not queue_settings_summary(project=project).without_judge
    assert set(ScoringJob.objects.values_list("judge__name", flat=True)) == {"minilm", "smollm2-tok"}
    # Run again after an admin chose the baseline: their choice stays.
    Project.objects.filter(pk=project.pk).update(queue_judge=Judge.objects.get(name="minilm"))
    assert "Queue judge" not in run(project.slug)
    project.refresh_from_db()
    assert project.queue_judge.name == "minilm"


def test_minilm_scores_every_pair_first_and_a_too_slow_smollm2_what_the_pages_need(tmp_path):
    from labeling.models import Pair, ScoringChunk
    from labeling.services.runs import run_store

    project = small_scoring_project(tmp_path / "b", queries=2, passages=12)
    query = project.queries.order_by("id").first()
    passages = list(Pair.objects.filter(project=project, query=query).order_by("id")
                    .values_list("passage_id", flat=True))
    run_store(project=project, name="bm25", kind="bm25", parameters={},
              rankings=[(query.id, passages, [float(-i) for i in range(len(passages))])])
    gold = Pair.objects.filter(project=project).exclude(query=query).order_by("id").first()
    Pair.objects.filter(id=gold.id).update(reference_grade=1)
    out = StringIO()
    # Any positive time is "too long" with a limit of 0 s: SmolLM2 scores only the needed pairs; MiniLM, which embeds
    # each distinct text once, is not timed by a probe and scores every pair, ahead of SmolLM2.
    call_command("demo_judges", "--project", project.slug, "--full-limit", "0", stdout=out)
    text = out.getvalue()
    minilm = ScoringJob.objects.get(judge__name="minilm")
    assert (minilm.scope, minilm.total, minilm.priority) == ("missing", 24, 4)
    assert f"minilm: job {minilm.id} queued for 24 pairs, ahead of the others (priority 4)." in text
    assert "smollm2-tok: scoring all 24 pairs would take about" in text and "scoring the 11 the pages need now" in text
    assert "manage.py score --project score --judge smollm2-tok" in text
    smollm2 = ScoringJob.objects.get(judge__name="smollm2-tok")
    scored = {pid for chunk in ScoringChunk.objects.filter(job=smollm2) for pid in chunk.pair_ids}
    top = set(Pair.objects.filter(query=query, passage_id__in=passages[:10]).values_list("id", flat=True))
    assert (smollm2.scope, smollm2.priority) == ("selection", 1) and scored == top | {gold.id}


def test_one_judge_at_a_time_and_a_judge_with_every_pair_scored_gets_no_new_job(tmp_path):
    from labeling.models import ScoringChunk
    from labeling.services.scoring_chunks import scoring_chunk_run

    project = small_scoring_project(tmp_path / "b", queries=1, passages=3)
    call_command("demo_judges", "--project", project.slug, "--judge", "minilm", stdout=StringIO())
    job = ScoringJob.objects.get()
    assert job.judge.name == "minilm"
    for chunk_id in ScoringChunk.objects.filter(job=job).values_list("id", flat=True):
        scoring_chunk_run(chunk_id=chunk_id)  # as the worker would
    job.refresh_from_db()
    assert (job.status, job.done) == ("done", 3)
    # `make demo` again: nothing to do, and no new (empty) job.
    again = StringIO()
    call_command("demo_judges", "--project", project.slug, "--judge", "minilm", stdout=again)
    assert again.getvalue() == "minilm: every pair is scored.\n"
    assert ScoringJob.objects.count() == 1

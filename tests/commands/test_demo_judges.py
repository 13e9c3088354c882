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
    assert not queue_settings_summary(project=project).without_judge  # the uncertain queue no longer says "no queue judge set"
    assert set(ScoringJob.objects.values_list("judge__name", flat=True)) == {"minilm", "smollm2-tok"}
    # Run again after an admin chose the baseline: their choice stays.
    Project.objects.filter(pk=project.pk).update(queue_judge=Judge.objects.get(name="minilm"))
    assert "Queue judge" not in run(project.slug)
    project.refresh_from_db()
    assert project.queue_judge.name == "minilm"


def test_a_judge_too_slow_for_every_pair_here_scores_what_the_pages_need_and_says_so(tmp_path):
    from labeling.models import Pair, ScoringChunk
    from labeling.services.runs import run_store

    project = small_scoring_project(tmp_path / "b", queries=2, passages=12)
    query = project.queries.order_by("id").first()
    passages = list(Pair.objects.filter(project=project, query=query).order_by("id").values_list("passage_id", flat=True))
    run_store(project=project, name="bm25", kind="bm25", parameters={},
              rankings=[(query.id, passages, [float(-i) for i in range(len(passages))])])
    gold = Pair.objects.filter(project=project).exclude(query=query).order_by("id").first()
    Pair.objects.filter(id=gold.id).update(reference_grade=1)
    out = StringIO()
    # Any positive time is "too long" with a limit of 0 s: both judges score only the needed pairs.
    call_command("demo_judges", "--project", project.slug, "--full-limit", "0", stdout=out)
    text = out.getvalue()
    assert "scoring all 24 pairs would take about" in text and "scoring the 11 the pages need now" in text
    assert "manage.py score --project score --judge smollm2-tok" in text
    for job in ScoringJob.objects.all():
        scored = {pid for chunk in ScoringChunk.objects.filter(job=job) for pid in chunk.pair_ids}
        top = set(Pair.objects.filter(query=query, passage_id__in=passages[:10]).values_list("id", flat=True))
        assert job.scope == "selection" and scored == top | {gold.id}

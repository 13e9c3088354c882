"""demo_judges: the demo's judges, their scoring queued, and SmolLM2 made the queue judge unless an admin chose
one, so that the uncertain queue ranks pairs after the demo's scoring."""
from io import StringIO

import pytest
from django.core.management import call_command

from labeling.models import Judge, Project, ScoringJob
from labeling.selectors.queue_settings import queue_settings_summary
from tests.scoring_fixtures import small_scoring_project

pytestmark = pytest.mark.django_db


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

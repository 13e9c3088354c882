"""The teacher judges a training set: an ordinary scoring job over the set's pairs it has no ok answer on (a paid
teacher is never asked twice), from the service, the command, the page and the API."""
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from labeling.models import Judgment, Membership, Pair, ScoringJob, TrainingSet
from labeling.services.finetune_training_sets import TrainingSetError, training_set_score
from tests.factories import MembershipFactory, UserFactory
from tests.finetune_fixtures import rule_project
from tests.scoring_fixtures import smollm2_judge

pytestmark = pytest.mark.django_db


def scored_pairs(job: ScoringJob) -> set[int]:
    return {pair_id for chunk in job.chunks.all() for pair_id in chunk.pair_ids}


def test_the_teacher_is_asked_only_for_the_pairs_it_has_not_answered(tmp_path):
    project, teacher, training_set = rule_project(tmp_path / "bundle")
    judge = smollm2_judge(project, name="gpt")
    pairs = sorted(Pair.objects.filter(project=project).values_list("id", flat=True))
    # The judge answered two pairs (ok) and failed a third: the failed one is asked again.
    Judgment.objects.bulk_create([
        Judgment(pair_id=pair_id, judge=judge, status=status, p_relevant=p, created_at=teacher.created_at)
        for pair_id, status, p in ((pairs[0], "ok", 0.9), (pairs[1], "ok", 0.1), (pairs[2], "failed", None))])
    job, created = training_set_score(training_set=training_set, judge=judge)
    assert created and job.scope == ScoringJob.Scope.SELECTION and scored_pairs(job) == set(pairs[2:])
    with pytest.raises(TrainingSetError, match="has answered all 16 pairs"):
        training_set_score(training_set=training_set, judge=teacher)


def test_a_file_set_has_no_pairs_to_judge(tmp_path):
    project, _, _ = rule_project(tmp_path / "bundle")
    judge = smollm2_judge(project, name="gpt")
    file_set = TrainingSet.objects.create(project=project, name="file", source="f.csv")
    with pytest.raises(TrainingSetError, match="holds no pairs"):
        training_set_score(training_set=file_set, judge=judge)
    assert not ScoringJob.objects.exists()


def test_the_command_page_and_api_start_the_same_job(tmp_path, client):
    project, _, _ = rule_project(tmp_path / "bundle")
    smollm2_judge(project, name="gpt")
    out = StringIO()
    call_command("training_set", "--project", project.slug, "--name", "rule", "--score-with", "gpt", stdout=out)
    job = ScoringJob.objects.get()
    assert f"Scoring job {job.id}: 'gpt' judges 16 pairs of training set 'rule', queued" in out.getvalue()
    with pytest.raises(CommandError, match="takes no sampling"):
        call_command("training_set", "--project", project.slug, "--name", "rule", "--score-with", "gpt",
                     "--top", "3")

    admin = UserFactory(username="boss")
    MembershipFactory(project=project, user=admin, role=Membership.Role.ADMIN)
    client.force_login(admin)
    page = client.get(reverse("labeling:finetune", args=[project.slug])).content.decode()
    assert reverse("labeling:training_set_score", args=[project.slug, "rule"]) in page
    answer = client.post(reverse("labeling:training_set_score", args=[project.slug, "rule"]), {"judge": "gpt"},
                         follow=True)
    # The judge's job is still running: it is resumed, not doubled.
    assert f"Scoring job {job.id} resumed" in answer.content.decode() and ScoringJob.objects.count() == 1
    api = client.post(reverse("api:training-set-score", args=[project.slug, "rule"]), {"judge": "teacher"},
                      content_type="application/json")
    assert api.status_code == 422 and "has answered all 16 pairs" in api.json()["message"]

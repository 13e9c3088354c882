"""A round that retrains the student (#33 with #32's cross-encoder student), with the real parts: a MiniLM
cross-encoder student of the banana rule, a third query experts label during the round, and the worker's part run
in-process. The round's training set is the student's plus the experts' new labels (not the random validation
sample's, not a held-out query's), the new student starts from the stored one, and it scores the whole pool."""
import pytest
from django.urls import reverse

from labeling.models import FineTuneJob, Judge, Judgment, LabellingRound, Membership, Pair, Passage, TrainingExample
from labeling.selectors.completeness import random_sample_pair_ids
from labeling.selectors.finetune import base_judge_name
from labeling.services.finetune import finetune_create, finetune_run
from labeling.services.labels import label_submit
from labeling.services.rounds import RoundError, round_check, round_request, round_run
from labeling.services.scoring import scoring_chunk_run
from tests.audit_fixtures import members
from tests.factories import LeaseFactory, QueryFactory
from tests.finetune_fixtures import rule_project, teacher_p
from tests.services.test_finetune_crossencoder import QUICK

pytestmark = pytest.mark.django_db


def test_a_student_round_retrains_from_the_stored_student_with_the_experts_labels_and_scores_the_pool(
        tmp_path, settings, client):
    settings.ADAPTER_CACHE_DIR = tmp_path / "cache"
    project, teacher, training_set = rule_project(tmp_path / "bundle")
    parent = finetune_run(job_id=finetune_create(
        project=project, training_set=training_set, teacher=teacher, base_model="", student_name="ce",
        student="crossencoder", hyperparameters={**QUICK, "epochs": 12}).id)
    assert parent.status == FineTuneJob.Status.DONE, parent.error
    users = members(project)
    admin, expert = users[Membership.Role.ADMIN], users[Membership.Role.EXPERT]
    with pytest.raises(RoundError, match="not a stored cross-encoder student"):
        round_request(project=project, by=admin, judge="teacher", budget=1, after="student")
    with pytest.raises(RoundError, match="after must be one of"):
        round_request(project=project, by=admin, judge="ce", budget=1, after="retrain")

    # A third query joins the pool; the old pairs lie late in the random order, so the random validation sample is
    # the first new pair (labelled) alone: the second, left unlabelled, is where the sample stops.
    Pair.objects.filter(project=project).update(sample_key=0.9)
    q3 = QueryFactory(project=project, external_id="q3", text="Which paragraphs mention bananas?")
    passages = list(Passage.objects.filter(project=project).order_by("id"))
    new = [Pair.objects.create(project=project, query=q3, passage=passage, sample_key=0.5 + i / 100)
           for i, passage in enumerate(passages)]
    Pair.objects.filter(id=new[0].id).update(sample_key=0.01)
    Pair.objects.filter(id=new[1].id).update(sample_key=0.02)
    labelled = [new[0]] + new[2:]
    started = round_request(project=project, by=admin, judge="ce", budget=len(labelled), after="student")
    for pair in labelled:
        LeaseFactory(pair=pair, annotator=expert)
        label_submit(project=project, annotator=expert, pair_id=pair.id, grade=int(teacher_p(pair.passage.text) > 0.5))
    assert random_sample_pair_ids(project) == {new[0].id}
    assert round_check(project_id=project.id) is None  # the last label already handed it over
    started.refresh_from_db()
    assert started.status == LabellingRound.Status.RUNNING
    waiting = round_run(round_id=started.id)
    # Measured before; then the round waits, running and held by no worker, for the retrain and the pool's scoring.
    assert waiting.status == LabellingRound.Status.RUNNING, waiting.error
    assert waiting.waiting_since is not None and "before" in waiting.numbers and "after" not in waiting.numbers
    job = waiting.finetune
    assert waiting.numbers["student"] == {"job": job.id, "name": "ce-r1", "training_set": "rule + round 1",
                                       "examples": 8 + 6}  # q1 with the teacher, six new labels
    assert (job.parent_id, job.base_model, job.score_pool, job.student_kind) == (
        parent.id, parent.base_model, True, "crossencoder")

    # The round's set: the student's own examples, and the experts' labels outside the sample and held-out queries.
    examples = TrainingExample.objects.filter(training_set=job.training_set)
    assert set(examples.filter(origin="expert").values_list("pair_id", flat=True)) == {p.id for p in new[2:]}
    assert set(examples.exclude(origin="expert").values_list("pair_id", "split")) == set(
        TrainingExample.objects.filter(training_set=training_set).values_list("pair_id", "split"))
    # The task delivered again while the round waits does nothing; the sweep leaves a waiting round alone, however
    # long the retrain takes.
    assert round_run(round_id=waiting.id) is None
    assert FineTuneJob.objects.count() == 2
    from datetime import timedelta

    from django.utils import timezone

    from labeling.services.job_sweep import jobs_sweep

    LabellingRound.objects.filter(id=waiting.id).update(started_at=timezone.now() - timedelta(days=2))
    assert "round" not in jobs_sweep().given_up
    client.force_login(admin)
    page = reverse("labeling:rounds", args=[project.slug])
    assert "retraining" in client.get(page).content.decode()

    retrained = finetune_run(job_id=job.id)
    assert retrained.status == FineTuneJob.Status.DONE, retrained.error
    # It went on from the stored student: its first loss is already far below the fresh head's first loss.
    assert retrained.loss_history[0][1] < parent.loss_history[0][1] - 0.2, (retrained.loss_history,
                                                                            parent.loss_history)
    base = Judge.objects.get(project=project, name=base_judge_name("ce-r1"))
    assert base.parameters["adapter_storage"] == parent.adapter
    scoring = retrained.student.scoring_jobs.get()
    assert scoring.total == Pair.objects.filter(project=project).count()
    assert "re-scoring: 0 of 24 pairs" in client.get(page).content.decode()
    for chunk_id in scoring.chunks.values_list("id", flat=True):
        scoring_chunk_run(chunk_id=chunk_id)
    assert Judgment.objects.filter(judge=retrained.student, status="ok").count() == scoring.total
    # The pool's scoring ended: the round was handed back to a worker, which measures under the new student.
    woken = LabellingRound.objects.get(id=waiting.id)
    assert (woken.status, woken.waiting_since, woken.heartbeat_at) == (LabellingRound.Status.RUNNING, None, None)
    done = round_run(round_id=waiting.id)
    assert done.status == LabellingRound.Status.DONE, done.error
    assert done.numbers["after"]["judge"] == "ce-r1" and done.numbers["before"]["judge"] == "ce"
    assert done.numbers["after"]["judge_accuracy"]["sample"]["n"] == 1  # the random validation sample: new[0]

    html = client.get(page).content.decode()
    assert "ce-r1" in html and "trained; scoring the pool 24 of 24 (done)" in html

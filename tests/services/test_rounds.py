"""Labelling rounds (#33): an admin starts a round (judge, batch, mix with a random floor), the round sets the
project's queue; when experts have given its batch a worker measures what it bought and refits the judge's
calibrator; the numbers are the completeness report's at that moment. End to end with a real worker: the round
is started through the API, an expert labels its batch in the workspace, the calibrator is refitted and the
Rounds page shows the round's numbers and the chart."""
from __future__ import annotations

import io
import json
import re

import numpy as np
import pytest
from celery import Task
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.test import APIClient

from labeling.models import JudgeCalibration, LabellingRound, Membership, Project
from labeling.selectors import streams
from labeling.selectors.completeness import completeness_compute, completeness_options
from labeling.services.labels import label_submit, queue_next_for_annotator
from labeling.services.rounds import RoundError, RoundForbidden, RoundOpen, round_request, round_run
from labeling.tasks import round_finish_task
from tests.factories import MembershipFactory, UserFactory
from tests.polling import wait_for
from tests.selectors.test_completeness import world  # noqa: F401 - the fixture: 60 pairs, a judge, 17 gold pairs

pytestmark = pytest.mark.django_db


def admin_of(project: Project):
    admin = UserFactory()
    MembershipFactory(project=project, user=admin, role=Membership.Role.ADMIN)
    return admin


def test_a_round_sets_the_queue_and_refuses_what_it_cannot_do(world):  # noqa: F811
    project, judge, *_ = world
    admin = admin_of(project)
    expert = UserFactory()
    MembershipFactory(project=project, user=expert, role=Membership.Role.EXPERT)
    with pytest.raises(RoundForbidden):
        round_request(project=project, by=expert, judge="imported", budget=5)
    with pytest.raises(RoundError, match="random_share must be at least 0.2"):
        round_request(project=project, by=admin, judge="imported", budget=5, random_share=0.1)
    with pytest.raises(RoundError, match="budget must be a whole number"):
        round_request(project=project, by=admin, judge="imported", budget=0)
    with pytest.raises(RoundError, match="no judge 'nope'"):
        round_request(project=project, by=admin, judge="nope", budget=5)
    with pytest.raises(RoundError, match="unknown strategy 'conflict'"):
        round_request(project=project, by=admin, judge="imported", budget=5, mix={"conflict": 1})
    assert not LabellingRound.objects.exists()
    started = round_request(project=project, by=admin, judge="imported", budget=5,
                            mix={"uncertain": 3, "disagreement": 1}, random_share=0.25)
    project.refresh_from_db()
    assert project.queue_judge == judge and project.queue_mix == {"uncertain": 56.25, "disagreement": 18.75,
                                                                  "random": 25.0}
    assert (started.number, started.labels_at_start, started.status) == (1, 17, "pending")
    with pytest.raises(RoundOpen, match="round 1 is still labelling"):
        round_request(project=project, by=admin, judge="imported", budget=5)


def test_the_batch_in_hands_the_round_to_a_worker_once_and_it_records_the_completeness_report(
        world, django_capture_on_commit_callbacks, monkeypatch):  # noqa: F811
    project, judge, *_ = world
    admin = admin_of(project)
    started = round_request(project=project, by=admin, judge="imported", budget=3)
    expert = UserFactory()
    MembershipFactory(project=project, user=expert, role=Membership.Role.EXPERT)
    sent = []  # the tasks the labels' transactions queue, by name (none reaches a broker)
    monkeypatch.setattr(Task, "apply_async", lambda task, args=None, kwargs=None, **_: sent.append((task.name, args)))
    with django_capture_on_commit_callbacks(execute=True):
        for grade in (1, 0):
            claim = queue_next_for_annotator(project=project, annotator=expert)
            label_submit(project=project, annotator=expert, pair_id=claim.pair.id, grade=grade)
    started.refresh_from_db()
    assert started.status == "pending" and round_finish_task.name not in {name for name, _ in sent}
    with django_capture_on_commit_callbacks(execute=True):
        claim = queue_next_for_annotator(project=project, annotator=expert)
        label_submit(project=project, annotator=expert, pair_id=claim.pair.id, grade=1)
    assert [args for name, args in sent if name == round_finish_task.name] == [(started.id,)]
    started.refresh_from_db()
    assert started.status == "running" and started.attempts == 1 and started.heartbeat_at is None
    expected = completeness_compute(project=project, options=completeness_options(project=project, judge="imported"))
    # The task delivered again while a worker measures the round (its heartbeat fresh) leaves it to that worker.
    LabellingRound.objects.filter(id=started.id).update(heartbeat_at=timezone.now())
    held = round_run(round_id=started.id)
    assert (held.status, held.numbers, held.attempts) == ("running", None, 1)
    LabellingRound.objects.filter(id=started.id).update(heartbeat_at=None)
    done = round_run(round_id=started.id)
    assert done.status == "done" and done.numbers["labels"] == 3
    before = done.numbers["before"]
    expected = expected.to_dict()
    assert before["pool"] == expected["pool"] and before["judge_accuracy"] == expected["judge_accuracy"]
    calibration = JudgeCalibration.objects.get(judge=judge)
    assert done.numbers["calibration"] == {"method": calibration.method, "n": 20, "n_relevant": calibration.n_relevant}
    # "after": the report under the refitted calibrator, on the same random validation sample
    refitted = completeness_compute(project=project, options=completeness_options(project=project,
                                                                                  judge="imported")).to_dict()
    after = done.numbers["after"]
    assert after["pool"] == refitted["pool"] and after["judge_accuracy"] == refitted["judge_accuracy"]
    assert after["judge_accuracy"]["sample"]["n"] == before["judge_accuracy"]["sample"]["n"]
    assert after["basis"] != before["basis"]  # no calibrator before, the refitted one after
    # the next round may start now
    assert round_request(project=project, by=admin, judge="imported", budget=2).number == 2


def test_a_refit_that_cannot_be_made_leaves_the_round_done_with_its_numbers_and_the_reason(world):  # noqa: F811
    project, *_ = world
    admin = admin_of(project)
    from labeling.models import Label

    Label.objects.filter(pair__project=project, grade=1).update(grade=0)  # no relevant gold pair left
    started = round_request(project=project, by=admin, judge="imported", budget=1)
    LabellingRound.objects.filter(id=started.id).update(status="running")
    done = round_run(round_id=started.id)
    assert done.status == "done" and not done.error and "after" not in done.numbers
    assert done.numbers["reason"].startswith("the calibrator was not refitted: judge 'imported': needs at least 5 "
                                             "relevant and 5 non-relevant gold pairs")
    assert done.numbers["before"]["pool"]["verified_relevant"] == 0


def test_a_round_reads_the_gold_pairs_once_for_its_measures_and_its_refit(world, monkeypatch):  # noqa: F811
    # The measures before and after the refit and the refit itself read the same gold set: the label stream is
    # walked once per round, not once for each of them.
    project, *_ = world
    started = round_request(project=project, by=admin_of(project), judge="imported", budget=1)
    LabellingRound.objects.filter(id=started.id).update(status="running")
    walks = []
    pair_stream = streams.pair_stream
    monkeypatch.setattr(streams, "pair_stream", lambda *args, **kwargs: walks.append(1) or pair_stream(*args, **kwargs))
    done = round_run(round_id=started.id)
    assert done.status == "done" and "after" in done.numbers and len(walks) == 1


def test_the_api_and_the_command_start_and_list_rounds(world):  # noqa: F811
    project, *_ = world
    admin = admin_of(project)
    client = APIClient()
    client.force_authenticate(admin)
    response = client.post("/api/projects/complete/rounds/", {"judge": "imported", "budget": 4}, format="json")
    assert response.status_code == 201 and response.json()["state"] == "labelling: 0 of 4 labels"
    again = client.post("/api/projects/complete/rounds/", {"judge": "imported", "budget": 4}, format="json")
    assert again.status_code == 409
    bad = client.post("/api/projects/complete/rounds/", {"judge": "imported", "budget": "x"}, format="json")
    assert bad.status_code == 400
    listed = client.get("/api/projects/complete/rounds/").json()["rounds"]
    out = io.StringIO()
    call_command("round", "list", "--project", "complete", "--json", stdout=out)
    assert json.loads(out.getvalue()) == listed and listed[0]["budget"] == 4
    with pytest.raises(CommandError, match="round 1 is still labelling"):
        call_command("round", "start", "--project", "complete", "--by", admin.username, "--judge", "imported",
                     "--budget", "3")


@pytest.mark.parametrize("body, status, field", [
    ({"mix": {"uncertain": 1e308}}, 400, "mix.uncertain"),
    ({"mix": {"uncertain": 1e308, "disagreement": 1e308}}, 400, "mix.disagreement"),
    ({"mix": {"uncertain": 1, "disagreement": 1e7}}, 400, "mix.disagreement"),
    ({"random_share": 1e308}, 422, "random_share"),
    ({"budget": 1e308}, 400, "budget"),
    ({"budget": 10 ** 400}, 422, "budget"),
])
def test_the_api_refuses_a_huge_number_in_any_field_naming_it_and_starts_nothing(
        world, body, status, field):  # noqa: F811
    """Shares of 1e308 overflowed to NaN in the stored mix, a 500 from the database's JSON check."""
    project, *_ = world
    client = APIClient()
    client.force_authenticate(admin_of(project))
    mix_before = project.queue_mix
    response = client.post("/api/projects/complete/rounds/", {"judge": "imported", "budget": 4, **body},
                           format="json")
    assert response.status_code == status, response.content
    answer = response.json()
    assert field in answer["errors"] if status == 400 else answer["message"].startswith(f"{field} must be")
    assert not LabellingRound.objects.exists()
    project.refresh_from_db()
    assert project.queue_mix == mix_before


@pytest.mark.parametrize("fields, named", [
    ({"share_uncertain": "1e308"}, "the share of &#x27;uncertain&#x27;"),
    ({"share_uncertain": "1e308", "share_disagreement": "1e308"}, "the share of &#x27;uncertain&#x27;"),
    ({"share_disagreement": "inf"}, "the share of &#x27;disagreement&#x27;"),
    ({"share_uncertain": "nan"}, "the share of &#x27;uncertain&#x27;"),
    ({"random_share": "1e308"}, "random_share must be"),
    ({"random_share": "nan"}, "random_share must be"),
    ({"budget": "1e308"}, "budget"),
    ({"budget": "9" * 30}, "budget must be"),
])
def test_the_page_form_refuses_a_huge_or_non_finite_number_in_any_field_and_starts_nothing(
        world, client, fields, named):  # noqa: F811
    project, *_ = world
    client.force_login(admin_of(project))
    form = {"judge": "imported", "budget": "4", "share_uncertain": "1", "share_disagreement": "0",
            "random_share": "20", **fields}
    response = client.post(f"/projects/{project.slug}/rounds/start/", form)
    assert response.status_code == 400
    error = re.search(r'data-testid="round-error">([^<]*)<', response.content.decode())
    assert error is not None and named in error.group(1)
    assert not LabellingRound.objects.exists()


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_round_end_to_end_with_a_real_worker(world, worker, client):  # noqa: F811
    project, judge, *_ = world
    admin = admin_of(project)
    api = APIClient()
    api.force_authenticate(admin)
    assert api.post("/api/projects/complete/rounds/", {"judge": "imported", "budget": 4}, format="json"
                    ).status_code == 201
    expert = UserFactory()
    MembershipFactory(project=project, user=expert, role=Membership.Role.EXPERT)
    client.force_login(expert)
    fields = re.compile(r'<input type="hidden" name="(\w+)" value="([^"]*)"')
    for grade in (1, 0, 0, 1):
        page = client.get(f"/projects/{project.slug}/annotate/").content.decode()
        shown = dict(fields.findall(page.partition('<template id="ws-next">')[0]))
        assert client.post(f"/projects/{project.slug}/annotate/submit/", {**shown, "grade": str(grade)}
                           ).status_code == 302
    wait_for(lambda: LabellingRound.objects.filter(project=project, status__in=["done", "failed"]).exists(),
             "the worker finished the round")
    done = LabellingRound.objects.get(project=project)
    assert done.status == "done", done.error
    assert JudgeCalibration.objects.filter(judge=judge).exists()
    assert done.numbers["labels"] == 4 and done.numbers["before"]["pool"]["graded"] == 21
    client.force_login(admin)
    html = client.get(f"/projects/{project.slug}/rounds/").content.decode()
    assert 'data-chart="rounds"' in html and 'data-round="1" data-status="done"' in html
    assert f"Refit: {done.numbers['calibration']['method']} on 21 gold pairs" in html


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_round_on_the_sample_with_the_minilm_judge_and_a_real_worker(tmp_path, worker, client):
    """On the ClimRetrieve sample (2 queries x 20 passages): the MiniLM judge scores the pool; a round of 40 labels
    is started through the API; an expert grades every item the workspace hands them as the sample's qrels say;
    the worker records the round's numbers (the judge's AUROC on the random sample equal to scikit-learn's on the
    same pairs) and refits the calibrator on the 40 gold pairs; the Rounds page shows the round and the chart."""
    from sklearn.metrics import roc_auc_score

    from labeling.models import Judgment, Pair
    from labeling.services.scoring import scoring_chunk_run, scoring_job_create
    from tests.scoring_fixtures import SAMPLE, minilm_judge, small_scoring_project

    project = small_scoring_project(tmp_path / "b", queries=2, passages=20)
    judge = minilm_judge(project)
    job = scoring_job_create(project=project, judge=judge, scope="all")
    for chunk_id in job.chunks.values_list("id", flat=True):
        scoring_chunk_run(chunk_id=chunk_id)  # the worker may take some first: either way each is scored once
    wait_for(lambda: Judgment.objects.filter(judge=judge, status="ok").count() == 40, "the pool scored")
    relevant = {tuple(line.split("\t")[:2]) for line in (SAMPLE / "qrels" / "test.tsv").read_text().splitlines()[1:]
                if int(line.split("\t")[2]) > 0}
    scale = project.label_scale
    admin = admin_of(project)
    api = APIClient()
    api.force_authenticate(admin)
    response = api.post(f"/api/projects/{project.slug}/rounds/", {"judge": "minilm", "budget": 40, "random_share": 0.25},
                        format="json")
    assert response.status_code == 201, response.content
    expert = UserFactory()
    MembershipFactory(project=project, user=expert, role=Membership.Role.EXPERT)
    client.force_login(expert)
    fields = re.compile(r'<input type="hidden" name="(\w+)" value="([^"]*)"')
    truth = {}
    for _ in range(40):
        page = client.get(f"/projects/{project.slug}/annotate/").content.decode()
        shown = dict(fields.findall(page.partition('<template id="ws-next">')[0]))
        pair = Pair.objects.select_related("query", "passage").get(id=shown["pair_id"])
        truth[pair.id] = (pair.query.external_id, pair.passage.external_id) in relevant
        grade = scale.top if truth[pair.id] else min(g.value for g in scale.grades)
        assert client.post(f"/projects/{project.slug}/annotate/submit/", {**shown, "grade": str(grade)}
                           ).status_code == 302
    assert sum(truth.values()) == 13 and len(truth) == 40
    wait_for(lambda: LabellingRound.objects.filter(project=project, status__in=["done", "failed"]).exists(),
             "the worker finished the round")
    done = LabellingRound.objects.get(project=project)
    assert done.status == "done", done.error
    p = dict(Judgment.objects.filter(judge=judge).values_list("pair_id", "p_relevant"))
    ids = sorted(truth)
    sample = done.numbers["before"]["judge_accuracy"]["sample"]
    assert sample["n"] == 40 and done.numbers["before"]["pool"]["design"]["total"] == 13
    assert sample["auroc"]["value"] == pytest.approx(roc_auc_score([truth[i] for i in ids], [p[i] for i in ids]))
    assert done.numbers["calibration"]["n"] == 40 and JudgeCalibration.objects.filter(judge=judge).count() == 1
    # After: the same 40 pairs under the refitted calibrator (scikit-learn's AUROC on its calibrated P).
    from labeling.selectors.export import judge_calibrator

    calibrated = judge_calibrator(judge).apply(np.array([p[i] for i in ids]))
    after = done.numbers["after"]["judge_accuracy"]["sample"]
    assert after["n"] == 40
    assert after["auroc"]["value"] == pytest.approx(roc_auc_score([truth[i] for i in ids], calibrated))
    client.force_login(admin)
    html = client.get(f"/projects/{project.slug}/rounds/").content.decode()
    assert 'data-chart="rounds"' in html and 'data-round="1" data-status="done"' in html
    shown = re.search(r"data-auroc><span data-before>([0-9.]+)</span> &rarr; <span data-after>([0-9.]+)<", html)
    assert shown and float(shown.group(1)) == pytest.approx(sample["auroc"]["value"], abs=5e-4)
    assert float(shown.group(2)) == pytest.approx(after["auroc"]["value"], abs=5e-4)

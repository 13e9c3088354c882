"""The Fine-tuning page through the test client: training sets sampled from a run and imported from DIRAS's files,
refused deletes, a fine-tuning request stored as a pending job (nothing trained here), cancel, resume refused while
the worker reports, the student scoring the pool, the jobs polled by htmx; who sees what (admins act, members see,
blind-first experts see no comparison); the side-by-side's numbers against scikit-learn and a hand computation, and
the loss curve's geometry. With chromium, a screenshot of the page with data for a person to look at."""
from __future__ import annotations

import csv
import re
from datetime import timedelta
from html import unescape
from pathlib import Path

import numpy as np
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone
from sklearn.metrics import accuracy_score, brier_score_loss, roc_auc_score

from labeling.models import FineTuneJob, Judge, Pair, RunEntry, ScoringJob, TrainingExample, TrainingSet
from labeling.selectors.definitions import current_definitions
from labeling.selectors.finetune import base_judge_name
from labeling.services.judges import judge_create
from labeling.services.judging import judgments_upsert
from labeling.views.finetune import loss_curve
from models_llm.bundled import minilm_folder
from models_llm.types import Verdict
from tests.browser import log_in, needs_chromium
from tests.factories import MembershipFactory, UserFactory
from tests.finetune_fixtures import BANANAS, OTHERS, base_folder, rule_project, teacher_p
from tests.url_matrix import ADMIN, EXPERT, VIEWER, build_world
from tests.views.test_xss import ESCAPED, PAYLOAD, RAW

pytestmark = pytest.mark.django_db

DATA = Path(__file__).resolve().parents[2] / "data" / "diras-distill"
# The student's and the bare base model's P on the held-out query's paragraphs (BANANAS then OTHERS), each in its
# own tenth of [0, 1], so that each pair is a bin of its own for the ECE.
STUDENT_P = [0.92, 0.83, 0.45, 0.74, 0.15, 0.66, 0.05, 0.36]
BASE_P = [0.6] * 8
LOSSES = [[1, 2.0], [2, 1.5], [3, 1.0], [4, 0.5]]


def page(project) -> str:
    return reverse("labeling:finetune", args=[project.slug])


def members(project) -> dict[str, object]:
    users = {}
    for role in (ADMIN, VIEWER, EXPERT):
        users[role] = UserFactory(username=f"{role}-{project.slug}")
        MembershipFactory(project=project, user=users[role], role=role)
    return users


def _judged(project, name: str, p_of: dict[str, float]) -> Judge:
    """A judge (the hf backend, so the pool can be scored with it) whose P of each held-out pair is given."""
    judge = judge_create(project=project, name=name, backend=Judge.Backend.HF, model=base_folder(), method="tok")
    pairs = list(Pair.objects.filter(project=project, query__external_id="q2").select_related("passage"))
    judgments_upsert(judge=judge, pairs=pairs, definitions=current_definitions({pairs[0].query_id}), verdicts=[
        Verdict(pair_id=pair.id, status="ok", method="tok", p=p_of[pair.passage.text],
                guess=p_of[pair.passage.text] >= 0.5) for pair in pairs])
    return judge


def done_job(root: Path, slug: str = "distill"):
    """rule_project with a done job: its student and bare base judged the held-out query q2 (STUDENT_P, BASE_P),
    whose paragraphs the experts graded by the teacher's rule (the gold)."""
    project, teacher, training_set = rule_project(root, slug)
    texts = BANANAS + OTHERS
    student = _judged(project, "student", dict(zip(texts, STUDENT_P)))
    _judged(project, base_judge_name("student"), dict(zip(texts, BASE_P)))
    top = project.label_scale.top
    for pair in Pair.objects.filter(project=project, query__external_id="q2").select_related("passage"):
        pair.reference_grade = top if teacher_p(pair.passage.text) > 0.5 else 0
        pair.save(update_fields=["reference_grade"])
    now = timezone.now()
    job = FineTuneJob.objects.create(
        project=project, training_set=training_set, teacher=teacher, base_model=base_folder(), student_name="student",
        status=FineTuneJob.Status.DONE, started_at=now - timedelta(minutes=3), finished_at=now, student=student,
        examples=8, step=4, total_steps=4, loss_history=LOSSES, examples_per_s=3.25, eta_s=0.0,
    )
    return project, teacher, training_set, job


def hand_ece(p: list[float], y: list[int]) -> float:
    """Ten equal-width bins (no P here lies on a bin's edge): each bin's share of the pairs times the gap between
    its mean P and its share of relevant pairs."""
    bins: dict[int, list[tuple[float, int]]] = {}
    for value, label in zip(p, y):
        bins.setdefault(int(value * 10), []).append((value, label))
    return sum(len(rows) / len(p) * abs(np.mean([v for v, _ in rows]) - np.mean([l for _, l in rows]))
               for rows in bins.values())


def expected_agreement(p: list[float]) -> dict[str, float]:
    """The side-by-side's numbers by scikit-learn, the ECE by hand."""
    y = [int(teacher_p(text) > 0.5) for text in BANANAS + OTHERS]
    return {"auroc": roc_auc_score(y, p), "ece": hand_ece(p, y), "brier": brier_score_loss(y, p),
            "accuracy": accuracy_score(y, [int(v >= 0.5) for v in p])}


def row_cells(html: str, job: FineTuneJob, role: str) -> list[str]:
    table = re.search(rf'<table[^>]*data-comparison="{job.id}".*?</table>', html, re.DOTALL).group(0)
    row = re.search(rf'<tr data-role="{role}">(.*?)</tr>', table, re.DOTALL).group(1)
    return [unescape(re.sub(r"<[^>]+>", "", cell)).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.DOTALL)]


# --- Who sees what, and the side-by-side ------------------------------------------------------------------------

def test_admins_see_sets_jobs_forms_and_the_side_by_side_with_its_numbers(client, tmp_path):
    project, _, _, job = done_job(tmp_path / "bundle")
    client.force_login(members(project)[ADMIN])
    html = client.get(page(project)).content.decode()
    assert 'data-training-set="rule"' in html and f'data-finetune-job="{job.id}"' in html
    for name in ("training_set_sample", "training_set_import", "finetune_start"):
        assert reverse(f"labeling:{name}", args=[project.slug]) in html
    assert reverse("labeling:finetune_score_pool", args=[project.slug, job.id]) in html
    assert reverse("labeling:training_set_delete", args=[project.slug, "rule"]) in html
    assert "hx-trigger" not in html  # nothing unfinished to poll
    # The training set's counts: q1's eight pairs train, q2's eight held out, all drawn at random.
    row = re.search(r'<tr data-training-set="rule">.*?</tr>', html, re.DOTALL).group(0)
    assert 'data-train>8<' in row and 'data-held-out>8<' in row
    # DIRAS's defaults prefill the settings (App. F: r 64, alpha 16, lr 2e-4, batch 32, 2 epochs).
    for name, value in (("r", "64"), ("alpha", "16"), ("learning_rate", "0.0002"), ("batch_size", "32"),
                        ("epochs", "2.0"), ("micro_batch", "4"), ("save_steps", "20")):
        assert re.search(rf'name="{name}" value="{re.escape(value)}"', html), name
    assert f'value="{base_folder()}"' in html

    student, base = expected_agreement(STUDENT_P), expected_agreement(BASE_P)
    assert student["auroc"] == 15 / 16 and student["accuracy"] == 6 / 8  # by hand: 15 of 16 pairs ordered
    # n, AUROC, ECE, Brier, accuracy vs the teacher; n, AUROC, accuracy vs gold (the same labels here).
    for role, wanted in (("student", student), ("base model", base)):
        cells = row_cells(html, job, role)
        assert cells[2:] == ["8", *(f"{wanted[k]:.3f}" for k in ("auroc", "ece", "brier", "accuracy")),
                             "8", f"{wanted['auroc']:.3f}", f"{wanted['accuracy']:.3f}"], role
    assert row_cells(html, job, "teacher") == ["teacher", "teacher", *["–"] * 5, "8", "1.000", "1.000"]
    assert "8 held-out pairs and 8 gold pairs that all three judged" in unescape(html)
    # The loss curve: one point per logged step.
    curve = re.search(r'<svg[^>]*data-loss-curve.*?</svg>', html, re.DOTALL).group(0)
    assert len(re.search(r'<polyline class="line f1" points="([^"]*)"', curve).group(1).split()) == len(LOSSES)


def test_viewers_see_the_numbers_but_no_form_and_blind_experts_see_no_number(client, tmp_path):
    project, _, _, job = done_job(tmp_path / "bundle")
    users = members(project)
    client.force_login(users[VIEWER])
    html = client.get(page(project)).content.decode()
    assert f'data-comparison="{job.id}"' in html and "0.938" in html
    assert html.count('method="post"') == 1 and 'action="/accounts/logout/"' in html  # logging out only

    client.force_login(users[EXPERT])
    html = client.get(page(project)).content.decode()
    assert f'data-finetune-job="{job.id}"' in html and 'data-training-set="rule"' in html
    assert "data-blind" in html and "data-comparison" not in html
    for wanted in expected_agreement(STUDENT_P).values():
        assert f"{wanted:.3f}" not in html


def test_the_project_page_links_to_the_fine_tuning_page(client):
    world = build_world()
    client.force_login(world.users[EXPERT])
    html = client.get(reverse("labeling:project_detail", args=[world.project.slug])).content.decode()
    assert f'href="{page(world.project)}"' in html


def test_running_jobs_are_polled_and_the_page_reloads_once_none_runs(client):
    world = build_world()
    client.force_login(world.users[ADMIN])
    html = client.get(page(world.project)).content.decode()
    assert 'hx-trigger="every 2s"' in html and "data-resumed" not in html
    partial = client.get(page(world.project), headers={"HX-Request": "true"})
    body = partial.content.decode()
    assert body.lstrip().startswith('<div id="finetune-jobs"') and "<html" not in body
    assert "2/4 (50%)" in body and "HX-Refresh" not in partial
    FineTuneJob.objects.filter(id=world.finetune_job.id).update(status="done", finished_at=timezone.now())
    assert client.get(page(world.project), headers={"HX-Request": "true"})["HX-Refresh"] == "true"


def test_errors_are_hidden_from_members_who_are_not_admins(client):
    world = build_world()
    FineTuneJob.objects.filter(id=world.finetune_job.id).update(
        status="failed", finished_at=timezone.now(), error="CUDA out of memory in /srv/models/secret")
    client.force_login(world.users[VIEWER])
    assert "/srv/models/secret" not in client.get(page(world.project)).content.decode()
    client.force_login(world.users[ADMIN])
    assert "/srv/models/secret" in client.get(page(world.project)).content.decode()


# --- Training sets ----------------------------------------------------------------------------------------------

def test_a_training_set_is_sampled_from_a_run(client):
    world = build_world()
    client.force_login(world.users[ADMIN])
    response = client.post(reverse("labeling:training_set_sample", args=[world.project.slug]),
                           {"name": "sampled", "run": "run-a", "top": 2, "inside": 2, "outside": 1, "seed": 0, "held_out": 0})
    assert response.status_code == 302
    training_set = TrainingSet.objects.get(project=world.project, name="sampled")
    # run-a ranks the query's three passages: the top 2 with their ranks, and the one left drawn at random.
    ranked = list(RunEntry.objects.filter(run=world.run).order_by("rank").values_list("passage__text", flat=True))
    examples = set(TrainingExample.objects.filter(training_set=training_set).values_list(
        "pair__passage__text", "origin", "rank", "split"))
    assert examples == {(ranked[0], "top", 1, "train"), (ranked[1], "top", 2, "train"),
                        (ranked[2], "random", None, "train")}
    shown = client.get(page(world.project)).content.decode()
    assert "Stored training set sampled" in shown
    assert ("Drew 2 passage(s) inside the top 2 (asked 2 per query) and 1 outside it (asked 1) over 1 query, "
            "seed 0; held-out share 0 (as given).") in shown
    assert "2 inside top 2, 1 outside, seed 0" in shown


def test_a_refused_sample_says_why_and_stores_nothing(client):
    world = build_world()
    client.force_login(world.users[ADMIN])
    response = client.post(reverse("labeling:training_set_sample", args=[world.project.slug]),
                           {"name": "set-a", "run": "run-a", "top": 2, "inside": 2, "outside": 1, "seed": 0, "held_out": 0.2})
    assert response.status_code == 400
    assert "already has a training set &#x27;set-a&#x27;" in response.content.decode()
    assert TrainingSet.objects.filter(project=world.project).count() == 2


def test_a_training_set_name_that_is_not_one_line_is_refused_and_the_page_still_answers(client):
    """Issue 30, finding 7: a set named "nl\r\nSet-Cookie: x=1" broke the Fine-tuning page (its delete and score
    links hold the name, and <path:training_set> matches no line break) and could be neither addressed nor
    deleted."""
    world = build_world()
    client.force_login(world.users[ADMIN])
    name = "nl\r\nSet-Cookie: x=1"
    sampled = client.post(reverse("labeling:training_set_sample", args=[world.project.slug]),
                          {"name": name, "run": "run-a", "top": 2, "inside": 2, "outside": 1, "seed": 0, "held_out": 0})
    assert sampled.status_code == 400
    assert "the training set name holds a control character (U+000D) at position 3" in sampled.content.decode()
    content = (DATA / "rag_bench_train_data.csv").read_bytes()
    imported = client.post(reverse("labeling:training_set_import", args=[world.project.slug]), {
        "name": name, "held_out": 0, "seed": 0, "file": SimpleUploadedFile("rag_bench.csv", content)})
    assert imported.status_code == 400 and "(U+000D) at position 3" in imported.content.decode()
    assert set(TrainingSet.objects.filter(project=world.project).values_list("name", flat=True)) == {"set-a", "set-b"}
    assert client.get(page(world.project)).status_code == 200


def test_a_training_set_name_keeps_its_inner_spaces_and_accents_and_can_be_deleted(client):
    world = build_world()
    client.force_login(world.users[ADMIN])
    response = client.post(reverse("labeling:training_set_sample", args=[world.project.slug]),
                           {"name": "BM25 re\u0301gle\u0301", "run": "run-a", "top": 2, "inside": 2, "outside": 1, "seed": 0,
                            "held_out": 0})
    assert response.status_code == 302
    delete = reverse("labeling:training_set_delete", args=[world.project.slug, "BM25 réglé"])
    assert delete in client.get(page(world.project)).content.decode()
    assert client.post(delete).status_code == 302
    assert not TrainingSet.objects.filter(project=world.project, name="BM25 réglé").exists()


def test_a_diras_file_is_imported(client):
    world = build_world()
    client.force_login(world.users[ADMIN])
    content = (DATA / "rag_bench_train_data.csv").read_bytes()
    response = client.post(reverse("labeling:training_set_import", args=[world.project.slug]), {
        "name": "rag", "held_out": 0, "seed": 0, "file": SimpleUploadedFile("rag_bench.csv", content)})
    assert response.status_code == 302
    with (DATA / "rag_bench_train_data.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    stored = TrainingExample.objects.filter(training_set__name="rag", training_set__project=world.project)
    assert stored.count() == len(rows) == 20
    assert set(stored.values_list("origin", "split")) == {("file", "train")}
    assert set(stored.values_list("group", flat=True)) == {row["question"] for row in rows}


def test_a_bad_or_oversized_file_is_refused_with_its_reason(client):
    world = build_world()
    client.force_login(world.users[ADMIN])
    url = reverse("labeling:training_set_import", args=[world.project.slug])
    bad = b"question,document,guess,confidence\nq1,para,Yes,2\n"
    response = client.post(url, {"name": "bad", "held_out": 0, "seed": 0, "file": SimpleUploadedFile("bad.csv", bad)})
    assert response.status_code == 400 and "bad.csv:2: the confidence 2 is outside [0, 1]" in response.content.decode()
    with override_settings(RUN_UPLOAD_MAX_BYTES=1000):
        content = (DATA / "asqa_train_data.csv").read_bytes()
        response = client.post(url, {"name": "big", "held_out": 0, "seed": 0,
                                     "file": SimpleUploadedFile("asqa.csv", content)})
    assert response.status_code == 413 and "manage.py training_set" in response.content.decode()
    assert not TrainingSet.objects.filter(name__in=["bad", "big"]).exists()


def test_a_set_in_use_is_not_deleted_and_an_unused_one_is(client):
    world = build_world()
    client.force_login(world.users[ADMIN])
    refused = client.post(reverse("labeling:training_set_delete", args=[world.project.slug, "set-b"]), follow=True)
    assert "is used by 1 fine-tuning job(s) (student-a): delete them first" in refused.content.decode()
    assert TrainingSet.objects.filter(name="set-b").exists()
    response = client.post(reverse("labeling:training_set_delete", args=[world.project.slug, "set-a"]))
    assert response.status_code == 302 and not TrainingSet.objects.filter(name="set-a").exists()


# --- Fine-tuning jobs -------------------------------------------------------------------------------------------

def _finetune_post(project, **changes) -> dict:
    data = {"training_set": "rule", "teacher": "teacher", "student": "lora", "base_model": base_folder(),
            "student_name": "pupil",
            "r": 8, "alpha": 16, "dropout": 0.1, "learning_rate": 2e-4, "warmup_ratio": 0.03, "batch_size": 32,
            "micro_batch": 4, "epochs": 2, "max_steps": 0, "source_max_length": 1024, "target_max_length": 64,
            "save_steps": 20, "device": "cpu"}
    return data | changes


def test_a_fine_tuning_request_is_stored_as_a_pending_job(client, tmp_path):
    project, teacher, training_set = rule_project(tmp_path / "bundle")
    client.force_login(members(project)[ADMIN])
    response = client.post(reverse("labeling:finetune_start", args=[project.slug]), _finetune_post(project))
    assert response.status_code == 302
    job = FineTuneJob.objects.get(project=project, student_name="pupil")
    # 8 train examples in micro batches of 4 make 2 micro batches, one optimizer step of 32 per epoch: 2 steps.
    assert (job.status, job.examples, job.total_steps, job.teacher, job.training_set) == (
        "pending", 8, 2, teacher, training_set)
    assert job.hyperparameters["r"] == 8 and job.hyperparameters["source_max_length"] == 1024
    assert job.hyperparameters["target_max_length"] == 64 and "max_length" not in job.hyperparameters
    assert job.hyperparameters["device"] == "cpu"


def test_a_crossencoder_request_is_stored_with_its_kind_and_settings_and_listed_as_one(client, tmp_path):
    project, teacher, _ = rule_project(tmp_path / "bundle")
    client.force_login(members(project)[ADMIN])
    html = client.get(page(project)).content.decode()
    # The cross-encoder's defaults prefill its fields (lr 3e-5, batch 16, 256 tokens, expert weight 1).
    for name, value in (("ce_learning_rate", "3e-05"), ("ce_batch_size", "16"), ("ce_max_length", "256"),
                        ("ce_epochs", "2.0"), ("ce_expert_weight", "1.0")):
        assert re.search(rf'name="{name}" value="{re.escape(value)}"', html), name
    base = re.search(r'<input[^>]*name="ce_base_model"[^>]*>', html).group(0)
    assert 'placeholder="empty: the bundled all-MiniLM-L6-v2"' in base and "value=" not in base

    # The LoRA fields still hold their values: only the cross-encoder's are passed on, blank ones keep the default.
    response = client.post(reverse("labeling:finetune_start", args=[project.slug]), _finetune_post(
        project, student="crossencoder", student_name="ce", ce_base_model="", ce_epochs=3, ce_learning_rate=5e-5,
        ce_batch_size=4, ce_max_length=128, ce_expert_weight=""))
    assert response.status_code == 302, unescape(response.content.decode())
    job = FineTuneJob.objects.get(project=project, student_name="ce")
    # q1's eight train pairs in batches of 4: 2 steps an epoch, 3 epochs.
    assert (job.student_kind, job.base_model, job.examples, job.total_steps, job.teacher) == (
        "crossencoder", str(minilm_folder()), 8, 6, teacher)
    settings = job.hyperparameters
    assert (settings["epochs"], settings["learning_rate"], settings["batch_size"], settings["max_length"],
            settings["expert_weight"], settings["device"]) == (3.0, 5e-5, 4, 128, 1.0, "cpu")
    assert "r" not in settings and "micro_batch" not in settings

    client.post(reverse("labeling:finetune_start", args=[project.slug]), _finetune_post(project))
    html = client.get(page(project)).content.decode()
    lora = FineTuneJob.objects.get(project=project, student_name="pupil")
    shown = {int(job_id): (kind, label) for job_id, kind, label in re.findall(
        r'<tr data-finetune-job="(\d+)">.*?data-student-kind="(\w+)">([^<]*)<', html, re.DOTALL)}
    assert shown == {job.id: ("crossencoder", "cross-encoder"), lora.id: ("lora", "LoRA adapter of a causal LM")}


@pytest.mark.parametrize(("changes", "message"), [
    ({"micro_batch": 5}, "the batch size must be a multiple of the micro batch"),
    ({"student": "crossencoder", "ce_max_length": 8}, "the maximum length must be 16 to 8192 tokens"),
    ({"student": "crossencoder", "ce_base_model": "/etc"}, "is not under a model root"),
    ({"base_model": ""}, "a lora student needs a base model folder"),
    ({"base_model": "/etc"}, "is not under a model root"),
    ({"teacher": ""}, "choose a teacher whose judgments are the answers"),
    ({"student_name": "pupil\u2028two"}, "the student name holds a line separator (U+2028) at position 6"),
])
def test_a_refused_request_says_why(client, tmp_path, changes, message):
    project, _, _ = rule_project(tmp_path / "bundle")
    client.force_login(members(project)[ADMIN])
    response = client.post(reverse("labeling:finetune_start", args=[project.slug]), _finetune_post(project, **changes))
    assert response.status_code == 400 and message in unescape(response.content.decode())
    assert not FineTuneJob.objects.exists()


def test_cancel_resume_and_scoring_the_pool(client, tmp_path):
    world = build_world()
    client.force_login(world.users[ADMIN])
    job = world.finetune_job
    resumed = client.post(reverse("labeling:finetune_resume", args=[world.project.slug, job.id]), follow=True)
    assert f"fine-tuning job {job.id} is running (its worker reported at" in resumed.content.decode()
    response = client.post(reverse("labeling:finetune_cancel", args=[world.project.slug, job.id]))
    assert response.status_code == 302
    job.refresh_from_db()
    assert job.status == "cancelled" and job.finished_at is not None
    nothing = client.post(reverse("labeling:finetune_score_pool", args=[world.project.slug, job.id]), follow=True)
    assert f"fine-tuning job {job.id} has no student judge" in nothing.content.decode()

    project, _, _, done = done_job(tmp_path / "bundle")
    client.force_login(members(project)[ADMIN])
    scored = client.post(reverse("labeling:finetune_score_pool", args=[project.slug, done.id]), follow=True)
    scoring = ScoringJob.objects.get(judge=done.student)
    assert scoring.scope == "missing" and scoring.total == Pair.objects.filter(project=project).count() - 8
    assert f"Scoring job {scoring.id} started" in scored.content.decode()


def test_experts_may_not_act(client):
    world = build_world()
    client.force_login(world.users[EXPERT])
    slug, job = world.project.slug, world.finetune_job.id
    for name, args in (("training_set_sample", []), ("training_set_import", []), ("training_set_delete", ["set-a"]),
                       ("finetune_start", []), ("finetune_cancel", [job]), ("finetune_resume", [job]),
                       ("finetune_score_pool", [job])):
        assert client.post(reverse(f"labeling:{name}", args=[slug, *args]), {}).status_code == 403, name
    assert FineTuneJob.objects.get(id=job).status == "running" and TrainingSet.objects.count() == 2


def test_untrusted_names_are_shown_escaped(client):
    world = build_world()
    TrainingSet.objects.filter(name="set-a").update(name=f"set {PAYLOAD}", source=f"file {PAYLOAD}")
    FineTuneJob.objects.filter(id=world.finetune_job.id).update(student_name=f"student {PAYLOAD}")
    client.force_login(world.users[ADMIN])
    html = client.get(page(world.project)).content.decode()
    assert all(raw not in html for raw in RAW) and ESCAPED in html


# --- The loss curve ---------------------------------------------------------------------------------------------

def test_the_loss_curve_spans_the_steps_and_the_losses():
    curve = loss_curve([[1, 2.0], [2, 1.0], [4, 0.5]], 4)
    # x: 30 + step / 4 * (174 - 30); y: 72 - loss / 2 * (72 - 8)
    assert curve.points == "66.0,8.0 102.0,40.0 174.0,56.0"
    assert [tick.label for tick in curve.x_ticks] == ["0", "4"] and [t.label for t in curve.y_ticks] == ["0", "2"]
    assert loss_curve([], 10) is None
    # Steps past the planned total (max_steps changed on resume) stretch the axis instead of leaving the box.
    assert loss_curve([[8, 1.0]], 4).points == "174.0,8.0"


# --- In a real browser ------------------------------------------------------------------------------------------

@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@needs_chromium
def test_the_page_in_a_browser(browser, live_server, tmp_path):
    """Screenshots saved as /tmp/finetune-page.png, /tmp/finetune-jobs.png and /tmp/validation-students.png (the
    side-by-side on the validation page) for a person to look at."""
    project, _, _, done = done_job(tmp_path / "bundle", slug="fine")
    admin = members(project)[ADMIN]
    FineTuneJob.objects.create(
        project=project, training_set=done.training_set, teacher=done.teacher, base_model=done.base_model,
        student_name="student-2", status="running", started_at=timezone.now(), heartbeat_at=timezone.now(),
        examples=8, step=3, total_steps=10, loss_history=[[1, 2.4], [2, 2.1], [3, 1.6]], eta_s=42.0,
        examples_per_s=2.5, requested_by=admin)
    page_, errors = log_in(browser, live_server, admin.username)
    page_.set_viewport_size({"width": 1280, "height": 900})
    page_.goto(f"{live_server.url}{page(project)}")
    assert page_.locator("[data-comparison] tbody tr").count() == 3
    assert page_.locator("svg[data-loss-curve] polyline").count() == 2
    page_.screenshot(path="/tmp/finetune-page.png", full_page=True)
    page_.locator("#jobs").screenshot(path="/tmp/finetune-jobs.png")
    page_.goto(f"{live_server.url}{reverse('labeling:validation', args=[project.slug])}")
    assert page_.locator("#students [data-comparison] tbody tr").count() == 3
    page_.locator("#students").screenshot(path="/tmp/validation-students.png")
    FineTuneJob.objects.filter(student_name="student-2").update(status="cancelled", finished_at=timezone.now())
    assert errors == []
    page_.close()


def test_the_validation_page_shows_each_students_side_by_side(client, tmp_path):
    project, _, _, job = done_job(tmp_path / "bundle")
    client.force_login(members(project)[ADMIN])
    html = client.get(reverse("labeling:validation", args=[project.slug])).content.decode()
    section = re.search(r'<section id="students">.*?</section>', html, re.DOTALL).group(0)
    wanted = expected_agreement(STUDENT_P)
    assert row_cells(section, job, "student")[2:4] == ["8", f"{wanted['auroc']:.3f}"]
    assert row_cells(section, job, "teacher")[-3:] == ["8", "1.000", "1.000"]

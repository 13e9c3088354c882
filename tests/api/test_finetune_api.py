"""The distillation API through DRF's test client: training sets listed with their counts, sampled from a run,
imported from a DIRAS file, deleted (or refused while a job uses them) and exported as JSONL in SmolLM2's template
with the teacher's answers; fine-tuning jobs listed, requested (pending, nothing trained here), shown with their
loss history and the side-by-side (hidden from blind-first experts), cancelled, resumed (refused while the worker
reports) and asked to score the pool; errors as 400 with the service's message; the OpenAPI schema."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from drf_spectacular.validation import validate_schema
from rest_framework.test import APIClient
from sklearn.metrics import roc_auc_score

from labeling.models import FineTuneJob, ScoringJob, TrainingExample, TrainingSet
from models_llm.bundled import minilm_folder
from models_llm.finetune.chat import teacher_answer
from tests.finetune_fixtures import BANANAS, OTHERS, base_folder, rule_project, teacher_p
from tests.url_matrix import ADMIN, EXPERT, VIEWER, build_world
from tests.views.test_finetune import STUDENT_P, done_job, members

pytestmark = pytest.mark.django_db
DATA = Path(__file__).resolve().parents[2] / "data" / "diras-distill"


def api_as(user) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


def url(project, name: str, *args, **query) -> str:
    address = reverse(f"api:{name}", args=[project.slug, *args])
    return address + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def lines(response) -> list[dict]:
    return [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]


# --- Training sets ----------------------------------------------------------------------------------------------

def test_members_list_the_sets_with_their_counts():
    world = build_world()
    body = api_as(world.users[EXPERT]).get(url(world.project, "training-set-list")).json()
    assert [(s["name"], s["train_count"], s["held_out_count"], s["file_count"], s["top_count"]) for s in body] == [
        ("set-b", 0, 0, 0, 0), ("set-a", 1, 0, 1, 0)]


def test_admins_sample_a_run_and_errors_are_400_with_the_reason():
    world = build_world()
    api = api_as(world.users[ADMIN])
    created = api.post(url(world.project, "training-set-list"),
                       {"name": "sampled", "run": "run-a", "top": 2, "inside": 2, "outside": 1, "held_out": 0}, format="json")
    assert created.status_code == 201, created.json()
    # run-a ranks the query's three passages: its top 2, and the third drawn at random.
    assert (created.json()["top_count"], created.json()["random_count"], created.json()["train_count"]) == (2, 1, 3)
    assert created.json()["parameters"]["run"] == "run-a" and created.json()["created_by"] == ADMIN
    assert {key: created.json()["parameters"][key] for key in ("inside_drawn", "outside_drawn", "short_queries")} == {
        "inside_drawn": 2, "outside_drawn": 1, "short_queries": 0}
    renamed = api.post(url(world.project, "training-set-list"), {"name": "old", "run": "run-a", "random": 1},
                       format="json")
    assert renamed.status_code == 400 and "renamed: `inside`" in str(renamed.json())
    taken = api.post(url(world.project, "training-set-list"), {"name": "sampled", "run": "run-a"}, format="json")
    assert taken.status_code == 409
    assert taken.json()["message"] == f"project {world.project.slug!r} already has a training set 'sampled': choose " \
                                     "another name"
    no_dense = api.post(url(world.project, "training-set-list"), {"name": "other"}, format="json")
    assert no_dense.status_code == 409 and "has no dense run to sample" in no_dense.json()["message"]
    unknown = api.post(url(world.project, "training-set-list"), {"name": "x", "run": "nope"}, format="json")
    assert unknown.status_code == 404 and "nope" in unknown.json()["message"]
    assert api_as(world.users[VIEWER]).post(url(world.project, "training-set-list"), {"name": "v"},
                                            format="json").status_code == 403


def test_a_diras_file_is_imported_and_a_bad_one_refused_by_line():
    world = build_world()
    api = api_as(world.users[ADMIN])
    with (DATA / "qampari_train_data.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    response = api.post(url(world.project, "training-set-import"), {
        "name": "qampari", "held_out": 0.25, "seed": 3,
        "file": SimpleUploadedFile("qampari.csv", (DATA / "qampari_train_data.csv").read_bytes())}, format="multipart")
    assert response.status_code == 201, response.json()
    body = response.json()
    # Four questions, five paragraphs each: one question (round(0.25 * 4)) held out, whole.
    assert (body["file_count"], body["train_count"], body["held_out_count"]) == (len(rows), 15, 5)
    held = set(TrainingExample.objects.filter(training_set__name="qampari", split="held_out")
               .values_list("group", flat=True))
    assert len(held) == 1 and held <= {row["question"] for row in rows}
    bad = api.post(url(world.project, "training-set-import"), {
        "name": "bad", "file": SimpleUploadedFile("bad.csv", b"question,document,guess,confidence\nq,p,Maybe,0.5\n")},
        format="multipart")
    assert bad.status_code == 422 and bad.json()["message"].startswith("bad.csv:2: ")
    assert not TrainingSet.objects.filter(name="bad").exists()


def test_a_training_set_name_that_is_not_one_line_is_refused():
    """Issue 30, finding 7, through the API: the sample and the import answer 422 naming the character."""
    world = build_world()
    api = api_as(world.users[ADMIN])
    name = "nl\r\nSet-Cookie: x=1"
    sampled = api.post(url(world.project, "training-set-list"), {"name": name, "run": "run-a"}, format="json")
    assert sampled.status_code == 422 and sampled.json()["message"].startswith(
        "the training set name holds a control character (U+000D) at position 3")
    imported = api.post(url(world.project, "training-set-import"), {
        "name": name, "file": SimpleUploadedFile("rag.csv", (DATA / "rag_bench_train_data.csv").read_bytes())},
        format="multipart")
    assert imported.status_code == 422 and "(U+000D) at position 3" in imported.json()["message"]
    full_width = api.post(url(world.project, "training-set-list"), {"name": "\uff53et-a", "run": "run-a"},
                          format="json")
    assert full_width.status_code == 409 and "already has a training set 'set-a'" in full_width.json()["message"]
    assert set(TrainingSet.objects.values_list("name", flat=True)) == {"set-a", "set-b"}


def test_a_set_in_use_is_not_deleted():
    world = build_world()
    api = api_as(world.users[ADMIN])
    refused = api.delete(url(world.project, "training-set-detail", "set-b"))
    assert refused.status_code == 422 and "is used by 1 fine-tuning job(s) (student-a)" in refused.json()["message"]
    assert api.delete(url(world.project, "training-set-detail", "set-a")).status_code == 204
    assert api.delete(url(world.project, "training-set-detail", "set-a")).status_code == 404
    assert list(TrainingSet.objects.values_list("name", flat=True)) == ["set-b"]


def test_the_export_teaches_the_teachers_answers_in_the_students_template(tmp_path):
    project, _, _ = rule_project(tmp_path / "bundle")
    users = members(project)
    api = api_as(users[VIEWER])
    response = api.get(url(project, "training-set-export", "rule", teacher="teacher", student=base_folder()))
    assert response.status_code == 200 and response["Content-Type"].startswith("application/x-ndjson")
    assert 'filename="rule-train.jsonl"' in response["Content-Disposition"]
    train = lines(response)
    # q1's eight pairs, each answered as the teacher judged its paragraph (the banana rule).
    assert len(train) == 8 and all(set(line) >= {"input", "output"} for line in train)
    assert {line["query"] for line in train} == {"q1"} and {line["split"] for line in train} == {"train"}
    texts = {f"d{i}": text for i, text in enumerate(BANANAS + OTHERS)}
    for line in train:
        assert line["output"].startswith(teacher_answer(teacher_p(texts[line["passage"]])))
        assert texts[line["passage"]] in line["input"]
    both = lines(api.get(url(project, "training-set-export", "rule", teacher="teacher", split="all")))
    assert len(both) == 16 and {line["split"] for line in both} == {"train", "held_out"}

    no_teacher = api.get(url(project, "training-set-export", "rule"))
    assert no_teacher.status_code == 422 and "name the teacher judge" in no_teacher.json()["message"]
    bad_split = api.get(url(project, "training-set-export", "rule", teacher="teacher", split="test"))
    assert bad_split.status_code == 400 and "split" in bad_split.json()["errors"]
    outside = api.get(url(project, "training-set-export", "rule", teacher="teacher", student="/etc"))
    assert outside.status_code == 422 and "not under a model root" in outside.json()["message"]
    assert api_as(users[EXPERT]).get(url(project, "training-set-export", "rule")).status_code == 403


# --- Fine-tuning jobs -------------------------------------------------------------------------------------------

def test_a_fine_tuning_request_is_a_pending_job_and_a_refused_one_says_why(tmp_path):
    project, _, _ = rule_project(tmp_path / "bundle")
    users = members(project)
    api = api_as(users[ADMIN])
    request = {"training_set": "rule", "teacher": "teacher", "student_name": "pupil",
               "hyperparameters": {"r": 8, "max_steps": 3, "device": "cpu"}}
    created = api.post(url(project, "finetune-list"), request, format="json")
    assert created.status_code == 202, created.json()
    body = created.json()
    assert (body["status"], body["examples"], body["total_steps"], body["teacher"], body["base_model"]) == (
        "pending", 8, 3, "teacher", base_folder())
    assert body["hyperparameters"]["r"] == 8 and body["hyperparameters"]["alpha"] == 16  # the rest DIRAS's
    assert body["student_kind"] == "lora"  # the default
    listed = api_as(users[EXPERT]).get(url(project, "finetune-list")).json()
    assert [(job["student_name"], job["status"]) for job in listed] == [("pupil", "pending")]

    again = api.post(url(project, "finetune-list"), request, format="json")
    assert again.status_code == 409 and again.json()["message"] == (
        "a fine-tuning job is making a student named 'pupil' already")
    unknown = api.post(url(project, "finetune-list"), {**request, "student_name": "p2", "hyperparameters": {"rank": 8}},
                       format="json")
    assert unknown.status_code == 422 and "unknown fine-tuning settings ['rank']" in unknown.json()["message"]
    assert FineTuneJob.objects.count() == 1


def test_a_crossencoder_student_is_requested_on_the_bundled_minilm_with_its_settings(tmp_path):
    project, _, _ = rule_project(tmp_path / "bundle")
    users = members(project)
    api = api_as(users[ADMIN])
    request = {"training_set": "rule", "teacher": "teacher", "student_name": "ce", "student": "crossencoder",
               "hyperparameters": {"epochs": 3, "learning_rate": 5e-5, "batch_size": 4, "max_length": 128,
                                   "expert_weight": 2.0, "use_definition": False}}
    created = api.post(url(project, "finetune-list"), request, format="json")
    assert created.status_code == 202, created.json()
    body = created.json()
    # q1's eight train pairs in batches of 4: 2 steps an epoch, 3 epochs.
    assert (body["student_kind"], body["base_model"], body["status"], body["examples"], body["total_steps"]) == (
        "crossencoder", str(minilm_folder()), "pending", 8, 6)
    settings = body["hyperparameters"]
    assert (settings["epochs"], settings["learning_rate"], settings["batch_size"], settings["max_length"],
            settings["expert_weight"], settings["use_definition"]) == (3.0, 5e-5, 4, 128, 2.0, False)
    assert settings["warmup_ratio"] == 0.1 and "r" not in settings  # the rest: the cross-encoder's defaults
    listed = api_as(users[VIEWER]).get(url(project, "finetune-list")).json()
    assert [(job["student_name"], job["student_kind"]) for job in listed] == [("ce", "crossencoder")]
    detail = api_as(users[VIEWER]).get(url(project, "finetune-detail", body["id"])).json()
    assert detail["student_kind"] == "crossencoder"

    for student, hyperparameters, message in (
            ("crossencoder", {"r": 8}, "unknown cross-encoder student settings ['r']"),
            ("crossencoder", {"max_length": 8}, "the maximum length must be 16 to 8192 tokens"),
            ("lora", {"expert_weight": 2.0}, "unknown fine-tuning settings ['expert_weight']")):
        refused = api.post(url(project, "finetune-list"), {**request, "student_name": "ce2", "student": student,
                                                           "hyperparameters": hyperparameters}, format="json")
        assert refused.status_code == 422 and message in refused.json()["message"], refused.json()
    bad_kind = api.post(url(project, "finetune-list"), {**request, "student_name": "ce2", "student": "bert"},
                        format="json")
    assert bad_kind.status_code == 400 and "student" in bad_kind.json()["errors"]
    assert FineTuneJob.objects.count() == 1


@pytest.mark.parametrize("endpoint", ["finetune-list", "training-set-export"])
def test_a_teacher_for_a_set_imported_with_its_answers_is_refused(tmp_path, endpoint):
    # The file holds the teacher's answers: a judge named as the teacher would teach nothing, yet be recorded (and
    # compared with the student) as the teacher.
    project, _, _ = rule_project(tmp_path / "bundle")
    api = api_as(members(project)[ADMIN])
    imported = api.post(url(project, "training-set-import"), {
        "name": "diras", "file": SimpleUploadedFile("qampari.csv", (DATA / "qampari_train_data.csv").read_bytes())},
        format="multipart")
    assert imported.status_code == 201, imported.json()

    def ask(**teacher):
        if endpoint == "finetune-list":
            return api.post(url(project, endpoint), {"training_set": "diras", "student_name": "pupil",
                                                     "hyperparameters": {"r": 8, "max_steps": 3}, **teacher},
                            format="json")
        return api.get(url(project, endpoint, "diras", student=base_folder(), **teacher))

    refused = ask(teacher="teacher")
    assert refused.status_code == 422 and refused.json()["code"] == "unprocessable"
    assert refused.json()["message"] == ("training set 'diras' was imported with its teacher's answers and holds no "
                                         "pair for judge 'teacher' to answer: leave the teacher out")
    assert not FineTuneJob.objects.exists()
    answered = ask()
    assert answered.status_code == (202 if endpoint == "finetune-list" else 200)
    if endpoint == "finetune-list":
        assert answered.json()["teacher"] is None and answered.json()["examples"] > 0
    else:
        assert len(lines(answered)) == TrainingExample.objects.filter(training_set__name="diras", split="train").count()


def test_a_done_job_shows_its_loss_and_the_side_by_side_to_readers_only(tmp_path):
    project, _, _, job = done_job(tmp_path / "bundle")
    users = members(project)
    body = api_as(users[VIEWER]).get(url(project, "finetune-detail", job.id)).json()
    assert body["loss_history"] == [[1, 2.0], [2, 1.5], [3, 1.0], [4, 0.5]] and body["last_loss"] == 0.5
    assert body["student"] == "student" and body["status"] == "done"
    comparison = body["comparison"]
    assert (comparison["pairs"], comparison["gold_pairs"]) == (8, 8)
    columns = {column["role"]: column for column in comparison["columns"]}
    y = [int(teacher_p(text) > 0.5) for text in BANANAS + OTHERS]
    assert columns["student"]["versus_teacher"]["auroc"] == pytest.approx(roc_auc_score(y, STUDENT_P))
    assert columns["teacher"]["versus_teacher"] is None and columns["teacher"]["versus_gold"]["accuracy"] == 1.0
    assert columns["base model"]["judge"] == "student (base)"
    hidden = api_as(users[EXPERT]).get(url(project, "finetune-detail", job.id)).json()
    assert hidden["comparison"] is None and hidden["loss_history"] == body["loss_history"]


def test_cancel_resume_and_score_the_pool(tmp_path):
    world = build_world()
    api = api_as(world.users[ADMIN])
    job = world.finetune_job
    resumed = api.post(url(world.project, "finetune-resume", job.id))
    assert resumed.status_code == 409 and resumed.json()["message"].startswith(
        f"fine-tuning job {job.id} is running (its worker reported at")
    no_student = api.post(url(world.project, "finetune-score-pool", job.id))
    assert no_student.status_code == 409 and no_student.json()["message"] == f"fine-tuning job {job.id} has no student judge"
    cancelled = api.post(url(world.project, "finetune-cancel", job.id))
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    finished = api.post(url(world.project, "finetune-resume", job.id))
    assert finished.status_code == 409 and "is finished: nothing to resume" in finished.json()["message"]
    assert api_as(world.users[EXPERT]).post(url(world.project, "finetune-cancel", job.id)).status_code == 403

    project, _, _, done = done_job(tmp_path / "bundle")
    admin_api = api_as(members(project)[ADMIN])
    scored = admin_api.post(url(project, "finetune-score-pool", done.id))
    assert scored.status_code == 201 and scored.json()["judge"] == "student"
    assert ScoringJob.objects.get(id=scored.json()["id"]).judge_id == done.student_id
    # A second click resumes the student's running job instead of making another.
    assert admin_api.post(url(project, "finetune-score-pool", done.id)).status_code == 200
    assert ScoringJob.objects.filter(judge=done.student).count() == 1


def test_errors_are_hidden_from_members_who_are_not_admins():
    world = build_world()
    FineTuneJob.objects.filter(id=world.finetune_job.id).update(status="failed", error="disk full at /srv/secret")
    seen = api_as(world.users[VIEWER]).get(url(world.project, "finetune-list")).json()
    assert seen[0]["error"] == "the fine-tuning failed (a project admin sees the reason)"
    assert api_as(world.users[ADMIN]).get(url(world.project, "finetune-list")).json()[0]["error"] == (
        "disk full at /srv/secret")


def test_the_schema_describes_the_distillation_endpoints():
    world = build_world()
    schema = api_as(world.users[ADMIN]).get(reverse("api:schema"), {"format": "json"}).json()
    validate_schema(schema)
    paths = schema["paths"]
    assert {"/api/projects/{slug}/training-sets/", "/api/projects/{slug}/training-sets/import/",
            "/api/projects/{slug}/training-sets/{training_set}/",
            "/api/projects/{slug}/training-sets/{training_set}/export.jsonl", "/api/projects/{slug}/finetune/",
            "/api/projects/{slug}/finetune/{finetune_job_id}/", "/api/projects/{slug}/finetune/{finetune_job_id}/cancel/",
            "/api/projects/{slug}/finetune/{finetune_job_id}/resume/",
            "/api/projects/{slug}/finetune/{finetune_job_id}/score-pool/"} <= set(paths)
    kinds = schema["components"]["schemas"]["StudentKindEnum"]["enum"]
    assert kinds == ["lora", "crossencoder"]
    request = schema["components"]["schemas"]["FineTuneCreateRequest"]["properties"]["student"]
    assert request["allOf"] == [{"$ref": "#/components/schemas/StudentKindEnum"}] and request["default"] == "lora"
    assert "student_kind" in schema["components"]["schemas"]["FineTuneJob"]["required"]
    export = paths["/api/projects/{slug}/training-sets/{training_set}/export.jsonl"]["get"]
    assert {p["name"] for p in export["parameters"]} >= {"student", "teacher", "split"}
    assert "application/x-ndjson" in export["responses"]["200"]["content"]
    # A training file too large to read in the request: 202 with the import job that stores it.
    imported = paths["/api/projects/{slug}/training-sets/import/"]["post"]["responses"]
    assert imported["202"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/BundleImportJob"}
    assert "training_set_name" in schema["components"]["schemas"]["BundleImportJob"]["properties"]

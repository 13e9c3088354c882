"""`manage.py finetune_judge`: inline from a teacher's judgments and from a DIRAS file, a cross-encoder student
(queued with its settings, and run inline), and its refusals as CommandErrors naming the problem."""
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from labeling.models import FineTuneJob, Judge, TrainingExample
from models_llm.bundled import minilm_folder
from tests.finetune_fixtures import base_folder, rule_project

pytestmark = pytest.mark.django_db
DATA = Path(__file__).resolve().parents[2] / "data" / "diras-distill"
ONE_STEP = ["--max-steps", "1", "--lora-r", "4", "--batch-size", "4", "--micro-batch", "4"]


def run(*args) -> str:
    out = StringIO()
    call_command("finetune_judge", *args, stdout=out)
    return out.getvalue()


def test_inline_from_the_teachers_judgments_makes_the_student_judge(tmp_path):
    project, _, _ = rule_project(tmp_path / "bundle")
    out = run("--project", project.slug, "--training-set", "rule", "--teacher", "teacher", "--base", base_folder(),
              "--name", "student", "--inline", "--max-length", "1500", "--target-max-length", "64", *ONE_STEP)
    job = FineTuneJob.objects.get()
    assert job.status == FineTuneJob.Status.DONE and job.step == 1 and job.hyperparameters["r"] == 4
    # A LoRA student's --max-length is DIRAS App. F's source max length; none of these short prompts is cut.
    assert (job.hyperparameters["source_max_length"], job.hyperparameters["target_max_length"]) == (1500, 64)
    assert job.hyperparameters["truncated_examples"] == 0
    assert f"Judge 'student' made (adapter {job.adapter})" in out
    assert Judge.objects.filter(project=project, name__in=["student", "student (base)"]).count() == 2


def test_from_a_diras_file_the_set_is_imported_and_learnt_without_a_teacher(tmp_path):
    project, _, _ = rule_project(tmp_path / "bundle")
    out = run("--project", project.slug, "--training-set", "asqa", "--from-file", str(DATA / "asqa_train_data.csv"),
              "--base", base_folder(), "--name", "asqa-student", "--inline", *ONE_STEP)
    assert "Training set 'asqa' imported from asqa_train_data.csv." in out
    job = FineTuneJob.objects.get()
    assert job.teacher is None and job.status == FineTuneJob.Status.DONE
    assert job.examples == TrainingExample.objects.filter(training_set=job.training_set, split="train").count() > 0


def test_a_crossencoder_student_is_queued_on_the_bundled_minilm_with_its_settings(tmp_path):
    project, _, _ = rule_project(tmp_path / "bundle")
    out = run("--project", project.slug, "--training-set", "rule", "--teacher", "teacher", "--student", "crossencoder",
              "--name", "ce", "--epochs", "3", "--learning-rate", "5e-5", "--batch-size", "4", "--max-length", "128",
              "--expert-weight", "2")
    job = FineTuneJob.objects.get()
    # q1's eight train pairs in batches of 4: 2 steps an epoch, 3 epochs.
    assert f"Job {job.id}: fine-tuning 'ce' queued for the workers (6 steps)." in out
    assert (job.student_kind, job.base_model, job.status, job.examples) == (
        "crossencoder", str(minilm_folder()), "pending", 8)
    settings = job.hyperparameters
    assert (settings["epochs"], settings["learning_rate"], settings["batch_size"], settings["max_length"],
            settings["expert_weight"]) == (3.0, 5e-5, 4, 128, 2.0)
    assert settings["warmup_ratio"] == 0.1 and "r" not in settings  # the rest: the cross-encoder's defaults


def test_inline_a_crossencoder_student_becomes_a_crossencoder_judge(tmp_path, settings):
    settings.ADAPTER_CACHE_DIR = tmp_path / "cache"
    project, _, _ = rule_project(tmp_path / "bundle")
    out = run("--project", project.slug, "--training-set", "rule", "--teacher", "teacher", "--student", "crossencoder",
              "--name", "ce", "--epochs", "2", "--batch-size", "8", "--max-length", "32", "--inline")
    job = FineTuneJob.objects.get()
    assert job.status == FineTuneJob.Status.DONE and job.step == 2
    assert f"Judge 'ce' made (model {job.adapter})" in out and job.adapter.startswith(f"adapters/{project.id}/")
    judges = Judge.objects.filter(project=project, name__in=["ce", "ce (base)"])
    assert {judge.backend for judge in judges} == {Judge.Backend.CROSSENCODER} and judges.count() == 2


@pytest.mark.parametrize("args, message", [
    (["--training-set", "rule", "--teacher", "nobody"], "has no judge 'nobody'"),
    (["--training-set", "missing", "--teacher", "teacher"], "has no training set 'missing'"),
    (["--training-set", "rule", "--teacher", "teacher", "--epochs", "0"], "epochs must be in"),
    (["--training-set", "x", "--teacher", "teacher", "--from-file", "nowhere.csv"], "carries the teacher's answers"),
    (["--training-set", "x", "--from-file", "nowhere.csv"], "nowhere.csv: no such file"),
    (["--training-set", "rule", "--teacher", "teacher", "--student", "crossencoder", "--lora-r", "4",
      "--micro-batch", "2"], r"^--lora-r, --micro-batch: not a setting of a crossencoder student$"),
    (["--training-set", "rule", "--teacher", "teacher", "--student", "crossencoder", "--target-max-length", "64"],
     r"^--target-max-length: not a setting of a crossencoder student$"),
    (["--training-set", "rule", "--teacher", "teacher", "--max-length", "8"],
     "the source max length must be 16 to 131072 tokens"),
    (["--training-set", "rule", "--teacher", "teacher", "--expert-weight", "2"],
     r"^--expert-weight: not a setting of a lora student$"),
    (["--training-set", "rule", "--teacher", "teacher", "--student", "crossencoder", "--max-length", "8"],
     "the maximum length must be 16 to 8192 tokens"),
    (["--training-set", "rule", "--teacher", "teacher", "--student", "bert"], "invalid choice: 'bert'"),
])
def test_refusals_name_the_problem_and_store_nothing(tmp_path, args, message):
    project, _, _ = rule_project(tmp_path / "bundle")
    with pytest.raises(CommandError, match=message):
        run("--project", project.slug, "--base", base_folder(), "--name", "student", *args)
    assert not FineTuneJob.objects.exists()


def test_resume_refuses_a_finished_or_unknown_job(tmp_path):
    project, _, _ = rule_project(tmp_path / "bundle")
    with pytest.raises(CommandError, match="has no fine-tuning job 99"):
        run("--project", project.slug, "--resume", "99")
    with pytest.raises(CommandError, match="--training-set, --base, --name are required"):
        run("--project", project.slug)
    with pytest.raises(CommandError, match="--training-set, --name are required"):
        run("--project", project.slug, "--student", "crossencoder")

"""Fine-tuning jobs with the real parts: SmolLM2-135M taught a teacher's rule with LoRA through the Trainer, the
adapter stored through Django's storage and loaded again in a fresh process, the student made a judge; requests
refused with their reason; a job cancelled mid-run writes nothing."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from django.conf import settings as django_settings
from django.urls import reverse

from labeling.llm_adapter import judge_config, scorer_for
from labeling.models import FineTuneJob, Judge
from labeling.selectors.finetune import base_judge_name, distill_comparison
from labeling.services.finetune import (
    FinetuneJobError,
    finetune_cancel,
    finetune_create,
    finetune_resume,
    finetune_run,
)
from models_llm.finetune.lora import LoraSettings
from models_llm.finetune.training import ProgressReport
from tests.factories import MembershipFactory, UserFactory
from tests.finetune_fixtures import base_folder, rule_inputs, rule_project, teacher_p

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
# Enough for SmolLM2-135M to learn the rule on 8 examples in 32 full-batch steps (about two minutes on 2 CPU
# cores). 16 steps without warm-up learned it from some LoRA initialisations only (seeds 1 and 2 left the student
# near 0.5); with these settings seeds 1, 2 and 3 all end at a mean error of about 0.04.
QUICK = {"r": 8, "alpha": 16, "dropout": 0.0, "learning_rate": 5e-4, "batch_size": 8, "micro_batch": 8,
         "max_steps": 32, "warmup_ratio": 0.1, "save_steps": 100}


def mean_error(p: list[float], teacher: list[float]) -> float:
    return float(np.mean(np.abs(np.array(p) - np.array(teacher))))


def test_the_student_learns_the_teachers_rule(tmp_path, settings):
    settings.ADAPTER_CACHE_DIR = tmp_path / "cache-here"
    project, teacher, training_set = rule_project(tmp_path / "bundle")
    job = finetune_create(project=project, training_set=training_set, teacher=teacher, base_model=base_folder(),
                          student_name="student", hyperparameters=QUICK)
    assert job.examples == 8 and job.total_steps == 32
    job = finetune_run(job_id=job.id)
    assert job.status == FineTuneJob.Status.DONE, job.error
    assert job.step == 32 and [step for step, _ in job.loss_history] == list(range(1, 33))
    assert job.loss_history[-1][1] < job.loss_history[0][1] / 4, job.loss_history
    student, base = job.student, Judge.objects.get(project=project, name=base_judge_name("student"))
    assert judge_config(student).adapter and not judge_config(base).adapter and judge_config(student).method == "tok"

    train = rule_inputs(project, "q1")
    wanted = [teacher_p(pair.passage) for pair in train]
    before = [v.p for v in scorer_for(base).score(train)]
    after = [v.p for v in scorer_for(student).score(train)]
    # The base model says about 0.6 to everything (mean error ~0.47); the student follows the rule.
    assert mean_error(after, wanted) < mean_error(before, wanted) - 0.2, (before, after)
    yes = [p for p, w in zip(after, wanted) if w > 0.5]
    no = [p for p, w in zip(after, wanted) if w < 0.5]
    assert min(yes) > max(no), (yes, no)
    held_out = rule_inputs(project, "q2")  # another wording of the question, never trained on
    held = [v.p for v in scorer_for(student).score(held_out)]
    assert np.mean([p for p, pair in zip(held, held_out) if teacher_p(pair.passage) > 0.5]) > np.mean(
        [p for p, pair in zip(held, held_out) if teacher_p(pair.passage) < 0.5]) + 0.2


def test_a_fresh_process_fetches_the_students_adapter_from_storage_and_gives_the_same_p(tmp_path, settings):
    """Any adapter will do here (the rule is the test above's): one step on the top two layers, at a learning rate
    high enough that the student's P differs from the base model's."""
    settings.ADAPTER_CACHE_DIR = tmp_path / "cache-here"
    project, teacher, training_set = rule_project(tmp_path / "bundle")
    job = finetune_create(project=project, training_set=training_set, teacher=teacher, base_model=base_folder(),
                          student_name="student", hyperparameters={**QUICK, "max_steps": 1, "warmup_ratio": 0.0,
                                                                   "learning_rate": 5e-3, "top_layers": 2})
    job = finetune_run(job_id=job.id)
    assert job.status == FineTuneJob.Status.DONE, job.error
    train = rule_inputs(project, "q1")
    after = [v.p for v in scorer_for(job.student).score(train)]
    before = [v.p for v in scorer_for(Judge.objects.get(project=project, name=base_judge_name("student"))).score(train)]
    assert max(abs(a - b) for a, b in zip(after, before)) > 0.01, (before, after)

    # A fresh process with an empty adapter cache fetches the adapter from storage.
    script = (
        "import json, sys, django; django.setup()\n"
        "from labeling.storage_folders import adapter_local\n"
        "from models_llm.backends.hf import HFScorer\n"
        "from models_llm.types import JudgeConfig, PairInput\n"
        "args = json.loads(sys.argv[1])\n"
        "scorer = HFScorer(JudgeConfig(backend='hf', model=args['base'], method='tok',"
        " adapter=adapter_local(args['adapter'])))\n"
        "print(json.dumps([v.p for v in scorer.score([PairInput(**pair) for pair in args['pairs']])]))\n"
    )
    fresh_cache = tmp_path / "cache-elsewhere"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "annotator.settings", "DEBUG": "1",
           "MEDIA_ROOT": str(django_settings.MEDIA_ROOT), "ADAPTER_CACHE_DIR": str(fresh_cache)}
    args = {"base": base_folder(), "adapter": job.adapter, "pairs": [pair.__dict__ for pair in train]}
    out = subprocess.run([sys.executable, "-c", script, json.dumps(args)], check=False, cwd=ROOT, env=env,
                         capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == pytest.approx(after, abs=1e-5)
    assert any(fresh_cache.iterdir()), "the fresh process did not fetch its own copy"


def test_the_side_by_side_compares_base_student_and_teacher_on_the_same_pairs(tmp_path):
    project, teacher, training_set = rule_project(tmp_path / "bundle")
    job = finetune_create(project=project, training_set=training_set, teacher=teacher, base_model=base_folder(),
                          student_name="student", hyperparameters={**QUICK, "max_steps": 1})
    job = finetune_run(job_id=job.id)
    held_out = rule_inputs(project, "q2")
    for judge in (job.student, Judge.objects.get(project=project, name=base_judge_name("student"))):
        from labeling.services.scoring import scoring_job_create
        from labeling.services.scoring_chunks import scoring_chunk_run

        scoring = scoring_job_create(project=project, judge=judge, scope="selection",
                                     pair_ids=[pair.pair_id for pair in held_out])
        for chunk in scoring.chunks.all():
            scoring_chunk_run(chunk_id=chunk.id)
    comparison = distill_comparison(job)
    assert comparison.pairs == 8 and [c.role for c in comparison.columns] == ["base model", "student", "teacher"]
    base_p = [v.p for v in scorer_for(comparison.columns[0].judge).score(held_out)]
    reference = [int(teacher_p(pair.passage) >= 0.5) for pair in held_out]
    from sklearn.metrics import brier_score_loss, roc_auc_score

    assert comparison.columns[0].versus_teacher.auroc == pytest.approx(roc_auc_score(reference, base_p), abs=1e-6)
    assert comparison.columns[0].versus_teacher.brier == pytest.approx(brier_score_loss(reference, base_p), abs=1e-6)
    assert comparison.columns[2].versus_teacher is None  # the teacher is the reference


def test_requests_that_cannot_run_are_refused_with_the_reason(tmp_path, settings):
    project, teacher, training_set = rule_project(tmp_path / "bundle")
    ok = {"project": project, "training_set": training_set, "teacher": teacher, "base_model": base_folder(),
          "student_name": "student"}
    with pytest.raises(FinetuneJobError, match="not under a model root"):
        finetune_create(**{**ok, "base_model": str(tmp_path)})
    with pytest.raises(FinetuneJobError, match="r must be 1 to 1024"):
        finetune_create(**ok, hyperparameters={"r": 0})
    with pytest.raises(FinetuneJobError, match="unknown fine-tuning settings"):
        finetune_create(**ok, hyperparameters={"rank": 8})
    with pytest.raises(FinetuneJobError, match="has a judge named 'teacher'"):
        finetune_create(**{**ok, "student_name": "teacher"})
    silent = Judge.objects.create(project=project, name="silent", backend=Judge.Backend.IMPORT)
    with pytest.raises(FinetuneJobError, match="no train example with a teacher's answer: score it with 'silent'"):
        finetune_create(**{**ok, "teacher": silent})
    first = finetune_create(**ok)
    with pytest.raises(FinetuneJobError, match="making a student named 'student' already"):
        finetune_create(**ok)
    with pytest.raises(FinetuneJobError, match="is finished: nothing to resume"):
        finetune_resume(job=finetune_cancel(job=first))
    assert FineTuneJob.objects.count() == 1 and not Judge.objects.filter(name="student").exists()


def test_diras_app_f_settings_are_the_defaults_and_the_step_count_is_the_trainers():
    s = LoraSettings()
    assert (s.r, s.alpha, s.dropout, s.target_modules) == (64, 16, 0.1, "all-linear")
    assert (s.learning_rate, s.scheduler, s.warmup_ratio, s.adam_beta2) == (2e-4, "constant_with_warmup", 0.03, 0.999)
    assert (s.max_grad_norm, s.weight_decay, s.batch_size, s.epochs) == (0.3, 0.0, 32, 2.0)
    assert (s.source_max_length, s.target_max_length) == (2048, 512)
    # 100 examples, micro batches of 4 accumulated 8 times: 25 micro batches -> 4 optimizer steps per epoch.
    assert s.total_steps(100) == 8 and LoraSettings(max_steps=5).total_steps(100) == 5


def test_a_job_counts_the_examples_whose_passage_it_cut_to_the_source_length(tmp_path, client):
    """DIRAS App. F's source max length: a prompt over it has its passage cut, counted on the job, not an error."""
    from transformers import AutoTokenizer

    from labeling.selectors.finetune import teacher_examples
    from models_llm.finetune.chat import render

    project, teacher, training_set = rule_project(tmp_path / "bundle")
    tokenizer = AutoTokenizer.from_pretrained(base_folder(), local_files_only=True)
    examples = teacher_examples(training_set, teacher=teacher).examples
    full = [len(tokenizer(render(tokenizer, e)[0], add_special_tokens=False)["input_ids"]) for e in examples]
    bare = [len(tokenizer(render(tokenizer, e)[0].replace(e.passage, ""), add_special_tokens=False)["input_ids"])
            for e in examples]
    limit = sorted(full)[len(full) // 2] - 1  # by hand: about half the prompts are over it, none without passage
    assert max(bare) < limit and 0 < sum(length > limit for length in full) < len(full)
    job = finetune_create(project=project, training_set=training_set, teacher=teacher, base_model=base_folder(),
                          student_name="student", hyperparameters={**QUICK, "max_steps": 1,
                                                                   "source_max_length": limit})
    job = finetune_run(job_id=job.id)
    assert job.status == FineTuneJob.Status.DONE, job.error
    cut = sum(length > limit for length in full)
    assert job.hyperparameters["truncated_examples"] == cut
    admin = UserFactory()
    MembershipFactory(project=project, user=admin, role="admin")
    client.force_login(admin)
    page = client.get(reverse("labeling:finetune", args=[project.slug])).content.decode()
    assert f"{cut} with the passage cut to {limit} prompt tokens" in page


def test_a_job_cancelled_while_it_trains_stops_and_writes_no_adapter_or_judge(tmp_path, monkeypatch):
    project, teacher, training_set = rule_project(tmp_path / "bundle")
    job = finetune_create(project=project, training_set=training_set, teacher=teacher, base_model=base_folder(),
                          student_name="student", hyperparameters={**QUICK, "micro_batch": 4, "batch_size": 4})
    real = ProgressReport.on_log

    def cancel_at_two(self, args, state, control, logs=None, **kwargs):
        if state.global_step == 2:
            finetune_cancel(job=job)
        return real(self, args, state, control, logs=logs, **kwargs)

    monkeypatch.setattr(ProgressReport, "on_log", cancel_at_two)
    done = finetune_run(job_id=job.id)
    assert done.status == FineTuneJob.Status.CANCELLED and done.step == 1 and done.student is None
    assert not Judge.objects.filter(project=project, name__startswith="student").exists()
    assert not done.adapter


def test_running_out_of_memory_fails_the_job_saying_so(tmp_path, monkeypatch):
    project, teacher, training_set = rule_project(tmp_path / "bundle")
    job = finetune_create(project=project, training_set=training_set, teacher=teacher, base_model=base_folder(),
                          student_name="student", hyperparameters=QUICK)

    def no_memory(self, *args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr("transformers.Trainer.train", no_memory)
    done = finetune_run(job_id=job.id)
    assert done.status == FineTuneJob.Status.FAILED and "out of memory" in done.error and "micro_batch" in done.error
    assert done.student is None


def test_a_judge_may_name_only_a_stored_adapter_of_its_own_project(tmp_path):
    from labeling.llm_adapter import JudgeConfigError

    project, _, _ = rule_project(tmp_path / "bundle")
    for stored, message in ((f"adapters/{project.id + 1}/1-x/", "not one of this project's"),
                            ("embeddings/x/", "not one of this project's"),
                            (f"adapters/{project.id}/../../etc/", "is not a stored adapter"),
                            (f"adapters/{project.id}/9-none/", "holds no files")):
        judge = Judge(project=project, name="j", backend="hf", model=base_folder(),
                      parameters={"method": "tok", "adapter_storage": stored})
        with pytest.raises(JudgeConfigError, match=message):
            judge_config(judge)


def test_a_job_whose_worker_still_reports_is_not_taken_by_a_second_worker(tmp_path, settings):
    from django.utils import timezone

    project, teacher, training_set = rule_project(tmp_path / "bundle")
    job = finetune_create(project=project, training_set=training_set, teacher=teacher, base_model=base_folder(),
                          student_name="student", hyperparameters=QUICK)
    FineTuneJob.objects.filter(id=job.id).update(status="running", attempts=1, heartbeat_at=timezone.now())
    again = finetune_run(job_id=job.id)  # a redelivered message while the first worker trains
    assert again.status == FineTuneJob.Status.RUNNING and again.attempts == 1 and again.step == 0
    with pytest.raises(FinetuneJobError, match="running"):
        finetune_resume(job=again)

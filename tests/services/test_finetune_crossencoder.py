"""Cross-encoder students (#32) with the real parts: the bundled all-MiniLM-L6-v2 with a new one-logit head taught a
teacher's rule through sentence-transformers' CrossEncoderTrainer, stored, made a crossencoder judge whose P is
CrossEncoder.predict's sigmoid; experts' labels replace a wrong teacher's answers; DIRAS prompts read apart."""
import numpy as np
import pytest
import torch
from sentence_transformers import CrossEncoder
from sentence_transformers.cross_encoder.losses import BinaryCrossEntropyLoss
from sklearn.metrics import roc_auc_score

from labeling.llm_adapter import judge_config, scorer_for
from labeling.models import FineTuneJob, Judge, Membership, Pair
from labeling.selectors.finetune import base_judge_name, student_pairs
from labeling.services.finetune import FinetuneJobError, finetune_create, finetune_estimate, finetune_run
from labeling.services.labels import label_submit
from models_llm.backends.crossencoder import passage_side, query_side
from models_llm.bundled import minilm_folder
from models_llm.finetune.crossencoder_student import (
    CrossEncoderSettings,
    FinetuneError,
    SoftPair,
    diras_fields,
)
from models_llm.finetune.crossencoder_training import weighted_bce_loss
from models_llm.finetune.files import diras_user
from tests.factories import LeaseFactory, MembershipFactory, UserFactory
from tests.finetune_fixtures import rule_inputs, rule_project, teacher_p

pytestmark = pytest.mark.django_db
# Eight train pairs, full batches: 24 steps at 2e-4 take a few seconds on 2 CPU cores and separate the held-out
# query's pairs (AUROC 1.0 with seeds 0 to 2; the untrained head is near chance).
QUICK = {"learning_rate": 2e-4, "batch_size": 8, "epochs": 24, "warmup_ratio": 0.1, "max_length": 64,
         "save_steps": 100}


def held_out_auroc(judge: Judge, project, against) -> float:
    pairs = rule_inputs(project, "q2")
    p = [verdict.p for verdict in scorer_for(judge).score(pairs)]
    return roc_auc_score([against(pair) for pair in pairs], p)


def test_the_student_learns_the_teachers_rule_and_its_judge_is_crossencoder_predict(tmp_path, settings):
    settings.ADAPTER_CACHE_DIR = tmp_path / "cache"
    project, teacher, training_set = rule_project(tmp_path / "bundle")
    job = finetune_create(project=project, training_set=training_set, teacher=teacher, base_model="",
                          student_name="ce", student="crossencoder", hyperparameters=QUICK)
    assert (job.student_kind, job.base_model, job.examples, job.total_steps) == (
        "crossencoder", str(minilm_folder()), 8, 24)
    job = finetune_run(job_id=job.id)
    assert job.status == FineTuneJob.Status.DONE, job.error
    assert [step for step, _ in job.loss_history] == list(range(1, 25))
    assert job.loss_history[-1][1] < job.loss_history[0][1] - 0.2, job.loss_history

    student, base = job.student, Judge.objects.get(project=project, name=base_judge_name("ce"))
    assert student.backend == base.backend == Judge.Backend.CROSSENCODER
    relevant = lambda pair: teacher_p(pair.passage) > 0.5
    assert held_out_auroc(student, project, relevant) > 0.9
    assert held_out_auroc(base, project, relevant) < 0.9  # the untrained head it started from

    # The judge's P is sentence-transformers' own prediction on the stored folder, through the sigmoid.
    config = judge_config(student)
    pairs = rule_inputs(project, "q2")
    sides = [(query_side(pair, True, config.separator), passage_side(pair)) for pair in pairs]
    logits = CrossEncoder(config.model, local_files_only=True).predict(
        sides, activation_fn=torch.nn.Identity(), convert_to_numpy=True)
    expected = 1.0 / (1.0 + np.exp(-logits.astype(np.float64)))
    got = [verdict.p for verdict in scorer_for(student).score(pairs)]
    assert got == pytest.approx(expected.tolist(), abs=1e-6)
    assert config.model != judge_config(base).model and config.max_length == 64


def test_experts_labels_replace_a_wrong_teachers_answers(tmp_path, settings):
    """The teacher follows the banana rule; the experts, who labelled every train pair, say the opposite. The
    student learns the experts' answers: on the held-out query it ranks the non-banana paragraphs first."""
    settings.ADAPTER_CACHE_DIR = tmp_path / "cache"
    project, teacher, training_set = rule_project(tmp_path / "bundle")
    expert = UserFactory(username="expert")
    MembershipFactory(project=project, user=expert, role=Membership.Role.EXPERT)
    train_pairs = list(Pair.objects.filter(project=project, query__external_id="q1").select_related("passage"))
    for pair in train_pairs:
        LeaseFactory(pair=pair, annotator=expert)
        label_submit(project=project, annotator=expert, pair_id=pair.id,
                     grade=0 if teacher_p(pair.passage.text) > 0.5 else 1)

    found = student_pairs(training_set, teacher=teacher, settings=CrossEncoderSettings(expert_weight=2.0))
    assert (found.experts, found.missing, len(found.pairs)) == (8, 0, 8)
    by_passage = {pair.passage: pair for pair in found.pairs}
    for pair in train_pairs:
        learnt = by_passage[pair.passage.text]
        assert learnt.target == (0.0 if teacher_p(pair.passage.text) > 0.5 else 1.0) and learnt.weight == 2.0
    ignored = student_pairs(training_set, teacher=teacher, settings=CrossEncoderSettings(expert_weight=0.0))
    assert ignored.experts == 0 and sorted(p.target for p in ignored.pairs) == [0.05] * 4 + [0.95] * 4

    job = finetune_create(project=project, training_set=training_set, teacher=teacher, base_model="",
                          student_name="ce", student="crossencoder", hyperparameters=QUICK)
    job = finetune_run(job_id=job.id)
    assert job.status == FineTuneJob.Status.DONE, job.error
    assert held_out_auroc(job.student, project, lambda pair: teacher_p(pair.passage) < 0.5) > 0.9


def test_requests_that_cannot_run_are_refused_and_the_estimate_times_the_base(tmp_path):
    project, teacher, training_set = rule_project(tmp_path / "bundle")
    common = {"project": project, "training_set": training_set, "teacher": teacher, "student_name": "ce"}
    for hyperparameters, message in (({"max_length": 8}, "maximum length"), ({"expert_weight": -1}, "expert"),
                                     ({"r": 8}, "unknown cross-encoder student settings"),
                                     ({"use_definition": "yes"}, "true or false")):
        with pytest.raises(FinetuneJobError, match=message):
            finetune_create(**common, base_model="", student="crossencoder", hyperparameters=hyperparameters)
    with pytest.raises(FinetuneJobError, match="unknown student kind"):
        finetune_create(**common, base_model="", student="bert")
    with pytest.raises(FinetuneJobError, match="needs a base model"):
        finetune_create(**common, base_model="")
    estimate = finetune_estimate(project=project, training_set=training_set, teacher=teacher, base_model="",
                                 student="crossencoder", hyperparameters=QUICK)
    assert (estimate.examples, estimate.steps, estimate.processed) == (8, 24, 192)
    assert estimate.throughput.basis == "probe training" and estimate.wall_s == pytest.approx(
        192 / estimate.throughput.per_s)
    assert not FineTuneJob.objects.exists()


def test_the_weighted_loss_is_sentence_transformers_bce_with_unit_weights_and_a_weighted_mean_otherwise():
    torch.manual_seed(0)
    model = CrossEncoder(str(minilm_folder()), num_labels=1, max_length=32, local_files_only=True, device="cpu")
    queries, passages = ["floods", "floods", "budget"], ["The river flooded.", "A choir sang.", "Rain fell."]
    targets = torch.tensor([0.9, 0.2, 0.5])
    plain = BinaryCrossEntropyLoss(model)([queries, passages], targets)
    ours = weighted_bce_loss(model)([queries, passages], torch.stack([targets, torch.ones(3)], dim=1))
    assert float(ours) == pytest.approx(float(plain), abs=1e-6)
    weights = torch.tensor([3.0, 1.0, 0.0])
    logits = model.predict(list(zip(queries, passages)), activation_fn=torch.nn.Identity(), convert_to_tensor=True)
    per_example = torch.nn.functional.binary_cross_entropy_with_logits(logits, targets, reduction="none")
    weighted = weighted_bce_loss(model)([queries, passages], torch.stack([targets, weights], dim=1))
    assert float(weighted) == pytest.approx(float((per_example * weights).sum() / 4.0), abs=1e-5)


def test_diras_prompts_are_read_apart_and_another_layout_is_refused():
    user = diras_user('When did "the" Broncos win?', 'Line one.\nLine "two".', background="Useful if it answers.")
    assert diras_fields(user) == ("Useful if it answers.", 'When did "the" Broncos win?', 'Line one.\nLine "two".')
    with pytest.raises(FinetuneError, match="DIRAS's layout"):
        diras_fields("Is this relevant? Yes or no.")
    with pytest.raises(FinetuneError, match="out of range"):
        from models_llm.finetune.crossencoder_student import crossencoder_finetune

        crossencoder_finetune(base_folder=str(minilm_folder()), pairs=[SoftPair("q", "p", 1.5)], work_dir="/nonexistent",
                              model_dir="/nonexistent")

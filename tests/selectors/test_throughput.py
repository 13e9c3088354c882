"""Time before money: a judge's speed is measured from the chunks it scored (per device), borrowed from a judge of the
same model, or guessed from a timed probe; estimates turn it into wall time. Fine-tuning alike, from the base model's
past trainings here or a probe of a few micro batches going forward and backward. How close the guesses come to real
runs is measured by bench/estimates.py (bench/README.md), never timed here."""
from __future__ import annotations

import pytest
import torch
from django.utils import timezone

from labeling.models import FineTuneJob, Judgment, ScoringChunk
from labeling.selectors.throughput import judge_throughput
from labeling.services.finetune import FinetuneJobError, finetune_estimate
from labeling.services.scoring import scoring_chunk_run, scoring_job_create, scoring_job_estimate
from tests.finetune_fixtures import base_folder, rule_project
from tests.scoring_fixtures import minilm_judge, small_scoring_project

pytestmark = pytest.mark.django_db


def test_a_judges_speed_is_its_timed_pairs_over_their_seconds_on_its_device(tmp_path,
                                                                            django_capture_on_commit_callbacks):
    project = small_scoring_project(tmp_path / "b", queries=2, passages=10)
    judge, twin = minilm_judge(project, "minilm"), minilm_judge(project, "minilm-again")
    assert judge_throughput(judge) is None
    with django_capture_on_commit_callbacks(execute=False):
        job = scoring_job_create(project=project, judge=judge, chunk_pairs=5)
    for chunk_id in job.chunks.values_list("id", flat=True):
        scoring_chunk_run(chunk_id=chunk_id)
    chunks = ScoringChunk.objects.filter(job=job)
    # The process's first part with the judge (one chunk of 5) loaded its model and is not timed; the others are.
    assert sorted(chunks.values_list("timed_pairs", flat=True)) == [0, 5, 5, 5]
    assert set(chunks.filter(timed_pairs__gt=0).values_list("device", flat=True)) == {"cpu"}
    # Hand-set figures, to check the arithmetic: 12 pairs in 3 s and 0 s of two chunks -> 4 pairs/s.
    first, second, *rest = chunks.order_by("id")
    ScoringChunk.objects.filter(id__in=[c.id for c in rest]).update(timed_pairs=0, busy_seconds=0)
    ScoringChunk.objects.filter(id=first.id).update(timed_pairs=8, busy_seconds=2.0, device="cpu")
    ScoringChunk.objects.filter(id=second.id).update(timed_pairs=4, busy_seconds=1.0)
    speed = judge_throughput(judge)
    assert (speed.per_s, speed.items, speed.basis) == (4.0, 12, "measured")
    assert speed.text == "measured over its last 12 scored pairs on cpu"
    borrowed = judge_throughput(twin)  # never scored: the same model's measure on the same device
    assert (borrowed.per_s, borrowed.basis) == (4.0, "measured, same model")
    # Another device is another measure: nothing to borrow.
    twin.parameters = {**twin.parameters, "device": "cuda"}
    twin.save()
    assert judge_throughput(twin) is None
    estimate = scoring_job_estimate(project=project, judge=judge, scope="all")
    assert estimate.wall_s == pytest.approx(20 / 4.0) and not estimate.sends_prompts


def test_a_judge_never_timed_is_probed_and_nothing_is_stored(tmp_path):
    project = small_scoring_project(tmp_path / "b", queries=2, passages=10)
    judge = minilm_judge(project)
    estimate = scoring_job_estimate(project=project, judge=judge, scope="missing")
    assert estimate.throughput.basis == "probe" and estimate.throughput.items == 8
    assert estimate.wall_s == pytest.approx(20 / estimate.throughput.per_s)
    assert not Judgment.objects.filter(judge=judge).exists() and not ScoringChunk.objects.exists()
    assert scoring_job_estimate(project=project, judge=judge, probe=False).wall_s is None


def test_a_fine_tuning_estimate_comes_from_past_trainings_of_the_base_model_or_a_probe(tmp_path):
    project, teacher, training_set = rule_project(tmp_path / "bundle")
    settings = {"r": 8, "alpha": 16, "batch_size": 8, "micro_batch": 4, "epochs": 2.0}
    probed = finetune_estimate(project=project, training_set=training_set, teacher=teacher, base_model=base_folder(),
                               hyperparameters=settings)
    # 8 train examples, batches of 8, 2 epochs: 2 steps through 16 examples.
    assert (probed.examples, probed.steps, probed.processed) == (8, 2, 16)
    assert probed.throughput.basis == "probe training" and probed.throughput.per_s > 0
    assert probed.wall_s == pytest.approx(16 / probed.throughput.per_s)
    assert not FineTuneJob.objects.exists()
    # A fine-tuning of this base model finished here: its measured speed (the median of the newest) is used.
    for rate in (2.0, 4.0, 3.0):
        FineTuneJob.objects.create(project=project, training_set=training_set, teacher=teacher,
                                   base_model=base_folder(), student_name=f"s{rate}", examples=8,
                                   hyperparameters={"device": "cpu"}, examples_per_s=rate, status="done",
                                   finished_at=timezone.now())
    measured = finetune_estimate(project=project, training_set=training_set, teacher=teacher,
                                 base_model=base_folder(), hyperparameters=settings)
    assert (measured.throughput.basis, measured.throughput.per_s, measured.wall_s) == ("measured training", 3.0, 16 / 3)
    # Nothing measured on a GPU: a machine without one cannot time it, and says so rather than time its CPU.
    if not torch.cuda.is_available():
        with pytest.raises(FinetuneJobError, match="no CUDA device to time the training on cuda"):
            finetune_estimate(project=project, training_set=training_set, teacher=teacher, base_model=base_folder(),
                              hyperparameters=settings, device="cuda")


def test_a_slow_judge_gets_chunks_that_take_about_scoring_chunk_seconds(settings):
    from labeling.selectors.throughput import Throughput
    from labeling.services.scoring import chunk_size_for

    settings.SCORING_CHUNK_PAIRS, settings.SCORING_CHUNK_SECONDS = 32, 30.0
    speed = lambda per_s: Throughput(per_s=per_s, items=10, device="cpu", basis="measured")  # noqa: E731
    assert [chunk_size_for(None), chunk_size_for(speed(100.0)), chunk_size_for(speed(0.5)),
            chunk_size_for(speed(0.01))] == [32, 32, 15, 1]


def test_an_embedding_judge_gets_a_query_s_pairs_in_one_chunk_unless_its_speed_says_otherwise(settings):
    from labeling.selectors.throughput import Throughput
    from labeling.services.scoring import chunk_size_for

    settings.SCORING_CHUNK_PAIRS, settings.SCORING_EMBEDDING_CHUNK_PAIRS, settings.SCORING_CHUNK_SECONDS = 32, 512, 30.0
    speed = lambda per_s: Throughput(per_s=per_s, items=10, device="cpu", basis="measured")  # noqa: E731
    assert [chunk_size_for(None, backend="embedding"), chunk_size_for(speed(240.0), backend="embedding"),
            chunk_size_for(speed(2.0), backend="embedding"), chunk_size_for(speed(240.0), backend="hf")] == [
        512, 512, 60, 32]

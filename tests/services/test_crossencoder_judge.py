"""A crossencoder judge in the product: created from a re-ranker folder under a model root, scored by a scoring job
like any judge (each judgment's P is sentence-transformers' CrossEncoder.predict on the pair as shown, definition
first), estimated by time with no token bought, sent to the GPU queue on cuda, and refused the settings it has no
use for."""
from __future__ import annotations

import numpy as np
import pytest
from sentence_transformers import CrossEncoder

from labeling.models import Judgment, Pair
from labeling.selectors.definitions import current_definitions
from labeling.services.judges import JudgeError, judge_create
from labeling.services.scoring import scoring_chunk_run, scoring_job_create, scoring_job_estimate
from labeling.services.scoring_dispatch import bulk_queue_for
from models_llm.bundled import minilm_folder
from models_llm.types import CROSSENCODER_SEPARATOR
from tests.scoring_fixtures import small_scoring_project

pytestmark = pytest.mark.django_db


@pytest.fixture
def project(tmp_path, settings, reranker_root):
    settings.MODEL_ROOTS = [reranker_root]
    return small_scoring_project(tmp_path / "b", queries=2, passages=5)


def test_a_scoring_job_stores_cross_encoder_predict_for_each_pair(project, reranker_root):
    judge = judge_create(project=project, name="rerank", backend="crossencoder", model=str(reranker_root / "reranker"),
                         max_length=128)
    assert judge.parameters == {"max_length": 128, "method": "crossencoder"}
    job = scoring_job_create(project=project, judge=judge, scope="all")
    for chunk_id in job.chunks.values_list("id", flat=True):
        scoring_chunk_run(chunk_id=chunk_id)
    pairs = list(Pair.objects.filter(project=project).select_related("query", "passage").order_by("id"))
    definitions = current_definitions({pair.query_id for pair in pairs})
    sides = [(f"{definitions[p.query_id].text.strip()}{CROSSENCODER_SEPARATOR}{p.query.text}",
              f"{p.passage.title}\n{p.passage.text}" if p.passage.title else p.passage.text) for p in pairs]
    reference = CrossEncoder(str(reranker_root / "reranker"), local_files_only=True, device="cpu",
                             max_length=128).predict(sides)
    stored = dict(Judgment.objects.filter(judge=judge).values_list("pair_id", "p_relevant"))
    assert len(stored) == len(pairs) == 10
    assert np.allclose([stored[p.id] for p in pairs], reference, atol=1e-6, rtol=0)
    assert set(Judgment.objects.filter(judge=judge).values_list("method", flat=True)) == {"crossencoder"}


def test_an_estimate_is_time_alone_and_a_cuda_judge_goes_to_the_gpu_queue(project, reranker_root, settings):
    judge = judge_create(project=project, name="rerank", backend="crossencoder", model=str(reranker_root / "reranker"))
    estimate = scoring_job_estimate(project=project, judge=judge, scope="all")
    assert not estimate.sends_prompts and estimate.cost_usd is None and estimate.tokens.prompt_tokens == 0
    assert estimate.throughput.basis == "probe" and estimate.wall_s > 0
    settings.GPU_QUEUE = "gpu"
    judge.parameters = {**judge.parameters, "device": "cuda"}
    assert bulk_queue_for(judge) == "gpu"


@pytest.mark.parametrize("backend, options, message", [
    ("crossencoder", {"cot": True}, "leave out cot"),
    ("crossencoder", {"max_new_tokens": 10}, "leave out max_new_tokens"),
    ("crossencoder", {"price_in": 1.0}, "costs no tokens"),
    ("embedding", {"max_length": 128}, "a crossencoder judge's settings"),
    ("hf", {"separator": " | "}, "a crossencoder judge's settings"),
    ("crossencoder", {"max_length": 4}, "max_length must be"),
])
def test_settings_a_backend_has_no_use_for_are_refused(project, reranker_root, backend, options, message):
    model = str(reranker_root / "reranker") if backend == "crossencoder" else str(minilm_folder())
    with pytest.raises(JudgeError, match=message):
        judge_create(project=project, name="x", backend=backend, model=model, **options)


def test_a_plain_encoder_folder_is_refused_as_a_judge(project, settings):
    settings.MODEL_ROOTS = [minilm_folder().parent]
    with pytest.raises(JudgeError, match="encoder without a relevance head"):
        judge_create(project=project, name="plain", backend="crossencoder", model=str(minilm_folder()))

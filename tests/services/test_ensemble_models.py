"""The DisastIR ensemble end to end on the real bundled SmolLM2-135M: in-process (hf backend) and over HTTP
against `transformers serve` (openai backend). Every strategy's output is stored, the judgment is their mean
(or a parse error: SmolLM2 is too small to write the JSON reliably, and a label is never invented), and the
job's token figures and the dry-run estimate agree with what the model was sent."""
from __future__ import annotations

import pytest
from django.conf import settings

from labeling.models import Judgment, MemberOutput, Pair
from labeling.selectors.scoring import job_progress
from labeling.services.judges import judge_create
from labeling.services.scoring import scoring_chunk_run, scoring_job_create, scoring_job_estimate
from models_llm.bundled import smollm2_folder
from models_llm.ensembles import STEPS, intent_get
from models_llm.tokenizers import chat_token_counter
from models_llm.types import PairInput
from tests.endpoints import declare_endpoint
from tests.models_llm.test_openai_backend import served_smollm2  # noqa: F401 - a module-scoped fixture
from tests.scoring_fixtures import small_scoring_project

pytestmark = pytest.mark.django_db

MAX_NEW_TOKENS = 40


def _score(project, judge, **scope):
    job = scoring_job_create(project=project, judge=judge, **scope)
    for chunk_id in job.chunks.values_list("id", flat=True):
        scoring_chunk_run(chunk_id=chunk_id)
    job.refresh_from_db()
    return job


def _check_stored(judge, jobs, n_pairs):
    pairs = list(Pair.objects.filter(project=judge.project).select_related("query", "passage"))
    assert all(job.status == "done" for job in jobs) and sum(job.done for job in jobs) == len(pairs) == n_pairs
    for pair in pairs:
        judgment = Judgment.objects.get(judge=judge, pair=pair)
        outputs = list(MemberOutput.objects.filter(judge=judge, pair=pair).order_by("member"))
        assert [o.member for o in outputs] == ["cot", "direct", "multi"]
        for output in outputs:
            assert output.steps and all(step["raw"] is not None for step in output.steps)
            assert output.calls == len(output.steps) and (output.score is None) == bool(output.error)
        scores = [o.score for o in outputs if o.score is not None]
        if scores:
            assert judgment.status == "ok" and judgment.score == pytest.approx(sum(scores) / len(scores))
            assert judgment.p_relevant == pytest.approx(judgment.score / 3)
        else:
            assert judgment.status == "parse_error" and judgment.p_relevant is None
            assert "no strategy gave a usable answer" in judgment.error
    outputs = MemberOutput.objects.filter(judge=judge)
    progress = [job_progress(job) for job in jobs]
    assert sum(p.calls for p in progress) == sum(o.calls for o in outputs)
    assert sum(p.prompt_tokens for p in progress) == sum(o.prompt_tokens for o in outputs) > 0
    assert sum(p.completion_tokens for p in progress) == sum(o.completion_tokens for o in outputs) > 0
    return pairs


def test_the_ensemble_on_smollm2_in_process_and_the_dry_run_after_a_pilot(tmp_path):
    project = small_scoring_project(tmp_path / "b", queries=1, passages=3)
    folder = str(smollm2_folder(settings.VAR_DIR))
    judge = judge_create(project=project, name="smollm2-ensemble", backend="hf", model=folder, method="ensemble",
                         max_new_tokens=MAX_NEW_TOKENS, prompts="legacy")
    before = scoring_job_estimate(project=project, judge=judge)
    # Before any answer the dry run assumes every step of every strategy runs: 6 calls per QA pair.
    assert before.tokens.exact_prompt_tokens and before.tokens.pairs == 3 and before.tokens.calls == 18
    assert before.observed_pairs == 0
    first_pair, *rest = Pair.objects.filter(project=project).order_by("id")
    pilot = _score(project, judge, scope="selection", pair_ids=[first_pair.id])
    assert pilot.done == 1
    # After the pilot it knows how far this judge's strategies get and how long its answers are.
    after = scoring_job_estimate(project=project, judge=judge)
    assert after.observed_pairs == 1 and after.tokens.pairs == 2
    job = _score(project, judge)
    assert job.done == 2
    _check_stored(judge, [pilot, job], 3)
    actual = job_progress(job)
    total = actual.prompt_tokens + actual.completion_tokens
    assert abs(after.tokens.total_tokens - total) <= 0.10 * total, (after.tokens, actual)
    pairs = list(Pair.objects.filter(project=project).select_related("query", "passage").order_by("id"))
    for pair in pairs:
        assert Judgment.objects.filter(judge=judge, pair=pair).count() == 1
    # Each call's prompt tokens are what the tokenizer counts for the prompt the step sends.
    count = chat_token_counter(folder)
    pair = pairs[0]
    definition = pair.query.definitions.last()
    pair_input = PairInput(pair_id=pair.id, query=pair.query.text, passage=pair.passage.text,
                           title=pair.passage.title, definition=definition.text if definition else None)
    direct = MemberOutput.objects.get(judge=judge, pair=pair, member="direct")
    messages = STEPS["direct"][0].build(intent_get("QA"), pair_input, ())
    assert direct.steps[0]["prompt_tokens"] == count(messages)
    assert 0 < direct.steps[0]["completion_tokens"] <= MAX_NEW_TOKENS


def test_the_ensemble_over_http_against_transformers_serve(tmp_path, served_smollm2):  # noqa: F811
    base_url, folder = served_smollm2
    project = small_scoring_project(tmp_path / "b", queries=1, passages=1)
    judge = judge_create(project=project, name="served-ensemble", backend="openai", model=str(folder),
                         method="ensemble", endpoint=declare_endpoint(base_url), max_new_tokens=MAX_NEW_TOKENS, timeout_s=120.0,
                         prompts="legacy", max_retries=1, concurrency=1, price_in=0.15, price_out=0.60)
    job = _score(project, judge)
    _check_stored(judge, [job], 1)
    progress = job_progress(job)
    assert progress.cost_usd == pytest.approx((progress.prompt_tokens * 0.15 + progress.completion_tokens * 0.60) / 1e6)

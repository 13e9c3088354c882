"""The prompt preset of an ensemble judge in the product: a new judge asks the paper's App. C prompts (10 calls per
QA pair: direct 1, cot 1 + 2 + 1, multi 4 + 1), a judge stored before the choice existed keeps the legacy ones (its
stored judgments stay reproducible), add_judge takes --prompts, and the dry run counts the preset's calls."""
from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from labeling.models import Judge, Judgment, MemberOutput, ScoringJob
from labeling.services.judges import JudgeError, judge_create
from labeling.services.scoring import scoring_chunk_run, scoring_job_create, scoring_job_estimate
from tests.endpoints import declare_endpoint
from tests.models_llm.fake_openai import FakeOpenAI, Reply, completion
from tests.scoring_fixtures import small_scoring_project

pytestmark = pytest.mark.django_db


@pytest.fixture
def project(tmp_path):
    return small_scoring_project(tmp_path / "b", queries=1, passages=2)


def paper_answers(body: dict) -> Reply:
    """The paper's JSON keys: direct 1, cot Yes -> 2, 2 -> 3, multi 2, 2, 2, 2 -> 2."""
    text = body["messages"][-1]["content"]
    if '"has_answer"' in text:
        answer = '{"has_answer": "Yes"}'
    elif '"final_relevance_score"' in text:
        answer = '{"final_relevance_score": 2}'
    elif '"criterion_score"' in text:
        answer = '{"criterion_score": 2}'
    elif '"relevance_score"' in text:
        answer = '{"relevance_score": 3}'
    else:
        answer = '{"final_score": 1}'
    return Reply(body=completion(answer, prompt_tokens=10, completion_tokens=5))


def run(job: ScoringJob) -> ScoringJob:
    for chunk_id in job.chunks.values_list("id", flat=True):
        scoring_chunk_run(chunk_id=chunk_id)
    job.refresh_from_db()
    return job


def test_a_new_ensemble_judge_asks_the_papers_prompts_and_stores_each_call(project):
    with FakeOpenAI(default=paper_answers) as server:
        judge = judge_create(project=project, name="disastir", backend="openai", model="judge", method="ensemble",
                             endpoint=declare_endpoint(server.base_url), max_new_tokens=32)
        assert judge.parameters["prompts"] == "paper"
        estimate = scoring_job_estimate(project=project, judge=judge)
        job = run(scoring_job_create(project=project, judge=judge))
    assert estimate.tokens.calls == 2 * 10
    assert job.status == ScoringJob.Status.DONE and job.done == 2
    assert len(server.bodies) == 2 * (1 + 4 + 5)
    cot = MemberOutput.objects.filter(judge=judge, member="cot").first()
    assert [step["step"] for step in cot.steps] == ["has_answer", "exactness", "coverage", "score"]
    assert [step["value"] for step in cot.steps] == [True, 2, 2, 3] and cot.calls == 4
    multi = MemberOutput.objects.filter(judge=judge, member="multi").first()
    assert multi.calls == 5 and multi.score == 2
    for judgment in Judgment.objects.filter(judge=judge):
        assert judgment.score == pytest.approx((1 + 3 + 2) / 3) and judgment.p_relevant == pytest.approx(2 / 3)
    # After the pilot the estimate reads how far this judge's paper steps got: still 10 calls a pair.
    after = scoring_job_estimate(project=project, judge=judge, scope=ScoringJob.Scope.ALL)
    assert after.observed_pairs == 2 and after.tokens.calls == 2 * 10


def test_a_judge_stored_without_the_key_keeps_the_legacy_prompts(project):
    with FakeOpenAI(default=lambda body: Reply(body=completion('{"score": 2}'))) as server:
        judge = Judge.objects.create(project=project, name="old", backend="openai", model="judge",
                                     parameters={"method": "ensemble", "strategies": ["direct"],
                                                 "endpoint": declare_endpoint(server.base_url)})
        run(scoring_job_create(project=project, judge=judge))
    # The legacy direct prompt: its "score" key and the definition; the paper's asks "final_score" and has none.
    user = server.bodies[0]["messages"][1]["content"]
    assert '{"score": 0 or 1 or 2 or 3}' in user and "What counts as relevant for this query" in user
    assert set(Judgment.objects.filter(judge=judge).values_list("score", flat=True)) == {2.0}


def test_add_judge_takes_prompts_and_refuses_an_unknown_preset(project):
    call_command("add_judge", "legacy-judge", project=project.slug, backend="openai", model="m",
                 endpoint=declare_endpoint("http://127.0.0.1:9/v1"), method="ensemble", prompts="legacy")
    assert Judge.objects.get(name="legacy-judge").parameters["prompts"] == "legacy"
    with pytest.raises(CommandError, match="prompts must be paper, released-code or legacy, got 'released'"):
        call_command("add_judge", "x", project=project.slug, backend="openai", model="m", method="ensemble",
                     endpoint=declare_endpoint("http://127.0.0.1:9/v1"), prompts="released")
    with pytest.raises(JudgeError, match="prompts must be paper, released-code or legacy, got 'PAPER'"):
        judge_create(project=project, name="y", backend="openai", model="m", method="ensemble",
                     endpoint=declare_endpoint("http://127.0.0.1:9/v1"), prompts="PAPER")

"""Ensemble judges in scoring jobs, against a scripted OpenAI-compatible server over real HTTP: every prompt
strategy's output is stored with its calls and tokens, the judgment holds the mean score, P and the spread; a
re-run calls no LLM; a job's tokens and cost add up from the per-call records; judges ensembles average their
members; the disagreement queue sees an ensemble's spread."""
from __future__ import annotations

import json

import pytest
from django.utils import timezone

from labeling.models import Judgment, MemberOutput, Pair, Query, ScoringJob
from labeling.selectors.queues import queue_candidates
from labeling.selectors.scoring import job_progress
from labeling.services.judges import JudgeError, judge_create
from labeling.services.scoring import ScoringError, scoring_chunk_run, scoring_job_create, scoring_job_estimate
from tests.factories import MembershipFactory
from tests.models_llm.fake_openai import FakeOpenAI, Reply, completion
from tests.scoring_fixtures import small_scoring_project
from tests.endpoints import declare_endpoint

pytestmark = pytest.mark.django_db

ATTRIBUTES = '{"exactness": 2, "coverage": 2, "topicality": 3, "contextual_fit": 1}'


def scripted(body: dict) -> Reply:
    """Answers by the step the prompt asks for; usage is a function of the request so that a test can add
    up independently what the server reported."""
    user = body["messages"][1]["content"]
    if "Step 1 of 3" in user:
        text = 'Sure: {"reason": "it names the target", "holds": "yes"}'
    elif "Step 2 of 3" in user:
        text = '```json\n{"exactness": 3, "coverage": 2}\n```'
    elif "Step 3 of 3" in user:
        text = '{"score": 3}'
    elif "on four attributes, each" in user:
        text = ATTRIBUTES
    elif "was rated 0-3 on four attributes" in user:
        text = '{"score": 2}'
    else:  # direct
        text = '{"score": 1}'
    return Reply(body=completion(text, prompt_tokens=len(user), completion_tokens=len(text)))


def reported_usage(server: FakeOpenAI) -> tuple[int, int, int]:
    calls = prompt = completion_tokens = 0
    for body in server.bodies:
        reply = scripted(body).body
        calls += 1
        prompt += reply["usage"]["prompt_tokens"]
        completion_tokens += reply["usage"]["completion_tokens"]
    return calls, prompt, completion_tokens


def run(job: ScoringJob) -> ScoringJob:
    for chunk_id in job.chunks.values_list("id", flat=True):
        scoring_chunk_run(chunk_id=chunk_id)
    job.refresh_from_db()
    return job


@pytest.fixture
def project(tmp_path):
    return small_scoring_project(tmp_path / "b", queries=2, passages=3)


def ensemble_judge(project, server, name="disastir", prompts="legacy", **extra):
    # The scripted answers below are the legacy preset's; tests/services/test_ensemble_paper.py runs the paper's.
    return judge_create(project=project, name=name, backend="openai", model="judge", method="ensemble",
                        endpoint=declare_endpoint(server.base_url), max_new_tokens=64, prompts=prompts, **extra)


def test_each_strategy_is_stored_and_the_judgment_holds_the_mean_p_and_spread(project):
    with FakeOpenAI(default=scripted) as server:
        judge = ensemble_judge(project, server)
        job = run(scoring_job_create(project=project, judge=judge))
    assert job.status == ScoringJob.Status.DONE and job.done == 6 and job.failed == 0
    assert len(server.bodies) == 6 * (1 + 3 + 2)  # direct, cot's three phases, multi's two calls per pair
    outputs = MemberOutput.objects.filter(judge=judge)
    assert outputs.count() == 18
    assert sorted(set(outputs.values_list("member", flat=True))) == ["cot", "direct", "multi"]
    assert {m: s for m, s in outputs.values_list("member", "score")} == {"direct": 1, "cot": 3, "multi": 2}
    cot = outputs.filter(member="cot").first()
    assert [step["step"] for step in cot.steps] == ["holds", "criteria", "score"]
    # After a yes cot rates exactness and coverage; the two criteria of a no are not asked.
    assert cot.steps[1]["value"] == {"exactness": 3, "coverage": 2, "topicality": None, "contextual_fit": None}
    assert cot.steps[0]["raw"].startswith("Sure:")
    for judgment in Judgment.objects.filter(judge=judge):
        assert judgment.status == "ok" and judgment.method == "ensemble"
        assert judgment.score == pytest.approx(2.0) and judgment.p_relevant == pytest.approx(2 / 3)
        assert judgment.spread == pytest.approx(3 / 3 - 1 / 3) and judgment.guess is True
        assert json.loads(judgment.raw_output)["scores"] == {"direct": 1, "cot": 3, "multi": 2}
        # The definition shown is the query's current one, as for any judge.
        assert judgment.definition_id == Query.objects.get(id=judgment.pair.query_id).definitions.last().id


def test_job_tokens_and_cost_add_up_from_the_per_call_records(project):
    with FakeOpenAI(default=scripted) as server:
        judge = ensemble_judge(project, server, price_in=0.15, price_out=0.60)
        job = run(scoring_job_create(project=project, judge=judge))
    calls, prompt, completion_tokens = reported_usage(server)
    progress = job_progress(job)
    assert (progress.calls, progress.prompt_tokens, progress.completion_tokens) == (calls, prompt, completion_tokens)
    steps = [step for output in MemberOutput.objects.filter(judge=judge) for step in output.steps]
    assert len(steps) == calls
    assert sum(step["prompt_tokens"] for step in steps) == prompt
    assert sum(step["completion_tokens"] for step in steps) == completion_tokens
    assert progress.cost_usd == pytest.approx((prompt * 0.15 + completion_tokens * 0.60) / 1e6)
    judged = Judgment.objects.filter(judge=judge)
    assert sum(judged.values_list("prompt_tokens", flat=True)) == prompt


def test_a_rerun_calls_no_llm_and_a_resumed_chunk_reuses_stored_strategies(project):
    with FakeOpenAI(default=scripted) as server:
        judge = ensemble_judge(project, server)
        first = scoring_job_create(project=project, judge=judge)
        chunk = first.chunks.first()
        pair = Pair.objects.get(id=chunk.pair_ids[0])
        # A worker was killed after storing one strategy of one pair: the chunk's run calls for the rest only.
        from labeling.services.judging import judge_pairs

        run(first)
        sent = len(server.bodies)
        assert sent == 36
        MemberOutput.objects.filter(judge=judge, pair=pair).exclude(member="direct").delete()
        judge_pairs(judge=judge, pairs=[Pair.objects.select_related("query", "passage").get(id=pair.id)],
                    definitions={pair.query_id: pair.query.definitions.last()})
        assert len(server.bodies) == sent + 5  # cot (3) and multi (2) again, direct from storage
        again = run(scoring_job_create(project=project, judge=judge, scope=ScoringJob.Scope.ALL))
        assert len(server.bodies) == sent + 5  # every strategy of every pair is stored: no call at all
    assert again.done == 6 and job_progress(again).calls == 0 and job_progress(again).prompt_tokens == 0
    assert Judgment.objects.filter(judge=judge).count() == 6


def test_sts_queries_run_direct_only(project):
    query = project.queries.order_by("id").first()
    Query.objects.filter(id=query.id).update(metadata={"intent": "STS"})
    with FakeOpenAI(default=scripted) as server:
        judge = ensemble_judge(project, server)
        run(scoring_job_create(project=project, judge=judge))
    sts = MemberOutput.objects.filter(judge=judge, pair__query=query)
    assert set(sts.values_list("member", flat=True)) == {"direct"} and set(sts.values_list("max_score", flat=True)) == {5}
    for judgment in Judgment.objects.filter(judge=judge, pair__query=query):
        assert judgment.p_relevant == pytest.approx(1 / 5) and judgment.spread == 0


def test_an_unknown_intent_fails_its_pairs_with_the_reason(project):
    query = project.queries.order_by("id").first()
    Query.objects.filter(id=query.id).update(metadata={"intent": "poetry"})
    with FakeOpenAI(default=scripted) as server:
        judge = ensemble_judge(project, server)
        job = run(scoring_job_create(project=project, judge=judge))
    failed = Judgment.objects.filter(judge=judge, pair__query=query)
    assert set(failed.values_list("status", flat=True)) == {"failed"} and job.failed == 3
    assert "unknown intent" in failed.first().error.lower() or "poetry" in failed.first().error


def test_answers_that_never_parse_are_a_parse_error_with_every_raw_text(project):
    with FakeOpenAI(default=lambda body: Reply(body=completion("I think it is relevant."))) as server:
        judge = ensemble_judge(project, server)
        run(scoring_job_create(project=project, judge=judge))
    judgment = Judgment.objects.filter(judge=judge).first()
    assert judgment.status == "parse_error" and judgment.p_relevant is None and judgment.score is None
    assert "no strategy gave a usable answer" in judgment.error
    outputs = MemberOutput.objects.filter(judge=judge, pair=judgment.pair)
    assert outputs.count() == 3 and all(o.score is None and o.error for o in outputs)
    assert all(o.steps[0]["raw"] == "I think it is relevant." for o in outputs)


def test_a_judges_ensemble_scores_missing_members_and_averages_their_p(project):
    with FakeOpenAI(default=scripted) as server, \
            FakeOpenAI(default=lambda body: Reply(body=completion("[Guess]: No\n[Confidence]: 0.75"))) as asker:
        strategies = ensemble_judge(project, server)
        ask = judge_create(project=project, name="ask", backend="openai", model="judge", method="ask",
                           endpoint=declare_endpoint(asker.base_url, "asker"))
        both = judge_create(project=project, name="both", backend="ensemble", members=["disastir", "ask"])
        job = run(scoring_job_create(project=project, judge=both))
        assert len(server.bodies) == 36 and len(asker.bodies) == 6
        run(scoring_job_create(project=project, judge=both, scope=ScoringJob.Scope.ALL))
        assert len(server.bodies) == 36 and len(asker.bodies) == 6  # members already judged: no call
    assert job.done == 6 and job_progress(job).calls == 36 + 6
    assert Judgment.objects.filter(judge=strategies).count() == 6 and Judgment.objects.filter(judge=ask).count() == 6
    for judgment in Judgment.objects.filter(judge=both):
        assert judgment.p_relevant == pytest.approx((2 / 3 + 0.25) / 2)
        assert judgment.spread == pytest.approx(2 / 3 - 0.25)
        assert json.loads(judgment.raw_output)["members"] == {"disastir": pytest.approx(2 / 3), "ask": 0.25}


def test_the_disagreement_queue_ranks_an_ensembles_member_spread(project):
    first = project.queries.order_by("id").first()

    def split(body: dict) -> Reply:
        # The strategies disagree on the first query's passages only.
        reply = scripted(body)
        user = body["messages"][1]["content"]
        if first.text.strip() not in user:
            text = '{"score": 2}'
            if "Step 1 of 3" in user:
                text = '{"holds": "yes"}'
            elif "Step 2 of 3" in user:
                text = '{"exactness": 2, "coverage": 2}'
            elif "on four attributes, each" in user:
                text = ATTRIBUTES
            reply = Reply(body=completion(text))
        return reply

    with FakeOpenAI(default=split) as server:
        judge = ensemble_judge(project, server)
        run(scoring_job_create(project=project, judge=judge))
    spread = dict(Judgment.objects.filter(judge=judge).values_list("pair_id", "spread"))
    disagreeing = sorted(pair_id for pair_id, value in spread.items() if value > 0)
    assert disagreeing == sorted(Pair.objects.filter(query=first).values_list("id", flat=True))
    expert = MembershipFactory(project=project, role="expert").user
    found = queue_candidates(project=project, annotator=expert, strategy="disagreement", now=timezone.now(), limit=10)
    assert sorted(found) == disagreeing


def test_bad_ensemble_judges_are_refused_with_the_reason(project):
    with pytest.raises(JudgeError, match="unknown strategy 'vote'"):
        judge_create(project=project, name="x", backend="openai", model="m", method="ensemble",
                     endpoint="unreachable", strategies=["direct", "vote"])
    with pytest.raises(JudgeError, match="member 'ghost' is not a judge"):
        judge_create(project=project, name="y", backend="ensemble", members=["ghost"])
    with pytest.raises(JudgeError, match="a judges ensemble takes only members"):
        judge_create(project=project, name="z", backend="ensemble", model="m", members=["x"])
    with pytest.raises(JudgeError, match="price_in must be a price"):
        judge_create(project=project, name="w", backend="openai", model="m", endpoint="unreachable", price_in=-1)


def test_the_estimate_refuses_judges_that_send_no_prompts(project):
    judge = judge_create(project=project, name="e1", backend="openai", model="m", endpoint="unreachable")
    both = judge_create(project=project, name="e2", backend="ensemble", members=["e1"])
    with pytest.raises(ScoringError, match="judges ensemble"):
        scoring_job_estimate(project=project, judge=both)
    estimate = scoring_job_estimate(project=project, judge=judge)
    assert estimate.tokens.pairs == 6 and estimate.tokens.calls == 6 and not estimate.tokens.exact_prompt_tokens

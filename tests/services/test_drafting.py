"""LLM-drafted definitions through the services with a scripted model: a draft is a version that is not current
(labels and scoring keep using the previous one), a malformed answer is stored as an error and writes nothing,
refining shows the model the passages experts labelled relevant, and an admin's review makes a draft current."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from labeling.models import DefinitionDraft, Judgment, RelevanceDefinition, ScoringJob
from labeling.selectors.definitions import current_definition, current_definitions, definition_versions, stale_judgments
from labeling.selectors.job_states import job_state
from labeling.services import drafting as drafting_module
from labeling.services.definitions import DefinitionError, definition_save
from labeling.services.drafting import (
    DRAFT_MAX_NEW_TOKENS,
    DraftingError,
    definition_draft_create,
    definition_draft_fail,
    definition_draft_request,
    definition_draft_run,
)
from labeling.services.job_sweep import jobs_sweep
from labeling.services.scoring import scoring_job_create
from labeling.tasks import definition_draft_task
from models_llm.backends import TransientScoringError
from models_llm.types import Generation
from tests.factories import (
    JudgeFactory,
    JudgmentFactory,
    LabelFactory,
    PairFactory,
    PassageFactory,
    ProjectFactory,
    QueryFactory,
    RelevanceDefinitionFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

ANSWER = ("Meaning: The question asks whether the company commits to reaching net-zero emissions.\n\n"
          "Examples of the information it seeks:\n1. A net-zero target year\n2. Interim reduction targets")
DRAFTED = ("The question asks whether the company commits to reaching net-zero emissions.\n\n"
           "Examples of the information it seeks:\n1. A net-zero target year\n2. Interim reduction targets")


class Scripted:
    """A model that answers `text` and keeps the messages it was asked."""

    def __init__(self, text: str = ANSWER) -> None:
        self.text, self.calls = text, []

    def __call__(self, messages, max_new_tokens=None) -> Generation:
        self.calls.append((messages, max_new_tokens))
        return Generation(text=self.text, prompt_tokens=321, completion_tokens=45)

    @property
    def prompt(self) -> str:
        (messages, _), = self.calls
        return messages[-1]["content"]


def openai_judge(project, name: str = "gpt"):
    return JudgeFactory(project=project, name=name, backend="openai", model="gpt-x",
                        parameters={"endpoint": "unreachable", "method": "ask"})


@pytest.fixture
def query():
    query = QueryFactory(project=ProjectFactory(), text="Does the company set a net-zero target?")
    RelevanceDefinitionFactory(query=query, text="Targets for greenhouse gas emissions.")
    return query


def test_a_draft_is_a_new_version_that_is_not_current(query, django_capture_on_commit_callbacks):
    judge, admin = openai_judge(query.project), UserFactory()
    pair = PairFactory(project=query.project, query=query)
    JudgmentFactory(pair=pair, judge=judge, definition=query.definitions.get())
    with django_capture_on_commit_callbacks() as callbacks:
        draft = definition_draft_request(query=query, judge=judge, refine=False, user=admin)
    assert len(callbacks) == 1  # the worker task, enqueued once the request is committed
    assert (draft.requested_by, draft.finished_at, draft.definition) == (admin, None, None)

    model = Scripted()
    draft = definition_draft_run(draft_id=draft.id, generate=model)
    (messages, max_new_tokens), = model.calls
    assert max_new_tokens == DRAFT_MAX_NEW_TOKENS == 400
    assert "Question: Does the company set a net-zero target?" in model.prompt and "<passage" not in model.prompt

    version = draft.definition
    assert (version.version, version.text, version.is_draft, version.origin, version.drafted_by, version.author) == (
        2, DRAFTED, True, "llm_draft", judge, None)
    assert draft.finished_at is not None and draft.error == "" and draft.raw_output == ANSWER
    assert (draft.prompt_tokens, draft.completion_tokens) == (321, 45)

    # Experts, scoring workers and the stale count all still go by version 1.
    v1 = RelevanceDefinition.objects.get(query=query, version=1)
    assert current_definition(query=query) == v1 == current_definition(query=query.id)
    assert current_definitions([query.id]) == {query.id: v1}
    assert not stale_judgments(project=query.project).exists()
    assert scoring_job_create(project=query.project, judge=judge, scope=ScoringJob.Scope.MISSING).total == 0
    assert [(v.definition.version, v.is_current) for v in definition_versions(query=query)] == [(2, False), (1, True)]


def test_a_finished_draft_is_not_run_again(query):
    judge = openai_judge(query.project)
    draft = definition_draft_create(query=query, judge=judge, refine=False, user=None)
    first = definition_draft_run(draft_id=draft.id, generate=Scripted())
    again = Scripted()
    assert definition_draft_run(draft_id=draft.id, generate=again).definition == first.definition
    assert definition_draft_fail(draft_id=draft.id, error="late failure").error == ""
    assert again.calls == [] and RelevanceDefinition.objects.filter(query=query).count() == 2
    assert definition_draft_run(draft_id=draft.id + 1000, generate=again) is None  # a deleted draft: nothing to do


def test_an_answer_that_is_not_a_definition_is_stored_as_an_error_and_writes_nothing(query):
    draft = definition_draft_create(query=query, judge=openai_judge(query.project), refine=False, user=None)
    draft = definition_draft_run(draft_id=draft.id, generate=Scripted("Net zero is a great goal for companies."))
    assert draft.error == ("the model's answer is not a definition: the answer has no list of examples of the "
                           "information the question seeks")
    assert draft.raw_output == "Net zero is a great goal for companies." and draft.finished_at is not None
    assert draft.definition is None and draft.completion_tokens == 45
    assert list(query.definitions.values_list("version", flat=True)) == [1]


def test_a_failed_draft_keeps_its_error_and_writes_nothing(query):
    draft = definition_draft_create(query=query, judge=openai_judge(query.project), refine=False, user=None)
    failed = definition_draft_fail(draft_id=draft.id, error="TransientScoringError: 503 from the server")
    assert (failed.error, failed.definition) == ("TransientScoringError: 503 from the server", None)
    assert failed.finished_at is not None and query.definitions.count() == 1


def label(pair, grade: int, *, minutes_ago: int, role: str = "annotator", **fields):
    return LabelFactory(pair=pair, grade=grade, role=role, created_at=timezone.now() - timedelta(minutes=minutes_ago),
                        **fields)


def test_refining_shows_the_model_the_passages_experts_labelled_relevant_newest_first(query):
    project = query.project

    def pair(text: str):
        return PairFactory(project=project, query=query, passage=PassageFactory(project=project, text=text))

    split, adjudicated = pair("SPLIT: net zero by 2040."), pair("ADJUDICATED: net zero by 2050.")
    irrelevant, disputed = pair("IRRELEVANT: the dividend."), pair("DISPUTED: a vague pledge.")
    changed, reference = pair("CHANGED: the board's view."), pair("REFERENCE: relevant in the imported qrels only.")
    label(split, 2, minutes_ago=30)
    label(split, 1, minutes_ago=20)  # two annotators with different grades: unresolved, so left out
    label(adjudicated, 0, minutes_ago=15)
    label(adjudicated, 2, minutes_ago=10, role="adjudicator")  # the adjudicator decides: relevant
    label(irrelevant, 0, minutes_ago=5)
    label(disputed, 0, minutes_ago=4)
    label(disputed, 2, minutes_ago=3)
    expert = UserFactory()
    label(changed, 2, minutes_ago=60, annotator=expert, superseded_at=timezone.now())  # the expert changed their
    label(changed, 0, minutes_ago=2, annotator=expert)  # mind: irrelevant now
    reference.reference_grade = 2
    reference.save()
    single = pair("SINGLE: scope 1-3 cut 40% by 2030.")
    label(single, 1, minutes_ago=1)  # one expert, "partially relevant": relevant on the default scale

    judge = openai_judge(project)
    draft = definition_draft_create(query=query, judge=judge, refine=True, user=None)
    model = Scripted()
    draft = definition_draft_run(draft_id=draft.id, generate=model)
    prompt = model.prompt
    assert "<definition>\nTargets for greenhouse gas emissions.\n</definition>" in prompt
    assert "<passage 1>\nSINGLE: scope 1-3 cut 40% by 2030.\n</passage 1>" in prompt
    assert "<passage 2>\nADJUDICATED: net zero by 2050.\n</passage 2>" in prompt
    assert "<passage 3>" not in prompt
    for left_out in ("SPLIT", "IRRELEVANT", "DISPUTED", "CHANGED", "REFERENCE"):
        assert left_out not in prompt
    assert (draft.definition.origin, draft.definition.is_draft, draft.refine) == ("llm_refined", True, True)


def test_refining_uses_the_eight_newest_relevant_passages(query):
    project = query.project
    for minutes in range(10):
        pair = PairFactory(project=project, query=query,
                           passage=PassageFactory(project=project, text=f"passage labelled {minutes} minutes ago"))
        label(pair, 2, minutes_ago=minutes)
    draft = definition_draft_create(query=query, judge=openai_judge(project), refine=True, user=None)
    model = Scripted()
    definition_draft_run(draft_id=draft.id, generate=model)
    shown = [f"<passage {n + 1}>\npassage labelled {n} minutes ago\n" for n in range(8)]
    assert all(text in model.prompt for text in shown)
    assert "<passage 9>" not in model.prompt
    assert "8 minutes ago" not in model.prompt and "9 minutes ago" not in model.prompt


def test_refining_is_refused_when_no_passage_is_labelled_relevant(query):
    pair = PairFactory(project=query.project, query=query)
    label(pair, 0, minutes_ago=1)
    with pytest.raises(DraftingError, match="no passage of query .* is labelled relevant by the experts yet"):
        definition_draft_request(query=query, judge=openai_judge(query.project), refine=True, user=None)
    assert not DefinitionDraft.objects.exists()


def test_a_refine_whose_relevant_labels_are_gone_by_the_time_it_runs_records_why(query):
    pair = PairFactory(project=query.project, query=query)
    relevant = label(pair, 2, minutes_ago=1)
    draft = definition_draft_create(query=query, judge=openai_judge(query.project), refine=True, user=None)
    relevant.grade = 0
    relevant.save()
    model = Scripted()
    draft = definition_draft_run(draft_id=draft.id, generate=model)
    assert "no passage of the query is labelled relevant any more" in draft.error
    assert model.calls == [] and draft.definition is None


@pytest.mark.parametrize(("backend", "parameters", "message"), [
    ("import", {}, "its backend is 'import'; drafting needs a generative judge"),
    ("embedding", {"method": "embedding"}, "its backend is 'embedding'"),
    ("openai", {"method": "ask", "endpoint": "unreachable"}, "a judge needs a model"),
])
def test_judges_that_cannot_write_are_refused(query, backend, parameters, message):
    judge = JudgeFactory(project=query.project, name="j", backend=backend, model="", parameters=parameters)
    with pytest.raises(DraftingError, match=message):
        definition_draft_request(query=query, judge=judge, refine=False, user=None)
    assert not DefinitionDraft.objects.exists()


def test_a_judge_of_another_project_is_refused(query):
    with pytest.raises(DraftingError, match="belongs to another project"):
        definition_draft_request(query=query, judge=openai_judge(ProjectFactory()), refine=False, user=None)


def test_the_worker_task_runs_the_draft_once_and_records_what_stopped_it(query):
    judge = openai_judge(query.project)
    draft = definition_draft_create(query=query, judge=judge, refine=False, user=None)
    judge.parameters = {**judge.parameters, "temperature": 2}
    judge.save()
    definition_draft_task.apply(args=[draft.id])
    draft.refresh_from_db()
    assert "cannot be loaded: judge 'gpt': unknown parameters ['temperature']" in draft.error
    finished = draft.finished_at
    definition_draft_task.apply(args=[draft.id])  # a redelivered message changes nothing
    draft.refresh_from_db()
    assert draft.finished_at == finished and query.definitions.count() == 1


def test_reviewing_a_draft_makes_it_current_and_keeps_its_origin(query):
    judge, admin = openai_judge(query.project), UserFactory()
    draft = definition_draft_create(query=query, judge=judge, refine=False, user=None)
    drafted = definition_draft_run(draft_id=draft.id, generate=Scripted()).definition
    edited = drafted.text.replace("2. Interim reduction targets", "2. Interim reduction targets for 2030")
    saved = definition_save(query=query, text=edited, author=admin, based_on=drafted)
    assert (saved.version, saved.is_draft, saved.origin, saved.drafted_by, saved.based_on, saved.author) == (
        3, False, "llm_draft", judge, drafted, admin)
    assert current_definition(query=query) == saved == current_definition(query=query.id)
    assert current_definitions([query.id]) == {query.id: saved}
    versions = definition_versions(query=query)
    assert [(v.definition.version, v.is_current, v.reviewed_as) for v in versions] == [
        (3, True, ()), (2, False, (3,)), (1, False, ())]
    # Judgments under version 1 are stale now, as after any save.
    pair = PairFactory(project=query.project, query=query)
    JudgmentFactory(pair=pair, judge=judge, definition=RelevanceDefinition.objects.get(query=query, version=1))
    assert stale_judgments(project=query.project).count() == 1 == Judgment.objects.count()
    # A version that is not a draft cannot be reviewed as one.
    with pytest.raises(DefinitionError, match="is not a draft"):
        definition_save(query=query, text="something else", author=admin, based_on=saved)


def test_a_draft_is_a_job_pending_then_running_then_done_or_failed(query):
    judge = openai_judge(query.project)
    draft = definition_draft_create(query=query, judge=judge, refine=False, user=None)
    assert (draft.status, draft.attempts, draft.started_at) == ("pending", 0, None)
    seen = []

    def model(messages, max_new_tokens=None):
        seen.append(DefinitionDraft.objects.values_list("status", "attempts").get(id=draft.id))
        return Scripted()(messages, max_new_tokens)

    done = definition_draft_run(draft_id=draft.id, generate=model)
    assert seen == [("running", 1)]
    assert (done.status, done.attempts) == ("done", 1) and done.started_at <= done.finished_at
    other = definition_draft_create(query=query, judge=judge, refine=False, user=None)
    failed = definition_draft_run(draft_id=other.id, generate=Scripted("Net zero is a great goal."))
    assert (failed.status, failed.attempts, failed.definition) == ("failed", 1, None)


def test_the_task_retries_a_server_that_is_down_then_records_the_error(query, monkeypatch):
    class Down:
        def generate_chat(self, messages, max_new_tokens=None):
            raise TransientScoringError("503 from the server")

    monkeypatch.setattr(drafting_module, "scorer_for", lambda judge: Down())
    draft = definition_draft_create(query=query, judge=openai_judge(query.project), refine=False, user=None)
    definition_draft_task.apply(args=[draft.id])  # retries run eagerly, then the draft is given up
    draft.refresh_from_db()
    assert (draft.status, draft.attempts, draft.error) == ("failed", 4, "TransientScoringError: 503 from the server")
    assert draft.finished_at is not None and query.definitions.count() == 1


def test_one_worker_holds_a_draft_and_leaves_it_to_its_retry_or_to_whoever_finds_it_lost(query, settings):
    """job_take's one rule, as every kind of job has it: the same task delivered again while a worker drafts finds
    the draft held and asks the model nothing; a worker that stops on an error releases it, so the task's retry
    takes it at once; a holder that has not shown it lives for JOB_STALL_SECONDS is taken over."""
    judge = openai_judge(query.project)
    draft = definition_draft_create(query=query, judge=judge, refine=False, user=None)
    duplicate = Scripted()

    def down_after_a_second_delivery(messages, max_new_tokens=None):
        again = definition_draft_run(draft_id=draft.id, generate=duplicate)  # delivered again meanwhile
        assert (again.status, again.attempts) == ("running", 1)
        raise TransientScoringError("503 from the server")

    with pytest.raises(TransientScoringError):
        definition_draft_run(draft_id=draft.id, generate=down_after_a_second_delivery)
    assert duplicate.calls == []
    retried = definition_draft_run(draft_id=draft.id, generate=Scripted())  # the task's retry, 10 s later
    assert (retried.status, retried.attempts, retried.definition.text) == ("done", 2, DRAFTED)

    settings.JOB_STALL_SECONDS = 600
    lost = definition_draft_create(query=query, judge=judge, refine=False, user=None)
    beat = timezone.now() - timedelta(seconds=599)
    DefinitionDraft.objects.filter(id=lost.id).update(status="running", attempts=1, started_at=beat, heartbeat_at=beat)
    assert definition_draft_run(draft_id=lost.id, generate=duplicate).status == "running" and not duplicate.calls
    DefinitionDraft.objects.filter(id=lost.id).update(heartbeat_at=timezone.now() - timedelta(seconds=601))
    taken = definition_draft_run(draft_id=lost.id, generate=duplicate)
    assert (taken.status, taken.attempts, len(duplicate.calls)) == ("done", 2, 1)


def test_the_sweep_leaves_a_released_draft_to_its_retry(query, settings):
    """A long job that stops on a transient error is released for its task's retry, which comes up to 5 minutes
    later; the sweep (every minute) must not take the released job for one whose worker was lost, or a query
    generation that ran an hour would be failed by a 503 its retry would have got past."""
    settings.JOB_STALL_SECONDS, settings.DRAFT_TIME_LIMIT = 600, 3600
    draft = definition_draft_create(query=query, judge=openai_judge(query.project), refine=False, user=None)
    long_ago = timezone.now() - timedelta(seconds=700)  # longer than the stall time, within the time limit

    def down(messages, max_new_tokens=None):
        DefinitionDraft.objects.filter(id=draft.id).update(started_at=long_ago)
        raise TransientScoringError("503 from the server")

    with pytest.raises(TransientScoringError):
        definition_draft_run(draft_id=draft.id, generate=down)
    swept = jobs_sweep()
    assert swept.given_up == {} and DefinitionDraft.objects.get(id=draft.id).status == "running"
    assert job_state(DefinitionDraft.objects.get(id=draft.id)).name == "running"
    retried = definition_draft_run(draft_id=draft.id, generate=Scripted())
    assert (retried.status, retried.attempts) == ("done", 2)

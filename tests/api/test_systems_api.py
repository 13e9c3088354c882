"""GET /api/projects/SLUG/systems/evaluation/: the evaluation JSON for admins and viewers, refused to experts (every
source is made of gold grades or judges' P of items they have not labelled) and invisible to non-members; above
SYSTEMS_INLINE_ENTRIES computed by a worker and read back, as the Systems page does, within the project's bound."""
from __future__ import annotations

import json

import numpy as np
import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from labeling.models import Membership, Run, RunEntry, SystemsResult
from labeling.selectors.systems import systems_report, systems_report_json
from labeling.selectors.systems_significance import SignificanceOptions, comparison_json, systems_significance
from labeling.services import systems_cache
from labeling.services.systems_cache import systems_run
from tests.factories import MembershipFactory, UserFactory
from tests.selectors.test_systems import RUN_NAMES, judge_qrels, systems_project, trec_per_query

pytestmark = pytest.mark.django_db


@pytest.fixture
def built():
    return systems_project()


def _client(built, role: str | None) -> APIClient:
    client = APIClient()
    user = UserFactory(username=f"user-{role}")
    if role is not None:
        MembershipFactory(project=built.project, user=user, role=role)
    client.force_authenticate(user)
    return client


def _url(built) -> str:
    return reverse("api:systems-evaluation", args=[built.project.slug])


@pytest.mark.parametrize("role", [Membership.Role.VIEWER, Membership.Role.ADMIN])
def test_viewers_and_admins_get_the_report_s_json(built, role):
    response = _client(built, role).get(_url(built), {"qrels": ["human", "judge:llm"], "group_by": "intent"})
    assert response.status_code == 200
    data = response.json()
    report = systems_report(project=built.project, sources=["human", "judge:llm"], group_by="intent")
    # The JSON as the selector builds it, through DRF's renderer (nan and tuples included).
    assert data == json.loads(json.dumps(systems_report_json(report)))
    judge = judge_qrels()
    for run in RUN_NAMES:
        values = trec_per_query(built.rankings[run], judge).values()
        assert data["runs"][run]["judge:llm"]["P@10"] == pytest.approx(np.mean([v["P@10"] for v in values]))
    assert set(data["groups"]["values"]) == {"(none)", "action", "info"}


def test_every_source_by_default_and_the_measures_asked(built):
    client = _client(built, Membership.Role.VIEWER)
    data = client.get(_url(built), {"measure": "AP", "include_partial": "true"}).json()
    assert [source["key"] for source in data["sources"]] == ["human", "judge:llm", "combined:llm", "expected:llm"]
    assert list(data["runs"]["bm25"]["human"]) == ["AP", "judged@10"]
    assert data["agreement_measure"] == "AP"
    # No AP under an expected source: its agreement with human is null.
    assert data["agreement"]["human|expected:llm"] is None
    # The judge lacks some of the pool pairs the runs retrieve: by default its sources are left out, and say so.
    default = client.get(_url(built), {"measure": "AP"}).json()
    assert default["left_out"] == ["judge:llm", "combined:llm", "expected:llm"] and default["agreement"] == {}
    assert default["coverage"]["human"] is None and default["coverage"]["judge:llm"]["partial"] is True
    assert default["coverage"]["judge:llm"] == data["coverage"]["expected:llm"]


def test_an_expert_is_refused_and_an_outsider_finds_no_project(built):
    expert = _client(built, Membership.Role.EXPERT).get(_url(built))
    assert expert.status_code == 403
    assert "label blind" in expert.json()["message"]
    assert _client(built, None).get(_url(built)).status_code == 404
    assert APIClient().get(_url(built)).status_code == 401


@pytest.mark.parametrize(("params", "status", "message"), [
    ({"qrels": "judge:nobody"}, 404, "no judge 'nobody'"),
    ({"qrels": "gold"}, 400, "qrels: 'human', 'sample', 'judge:NAME'"),
    ({"measure": "MRR"}, 400, "unknown measure 'MRR'"),
    ({"include_partial": "yes"}, 400, "include_partial: must be true or false"),
])
def test_a_source_or_measure_the_project_lacks_is_refused_naming_it(built, params, status, message):
    # 400: not a source or measure the schema allows; 404: a judge the project lacks.
    response = _client(built, Membership.Role.VIEWER).get(_url(built), params)
    assert response.status_code == status
    assert message in response.json()["message"]


@pytest.mark.parametrize("compare", ["true", "false"])
def test_permutations_past_the_page_s_own_are_refused_naming_the_field(built, compare):
    response = _client(built, Membership.Role.VIEWER).get(_url(built), {"compare": compare,
                                                                        "permutations": "1000000"})
    assert response.status_code == 400
    assert "permutations" in response.json()["errors"] and "at most 10,000" in response.json()["message"]


@pytest.fixture
def cached(built, settings, monkeypatch):
    """The project above SYSTEMS_INLINE_ENTRIES: the API goes through the worker's cache, as the page does; the
    tasks queued are kept in the list returned."""
    settings.SYSTEMS_INLINE_ENTRIES = 0
    settings.SYSTEMS_REFRESH_MIN_SECONDS = 0
    for run in Run.objects.filter(project=built.project):
        run.entries = RunEntry.objects.filter(run=run).count()
        run.save(update_fields=["entries"])
    queued = []
    monkeypatch.setattr(systems_cache.systems_refresh_task, "apply_async",
                        lambda args, countdown: queued.append(args[0]))
    return queued


def test_above_the_size_threshold_a_worker_computes_and_the_api_reads_it_back(
        built, cached, django_capture_on_commit_callbacks):
    client = _client(built, Membership.Role.VIEWER)
    params = {"qrels": ["human", "judge:llm"], "group_by": "intent", "compare": "true", "test": "t"}
    with django_capture_on_commit_callbacks(execute=True):
        first = client.get(_url(built), params)
        again = client.get(_url(built), params)
    runs = Run.objects.filter(project=built.project).count()
    assert first.status_code == 202
    assert first.json() == {"status": "pending", "done": 0, "total": runs + 2, "computed_at": None}
    assert again.status_code == 202 and len(cached) == 1  # asked twice, computed once

    systems_run(result_id=cached[0])
    answer = client.get(_url(built), params)
    assert answer.status_code == 200
    data = answer.json()
    report = systems_report(project=built.project, sources=["human", "judge:llm"], group_by="intent")
    significance = systems_significance(report, SignificanceOptions(test="t"))
    assert data == json.loads(json.dumps({**systems_report_json(report), "significance": {
        key: {measure: comparison_json(found) for measure, found in by_measure.items()}
        for key, by_measure in significance.items()}}))
    assert len(cached) == 1


def test_past_the_project_s_bound_of_computations_the_api_is_busy(
        built, cached, settings, django_capture_on_commit_callbacks):
    settings.SYSTEMS_MAX_PENDING = 1
    client = _client(built, Membership.Role.VIEWER)
    with django_capture_on_commit_callbacks(execute=True):
        assert client.get(_url(built), {"threshold": "0.5"}).status_code == 202
        busy = client.get(_url(built), {"threshold": "0.6"})
        missing = client.get(_url(built), {"qrels": "judge:nobody"})
    assert busy.status_code == 429 and busy["Retry-After"] and "busy" in busy.json()["message"]
    assert missing.status_code == 404
    assert len(cached) == 1 and SystemsResult.objects.filter(project=built.project).count() == 1

"""GET /api/projects/SLUG/systems/evaluation/: the evaluation JSON for admins and viewers, refused to experts (every
source is made of gold grades or judges' P of items they have not labelled) and invisible to non-members."""
from __future__ import annotations

import json

import numpy as np
import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from labeling.models import Membership
from labeling.selectors.systems import systems_report, systems_report_json
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

"""The completeness report and a round's numbers as types: what is stored (the validation cache's report, a round's
numbers, a round of #33 that stored its one measure at the top) reads back and writes the same keys, so old rows
show as they did and the API's answers keep their shape."""
from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from labeling.models import LabellingRound, Membership
from labeling.selectors.completeness import completeness_cached, completeness_compute, project_target_met
from labeling.selectors.completeness_report import CompletenessReport, RoundNumbers, completeness_from_dict
from labeling.services.rounds import round_request, round_run
from labeling.services.validation import validation_result_ensure
from tests.factories import MembershipFactory, UserFactory
from tests.selectors.test_completeness import world  # noqa: F401 - the fixture: 60 pairs, a judge, 17 gold pairs

pytestmark = pytest.mark.django_db


def _admin(project):
    admin = UserFactory()
    MembershipFactory(project=project, user=admin, role=Membership.Role.ADMIN)
    return admin


def test_what_the_worker_stores_reads_back_and_writes_the_same_keys(world):  # noqa: F811
    project, *_ = world
    result = validation_result_ensure(project=project)
    stored, cached = result.data["completeness"], completeness_cached(result=result)
    assert isinstance(cached, CompletenessReport) and cached.to_dict() == stored
    assert cached.pool.verified_relevant == completeness_compute(project=project).pool.verified_relevant == 8
    assert completeness_from_dict({"error": "level out of range"}).error == "level out of range"
    started = round_request(project=project, by=_admin(project), judge="imported", budget=1)
    LabellingRound.objects.filter(id=started.id).update(status="running")
    numbers = round_run(round_id=started.id).numbers
    assert set(numbers) == {"labels", "before", "calibration", "after"}
    assert RoundNumbers.from_dict(numbers).to_dict() == numbers


def test_a_round_of_33_with_its_measure_at_the_top_is_listed_with_it_as_before(world):  # noqa: F811
    project, *_ = world
    admin = _admin(project)
    measure = completeness_compute(project=project).to_dict()
    started = round_request(project=project, by=admin, judge="imported", budget=1)
    LabellingRound.objects.filter(id=started.id).update(status="done", numbers={"labels": 1, **measure})
    client = APIClient()
    client.force_authenticate(admin)
    row = client.get(f"/api/projects/{project.slug}/rounds/").json()["rounds"][0]
    assert row["before"]["verified_relevant"] == row["verified_relevant"] == measure["pool"]["verified_relevant"]
    assert row["after_refit"] is None and row["labels"] == 1 and row["state"] == "done"


def test_the_kappa_target_is_met_where_the_cached_reports_lower_bound_reaches_it(world):  # noqa: F811
    project, *_ = world
    low = completeness_compute(project=project).judge_accuracy.sample_kappa_low
    validation_result_ensure(project=project)
    project.stop_kappa = low
    assert project_target_met(project=project)
    project.stop_kappa = min(1.0, low + 0.01)
    assert not project_target_met(project=project)

"""Leave one run out on the command line (`pool_reusability`) and in the API (GET .../systems/reusability/): the
numbers pool_reusability gives on the hand-worked fixture of tests/selectors/test_systems_reusability.py, the flag
said in words, the refusals named, and the API's access as the other systems view's (admins and viewers; blind
first)."""
from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from labeling.models import Membership
from labeling.selectors.systems_reusability import pool_reusability, reusability_json
from tests.factories import MembershipFactory, UserFactory
from tests.selectors.test_systems_reusability import reuse_project

pytestmark = pytest.mark.django_db

HEADER = ["run", "contributed pairs", "relevant found only by it", "score", "score left out", "drop", "rank",
          "rank left out", "change"]


@pytest.fixture
def project():
    return reuse_project()


def _command(*args: str) -> str:
    out = StringIO()
    call_command("pool_reusability", "--project", "reuse", *args, stdout=out)
    return out.getvalue()


def _client(project, role: str | None) -> APIClient:
    client = APIClient()
    user = UserFactory(username=f"user-{role}")
    if role is not None:
        MembershipFactory(project=project, user=user, role=role)
    client.force_authenticate(user)
    return client


def _url(project) -> str:
    return reverse("api:systems-reusability", args=[project.slug])


def _hand_worked(data: dict) -> None:
    # P@10, worked out in tests/selectors/test_systems_reusability.py: C falls from 0.25 to 0.15 and from first to
    # third, A from 0.2 to 0.15 and from second to third; B found no relevant passage alone. C's move of 2 is more than
    # 1: flagged.
    rows = {row["run"]: row for row in data["runs"]}
    assert (rows["C"]["unique_relevant"], rows["C"]["score"], rows["C"]["score_left_out"]) == (
        2, pytest.approx(0.25), pytest.approx(0.15))
    assert (rows["C"]["drop"], rows["C"]["rank"], rows["C"]["rank_left_out"], rows["C"]["rank_change"]) == (
        pytest.approx(0.1), 1, 3, 2)
    assert (rows["A"]["contributed"], rows["A"]["rank_change"], rows["B"]["rank_change"]) == (6, 1, 0)
    assert (data["largest_move"], data["flagged"]) == (2, True)


def test_the_command_s_json_is_the_selector_s(project):
    data = json.loads(_command("--measure", "P@10", "--json"))
    expected = pool_reusability(project=project, source="human", measure="P@10")
    assert data == json.loads(json.dumps(reusability_json(expected)))
    assert (data["source"], data["measure"], data["threshold"]) == ("human", "P@10", 1)
    _hand_worked(data)
    assert json.loads(_command("--measure", "P@10", "--threshold", "2", "--json"))["flagged"] is False


def test_the_command_s_table_and_the_flag_in_words(project):
    lines = _command("--measure", "P@10").splitlines()
    assert lines[0].startswith("Project reuse: each run that fed the pool left out in turn, scored on the human "
                               "qrels")
    assert [cell.strip() for cell in lines[1].split("  ") if cell.strip()] == HEADER
    rows = {line.split()[0]: line.split() for line in lines[2:5]}
    assert rows["C"] == ["C", rows["C"][1], "2", "0.250", "0.150", "0.100", "1", "3", "+2"]
    assert rows["B"][-1] == "0"
    assert lines[-1].startswith("Flagged: a run left out moves by 2 places (more than 1 place)")
    assert _command("--measure", "P@10", "--threshold", "2").splitlines()[-1] == (
        "Not flagged: no run left out moves by more than 2 places (the largest move is 2 places).")
    # The defaults: human qrels on nDCG@10, where A moves one place only (tests/selectors/test_systems_reusability.py).
    assert _command().splitlines()[-1].startswith("Not flagged: no run left out moves by more than 1 place")


def test_the_command_names_what_it_refuses(project):
    with pytest.raises(CommandError, match=r"measure must be one of nDCG@10, .*, not 'judged@10'"):
        _command("--measure", "judged@10")
    with pytest.raises(CommandError, match="a sample grades only part of the pool"):
        _command("--qrels", "sample")
    with pytest.raises(CommandError, match="threshold must be 0 places or more"):
        _command("--threshold", "-1")
    with pytest.raises(CommandError, match="no project 'elsewhere'"):
        call_command("pool_reusability", "--project", "elsewhere", stdout=StringIO())


@pytest.mark.parametrize("role", [Membership.Role.VIEWER, Membership.Role.ADMIN])
def test_viewers_and_admins_get_the_selector_s_numbers(project, role):
    client = _client(project, role)
    response = client.get(_url(project), {"source": "human", "measure": "P@10", "threshold": "1"})
    assert response.status_code == 200
    data = response.json()
    assert data == json.loads(json.dumps(reusability_json(pool_reusability(project=project, measure="P@10"))))
    _hand_worked(data)
    assert client.get(_url(project), {"measure": "P@10", "threshold": "2"}).json()["flagged"] is False
    default = client.get(_url(project)).json()
    assert (default["source"], default["measure"], default["threshold"], default["flagged"]) == (
        "human", "nDCG@10", 1, False)
    assert default == json.loads(json.dumps(reusability_json(pool_reusability(project=project))))


@pytest.mark.parametrize(("params", "status", "message"), [
    ({"measure": "judged@10"}, 400, "measure: one of nDCG@10, nDCG@100, AP, P@10, R@100, got 'judged@10'"),
    ({"threshold": "-1"}, 400, "threshold: a whole number of places, 0 or more, got '-1'"),
    ({"source": "gold"}, 400, "source: 'human', 'judge:NAME', 'combined:NAME' or 'release:NAME', got 'gold'"),
    # Well formed, but what the selector cannot do (SystemsError): 422, a judge the project lacks 404.
    ({"source": "sample"}, 422, "sample: a sample grades only part of the pool"),
    ({"source": "judge:nobody"}, 404, "no judge 'nobody'"),
])
def test_what_the_api_refuses_is_named(project, params, status, message):
    response = _client(project, Membership.Role.VIEWER).get(_url(project), params)
    assert response.status_code == status
    assert message in response.json()["message"]


def test_an_expert_is_refused_and_an_outsider_finds_no_project(project):
    expert = _client(project, Membership.Role.EXPERT).get(_url(project))
    assert expert.status_code == 403
    assert "label blind" in expert.json()["message"]
    assert _client(project, None).get(_url(project)).status_code == 404
    assert APIClient().get(_url(project)).status_code == 401

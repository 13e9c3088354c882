"""`GET /api/projects/{slug}/qrels/`: with a token, as curl sends it, the same bytes as `manage.py export_qrels` and
the project page's download for every format and grade source; 400 naming what is wrong with `format`, `source` or
`threshold`, 422 for a threshold with the human grades; 403 for an expert (blind first)."""
from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from labeling.models import Membership
from labeling.services.users import user_token_ensure
from tests.views.test_export import CALIBRATED, CASES, FORMATS, RAW, SLUG, command_bytes, export_project, query

pytestmark = pytest.mark.django_db

URL = reverse("api:qrels", args=[SLUG])


@pytest.fixture
def world(tmp_path):
    return export_project(tmp_path)


def curl(user) -> Client:
    """A client that sends only the token, no session and no CSRF cookie, as curl does."""
    return Client(headers={"Authorization": f"Token {user_token_ensure(user=user).key}"})


@pytest.mark.parametrize(("format", "source", "threshold"), CASES)
def test_the_api_answers_the_commands_file_and_the_pages_download_byte_for_byte(
    client, tmp_path, world, format, source, threshold
):
    _, _, users = world
    response = curl(users[Membership.Role.VIEWER]).get(URL, query(format, source, threshold))
    assert response.status_code == 200
    assert response.streaming
    body = b"".join(response.streaming_content)
    assert body == command_bytes(tmp_path, format, source, threshold)
    client.force_login(users[Membership.Role.ADMIN])
    page = client.get(reverse("labeling:qrels_export", args=[SLUG]), query(format, source, threshold))
    assert body == b"".join(page.streaming_content)
    assert response["Content-Disposition"] == page["Content-Disposition"]


def test_a_judge_source_grades_each_pair_by_its_p_against_the_threshold(world):
    project, reference, users = world
    scale = project.label_scale
    response = curl(users[Membership.Role.ADMIN]).get(URL, {"format": "beir", "source": f"judge:{RAW}",
                                                            "threshold": "0.6"})
    p = reference["p"][RAW]
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert lines[0] == "query-id\tcorpus-id\tscore"
    # Pool order is the order the import created the pairs in: compared as sets here, in full by the byte tests.
    assert sorted(lines[1:]) == sorted(
        f"{q}\t{d}\t{scale.relevant_from if p[(q, d)] >= 0.6 else scale.values[0]}" for q, d in reference["order"]
    )


def test_combined_takes_the_gold_grade_where_there_is_one(world):
    _, reference, users = world
    response = curl(users[Membership.Role.ADMIN]).get(URL, {"format": "jsonl", "source": f"combined:{CALIBRATED}"})
    records = [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]
    assert sorted((r["query_id"], r["doc_id"]) for r in records) == sorted(reference["order"])
    for record in records:
        key = (record["query_id"], record["doc_id"])
        if key in reference["gold"]:
            assert (record["grade"], record["grade_source"]) == (reference["gold"][key], "human")
        else:
            (judgment,) = [j for j in record["judgments"] if j["judge"] == CALIBRATED]
            assert judgment["p_relevant"] == reference["p"][CALIBRATED][key]
            assert record["grade_source"] == f"judge:{CALIBRATED}"
            assert record["grade"] == (1 if judgment["p_calibrated"] >= 0.5 else 0)


@pytest.mark.parametrize(("params", "status", "message"), [
    ({"format": "csv"}, 400, "format: one of trec, beir, jsonl, got 'csv'"),
    ({"format": "json"}, 400, "format: one of trec, beir, jsonl, got 'json'"),
    ({"source": "gold"}, 400, "source: 'human', 'judge:NAME' or 'combined:NAME', got 'gold'"),
    ({"source": "judge:nobody"}, 404, f"project '{SLUG}' has no judge 'nobody' (its judges: {RAW}, {CALIBRATED})"),
    ({"source": f"judge:{RAW}", "threshold": "high"}, 400, "threshold: a number from 0 to 1, got 'high'"),
    ({"source": f"judge:{RAW}", "threshold": "-0.1"}, 400, "threshold: a number from 0 to 1, got '-0.1'"),
    ({"source": f"judge:{RAW}", "threshold": "nan"}, 400, "threshold: a number from 0 to 1, got 'nan'"),
])
def test_a_wrong_parameter_is_refused_saying_what_is_wrong(world, params, status, message):
    # 400: the value breaks the schema; 404: it names a judge the project lacks.
    _, _, users = world
    response = curl(users[Membership.Role.ADMIN]).get(URL, params)
    assert response.status_code == status
    assert response["Content-Type"] == "application/json"
    assert message in response.json()["message"]


def test_an_expert_gets_403_on_the_qrels_in_every_format(world):
    _, _, users = world
    for format in FORMATS:
        response = curl(users[Membership.Role.EXPERT]).get(URL, {"format": format})
        assert response.status_code == 403
        assert "blind" in response.json()["message"]


def test_without_a_token_nothing_is_exported(world):
    assert Client().get(URL).status_code in {401, 403}
    assert Client(headers={"Authorization": "Token not-a-token"}).get(URL).status_code in {401, 403}


@pytest.mark.parametrize("params", [
    {"threshold": "0.9"},
    {"source": "human", "threshold": "0.5", "format": "beir"},
    {"source": "human", "threshold": "0", "format": "jsonl"},
])
def test_a_threshold_with_the_human_grades_is_refused_not_dropped(world, params):
    # The human grades have nothing to apply a threshold to: 422, as the page and export_qrels refuse it.
    _, _, users = world
    api = curl(users[Membership.Role.ADMIN])
    refused = api.get(URL, params)
    assert refused.status_code == 422
    assert refused.json()["code"] == "unprocessable"
    assert "threshold applies to a judge source" in refused.json()["message"]
    plain = api.get(URL, {key: value for key, value in params.items() if key != "threshold"})
    blank = api.get(URL, {**params, "threshold": ""})  # the page's empty field: no threshold given
    assert plain.status_code == blank.status_code == 200
    assert b"".join(plain.streaming_content) == b"".join(blank.streaming_content) != b""

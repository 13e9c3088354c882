"""The audits API through DRF's test client, with a token as a script would use it, on real audits (the
multi-condition example project audited by the bundled MiniLM judge): the dry run answers what the audit would ask
without starting it, a start is 202 with the URL to poll, the audit's report comes back as the worker stored it,
refusals are 400 with the service's reason; a run's multi-condition report; blind first (experts get 403); the
OpenAPI schema."""
from __future__ import annotations

import pytest
from django.urls import reverse
from drf_spectacular.validation import validate_schema
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from labeling.models import AuditJob
from labeling.services.audit import audit_probes, audit_run
from tests.audit_fixtures import MULTICONDITION, PERTURBATION, audited_once, members, multicondition_project, oracle_run
from tests.factories import ProjectFactory, QueryFactory
from tests.scoring_fixtures import minilm_judge
from tests.url_matrix import ADMIN, EXPERT, VIEWER

pytestmark = pytest.mark.django_db


def token_client(user) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return api


@pytest.fixture
def example():
    project = multicondition_project()
    return project, minilm_judge(project), members(project)


def audits_url(project, judge) -> str:
    return reverse("api:audit-list", args=[project.slug, judge.name])


def test_a_dry_run_answers_the_estimate_and_starts_nothing(example):
    project, judge, users = example
    api = token_client(users[ADMIN])
    parameters = {"sample": 4, "seed": 3, "tests": ["length", "consistency"]}
    response = api.post(audits_url(project, judge), {"kind": "perturbation", "parameters": parameters,
                                                     "dry_run": True}, format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    probes = audit_probes(project=project, judge=judge, kind="perturbation", parameters=parameters)
    # By hand: 4 pairs x (original, padded to 512 and 1024, asked twice with sampling) = 20 probes, 8 sampled.
    assert (body["probes"], body["sampled_probes"]) == (len(probes), sum(p.sampled for p in probes)) == (20, 8)
    assert body["parameters"] == parameters and body["build_seconds"] >= 0
    # An embedding judge: no prompt, hence no token and no cost.
    assert (body["calls"], body["prompt_tokens"], body["cost_usd"]) == (None, None, None)
    assert not AuditJob.objects.exists()


def test_a_started_audit_is_polled_to_its_report(example):
    project, judge, users = example
    api = token_client(users[ADMIN])
    response = api.post(audits_url(project, judge), {"kind": "perturbation",
                                                     "parameters": {"sample": 2, "tests": ["injection"]}},
                        format="json")
    assert response.status_code == 202, response.json()
    started = response.json()
    job = AuditJob.objects.get(id=started["id"])
    assert started["url"] == f"http://testserver{reverse('api:audit-detail', args=[project.slug, job.id])}"
    assert (started["status"], started["total"], started["done"], started["requested_by"]) == (
        "pending", job.total, 0, f"admin-{project.slug}")
    assert started["parameters"] == {"sample": 2, "seed": 0, "tests": ["injection"]}

    audit_run(job_id=job.id)
    job.refresh_from_db()
    reader = token_client(users[VIEWER])
    body = reader.get(started["url"]).json()
    assert (body["status"], body["progress"], body["done"], body["calls"]) == ("done", 1.0, job.total, job.calls)
    assert body["report"] == job.report and body["verdict"] == job.report["verdict"]
    assert [row["test"] for row in body["report"]["rows"]] == ["injection"]
    listed = reader.get(audits_url(project, judge)).json()
    assert [(audit["id"], audit["kind"], audit["verdict"]) for audit in listed] == [
        (job.id, "perturbation", job.report["verdict"])]
    assert "report" not in listed[0]


def test_refusals_are_400_with_the_reason(example):
    project, judge, users = example
    api = token_client(users[ADMIN])
    for sent, reason in (
        ({"kind": "perturbation", "parameters": {"tests": ["volume"]}}, "unknown test(s) 'volume'"),
        ({"kind": "perturbation", "parameters": {"sample": 0}}, "sample must be a whole number"),
        ({"kind": "multicondition", "parameters": {"pads": ["long"]}}, "pads must be a list of word counts"),
    ):
        response = api.post(audits_url(project, judge), sent, format="json")
        # Well-formed JSON whose parameters the audit refuses: 422 with the reason.
        assert response.status_code == 422 and reason in response.json()["message"], response.json()
    assert api.post(audits_url(project, judge), {"kind": "attack"}, format="json").status_code == 400
    plain = ProjectFactory(slug="plain")
    QueryFactory(project=plain)
    plain_judge = minilm_judge(plain)
    members(plain)
    admin = token_client(plain.memberships.get(role=ADMIN).user)
    refused = admin.post(audits_url(plain, plain_judge), {"kind": "multicondition", "dry_run": True}, format="json")
    assert refused.status_code == 409 and "has no multi-condition items" in refused.json()["message"]
    assert not AuditJob.objects.exists()


@pytest.mark.parametrize("dry_run", [True, False])
@pytest.mark.parametrize(("kind", "parameters", "says"), [
    ("perturbation", {"pads": [512]}, "unknown parameter(s) 'pads' of a perturbation audit (sample, seed, tests)"),
    ("perturbation", {"sample": 4, "temperature": 0.7},
     "unknown parameter(s) 'temperature' of a perturbation audit (sample, seed, tests)"),
    ("multicondition", {"tests": ["length"]},
     "unknown multi-condition parameter(s) ['tests']: known are ['filler', 'pads']"),
    ("multicondition", {"seed": 1, "sample": 4}, "unknown multi-condition parameter(s) ['sample', 'seed']"),
])
def test_a_parameter_of_the_other_kind_is_refused_not_dropped(example, kind, parameters, says, dry_run):
    project, judge, users = example
    response = token_client(users[ADMIN]).post(audits_url(project, judge), {
        "kind": kind, "parameters": parameters, "dry_run": dry_run}, format="json")
    assert response.status_code == 422, response.json()
    assert response.json()["code"] == "unprocessable" and says in response.json()["message"]
    assert not AuditJob.objects.exists()


@pytest.mark.parametrize(("kind", "parameters"), [
    ("perturbation", {"sample": 4, "seed": 3, "tests": ["length"]}),
    ("multicondition", {"pads": [512], "filler": "Filler here."}),
])
def test_each_kind_takes_its_own_parameters(example, kind, parameters):
    project, judge, users = example
    response = token_client(users[ADMIN]).post(audits_url(project, judge), {
        "kind": kind, "parameters": parameters, "dry_run": True}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["parameters"] == parameters


def test_readers_get_the_reports_and_experts_do_not(example):
    project, judge, users = example
    job = audited_once(project, judge, AuditJob.Kind.MULTICONDITION, MULTICONDITION)
    detail = reverse("api:audit-detail", args=[project.slug, job.id])
    run = oracle_run(project)
    multicondition = reverse("api:run-multicondition", args=[project.slug, run.id])
    expert = token_client(users[EXPERT])
    for address in (detail, audits_url(project, judge), multicondition):
        assert expert.get(address).status_code == 403
    assert expert.post(audits_url(project, judge), {"kind": "perturbation", "dry_run": True},
                       format="json").status_code == 403
    viewer = token_client(users[VIEWER])
    assert viewer.get(detail).json()["report"]["task2"] == job.report["task2"]
    assert viewer.post(audits_url(project, judge), {"kind": "perturbation", "parameters": PERTURBATION},
                       format="json").status_code == 403


def test_a_runs_multicondition_report_or_why_there_is_none(example):
    project, _, users = example
    run = oracle_run(project)
    body = token_client(users[VIEWER]).get(reverse("api:run-multicondition", args=[project.slug, run.id])).json()
    assert body["run"] == "oracle" and body["unavailable"] is None
    report = body["report"]
    # The oracle ranks every item's documents by the conditions they meet: by hand, every win is won.
    assert report["subject"] == "run:oracle" and report["items"] == 6
    assert [report["task1"]["mean"], report["task2"]["mean"], report["task3"]["mean"]] == [1.0, 1.0, 0.0]
    assert report["task4"]["verdict"] == "no data" and "fixed" in report["task4"]["unavailable"]

    flat = ProjectFactory(slug="flat")
    QueryFactory(project=flat)
    bm25 = flat.runs.create(name="bm25", kind="bm25")
    reader = token_client(members(flat)[VIEWER])
    body = reader.get(reverse("api:run-multicondition", args=[flat.slug, bm25.id])).json()
    assert body["report"] is None and "has no multi-condition items" in body["unavailable"]


def test_the_schema_documents_the_audit_endpoints(example):
    _, _, users = example
    response = token_client(users[ADMIN]).get(reverse("api:schema"), {"format": "json"})
    schema = response.json()
    validate_schema(schema)
    assert {"/api/projects/{slug}/judges/{judge}/audits/", "/api/projects/{slug}/audits/{audit_id}/",
            "/api/projects/{slug}/runs/{run_id}/multicondition/"} <= set(schema["paths"])

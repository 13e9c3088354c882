"""LLM endpoints are the operator's (issue 14, findings 1 and 2): a judge names an endpoint declared in
LLM_ENDPOINTS; nobody types a URL or an environment variable's name in the form, the API or `add_judge`; the
worker refuses anything else; a declared host that resolves inward is refused unless the operator allowed it;
and a remote server's error text reaches project admins only."""
import ipaddress
import math
import socket

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from labeling.llm_adapter import judge_config
from labeling.models import Judge, Judgment, Membership, ScoringJob
from labeling.services.judges import JudgeError, judge_create
from labeling.services.scoring import ScoringError, scoring_chunk_run, scoring_job_create, scoring_request
from labeling.tasks import score_chunk_task
from models_llm.backends import ScorerConfigError
from models_llm.backends.outbound import endpoint_address_check
from tests.endpoints import declare_endpoint
from tests.factories import JudgeFactory, MembershipFactory, UserFactory
from tests.models_llm.fake_openai import FakeOpenAI, Reply, completion, next_token_server
from tests.scoring_fixtures import small_scoring_project

pytestmark = pytest.mark.django_db

SECRET = "postgres://annotator:s3cret-password@db.internal:5432/annotator"


@pytest.fixture
def project(tmp_path):
    return small_scoring_project(tmp_path / "b", queries=1, passages=2)


@pytest.fixture
def listener():
    """Stands for an attacker's server on loopback: records whatever reaches it."""
    with FakeOpenAI() as server:
        yield server


def member(project, role):
    user = UserFactory()
    MembershipFactory(project=project, user=user, role=role)
    return user


# -- creating a judge: no URL, no variable name, no undeclared endpoint ---------------------------------------

def test_the_service_refuses_urls_variables_and_undeclared_endpoints(project, listener, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", SECRET)
    with pytest.raises(JudgeError, match="takes no base_url or api_key_env"):
        judge_create(project=project, name="x", backend="openai", model="m", base_url=listener.base_url,
                     api_key_env="DATABASE_URL")
    with pytest.raises(JudgeError, match="endpoint 'evil' is not declared by the operator"):
        judge_create(project=project, name="x", backend="openai", model="m", endpoint="evil")
    with pytest.raises(JudgeError, match="needs an endpoint"):
        judge_create(project=project, name="x", backend="openai", model="m")
    assert not Judge.objects.filter(name="x").exists() and listener.bodies == []


def test_the_form_offers_only_declared_endpoints_and_refuses_others(client, project, listener):
    client.force_login(member(project, Membership.Role.ADMIN))
    page = client.get(reverse("labeling:judges", args=[project.slug])).content.decode()
    assert 'name="endpoint"' in page and '<option value="unreachable">' in page
    assert 'name="base_url"' not in page and 'name="api_key_env"' not in page
    response = client.post(reverse("labeling:judge_create", args=[project.slug]), {
        "name": "leak", "backend": "openai", "model": "m", "method": "ask", "endpoint": "evil",
        "base_url": listener.base_url, "api_key_env": "DATABASE_URL",
    })
    assert response.status_code == 400 and "Select a valid choice. evil is not one of the available choices." \
        in response.content.decode()
    assert not Judge.objects.filter(name="leak").exists() and listener.bodies == []
    response = client.post(reverse("labeling:judge_create", args=[project.slug]), {
        "name": "fine", "backend": "openai", "model": "m", "method": "ask", "endpoint": "unreachable",
        "base_url": listener.base_url, "api_key_env": "DATABASE_URL",
    })
    assert response.status_code == 302
    assert Judge.objects.get(name="fine").parameters == {"method": "ask", "endpoint": "unreachable"}


def test_the_api_refuses_urls_variables_and_undeclared_endpoints(project, listener):
    api = APIClient()
    api.force_authenticate(member(project, Membership.Role.ADMIN))
    url = reverse("api:judge-list", args=[project.slug])
    response = api.post(url, {"name": "leak", "backend": "openai", "model": "m", "endpoint": "unreachable",
                              "base_url": listener.base_url, "api_key_env": "DATABASE_URL"}, format="json")
    assert response.status_code == 400 and set(response.json()["errors"]) == {"base_url", "api_key_env"}
    response = api.post(url, {"name": "leak", "backend": "openai", "model": "m", "endpoint": "evil"}, format="json")
    assert response.status_code == 422 and "endpoint 'evil' is not declared" in response.json()["message"]
    assert not Judge.objects.filter(name="leak").exists() and listener.bodies == []
    response = api.post(url, {"name": "ok", "backend": "openai", "model": "m", "method": "ask",
                              "endpoint": "unreachable"}, format="json")
    assert response.status_code == 201 and response.json()["endpoint"] == "unreachable"
    listed = api.get(url).json()
    assert [j["name"] for j in listed] == ["ok"] and "base_url" not in str(listed)
    viewer = APIClient()
    viewer.force_authenticate(member(project, Membership.Role.VIEWER))
    assert viewer.post(url, {"name": "v", "backend": "openai", "model": "m", "endpoint": "unreachable"},
                       format="json").status_code == 403


def test_add_judge_refuses_urls_variables_and_undeclared_endpoints(project, listener):
    with pytest.raises(CommandError, match="--base-url and --api-key-env are not accepted"):
        call_command("add_judge", "leak", project=project.slug, backend="openai", model="m",
                     base_url=listener.base_url, api_key_env="DATABASE_URL")
    with pytest.raises(CommandError, match="endpoint 'evil' is not declared"):
        call_command("add_judge", "leak", project=project.slug, backend="openai", model="m", endpoint="evil")
    assert not Judge.objects.filter(name="leak").exists() and listener.bodies == []


# -- the worker refuses too ---------------------------------------------------------------------------------------

def test_a_judge_stored_with_a_url_and_variable_never_sends_them(project, listener, monkeypatch):
    """The reviewer's attack, on a row written before this rule (or by hand): nothing leaves the worker."""
    monkeypatch.setenv("DATABASE_URL", SECRET)
    judge = JudgeFactory(project=project, name="old", backend="openai", model="m",
                         parameters={"method": "ask", "base_url": listener.base_url, "api_key_env": "DATABASE_URL"})
    with pytest.raises(ScoringError, match=r"unknown parameters \['api_key_env', 'base_url'\]"):
        scoring_request(project=project, judge=judge)
    job = ScoringJob.objects.create(project=project, judge=judge, scope="all", total=2)
    chunk = job.chunks.create(query=project.queries.first(), pair_ids=list(project.pairs.values_list("id", flat=True)),
                              size=2)
    with pytest.raises(Exception, match="unknown parameters"):
        scoring_chunk_run(chunk_id=chunk.id)
    assert listener.bodies == [] and listener.headers == []


def test_an_endpoint_the_operator_withdrew_is_refused_by_the_worker(project, listener, settings):
    name = declare_endpoint(listener.base_url, "for-now")
    judge = judge_create(project=project, name="j", backend="openai", model="m", method="ask", endpoint=name)
    job = scoring_job_create(project=project, judge=judge)
    del settings.LLM_ENDPOINTS["for-now"]
    with pytest.raises(Exception, match="endpoint 'for-now' is not declared by the operator"):
        scoring_chunk_run(chunk_id=job.chunks.get().id)
    assert listener.bodies == []
    # Through the task (the same worker, as a retry would be), the chunk is given up with the reason and the job
    # ends: it does not hang because the judge's configuration no longer loads.
    score_chunk_task.apply(args=[job.chunks.get().id], task_id="direct")
    job.refresh_from_db()
    assert (job.status, job.done, job.failed) == (ScoringJob.Status.DONE, 2, 2)
    assert "endpoint 'for-now' is not declared" in job.error and listener.bodies == []
    assert set(Judgment.objects.filter(judge=judge).values_list("method", flat=True)) == {"ask"}


# -- outbound addresses ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("host", ["127.0.0.1", "10.1.2.3", "172.16.0.5", "192.168.1.1", "169.254.169.254",
                                  "100.64.0.1", "0.0.0.0", "[::1]", "[fd00:ec2::254]", "[::ffff:127.0.0.1]",
                                  "localhost"])
def test_inward_addresses_are_refused_unless_allowed(host):
    with pytest.raises(ScorerConfigError, match="loopback, private, link-local or reserved address: refused"):
        endpoint_address_check(f"http://{host}:8000/v1/chat/completions", allow_local=False)
    endpoint_address_check(f"http://{host}:8000/v1/chat/completions", allow_local=True)


def test_public_addresses_pass(monkeypatch):
    endpoint_address_check("https://8.8.8.8/v1/chat/completions", allow_local=False)
    # A name is checked by what it resolves to (no network here: the resolver is stood in for).
    answers = {"api.example.org": "93.184.216.34", "rebound.example.org": "10.0.0.7"}
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, port, **kw: [
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", (answers[host], port))])
    endpoint_address_check("https://api.example.org/v1", allow_local=False)
    with pytest.raises(ScorerConfigError, match="10.0.0.7"):
        endpoint_address_check("https://rebound.example.org/v1", allow_local=False)
    assert ipaddress.ip_address(answers["api.example.org"]).is_global


def test_a_declared_loopback_endpoint_without_allow_local_sends_nothing(project, listener):
    name = declare_endpoint(listener.base_url, "inward", allow_local=False)
    judge = judge_create(project=project, name="j", backend="openai", model="m", method="ask", endpoint=name)
    job = scoring_job_create(project=project, judge=judge)
    with pytest.raises(ScorerConfigError, match="resolves to 127.0.0.1"):
        scoring_chunk_run(chunk_id=job.chunks.get().id)
    assert listener.bodies == []


# -- remote error text is for admins ------------------------------------------------------------------------------

def test_a_remote_servers_error_text_reaches_admins_only(client, project):
    leaked = "internal: db password is hunter2"
    with FakeOpenAI(default=lambda body: Reply(status=400, body={"error": {"message": leaked}})) as server:
        judge = judge_create(project=project, name="j", backend="openai", model="m", method="ask",
                             endpoint=declare_endpoint(server.base_url), max_retries=0)
        job = scoring_job_create(project=project, judge=judge)
        score_chunk_task.apply(args=[job.chunks.get().id])
    job.refresh_from_db()
    assert job.failed == 2 and leaked in job.last_error
    url = reverse("api:job-detail", args=[project.slug, job.id])
    for role, sees in ((Membership.Role.ADMIN, True), (Membership.Role.VIEWER, False), (Membership.Role.EXPERT, False)):
        api = APIClient()
        user = member(project, role)
        api.force_authenticate(user)
        assert (leaked in api.get(url).json()["last_error"]) is sees, role
        assert (leaked in str(api.get(reverse("api:job-list", args=[project.slug])).json())) is sees, role
        client.force_login(user)
        assert (leaked in client.get(reverse("labeling:judges", args=[project.slug])).content.decode()) is sees, role
    assert Judgment.objects.filter(judge=judge, status="failed").count() == 2


def test_declared_endpoints_still_score(project):
    with FakeOpenAI(default=lambda body: Reply(body=completion("[Guess]: No\n[Confidence]: 0.8"))) as server:
        judge = judge_create(project=project, name="j", backend="openai", model="m", method="ask",
                             endpoint=declare_endpoint(server.base_url))
        job = scoring_job_create(project=project, judge=judge)
        assert scoring_chunk_run(chunk_id=job.chunks.get().id) == 2
        assert len(server.bodies) == 2
    assert sorted(Judgment.objects.filter(judge=judge).values_list("guess", flat=True)) == [False, False]


def test_assistant_prefill_is_the_declared_endpoints_capability_not_the_judges(project, settings):
    settings.LLM_ENDPOINTS["vllm"] = {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "", "allow_local": True,
                                      "prefill": True}
    on_vllm = judge_create(project=project, name="student", backend="openai", model="m", endpoint="vllm")
    elsewhere = judge_create(project=project, name="other", backend="openai", model="m", endpoint="unreachable")
    assert judge_config(on_vllm).prefill is True and judge_config(elsewhere).prefill is False
    with pytest.raises(JudgeError, match="prefill"):
        judge_create(project=project, name="x", backend="openai", model="m", endpoint="unreachable", prefill=True)


def test_label_token_ids_are_the_declared_endpoints_capability_not_the_judges(project, settings):
    settings.LLM_ENDPOINTS["vllm"] = {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "", "allow_local": True,
                                      "label_token_ids": {"Yes": [9642, 7566], "No": [2822]}}
    on_vllm = judge_create(project=project, name="student", backend="openai", model="m", method="tok",
                           endpoint="vllm")
    elsewhere = judge_create(project=project, name="other", backend="openai", model="m", endpoint="unreachable")
    assert (judge_config(on_vllm).yes_token_ids, judge_config(on_vllm).no_token_ids) == ((9642, 7566), (2822,))
    assert (judge_config(elsewhere).yes_token_ids, judge_config(elsewhere).no_token_ids) == ((), ())
    # Scored through the product: each judgment's P is read from exactly the declared ids' logprobs.
    vocabulary = {100: (" The", -0.1), 9642: (" Yes", -3.0), 7566: ("Yes", -4.0), 2822: (" No", -2.0)}
    with FakeOpenAI(default=next_token_server(vocabulary)) as server:
        settings.LLM_ENDPOINTS["vllm"]["base_url"] = server.base_url
        job = scoring_job_create(project=project, judge=on_vllm)
        assert scoring_chunk_run(chunk_id=job.chunks.get().id) == 2
    assert [body["logprob_token_ids"] for body in server.bodies] == [[9642, 7566, 2822]] * 2
    yes, no = math.exp(-3.0) + math.exp(-4.0), math.exp(-2.0)
    assert list(Judgment.objects.filter(judge=on_vllm).values_list("p_relevant", flat=True)) == [
        pytest.approx(yes / (yes + no))] * 2
    with pytest.raises(JudgeError, match="yes_token_ids"):
        judge_create(project=project, name="x", backend="openai", model="m", endpoint="unreachable",
                     yes_token_ids=[1], no_token_ids=[2])

"""Creating judges and starting scoring jobs through the API: fields that do not go together are a 422 naming them,
with nothing stored, never dropped. A job's `pair_ids` go with the selection scope only (issue #30, finding 11: with
scope `all` they were dropped and the whole pool scored, with a paid judge real money); a judge's fields its
backend never reads are refused; the valid forms keep working."""
from __future__ import annotations

import pytest
from django.conf import settings
from django.urls import reverse
from rest_framework.test import APIClient

from labeling.models import Judge, Membership, Pair, ScoringJob
from models_llm.bundled import minilm_folder, smollm2_folder
from tests.factories import MembershipFactory, UserFactory
from tests.scoring_fixtures import minilm_judge, small_scoring_project

pytestmark = pytest.mark.django_db


@pytest.fixture
def project(tmp_path):
    return small_scoring_project(tmp_path / "b", queries=2, passages=3)


@pytest.fixture
def api(project) -> APIClient:
    admin = UserFactory()
    MembershipFactory(project=project, user=admin, role=Membership.Role.ADMIN)
    client = APIClient()
    client.force_authenticate(admin)
    return client


def _pair_ids(project) -> list[int]:
    return list(Pair.objects.filter(project=project).order_by("id").values_list("id", flat=True)[:2])


@pytest.mark.parametrize(("body", "says"), [
    ({"scope": "all", "pair_ids": True}, "pair ids go with scope 'selection' only; scope 'all' scores"),
    ({"scope": "missing", "pair_ids": True}, "pair ids go with scope 'selection' only; scope 'missing' scores"),
    ({"pair_ids": True}, "pair ids go with scope 'selection' only; scope 'missing' scores"),  # the default scope
    ({"scope": "selection"}, "a selection job needs pair ids"),
])
def test_pair_ids_and_a_scope_that_do_not_go_together_are_refused(project, api, body, says):
    judge = minilm_judge(project)
    if body.get("pair_ids"):
        body = {**body, "pair_ids": _pair_ids(project)}
    response = api.post(reverse("api:job-list", args=[project.slug]), {"judge": judge.name, **body}, format="json")
    assert response.status_code == 422, response.json()
    assert response.json()["code"] == "unprocessable" and says in response.json()["message"]
    if "pair_ids" in body:
        assert "leave pair_ids out, or ask for scope 'selection'" in response.json()["message"]
    assert not ScoringJob.objects.exists()


@pytest.mark.parametrize(("body", "total"), [
    ({"scope": "selection", "pair_ids": True}, 2),
    ({"scope": "all"}, 6),
    ({}, 6),  # missing: nothing judged yet
])
def test_a_scope_with_its_own_fields_starts_a_job(project, api, body, total):
    judge = minilm_judge(project)
    if body.get("pair_ids"):
        body = {**body, "pair_ids": _pair_ids(project)}
    response = api.post(reverse("api:job-list", args=[project.slug]), {"judge": judge.name, **body}, format="json")
    assert response.status_code == 201, response.json()
    assert (response.json()["scope"], response.json()["total"]) == (body.get("scope", "missing"), total)
    assert ScoringJob.objects.get().total == total


def _smollm2() -> str:
    return str(smollm2_folder(settings.VAR_DIR))


EMBEDDING = {"backend": "embedding", "model": str(minilm_folder())}
OPENAI = {"backend": "openai", "model": "gpt-4o-mini", "endpoint": "unreachable", "method": "ask"}
EMBEDDING_REFUSES = "an embedding judge compares embeddings: it sends no prompt, writes no text and costs no tokens"


@pytest.mark.parametrize(("body", "says"), [
    ({**EMBEDDING, "method": "tok"}, f"{EMBEDDING_REFUSES}; leave out method"),
    ({**EMBEDDING, "method": "ask", "cot": True}, f"{EMBEDDING_REFUSES}; leave out cot, method"),
    ({**EMBEDDING, "cot": False}, f"{EMBEDDING_REFUSES}; leave out cot"),
    ({**EMBEDDING, "template": {"role": "You judge paragraphs."}}, f"{EMBEDDING_REFUSES}; leave out template"),
    ({**EMBEDDING, "max_new_tokens": 64}, f"{EMBEDDING_REFUSES}; leave out max_new_tokens"),
    ({**EMBEDDING, "strategies": ["direct"]}, f"{EMBEDDING_REFUSES}; leave out strategies"),
    ({**EMBEDDING, "prompts": "paper"}, f"{EMBEDDING_REFUSES}; leave out prompts"),
    ({"backend": "hf", "model": "SMOLLM2", "method": "ask", "prompts": "paper"},
     "prompts (a prompt preset) are for the ensemble method"),
    ({**EMBEDDING, "adapter": "var/models/lora"}, f"{EMBEDDING_REFUSES}; leave out adapter"),
    ({**EMBEDDING, "price_in": 0.1, "price_out": 0.2}, f"{EMBEDDING_REFUSES}; leave out price_in, price_out"),
    ({**OPENAI, "adapter": "var/models/lora"},
     "an openai judge's model runs at its endpoint: it takes no local model settings; leave out adapter"),
    ({"backend": "hf", "model": "SMOLLM2", "endpoint": "unreachable"},
     "an endpoint is for openai judges"),
    ({"backend": "ensemble", "members": ["a"], "method": "tok"}, "a judges ensemble takes only members"),
    ({"backend": "hf", "model": "SMOLLM2", "members": ["a"]},
     "members are for a judges ensemble"),
])
def test_a_field_the_backend_never_reads_is_refused(project, api, body, says):
    if body.get("model") == "SMOLLM2":
        body = {**body, "model": _smollm2()}
    response = api.post(reverse("api:judge-list", args=[project.slug]), {"name": "new", **body}, format="json")
    assert response.status_code == 422, response.json()
    assert response.json()["code"] == "unprocessable" and says in response.json()["message"]
    assert not Judge.objects.filter(name="new").exists()


@pytest.mark.parametrize(("body", "parameters"), [
    (EMBEDDING, {"method": "embedding"}),
    ({**EMBEDDING, "use_definition": False}, {"method": "embedding", "use_definition": False}),
    ({**OPENAI, "cot": True, "max_new_tokens": 256, "price_in": 0.15, "price_out": 0.6},
     {"method": "ask", "cot": True, "max_new_tokens": 256, "endpoint": "unreachable"}),
    # A new ensemble judge asks the paper's prompts unless told otherwise (docs/ensembles.md).
    ({"backend": "hf", "model": "SMOLLM2", "method": "ensemble", "strategies": ["direct"], "max_new_tokens": 64},
     {"method": "ensemble", "strategies": ["direct"], "max_new_tokens": 64, "prompts": "paper"}),
    ({"backend": "hf", "model": "SMOLLM2", "method": "ensemble", "prompts": "legacy"},
     {"method": "ensemble", "prompts": "legacy"}),
    ({"backend": "hf", "model": "SMOLLM2", "cot": True, "template": {"role": "You judge paragraphs."}},
     {"cot": True}),
])
def test_each_backend_takes_its_own_fields(project, api, body, parameters):
    if body.get("model") == "SMOLLM2":
        body = {**body, "model": _smollm2()}
    response = api.post(reverse("api:judge-list", args=[project.slug]), {"name": "new", **body}, format="json")
    assert response.status_code == 201, response.json()
    judge = Judge.objects.get(name="new")
    assert judge.parameters == parameters
    assert (judge.price_in, judge.price_out) == (body.get("price_in"), body.get("price_out"))

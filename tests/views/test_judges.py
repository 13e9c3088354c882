"""The Judges page, its forms and the jobs API through the test client."""
import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from labeling.models import Estimate, Judge, Membership, ScoringJob
from labeling.services.estimates import estimate_run
from labeling.services.scoring import scoring_chunk_run
from models_llm.bundled import minilm_folder
from tests.factories import MembershipFactory, UserFactory
from tests.scoring_fixtures import minilm_judge, small_scoring_project

pytestmark = pytest.mark.django_db


def member(project, role):
    user = UserFactory()
    MembershipFactory(project=project, user=user, role=role)
    return user


@pytest.fixture
def project(tmp_path):
    return small_scoring_project(tmp_path / "b", queries=2, passages=3)


def test_admin_creates_a_judge_starts_a_job_and_sees_progress(client, project, django_capture_on_commit_callbacks):
    client.force_login(member(project, Membership.Role.ADMIN))
    page = reverse("labeling:judges", args=[project.slug])
    html = client.get(page).content.decode()
    assert "New judge" in html and "[Guess]: Yes or No" in html  # the default template, to copy
    response = client.post(reverse("labeling:judge_create", args=[project.slug]),
                           {"name": "mini", "backend": "embedding", "model": str(minilm_folder())})
    assert response.status_code == 302 and Judge.objects.filter(project=project, name="mini").exists()
    with django_capture_on_commit_callbacks() as queued:
        client.post(reverse("labeling:job_start", args=[project.slug, "mini"]), {"scope": "missing"})
    job = ScoringJob.objects.get(judge__name="mini")
    assert job.total == 6 and len(queued) == 1
    running = client.get(page).content.decode()
    assert 'hx-trigger="every 2s"' in running and "0 / 6" in running
    for chunk_id in job.chunks.values_list("id", flat=True):
        scoring_chunk_run(chunk_id=chunk_id)
    done = client.get(page, headers={"HX-Request": "true"}).content.decode()
    assert "6 / 6" in done and "every 2s" not in done and "<html" not in done  # the partial only


def test_bad_judge_form_shows_the_reason(client, project):
    client.force_login(member(project, Membership.Role.ADMIN))
    response = client.post(reverse("labeling:judge_create", args=[project.slug]),
                           {"name": "x", "backend": "hf", "model": "/no/such/folder"})
    assert response.status_code == 400 and "/no/such/folder&#x27; is not under a model root" in response.content.decode()


def test_experts_see_jobs_but_cannot_start_or_cancel(client, project):
    judge = minilm_judge(project)
    client.force_login(member(project, Membership.Role.EXPERT))
    html = client.get(reverse("labeling:judges", args=[project.slug])).content.decode()
    assert "minilm" in html and "New judge" not in html
    assert client.post(reverse("labeling:job_start", args=[project.slug, judge.name])).status_code == 403
    client.force_login(UserFactory())
    assert client.get(reverse("labeling:judges", args=[project.slug])).status_code == 404


def test_jobs_api(project):
    judge = minilm_judge(project)
    api = APIClient()
    api.force_authenticate(member(project, Membership.Role.ADMIN))
    url = reverse("api:job-list", args=[project.slug])
    created = api.post(url, {"judge": judge.name, "scope": "all"}, format="json")
    assert created.status_code == 201 and created.json()["total"] == 6 and created.json()["status"] == "running"
    job_id = created.json()["id"]
    for chunk_id in ScoringJob.objects.get(id=job_id).chunks.values_list("id", flat=True):
        scoring_chunk_run(chunk_id=chunk_id)
    status = api.get(reverse("api:job-detail", args=[project.slug, job_id])).json()
    assert (status["status"], status["done"], status["failed"]) == ("done", 6, 0)
    assert api.post(url, {"judge": "nope"}, format="json").status_code == 404  # a judge the project lacks
    api.force_authenticate(member(project, Membership.Role.VIEWER))
    assert api.post(url, {"judge": judge.name}, format="json").status_code == 403
    assert api.get(url).status_code == 200


def test_admin_creates_ensemble_judges_and_gets_a_dry_run_estimate(client, project):
    from django.conf import settings

    from models_llm.bundled import smollm2_folder

    client.force_login(member(project, Membership.Role.ADMIN))
    create = reverse("labeling:judge_create", args=[project.slug])
    response = client.post(create, {"name": "disastir", "backend": "hf", "method": "ensemble",
                                    "model": str(smollm2_folder(settings.VAR_DIR)), "strategies": ["direct", "cot"],
                                    "max_new_tokens": "64", "price_in": "0.15", "price_out": "0.6"})
    assert response.status_code == 302
    judge = Judge.objects.get(project=project, name="disastir")
    assert judge.parameters["strategies"] == ["direct", "cot"] and judge.price_in == 0.15
    assert judge.parameters["prompts"] == "paper"  # none chosen in the form: the paper's App. C prompts
    response = client.post(create, {"name": "both", "backend": "ensemble", "members": "disastir, ghost"})
    assert response.status_code == 400 and "member &#x27;ghost&#x27; is not a judge" in response.content.decode()
    minilm_judge(project)
    assert client.post(create, {"name": "both", "backend": "ensemble", "members": "disastir, minilm"}).status_code == 302
    html = client.get(reverse("labeling:judges", args=[project.slug])).content.decode()
    assert "mean P of disastir, minilm" in html and "(direct, cot), paper prompts" in html and "$0.15 / $0.6 per M tokens" in html
    estimate = _estimate(client, project, "disastir")
    # 6 QA pairs x (direct 1 call + the paper's cot 1 + 2 + 1 calls), prompts counted by SmolLM2's tokenizer.
    assert "Dry run for disastir" in estimate and "<span data-calls>30</span>" in estimate
    assert "with the model's tokenizer" in estimate and "data-cost" in estimate and "DisastIR" in estimate
    embedding = _estimate(client, project, "minilm")
    # An embedding judge costs time, not tokens: its time comes from a timed probe of one part.
    assert "An embedding judge sends no prompts" in embedding and "data-calls" not in embedding
    # 6 pairs in scope: one loads the model, five are timed.
    assert "from a timed probe of 5 pairs on cpu" in embedding and "for 6 pairs on one worker process" in embedding


def _estimate(client, project, judge: str) -> str:
    """Click Estimate on the Judges page: the answer (htmx) is the estimate queued, following itself; a worker makes
    it; the next poll shows it."""
    asked = client.post(reverse("labeling:judge_estimate", args=[project.slug, judge]), {"scope": "missing"},
                        headers={"HX-Request": "true"}).content.decode()
    estimate = Estimate.objects.filter(judge__name=judge).latest("id")
    assert estimate.status == "pending" and estimate.result is None  # nothing estimated in the request
    poll = reverse("labeling:estimate", args=[project.slug, estimate.id])
    assert f'hx-get="{poll}" hx-trigger="every 1s"' in asked and "queued" in asked
    estimate_run(estimate_id=estimate.id)  # what the worker does with the task
    done = client.get(poll, headers={"HX-Request": "true"}).content.decode()
    assert "hx-trigger" not in done and 'data-state="done"' in done
    return done


def test_an_estimate_past_its_time_limit_is_given_up_and_its_page_says_why(client, project, settings):
    from datetime import timedelta

    from django.utils import timezone

    from labeling.services.job_sweep import jobs_sweep

    settings.ESTIMATE_TIME_LIMIT = 60
    client.force_login(member(project, Membership.Role.ADMIN))
    minilm_judge(project)
    asked = client.post(reverse("labeling:judge_estimate", args=[project.slug, "minilm"]), {"scope": "missing"})
    # A worker took it two minutes ago and its model never answered (its heartbeat still beats).
    now = timezone.now()
    Estimate.objects.update(status="running", started_at=now - timedelta(seconds=120), heartbeat_at=now)
    assert "estimating" in client.get(asked.url).content.decode()
    jobs_sweep()
    html = client.get(asked.url).content.decode()
    assert 'data-state="failed"' in html and "ran longer than its time limit of 60 s (ESTIMATE_TIME_LIMIT)" in html


def test_experts_cannot_estimate(client, project):
    client.force_login(member(project, Membership.Role.EXPERT))
    minilm_judge(project)
    assert client.post(reverse("labeling:judge_estimate", args=[project.slug, "minilm"])).status_code == 403
    assert not Estimate.objects.exists()


def test_a_model_folder_that_cannot_load_is_an_error_on_the_page_not_a_500(client, project, settings, tmp_path):
    """Issue 14, finding 7: the estimate loads the judge's tokenizer in the web process."""
    root = tmp_path / "models"
    (root / "broken").mkdir(parents=True)
    (root / "broken" / "config.json").write_text('{"model_type": "llama"}')
    settings.MODEL_ROOTS = [root]
    client.force_login(member(project, Membership.Role.ADMIN))
    response = client.post(reverse("labeling:judge_create", args=[project.slug]),
                           {"name": "etc", "backend": "hf", "model": "/etc", "method": "tok"})
    assert response.status_code == 400 and "is not under a model root" in response.content.decode()
    response = client.post(reverse("labeling:judge_create", args=[project.slug]),
                           {"name": "broken", "backend": "hf", "model": str(root / "broken"), "method": "tok"})
    assert response.status_code == 302
    asked = client.post(reverse("labeling:judge_estimate", args=[project.slug, "broken"]), {"scope": "missing"})
    estimate = Estimate.objects.get()
    assert asked.status_code == 302 and asked.url == reverse("labeling:estimate",
                                                             args=[project.slug, estimate.id])
    estimate_run(estimate_id=estimate.id)  # what the worker does with the task
    response = client.get(asked.url)
    assert response.status_code == 200 and "holds no loadable tokenizer" in response.content.decode()


def test_a_judge_name_with_a_line_break_is_refused_and_the_judges_page_still_answers(client, project):
    """Issue 30, finding 7: the API stored a judge named "nl\\njudge", and the Judges page, whose links hold the
    name (<path:judge> matches no line break), answered 500 to every member from then on."""
    admin = member(project, Membership.Role.ADMIN)
    api = APIClient()
    api.force_authenticate(admin)
    body = {"name": "nl\njudge", "backend": "embedding", "model": str(minilm_folder())}
    refused = api.post(reverse("api:judge-list", args=[project.slug]), body, format="json")
    assert refused.status_code == 422 and refused.json()["code"] == "unprocessable"
    assert refused.json()["message"].startswith("the judge name holds a control character (U+000A) at position 3")
    client.force_login(admin)
    form = client.post(reverse("labeling:judge_create", args=[project.slug]), {**body, "name": "rlo\u202ejudge"})
    assert form.status_code == 400
    assert "the judge name holds an invisible format character (U+202E) at position 4" in form.content.decode()
    assert not Judge.objects.filter(project=project).exists()
    assert client.get(reverse("labeling:judges", args=[project.slug])).status_code == 200


def test_a_judge_name_keeps_its_inner_spaces_and_accents_and_a_look_alike_is_the_same_name(client, project):
    admin = member(project, Membership.Role.ADMIN)
    api = APIClient()
    api.force_authenticate(admin)
    url = reverse("api:judge-list", args=[project.slug])
    body = {"backend": "embedding", "model": str(minilm_folder())}
    created = api.post(url, {**body, "name": " BM25 re\u0301gle\u0301 "}, format="json")  # decomposed accents
    assert created.status_code == 201 and created.json()["name"] == "BM25 réglé"
    twin = api.post(url, {**body, "name": "\uff22\uff2d\uff12\uff15 réglé"}, format="json")  # full-width "BM25"
    assert twin.status_code == 422 and twin.json()["message"] == f"project {project.slug!r} already has a judge " \
                                                                 "'BM25 réglé'"
    client.force_login(admin)
    html = client.get(reverse("labeling:judges", args=[project.slug])).content.decode()
    assert reverse("labeling:job_start", args=[project.slug, "BM25 réglé"]) in html


@pytest.mark.parametrize(("fields", "refused"), [
    ({"method": "tok"}, "leave out method"),
    ({"max_new_tokens": "64"}, "leave out max_new_tokens"),
    ({"preset": "diras-definition"}, "leave out template"),
    ({"method": ""}, None),  # the select's blank default: the embedding judge's own method
])
def test_the_form_gets_the_services_refusal_of_a_field_an_embedding_judge_never_reads(client, project, fields,
                                                                                       refused):
    client.force_login(member(project, Membership.Role.ADMIN))
    response = client.post(reverse("labeling:judge_create", args=[project.slug]),
                           {"name": "mini", "backend": "embedding", "model": str(minilm_folder()), **fields})
    if refused is None:
        assert response.status_code == 302
        assert Judge.objects.get(project=project, name="mini").parameters == {"method": "embedding"}
    else:
        assert response.status_code == 400 and refused in response.content.decode()
        assert not Judge.objects.filter(project=project, name="mini").exists()

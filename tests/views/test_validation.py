"""The validation dashboard, its actions and its API through the test client."""
import re
import sys
from collections import Counter
from html import unescape

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from labeling.models import JudgeCalibration, Membership, Project, ValidationResult
from labeling.services import validation
from labeling.services.bundle_import import bundle_import
from labeling.services.validation import validation_refresh, validation_request
from tests.factories import MembershipFactory, ProjectFactory, UserFactory
from tests.selectors.test_definition_metrics import build_study
from tests.services.test_bundle_import import SAMPLE
from tests.services.test_validation import coverage_study, synthetic_bundle

pytestmark = pytest.mark.django_db


def member(project, role=Membership.Role.VIEWER):
    user = UserFactory()
    MembershipFactory(project=project, user=user, role=role)
    return user


@pytest.fixture
def sample():
    bundle_import(path=SAMPLE, project_slug="cr")
    project = Project.objects.get(slug="cr")
    validation_request(project=project)
    validation_refresh(project_id=project.id)
    return project


def test_dashboard_shows_every_judge_and_the_charts(client, sample):
    client.force_login(member(sample))
    html = client.get(reverse("labeling:validation", args=["cr"])).content.decode()
    for name in ("gpt4-ask-generic", "gpt35-ask-generic", "llama3-ask-generic", "llama3-tok-generic"):
        assert name in html
    assert html.count('role="img"') == 8  # a reliability diagram and an F1 curve per judge
    assert "data-computed-at" in html
    assert 'data-metric="auroc"' in html and "Fit calibrator" not in html  # viewers cannot calibrate


def test_dashboard_for_an_empty_project_says_no_labels_yet(client):
    project = ProjectFactory()
    client.force_login(member(project))
    url = reverse("labeling:validation", args=[project.slug])
    first = client.get(url).content.decode()
    assert "Computing the report for the first time" in first and 'hx-trigger="every 3s"' in first
    validation_refresh(project_id=project.id)
    html = client.get(url).content.decode()
    assert "No labels yet" in html and "data-empty-state" in html


def test_dashboard_is_404_for_non_members(client, sample):
    client.force_login(UserFactory())
    assert client.get(reverse("labeling:validation", args=["cr"])).status_code == 404
    assert client.post(reverse("labeling:validation_refresh", args=["cr"])).status_code == 404


def test_only_project_admins_fit_calibrators(client, tmp_path):
    bundle_import(path=synthetic_bundle(tmp_path / "b"), project_slug="syn")
    project = Project.objects.get(slug="syn")
    url = reverse("labeling:judge_calibrate", args=["syn", "squashed"])
    client.force_login(member(project, Membership.Role.EXPERT))
    assert client.post(url).status_code == 403
    client.force_login(member(project, Membership.Role.ADMIN))
    response = client.post(url, follow=True)
    assert JudgeCalibration.objects.filter(judge__name="squashed").count() == 1
    assert "cross-validated ECE" in response.content.decode()
    assert ValidationResult.objects.get(project=project).is_stale


def test_api_serves_the_command_keys(sample):
    api = APIClient()
    api.force_authenticate(member(sample))
    url = reverse("api:validation", args=["cr"])
    body = api.get(url, {"judge": "gpt4-ask-generic"}).json()
    assert body["judge"]["name"] == "gpt4-ask-generic" and body["judge"]["n"] == 595
    assert set(body["human"]) >= {"human_kappa_binary", "human_kappa_graded", "krippendorff_alpha", "n_overlap"}
    assert body["stale"] is False
    both = api.get(url + "?judge=gpt4-ask-generic&judge=llama3-tok-generic").json()
    assert [j["name"] for j in both["judges"]] == ["gpt4-ask-generic", "llama3-tok-generic"]
    missing = api.get(url, {"judge": "nope"})
    assert missing.status_code == 404 and "no judge 'nope'" in missing.json()["message"]
    api.force_authenticate(UserFactory())
    assert api.get(url).status_code == 404


@pytest.fixture
def queued(monkeypatch):
    """The recomputations sent to the broker, one (args, options) each, however the code sends them."""
    sent: list[tuple] = []
    task = validation.validation_refresh_task
    monkeypatch.setattr(task, "delay", lambda *args: sent.append((args, {})))
    monkeypatch.setattr(task, "apply_async", lambda args=(), kwargs=None, **options: sent.append((tuple(args), options)))
    return sent


@pytest.mark.parametrize("role", [Membership.Role.VIEWER, Membership.Role.EXPERT])
def test_only_admins_ask_for_a_recomputation(client, sample, queued, role, django_capture_on_commit_callbacks):
    before = ValidationResult.objects.get(project=sample).requested_at
    client.force_login(member(sample, role))
    with django_capture_on_commit_callbacks(execute=True):
        assert client.post(reverse("labeling:validation_refresh", args=["cr"])).status_code == 403
    assert queued == [] and ValidationResult.objects.get(project=sample).requested_at == before


def test_the_recompute_button_is_shown_to_admins_only(client, sample):
    url = reverse("labeling:validation", args=["cr"])
    client.force_login(member(sample))
    assert "Recompute now" not in client.get(url).content.decode()
    client.force_login(member(sample, Membership.Role.ADMIN))
    assert "Recompute now" in client.get(url).content.decode()


def test_ten_refreshes_in_a_row_queue_one_recomputation(client, sample, queued, django_capture_on_commit_callbacks):
    client.force_login(member(sample, Membership.Role.ADMIN))
    for _ in range(10):
        with django_capture_on_commit_callbacks(execute=True):
            response = client.post(reverse("labeling:validation_refresh", args=["cr"]))
        assert response.status_code == 302
    assert [args for args, _ in queued] == [(sample.id,)]
    assert ValidationResult.objects.get(project=sample).is_stale


def test_the_admin_who_asks_is_the_requester_of_the_recomputation(client, sample, queued,
                                                                   django_capture_on_commit_callbacks):
    admin = member(sample, Membership.Role.ADMIN)
    client.force_login(admin)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("labeling:validation_refresh", args=["cr"]))
    pending = ValidationResult.objects.get(project=sample)
    assert (pending.status, pending.requested_by, pending.attempts, pending.finished_at) == ("pending", admin, 0, None)
    validation_refresh(project_id=sample.id)
    done = ValidationResult.objects.get(project=sample)
    assert (done.status, done.requested_by, done.attempts) == ("done", admin, 1)


def _count_calls(monkeypatch, name: str) -> list:
    """Wrap the function `name` wherever a labeling module imported it; returns the list of its calls' kwargs."""
    calls: list[dict] = []
    for module in [m for key, m in list(sys.modules.items()) if key.startswith("labeling") and hasattr(m, name)]:
        original = getattr(module, name)

        def counted(*args, _original=original, **kwargs):
            calls.append(kwargs)
            return _original(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)
    return calls


def test_metrics_by_definition_are_computed_once_for_many_reads(client, monkeypatch):
    study = build_study(per_query=6)
    calls = _count_calls(monkeypatch, "judge_metrics_by_definition")
    api = APIClient()
    api.force_authenticate(member(study.project))
    url = reverse("api:judge-metrics-by-definition", args=[study.project.slug, "qwen"])
    bodies = [api.get(url).json() for _ in range(5)]
    assert bodies[0]["by_version"]["groups"] and all(body == bodies[0] for body in bodies)
    client.force_login(member(study.project))
    page = reverse("labeling:validation", args=[study.project.slug])
    for _ in range(3):
        assert 'data-group="v2"' in client.get(page, {"judge": "qwen"}).content.decode()
        section = client.get(page, {"judge": "qwen"}, headers={"HX-Request": "true", "HX-Target": "by-definition"})
        assert 'data-group="v2"' in section.content.decode()
    computed = Counter(call["judge"].name for call in calls)
    assert computed["qwen"] == 1, computed


def _cached(project):
    validation_request(project=project)
    validation_refresh(project_id=project.id)
    return project


def _cell(html: str, judge_index: int, metric: str) -> str:
    """The text of the cell of `metric` in the judges-side-by-side table for the judge of that column."""
    cells = re.findall(rf'<td class="num" data-metric="{re.escape(metric)}"[^>]*>(.*?)</td>', html, re.DOTALL)
    return cells[judge_index]


def test_a_partial_judge_is_marked_and_does_not_compete_for_the_best_until_included(client):
    project = _cached(coverage_study())
    client.force_login(member(project))
    page = reverse("labeling:validation", args=[project.slug])
    html = client.get(page).content.decode()
    header = re.search(r'<th class="num" data-judge="partial">(.*?)</th>', html, re.DOTALL).group(1)
    assert 'data-partial="60"' in header and "partial (60&nbsp;%)" in header
    assert "60 of the 100 gold pairs; 40 missing. Left out of the rankings until complete" in header
    assert "data-partial" not in re.search(r'<th class="num" data-judge="full">(.*?)</th>', html, re.DOTALL).group(1)
    # The judges are full, partial, rough: the partial one is perfect on its 60 pairs, yet the best AUROC and
    # Brier shown are the full judge's.
    assert ["data-best" in _cell(html, index, "auroc") for index in range(3)] == [True, False, False]
    assert ["data-best" in _cell(html, index, "brier") for index in range(3)] == [True, False, False]
    included = client.get(page, {"include_partial": "true"}).content.decode()
    assert ["data-best" in _cell(included, index, "auroc") for index in range(3)] == [False, True, False]
    assert 'name="include_partial" value="true" checked' in included
    assert "Ranked all the same: partial judges are included." in included
    # Every metric line says what it measures and which way is better.
    assert "chance that a relevant pair gets a higher P than a non-relevant one (0.5: guessing, 1: perfect); higher " \
           "is better" in html
    assert "mean squared gap between P and gold&#x27;s 0 or 1; lower is better (0: perfect)" in html


@pytest.mark.parametrize(("non_relevant", "noted"), [(4, True), (10, False)])
def test_a_gold_set_with_under_5_percent_non_relevant_pairs_sends_to_the_all_pairs_view(client, non_relevant, noted):
    project = _cached(coverage_study(non_relevant=non_relevant))
    client.force_login(member(project))
    page = reverse("labeling:validation", args=[project.slug])
    html = client.get(page).content.decode()
    assert ("data-few-non-relevant" in html) is noted
    if noted:
        assert "4 of the 100 gold pairs are not relevant, fewer than 5%: precision, MAP and AUROC cannot" in html
        link = re.search(r'<a href="([^"]+)" data-all-pairs-link>', html).group(1)
        assert unescape(link) == f"{page}?all_pairs=1" and "adds 20 pairs" in html
        # One click away: the view it links to counts the 20 unjudged pool pairs as irrelevant (24 of 120).
        followed = client.get(unescape(link)).content.decode()
        assert 'data-added="20"' in followed and "data-few-non-relevant" not in followed

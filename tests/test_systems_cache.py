"""The Systems page's evaluation as a cached job (#34): above SYSTEMS_INLINE_ENTRIES the page asks a worker for it
(debounced), shows the progress, then reads the stored result; a change of labels, judgments or runs marks it stale;
a stored file that is not this site's is never unpickled."""
from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.urls import reverse

from labeling.models import Membership, Run, RunEntry, SystemsResult
from labeling.selectors.significance import systems_significance
from labeling.selectors.systems import systems_report
from labeling.selectors.systems_cache import (
    SystemsChoice,
    systems_bundle_compute,
    systems_bundle_load,
    systems_cached,
)
from labeling.services import systems_cache
from labeling.services.systems_cache import systems_refresh, systems_request
from labeling.services.validation import validation_request_refresh
from tests.factories import MembershipFactory, UserFactory
from tests.selectors.test_systems import systems_project

pytestmark = pytest.mark.django_db

CHOICE = SystemsChoice(sources=("human", "judge:llm"))


@pytest.fixture
def built(settings):
    settings.SYSTEMS_INLINE_ENTRIES = 0  # every project goes through the worker
    settings.SYSTEMS_REFRESH_MIN_SECONDS = 0
    built = systems_project()
    for run in Run.objects.filter(project=built.project):
        run.entries = RunEntry.objects.filter(run=run).count()
        run.save(update_fields=["entries"])
    return built


@pytest.fixture
def admin_client(built, client):
    admin = UserFactory(username="cache-admin")
    MembershipFactory(project=built.project, user=admin, role=Membership.Role.ADMIN)
    client.force_login(admin)
    return client


def _page(client, built, **params):
    return client.get(reverse("labeling:systems", args=[built.project.slug]),
                      {"source": ["human", "judge:llm"], **params})


def test_the_page_asks_a_worker_once_shows_progress_then_the_stored_leaderboard(
        built, admin_client, django_capture_on_commit_callbacks, monkeypatch):
    queued = []
    monkeypatch.setattr(systems_cache.systems_refresh_task, "apply_async",
                        lambda args, countdown: queued.append((args, countdown)))
    with django_capture_on_commit_callbacks(execute=True):
        first = _page(admin_client, built)
        again = _page(admin_client, built)
    html = first.content.decode()
    assert 'data-evaluation-status="pending"' in html and "data-leaderboard" not in html
    assert 'data-evaluation-status="pending"' in again.content.decode()
    result = SystemsResult.objects.get(project=built.project)
    assert len(queued) == 1 and queued[0][0] == (result.id,)  # debounced: two visits, one computation
    assert result.total == Run.objects.filter(project=built.project).count() + 2

    systems_refresh(result_id=result.id)
    result.refresh_from_db()
    assert result.status == "done" and result.done == result.total and result.file

    shown = _page(admin_client, built).content.decode()
    assert "data-evaluation-status" not in shown
    expected = systems_report(project=built.project, sources=["human", "judge:llm"])
    best = max(expected.runs, key=lambda run: (expected.scores[run]["human"]["nDCG@10"].mean, run))
    board = shown[shown.index('data-leaderboard="human"'):]
    assert board.index(f'<td class="run-name">{best}') < min(
        board.index(f'<td class="run-name">{run}') for run in expected.runs if run != best)
    status = admin_client.get(reverse("labeling:systems", args=[built.project.slug]),
                              {"source": ["human", "judge:llm"], "part": "status"}, HTTP_HX_REQUEST="true")
    assert status["HX-Refresh"] == "true"
    assert len(queued) == 1


def test_the_stored_bundle_is_what_the_selectors_compute(built):
    result = systems_request(project=built.project, choice=CHOICE)
    systems_refresh(result_id=result.id)
    cached = systems_cached(project=built.project, choice=CHOICE)
    assert cached.fresh
    report = systems_report(project=built.project, sources=list(CHOICE.sources))
    stored = cached.bundle.report
    for run in report.runs:
        for key in CHOICE.sources:
            assert stored.scores[run][key]["nDCG@10"] == report.scores[run][key]["nDCG@10"]
    significance = systems_significance(report, CHOICE.significance)
    assert cached.bundle.significance["human"]["nDCG@10"].best == significance["human"]["nDCG@10"].best
    assert cached.bundle.reusability is not None and cached.bundle.reusability.source == "human"


def test_the_stored_pickle_on_disk_is_private_to_the_service_account(built, settings):
    result = systems_request(project=built.project, choice=CHOICE)
    systems_refresh(result_id=result.id)
    result.refresh_from_db()
    path = Path(settings.MEDIA_ROOT) / result.file
    assert result.status == "done" and path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700


def test_progress_counts_each_run_then_the_tests_and_leave_one_run_out(built):
    steps = []
    systems_bundle_compute(project=built.project, choice=CHOICE, progress=steps.append)
    runs = Run.objects.filter(project=built.project).count()
    assert steps == list(range(1, runs + 3))


def test_a_change_of_data_marks_the_result_stale_and_the_page_says_so(
        built, admin_client, django_capture_on_commit_callbacks, monkeypatch):
    monkeypatch.setattr(systems_cache.systems_refresh_task, "apply_async", lambda args, countdown: None)
    result = systems_request(project=built.project, choice=CHOICE)
    systems_refresh(result_id=result.id)
    assert systems_cached(project=built.project, choice=CHOICE).fresh
    with django_capture_on_commit_callbacks(execute=True):
        validation_request_refresh(project=built.project)  # what every label, judgment and pool change does
    assert not systems_cached(project=built.project, choice=CHOICE).fresh
    with django_capture_on_commit_callbacks(execute=True):
        html = _page(admin_client, built).content.decode()
    # The old leaderboard stays, marked stale, while the new one is computed.
    assert 'data-evaluation-status="pending"' in html and 'data-leaderboard="human"' in html
    assert "before the latest changes" in html
    Run.objects.filter(project=built.project).first().delete()
    systems_refresh(result_id=result.id)
    assert systems_cached(project=built.project, choice=CHOICE).fresh


def test_a_file_that_is_not_this_sites_is_never_unpickled(built):
    result = systems_request(project=built.project, choice=CHOICE)
    systems_refresh(result_id=result.id)
    result.refresh_from_db()

    class Boom:
        def __reduce__(self):
            return (pytest.fail, ("a forged file was unpickled",))

    default_storage.delete(result.file)
    default_storage.save(result.file, ContentFile(pickle.dumps(Boom())))
    assert systems_bundle_load(result) is None
    assert not systems_cached(project=built.project, choice=CHOICE).fresh


def test_a_failed_computation_is_shown_and_the_next_visit_asks_again(
        built, admin_client, django_capture_on_commit_callbacks, monkeypatch):
    queued = []
    monkeypatch.setattr(systems_cache.systems_refresh_task, "apply_async",
                        lambda args, countdown: queued.append(args))

    def broken(**kwargs):
        raise RuntimeError("the disk is full")

    monkeypatch.setattr(systems_cache, "systems_bundle_compute", broken)
    with django_capture_on_commit_callbacks(execute=True):
        _page(admin_client, built)
    result = SystemsResult.objects.get(project=built.project)
    with pytest.raises(RuntimeError):
        systems_refresh(result_id=result.id)
    result.refresh_from_db()
    assert result.status == "failed" and "the disk is full" in result.error
    # The page's poll shows the error and stops polling.
    poll = admin_client.get(reverse("labeling:systems", args=[built.project.slug]),
                            {"source": ["human", "judge:llm"], "part": "status"}, HTTP_HX_REQUEST="true")
    shown = poll.content.decode()
    assert "the disk is full" in shown and 'data-evaluation-status="failed"' in shown and "hx-trigger" not in shown
    assert "HX-Refresh" not in poll
    # Reloading the page asks again.
    with django_capture_on_commit_callbacks(execute=True):
        html = _page(admin_client, built).content.decode()
    assert 'data-evaluation-status="pending"' in html
    assert len(queued) == 2


def test_old_results_beyond_the_limit_are_removed_with_their_files(built, monkeypatch):
    monkeypatch.setattr(systems_cache, "KEEP_PER_PROJECT", 2)
    files = []
    for test in ("randomization", "t", "wilcoxon"):
        choice = SystemsChoice(sources=("human",), test=test)
        result = systems_request(project=built.project, choice=choice)
        systems_refresh(result_id=result.id)
        result.refresh_from_db()
        files.append(result.file)
    assert SystemsResult.objects.filter(project=built.project).count() == 2
    assert not default_storage.exists(files[0]) and default_storage.exists(files[2])


def test_an_expert_under_blind_first_gets_no_status(built, client):
    expert = UserFactory(username="cache-expert")
    MembershipFactory(project=built.project, user=expert, role=Membership.Role.EXPERT)
    client.force_login(expert)
    systems_request(project=built.project, choice=CHOICE)
    response = client.get(reverse("labeling:systems", args=[built.project.slug]),
                          {"source": ["human", "judge:llm"], "part": "status"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 404

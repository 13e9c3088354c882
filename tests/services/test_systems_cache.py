"""The Systems page's evaluation as a cached job (#34): above SYSTEMS_INLINE_ENTRIES the page asks a worker for it
(debounced), shows the progress, then reads the stored result; a change of labels, judgments or runs marks it stale;
a stored file that is not this site's is never unpickled; only the page's own choices are queued, at most
SYSTEMS_MAX_PENDING of a project at once, and asking never removes a computed result (#47)."""
from __future__ import annotations

import pickle
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from labeling.models import Membership, Run, RunEntry, SystemsResult
from labeling.selectors.systems import systems_report
from labeling.selectors.systems_cache import (
    SystemsChoice,
    systems_bundle_compute,
    systems_bundle_load,
    systems_cached,
)
from labeling.selectors.systems_significance import systems_significance
from labeling.services import systems_cache
from labeling.services.systems_cache import systems_request, systems_run
from labeling.services.validation import validation_request
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

    systems_run(result_id=result.id)
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
    systems_run(result_id=result.id)
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
    systems_run(result_id=result.id)
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
    systems_run(result_id=result.id)
    assert systems_cached(project=built.project, choice=CHOICE).fresh
    with django_capture_on_commit_callbacks(execute=True):
        validation_request(project=built.project)  # what every label, judgment and pool change does
    assert not systems_cached(project=built.project, choice=CHOICE).fresh
    with django_capture_on_commit_callbacks(execute=True):
        html = _page(admin_client, built).content.decode()
    # The old leaderboard stays, marked stale, while the new one is computed.
    assert 'data-evaluation-status="pending"' in html and 'data-leaderboard="human"' in html
    assert "before the latest changes" in html
    Run.objects.filter(project=built.project).first().delete()
    systems_run(result_id=result.id)
    assert systems_cached(project=built.project, choice=CHOICE).fresh


def test_a_file_that_is_not_this_sites_is_never_unpickled(built):
    result = systems_request(project=built.project, choice=CHOICE)
    systems_run(result_id=result.id)
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
        systems_run(result_id=result.id)
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
        systems_run(result_id=result.id)
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


def test_a_viewer_queues_only_the_page_s_own_choices_within_the_bound_and_the_admin_s_report_survives(
        built, admin_client, settings, django_capture_on_commit_callbacks, monkeypatch):
    settings.SYSTEMS_MAX_PENDING = 3
    queued = []
    monkeypatch.setattr(systems_cache.systems_refresh_task, "apply_async",
                        lambda args, countdown: queued.append(args[0]))
    with django_capture_on_commit_callbacks(execute=True):
        _page(admin_client, built)
    systems_run(result_id=queued.pop())
    assert systems_cached(project=built.project, choice=CHOICE).fresh
    viewer = Client()
    user = UserFactory(username="cache-viewer")
    MembershipFactory(project=built.project, user=user, role=Membership.Role.VIEWER)
    viewer.force_login(user)

    pages = []
    with django_capture_on_commit_callbacks(execute=True):
        for step in range(1, 26):  # values the threshold box offers (0.01 to 0.25)
            pages.append(_page(viewer, built, threshold=f"{step / 100:.2f}").content.decode())
    assert len(queued) == 3 and all('data-evaluation-status="pending"' in page for page in pages[:3])
    busy = pages[3]
    assert "data-systems-busy" in busy and "3 other choices" in busy and "not queued" in busy
    assert all("data-systems-busy" in page for page in pages[3:])
    # What the page's controls do not offer is refused, saying why, and queues nothing.
    rows = SystemsResult.objects.filter(project=built.project).count()
    with django_capture_on_commit_callbacks(execute=True):
        off_step = _page(viewer, built, threshold="0.123").content.decode()
        tiny = _page(viewer, built, threshold="1e-300").content.decode()
        named = viewer.get(reverse("labeling:systems", args=[built.project.slug]),
                           {"source": ["human", "judge:llm@0.37"]}).content.decode()
        unknown = viewer.get(reverse("labeling:systems", args=[built.project.slug]),
                             {"source": ["human", "nothing-of-the-project"]}).content.decode()
    assert "data-threshold-error" in off_step and "steps of 0.01" in off_step and "0.123" in off_step
    assert "data-threshold-error" in tiny
    assert "data-source-error" in named and "judge:llm@0.37" in named
    assert "data-source-error" in unknown and "nothing-of-the-project" in unknown
    assert len(queued) == 3 and SystemsResult.objects.filter(project=built.project).count() == rows

    # The worker stores the viewer's three: the admin's computed report is still there, and fresh.
    for result_id in queued:
        systems_run(result_id=result_id)
    cached = systems_cached(project=built.project, choice=CHOICE)
    assert cached.fresh and default_storage.exists(cached.result.file)
    assert 'data-leaderboard="human"' in _page(admin_client, built).content.decode()


def test_pending_results_never_remove_a_computed_one(built, settings, monkeypatch):
    settings.SYSTEMS_MAX_PENDING = 30
    monkeypatch.setattr(systems_cache.systems_refresh_task, "apply_async", lambda args, countdown: None)
    admin_s = systems_request(project=built.project, choice=CHOICE)
    systems_run(result_id=admin_s.id)
    asked = [systems_request(project=built.project,
                             choice=SystemsChoice(sources=("human", f"judge:llm@{step / 100:g}")))
             for step in range(1, 26)]
    systems_run(result_id=asked[-1].id)
    assert systems_cached(project=built.project, choice=CHOICE).fresh
    assert SystemsResult.objects.filter(project=built.project, status="pending").count() == 24


def test_a_result_removed_while_it_was_computed_is_not_stored(built, monkeypatch):
    result = systems_request(project=built.project, choice=CHOICE)
    computed = systems_cache.systems_bundle_compute

    def removed_meanwhile(**kwargs):
        bundle = computed(**kwargs)
        SystemsResult.objects.filter(id=result.id).delete()
        return bundle

    monkeypatch.setattr(systems_cache, "systems_bundle_compute", removed_meanwhile)
    assert systems_run(result_id=result.id) is None
    assert default_storage.listdir(f"{systems_cache.STORE_PREFIX}{built.project.id}")[1] == []


def test_a_computation_whose_task_was_lost_frees_its_place_after_the_time_limit(built, settings, monkeypatch):
    """A broker flushed, a task lost: its row stays pending, and without a bound in time every lost one would keep
    one of the project's SYSTEMS_MAX_PENDING places for good."""
    settings.SYSTEMS_MAX_PENDING = 1
    queued = []
    monkeypatch.setattr(systems_cache.systems_refresh_task, "apply_async",
                        lambda args, countdown: queued.append(args[0]))
    monkeypatch.setattr(systems_cache.transaction, "on_commit", lambda queue: queue())
    lost = systems_request(project=built.project, choice=CHOICE)
    other = SystemsChoice(sources=("human", "judge:llm@0.3"))
    with pytest.raises(systems_cache.SystemsBusy):
        systems_request(project=built.project, choice=other)
    # Asking again for the lost one within the limit queues nothing more.
    systems_request(project=built.project, choice=CHOICE)
    assert len(queued) == 1

    past = timezone.now() - timedelta(seconds=settings.SYSTEMS_TIME_LIMIT + 1)
    SystemsResult.objects.filter(id=lost.id).update(heartbeat_at=past)
    systems_request(project=built.project, choice=other)
    assert len(queued) == 2
    # Asked again, the lost one is queued afresh (one worker computes it, whichever delivery comes first).
    SystemsResult.objects.filter(id=lost.id).update(heartbeat_at=past)
    SystemsResult.objects.exclude(id=lost.id).update(status="done", finished_at=timezone.now())
    systems_request(project=built.project, choice=CHOICE)
    assert queued[-1] == lost.id and len(queued) == 3
    systems_run(result_id=lost.id)
    assert systems_cached(project=built.project, choice=CHOICE).fresh

"""The Replay pages through the test client (#50): the form offers the project's judges with what each scored and
starts a replay for an admin; experts and viewers are refused; a bad field is named and nothing is stored; a done
replay's page shows the summary table's numbers (checked against a hand computation on the stored runs) and its
charts (a mean line checked point by point), and says why a measure has no chart; a running one is polled; cancel
and delete are an admin's."""
from __future__ import annotations

import re
from html import unescape

import numpy as np
import pytest
from django.urls import reverse

from labeling.models import Membership, ReplayJob
from labeling.services.releases import release_create
from labeling.services.replay import replay_request, replay_run
from labeling.tasks import replay_task
from tests.audit_fixtures import members
from tests.selectors.test_replay import graded_world  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db
ADMIN, EXPERT, VIEWER = Membership.Role.ADMIN, Membership.Role.EXPERT, Membership.Role.VIEWER
FORM = {"judges": ["full"], "mixes": ["uncertain-80", "random-100"], "batch": "5", "rounds": "3", "seeds": "2",
        "truth": "reference", "refit": "on", "target": "0.9", "alpha": "0.1"}
# band_chart's box (labeling.charts): x from 40 to 310, y from 170 (the axis' low end) up to 18 (its high end).
LEFT, RIGHT, TOP, BOTTOM = 40, 310, 18, 170


def page(project) -> str:
    return reverse("labeling:replay", args=[project.slug])


def detail(job) -> str:
    return reverse("labeling:replay_detail", args=[job.project.slug, job.id])


def text(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


def rows(html: str) -> dict[str, list[str]]:
    """The summary table's rows, by 'mix · judge', as lists of cell texts."""
    table = re.search(r'data-testid="replay-summary-table">(.*?)</table>', html, re.DOTALL).group(1)
    found = {}
    for arm, body in re.findall(r'<tr data-arm="([^"]+)">(.*?)</tr>', table, re.DOTALL):
        found[unescape(arm)] = [text(cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", body, re.DOTALL)]
    return found


@pytest.fixture
def done(graded_world, monkeypatch):  # noqa: F811
    """A replay of judges `full` and `partial` under two mixes, 8 rounds of 5 (the whole pool of 40 by the end, so
    that every measure reaches its target somewhere), 2 seeds, run by the worker's function; and the project's
    members."""
    project, _ = graded_world
    users = members(project)
    monkeypatch.setattr(replay_task, "delay", lambda *args: None)
    job = replay_request(project=project, by=users[ADMIN], judges=["full", "partial"],
                         mixes=[{"uncertain": 80, "random": 20}, {"random": 100}], batch=5, rounds=8, seeds=2)
    replay_run(job_id=job.id)
    job.refresh_from_db()
    assert job.status == "done"
    return project, users, job


def test_the_form_offers_the_judges_with_what_each_scored_and_starts_a_replay(
        client, graded_world, django_capture_on_commit_callbacks, monkeypatch):  # noqa: F811
    project, _ = graded_world
    users = members(project)
    client.force_login(users[ADMIN])
    html = client.get(page(project)).content.decode()
    assert 'data-tab="replay" aria-current="page"' in html
    assert text(re.search(r'data-scored="full">(.*?)</span>', html).group(1)) == "scored 40 of 40 pool pairs"
    assert "scored 10 of 40 pool pairs (partial" in text(re.search(r'data-scored="partial">(.*?)</span>',
                                                                   html).group(1))
    # A judge that scored nothing cannot be chosen, and the form says why.
    assert re.search(r'value="none" disabled', html)
    assert "scored none of the pool's pairs: score the pool with it first" in html
    assert "the TREC convention" in html
    queued = []
    monkeypatch.setattr(replay_task, "delay", lambda job_id: queued.append(job_id))
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(page(project), FORM)
    job = ReplayJob.objects.get()
    assert response.status_code == 302 and response["Location"] == detail(job)
    assert queued == [job.id] and job.total == 4 and job.requested_by == users[ADMIN]
    assert job.parameters == {"judges": ["full"], "mixes": [{"uncertain": 80.0, "random": 20.0}, {"random": 100.0}],
                              "batch": 5, "rounds": 3, "seeds": 2, "truth": "reference", "refit": True,
                              "target": 0.9, "alpha": 0.1}
    listed = client.get(page(project)).content.decode()
    assert f'<tr data-replay="{job.id}" data-status="pending">' in listed
    assert "0 / 4 runs" in listed and f'href="{detail(job)}"' in listed


def test_a_frozen_release_is_offered_as_the_truth_two_ways(client, graded_world, monkeypatch):  # noqa: F811
    project, _ = graded_world
    users = members(project)
    release_create(project=project, by=users[ADMIN], name="v1")
    client.force_login(users[ADMIN])
    html = client.get(page(project)).content.decode()
    assert 'value="release:v1"' in html and 'value="release-trec:v1"' in html
    monkeypatch.setattr(replay_task, "delay", lambda job_id: None)
    response = client.post(page(project), {**FORM, "truth": "release-trec:v1"})
    assert response.status_code == 302
    assert ReplayJob.objects.get().parameters["truth"] == "release-trec:v1"


@pytest.mark.parametrize("role", [EXPERT, VIEWER])
def test_experts_and_viewers_are_refused_and_nothing_is_started(client, graded_world, role):  # noqa: F811
    project, _ = graded_world
    users = members(project)
    job = ReplayJob.objects.create(project=project, total=1, parameters={**FORM, "judges": ["full"]})
    client.force_login(users[role])
    for response in (client.get(page(project)), client.post(page(project), FORM), client.get(detail(job))):
        assert response.status_code == 403
        assert "Only a project admin can replay the loop" in response.content.decode()
    assert ReplayJob.objects.count() == 1
    overview = client.get(reverse("labeling:project_detail", args=[project.slug])).content.decode()
    assert 'data-tab="rounds"' in overview or role == EXPERT  # a viewer reads the rounds
    assert 'data-tab="replay"' not in overview


@pytest.mark.parametrize(("change", "status", "named"), [
    ({"seeds": "0"}, 400, "seeds must be a whole number from 1 to 100, not 0"),
    ({"seeds": "ten"}, 400, "seeds must be a whole number, not 'ten'"),
    ({"judges": []}, 400, "judges: give the names of one or more judges"),
    ({"mixes": []}, 400, "mixes: give 1 to"),
    ({"alpha": "0.9"}, 400, "alpha must be a number from 0.001 to 0.5"),
    ({"judges": ["none"]}, 409, "judge 'none' has scored none of the pool's pairs"),
])
def test_a_bad_field_is_named_on_the_form_and_nothing_is_stored(
        client, graded_world, change, status, named):  # noqa: F811
    project, _ = graded_world
    client.force_login(members(project)[ADMIN])
    response = client.post(page(project), {**FORM, "batch": "7", **change})
    html = response.content.decode()
    assert response.status_code == status
    assert named in text(re.search(r'data-testid="replay-error">(.*?)</span>', html, re.DOTALL).group(1))
    assert not ReplayJob.objects.exists()
    assert re.search(r'id="replay-batch" name="batch" type="number" min="1" value="7"', html)  # kept as typed


def _first(states, test):
    return next((state for state in states if test(state)), None)


def test_a_done_replays_page_shows_the_summary_numbers_and_the_curves(client, done):
    project, users, job = done
    client.force_login(users[ADMIN])
    html = client.get(detail(job)).content.decode()
    assert 'data-status>done' in html and "8 / 8 runs" in html
    notes = text(re.search(r'data-testid="replay-notes">(.*?)</ul>', html, re.DOTALL).group(1))
    assert "Truth: the project's reference grades." in notes
    assert "Judge 'partial' scored 10 of the 40 pairs" in notes
    # The summary table comes before the curves.
    assert html.index('data-testid="replay-summary"') < html.index('data-testid="replay-curves"')
    table = rows(html)
    assert list(table) == ["uncertain 80 / random 20 · full", "uncertain 80 / random 20 · partial",
                           "random 100 · full", "random 100 · partial"]
    # Each row by hand from the stored runs: labels when the verified qrels and the exported ones first reached
    # recall 0.9 (mean over the seeds that did, and how many), the intervals' coverage of the true count over the
    # rounds, and WSS@95 = (N - labels at 95 % verified recall) / N - 0.05, averaged over the seeds.
    for arm, cells in table.items():
        mix, judge = arm.split(" · ")
        assert cells[:2] == [mix, judge]
        runs = [run for run in job.result["runs"] if run["judge"] == judge
                and " / ".join(f"{k} {v:g}" for k, v in sorted(run["mix"].items(), key=lambda kv: -kv[1])) == mix]
        assert len(runs) == 2
        for column, found in ((2, "verified_relevant"), (3, "exported_found")):
            reached = [_first(run["states"], lambda s: s[found] >= 0.9 * s["true_relevant"]) for run in runs]
            labels = [state["labels"] for state in reached if state is not None]
            expected = f"{np.mean(labels):g} {len(labels)}/2 seeds" if labels else "not reached 0/2 seeds"
            assert cells[column] == expected, (arm, column)
        assert cells[5] == "–"  # no runs to rank: tau is not measured
        for column, which in ((7, "model"), (8, "design")):
            flags = [s[which][1] <= s["true_relevant"] <= s[which][2]
                     for run in runs for s in run["states"][1:] if s[which] is not None]
            assert cells[column] == (f"{round(100 * np.mean(flags))} %" if flags else "–"), (arm, column)
        at95 = [_first(run["states"], lambda s: s["verified_relevant"] >= 0.95 * s["true_relevant"])["labels"]
                for run in runs]
        assert cells[9] == f"{np.mean([(40 - labels) / 40 - 0.05 for labels in at95]):.3f}"
        stops = [state for state in (_first(run["states"], lambda s: s["stopped"]) for run in runs) if state]
        recall = np.mean([s["verified_relevant"] / s["true_relevant"] for s in stops]) if stops else None
        assert cells[6] == (f"{np.mean([s['labels'] for s in stops]):g} labels, true recall {recall:.2f} "
                            f"{len(stops)}/2 seeds" if stops else "did not stop 0/2 seeds"), arm
    assert {cells[2] for cells in table.values()} != {"not reached 0/2 seeds"}
    # The curves: a chart per measure and judge; the verified recall's mean line, point by point.
    curves = html[html.index('data-testid="replay-curves"'):]
    assert 'data-measure="verified_recall"' in curves and 'data-measure="model_total"' in curves
    full = re.search(r'data-measure="verified_recall".*?data-judge="full">(.*?)</figure>', curves, re.DOTALL).group(1)
    assert full.count("<polygon class=\"band") == 2  # one band per mix
    first_line = re.search(r'<polyline class="line s0" points="([^"]+)"', full).group(1)
    runs = [run for run in job.result["runs"] if run["judge"] == "full" and "uncertain" in run["mix"]]
    means = [np.mean([run["states"][i]["verified_relevant"] / run["states"][i]["true_relevant"] for run in runs])
             for i in range(9)]
    expected = [(LEFT + labels / 40 * (RIGHT - LEFT), BOTTOM - mean * (BOTTOM - TOP))
                for labels, mean in zip(range(0, 45, 5), means)]
    drawn = [tuple(map(float, point.split(","))) for point in first_line.split()]
    assert np.allclose(drawn, expected, atol=0.06)
    # No runs to rank: the tau curve says why instead of an empty chart.
    tau = re.search(r'data-measure="kendall_tau">(.*?)</div>', curves, re.DOTALL).group(1)
    assert "<svg" not in tau and "the project has fewer than two runs" in tau


def test_a_running_replay_is_polled_and_a_finished_one_is_not(client, done):
    project, users, job = done
    running = ReplayJob.objects.create(project=project, total=4, done=1, status=ReplayJob.Status.RUNNING,
                                       parameters=job.parameters)
    client.force_login(users[ADMIN])
    html = client.get(detail(running)).content.decode()
    assert f'hx-get="{detail(running)}" hx-trigger="every 2s"' in html and "1 / 4 runs" in html
    assert "data-waiting" in html and "Cancel</button>" in html
    partial = client.get(detail(running), HTTP_HX_REQUEST="true").content.decode()
    assert partial.lstrip().startswith('<div id="replay-body"') and "<html" not in partial
    listed = client.get(page(project)).content.decode()
    assert f'hx-get="{page(project)}" hx-trigger="every 2s"' in listed
    assert 'hx-trigger' not in client.get(detail(job)).content.decode()


def test_cancel_and_delete_are_an_admins(client, done):
    project, users, job = done
    running = ReplayJob.objects.create(project=project, total=4, status=ReplayJob.Status.RUNNING,
                                       parameters=job.parameters)
    cancel = reverse("labeling:replay_cancel", args=[project.slug, running.id])
    delete = reverse("labeling:replay_delete", args=[project.slug, job.id])
    client.force_login(users[EXPERT])
    assert client.post(cancel).status_code == 403 and client.post(delete).status_code == 403
    running.refresh_from_db()
    assert running.status == "running" and ReplayJob.objects.filter(id=job.id).exists()
    client.force_login(users[ADMIN])
    response = client.post(cancel, follow=True)
    running.refresh_from_db()
    assert running.status == "cancelled" and f"Replay {running.id} is cancelled." in response.content.decode()
    assert "Cancel</button>" not in response.content.decode()
    # Deleting asks first: the button sits in a closed <details>.
    assert re.search(r'<details class="replay-delete"><summary class="small">Delete&hellip;</summary>\s*'
                     rf'<form method="post" action="{delete}">', client.get(detail(job)).content.decode())
    response = client.post(delete, follow=True)
    assert response.redirect_chain[-1][0] == page(project)
    assert not ReplayJob.objects.filter(id=job.id).exists()
    assert f"Deleted replay {job.id}" in response.content.decode()

"""The Robustness pages through the test client, on real audits (the multi-condition example project audited by
the bundled MiniLM judge): a judge's latest reports with their numbers and curves, its audits, the estimate before
the start, an audit's progress and report, a run's multi-condition report; who may see and do what (blind
first); untrusted text escaped. The line chart's geometry is checked by hand."""
from __future__ import annotations

import re
from html import unescape

import pytest
from django.urls import reverse
from django.utils import timezone

from labeling.charts import line_chart
from labeling.models import AuditJob, Judge, Passage
from labeling.services.audit import audit_estimate, audit_run
from labeling.services.judges import judge_create
from tests.audit_fixtures import (
    MULTICONDITION,
    PERTURBATION,
    audited,
    audited_once,
    members,
    multicondition_project,
    oracle_run,
)
from tests.factories import JudgeFactory, ProjectFactory, QueryFactory
from tests.scoring_fixtures import minilm_judge
from tests.url_matrix import ADMIN, EXPERT, VIEWER, build_world
from tests.views.test_xss import ESCAPED, PAYLOAD, RAW

pytestmark = pytest.mark.django_db

# line_chart's box (labeling.charts): x from 34 to 290, y from 170 (rate 0) up to 18 (rate 1).
LEFT, RIGHT, TOP, BOTTOM = 34, 290, 18, 170


@pytest.fixture
def audited_judge():
    project = multicondition_project()
    judge = minilm_judge(project)
    users = members(project)
    perturbation = audited_once(project, judge, AuditJob.Kind.PERTURBATION, PERTURBATION, users[ADMIN])
    multicondition = audited_once(project, judge, AuditJob.Kind.MULTICONDITION, MULTICONDITION, users[ADMIN])
    return project, judge, users, perturbation, multicondition


def robustness(project, judge) -> str:
    return reverse("labeling:judge_robustness", args=[project.slug, judge.name])


def detail(job) -> str:
    return reverse("labeling:audit_detail", args=[job.project.slug, job.id])


def cells(html: str, row_selector: str) -> list[str]:
    row = re.search(rf"<tr {row_selector}[^>]*>(.*?)</tr>", html, re.DOTALL).group(1)
    return [" ".join(unescape(re.sub(r"<[^>]+>", " ", cell)).split())
            for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.DOTALL)]


def shown(value: float | None, ci: list[float] | None = None, decimals: int = 3) -> str:
    if value is None:
        return "–"
    text = f"{value:.{decimals}f}"
    return f"{text} [{ci[0]:.{decimals}f}, {ci[1]:.{decimals}f}]" if ci else text


def section(html: str, start: str) -> str:
    """The <section {start}...> element, the sections inside it included."""
    begin = html.index(f"<section {start}")
    depth = 0
    for tag in re.finditer(r"<(/?)section\b", html[begin:]):
        depth += -1 if tag.group(1) else 1
        if depth == 0:
            return html[begin:begin + tag.end()]
    raise AssertionError(f"no end to <section {start}")


# --- The line chart -----------------------------------------------------------------------------------------------

def test_the_line_chart_spans_k_and_rates_and_leaves_a_gap_at_a_missing_value():
    chart = line_chart({"a": [(1, 0.0), (2, 0.5), (3, None), (4, 1.0), (5, 0.25)], "b": [(1, 1.0), (5, 0.75)]})
    # By hand: x = 34 + (k - 1) / 4 * 256, y = 170 - rate * 152.
    a, b = chart.series
    assert a.segments == ["34.0,170.0 98.0,94.0", "226.0,18.0 290.0,132.0"]
    assert [(p.x, p.y) for p in a.points] == [(34, 170), (98, 94), (226, 18), (290, 132)]
    assert b.segments == ["34.0,18.0 290.0,56.0"] and (a.index, b.index) == (0, 1)
    assert [tick.label for tick in chart.x_ticks] == ["1", "2", "3", "4", "5"]
    assert [(tick.label, tick.y) for tick in chart.y_ticks] == [("0", 174), ("0.25", 136), ("0.5", 98),
                                                                ("0.75", 60), ("1", 22)]
    # A value between two missing ones has no line but keeps its dot; one x alone sits in the middle.
    lonely = line_chart({"c": [(1, None), (2, 0.5), (3, None)]}).series[0]
    assert lonely.segments == [] and [(p.x, p.y) for p in lonely.points] == [(162, 94)]
    assert line_chart({"d": [(7, 0.5)]}).series[0].points[0].x == (LEFT + RIGHT) / 2


# --- The judge's page ---------------------------------------------------------------------------------------------

def test_readers_see_both_latest_reports_with_their_numbers_and_curves(client, audited_judge):
    project, judge, users, perturbation, multicondition = audited_judge
    client.force_login(users[VIEWER])
    html = client.get(robustness(project, judge)).content.decode()

    report = section(html, 'class="card systems-block" data-report="perturbation"')
    assert f'data-verdict>{perturbation.report["verdict"]}<' in report
    assert len(perturbation.report["rows"]) == 6  # length 512 and 1024, stuffing, injection, definition, consistency
    for row in perturbation.report["rows"]:
        assert cells(report, f'data-test="{row["test"]}"') == [
            f"{row['title']} {row['note']}".strip(), str(row["n"]), str(row["failed"]),
            shown(row["mean_delta"], row["mean_delta_ci"]), shown(row["decision_flips"], row["decision_flips_ci"]),
            shown(row["ordering_flips"], row["ordering_flips_ci"]), f"{row['verdict']} {row['why']}"]
        assert report.count(f'data-worst="{row["test"]}"') == (1 if row["worst"] else 0)
    assert "Robust: |mean change in P| ≤ 0.05 and decision flips ≤ 0.05" in unescape(report)

    mc = section(html, 'class="card systems-block" data-report="multicondition"')
    task1 = multicondition.report["task1"]
    styles = task1["styles"]
    table = re.search(r'<table[^>]*data-rates="task1".*?</table>', mc, re.DOTALL).group(0)
    for style, curve in styles.items():
        for domain, values in curve["by_domain"].items():
            assert cells(table, f'data-row="{style} · {domain}"') == [
                f"{style} · {domain}", *(shown(v, decimals=2) for v in values), ""]
        assert cells(table, f'data-row="{style} · average"') == [
            f"{style} · average", *(shown(v, decimals=2) for v in curve["average"]), shown(curve["mean"])]
    # The Task 1 chart: one line per style through its averages, at y = 170 - rate * 152.
    chart = re.search(r'<svg[^>]*data-chart="task1".*?</svg>', mc, re.DOTALL).group(0)
    assert "<title>Win Rate against k (conditions in the query) (instruction, descriptive)" in chart
    for index, curve in enumerate(styles.values()):
        dots = re.findall(rf'<circle class="dot s{index}" cx="([\d.]+)" cy="([\d.]+)"', chart)
        k_span = curve["k"][-1] - curve["k"][0]
        assert [(float(x), float(y)) for x, y in dots] == [
            (round(LEFT + (k - curve["k"][0]) / k_span * (RIGHT - LEFT), 1), round(BOTTOM - v * (BOTTOM - TOP), 1))
            for k, v in zip(curve["k"], curve["average"])]
    for key in ("task2", "task3", "task4"):
        assert f'data-chart="{key}"' in mc and f'data-rates="{key}"' in mc
    pads = multicondition.report["task4"]["pads"]
    assert set(pads) == {"0", "512"} and "512 words · average" in unescape(mc)
    assert 'data-thresholds>Win Rate: robust &ge; 0.9, sensitive &lt; 0.7.' in mc

    # The audits, newest first, with who asked; no form and no cancel for a viewer.
    assert html.index(f'data-audit="{multicondition.id}"') < html.index(f'data-audit="{perturbation.id}"')
    assert cells(html, f'data-audit="{perturbation.id}"')[2] == "sample 8; seed 1; tests length, stuffing, " \
                                                                 "injection, definition, consistency"
    assert f"admin-{project.slug}" in html
    assert "data-audit-card" not in html and "hx-trigger" not in html
    assert reverse("labeling:audit_start", args=[project.slug, judge.name]) not in html


def test_blind_experts_may_not_read_any_robustness_page(client, audited_judge):
    project, judge, users, perturbation, _ = audited_judge
    run = oracle_run(project)
    client.force_login(users[EXPERT])
    for url in (robustness(project, judge), detail(perturbation),
                reverse("labeling:run_robustness", args=[project.slug, run.id])):
        assert client.get(url).status_code == 403
    # Nor is the Robustness link offered to them; a viewer gets one per judge and per run.
    judges, systems = (reverse(f"labeling:{name}", args=[project.slug]) for name in ("judges", "systems"))
    assert robustness(project, judge) not in client.get(judges).content.decode()
    client.force_login(users[VIEWER])
    assert robustness(project, judge) in client.get(judges).content.decode()
    assert reverse("labeling:run_robustness", args=[project.slug, run.id]) in client.get(systems).content.decode()


def test_admins_estimate_first_then_start_with_the_same_settings(client, audited_judge):
    project, judge, users, _, _ = audited_judge
    client.force_login(users[ADMIN])
    url = robustness(project, judge)
    html = client.get(url).content.decode()
    assert 'data-audit-card="perturbation"' in html and 'data-audit-card="multicondition"' in html
    assert "data-estimate" not in html and "Start audit" not in html  # the estimate comes first

    asked = {"kind": "perturbation", "perturbation-sample": "3", "perturbation-seed": "7",
             "perturbation-tests": ["length", "injection"]}
    card = client.get(url, asked, headers={"HX-Request": "true"}).content.decode()
    assert card.lstrip().startswith('<div id="estimate-perturbation"') and "<html" not in card
    expected = audit_estimate(project=project, judge=judge, kind="perturbation",
                              parameters={"sample": 3, "seed": 7, "tests": ["length", "injection"]})
    # 3 pairs x (the original, padded to 512 and 1024, the injection's base and variant) = 15 probes at most.
    assert 0 < expected.probes <= 15 and expected.tokens is None
    assert f"<span data-probes>{expected.probes}</span> probes" in card
    assert "an embedding judge: no prompt, no token" in card and "No cost: a local model" in card

    start = re.search(r'<form method="post" action="([^"]+)">(.*?)</form>', card, re.DOTALL)
    assert start.group(1) == reverse("labeling:audit_start", args=[project.slug, judge.name])
    hidden = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', start.group(2)))
    assert hidden["kind"] == "perturbation" and hidden["perturbation-sample"] == "3"
    posted = {"kind": "perturbation", "perturbation-sample": "3", "perturbation-seed": "7",
              "perturbation-tests": re.findall(r'name="perturbation-tests" value="([^"]+)"', start.group(2))}
    assert posted["perturbation-tests"] == ["length", "injection"]
    response = client.post(start.group(1), posted)
    job = AuditJob.objects.latest("id")
    assert response.status_code == 302 and response["Location"] == detail(job)
    assert (job.kind, job.parameters, job.total, job.status) == (
        "perturbation", {"sample": 3, "seed": 7, "tests": ["length", "injection"]}, expected.probes, "pending")


def test_an_audit_that_cannot_run_says_why_in_its_form(client):
    project = ProjectFactory(slug="plain")
    QueryFactory(project=project)
    judge = minilm_judge(project)
    users = members(project)
    client.force_login(users[ADMIN])
    url = robustness(project, judge)
    card = client.get(url, {"kind": "multicondition"},
                      headers={"HX-Request": "true"}).content.decode()
    assert "has no multi-condition items" in unescape(card) and "Start audit" not in card
    response = client.post(reverse("labeling:audit_start", args=[project.slug, judge.name]),
                           {"kind": "perturbation", "perturbation-sample": "5", "perturbation-seed": "0",
                            "perturbation-tests": ["length"]})
    assert response.status_code == 400 and "has no gold pairs" in unescape(response.content.decode())
    bad = client.post(reverse("labeling:audit_start", args=[project.slug, judge.name]),
                      {"kind": "perturbation", "perturbation-sample": "0", "perturbation-seed": "0"})
    assert bad.status_code == 400 and not AuditJob.objects.exists()


def test_a_judge_without_a_model_of_its_own_says_why_it_cannot_be_audited(client):
    project = ProjectFactory(slug="imp")
    imported = JudgeFactory(project=project, name="published", backend=Judge.Backend.IMPORT)
    minilm_judge(project)
    both = judge_create(project=project, name="both", backend="ensemble", members=["published", "minilm"])
    client.force_login(members(project)[ADMIN])
    for judge, why in ((imported, "was imported with its judgments"), (both, "is a judges ensemble")):
        html = client.get(robustness(project, judge)).content.decode()
        assert why in unescape(html) and "data-unauditable" in html and "data-audit-card" not in html


# --- An audit's page ----------------------------------------------------------------------------------------------

def test_an_audit_is_polled_while_it_runs_and_shows_its_report_once_done(client):
    project = multicondition_project()
    judge = minilm_judge(project)
    users = members(project)
    job = AuditJob.objects.create(project=project, judge=judge, kind="perturbation", requested_by=users[ADMIN],
                                  parameters={"sample": 2, "seed": 0, "tests": ["injection"]}, total=6)
    client.force_login(users[ADMIN])
    html = client.get(detail(job)).content.decode()
    assert 'hx-trigger="every 2s"' in html and "0 / 6 probes (0%)" in html and "data-waiting" in html
    assert reverse("labeling:audit_cancel", args=[project.slug, job.id]) in html
    # The judge's page polls its audits until none is unfinished, then reloads for the new report.
    polled = client.get(robustness(project, judge), headers={"HX-Request": "true"})
    assert polled.content.decode().lstrip().startswith('<div id="audits"') and "HX-Refresh" not in polled

    audit_run(job_id=job.id)
    job.refresh_from_db()
    body = client.get(detail(job), headers={"HX-Request": "true"}).content.decode()
    assert body.lstrip().startswith('<div id="audit-body"') and "<html" not in body
    assert "hx-trigger" not in body and "data-perturbation-report" in body
    assert f"{job.total} / {job.total} probes (100%)" in body and "Cancel" not in body
    assert cells(body, 'data-test="injection"')[1] == str(job.report["rows"][0]["n"])
    assert client.get(robustness(project, judge), headers={"HX-Request": "true"})["HX-Refresh"] == "true"


def test_admins_cancel_an_unfinished_audit(client, audited_judge):
    project, judge, users, _, _ = audited_judge
    job = AuditJob.objects.create(project=project, judge=judge, kind="perturbation", total=4)
    client.force_login(users[ADMIN])
    response = client.post(reverse("labeling:audit_cancel", args=[project.slug, job.id]))
    assert response.status_code == 302 and response["Location"] == detail(job)
    job.refresh_from_db()
    assert job.status == "cancelled" and job.finished_at is not None
    assert "Cancelled: no report." in client.get(detail(job)).content.decode()


def test_a_failure_is_told_to_admins_and_hidden_from_other_readers(client, audited_judge):
    project, judge, users, _, _ = audited_judge
    job = AuditJob.objects.create(project=project, judge=judge, kind="perturbation", status="failed",
                                  finished_at=timezone.now(), error="model folder /srv/models/x is gone")
    client.force_login(users[ADMIN])
    assert "model folder /srv/models/x is gone" in client.get(detail(job)).content.decode()
    client.force_login(users[VIEWER])
    html = client.get(detail(job)).content.decode()
    assert "/srv/models" not in html and "a project admin sees the reason" in html


def test_untrusted_text_in_the_worst_examples_is_shown_escaped(client):
    project = multicondition_project(slug="hostile")
    Passage.objects.filter(project=project).update(text=f"A passage {PAYLOAD} that meets nothing.")
    judge = minilm_judge(project)
    job = audited(project, judge, AuditJob.Kind.PERTURBATION, {"sample": 2, "seed": 0, "tests": ["injection"]})
    client.force_login(members(project)[VIEWER])
    html = client.get(detail(job)).content.decode()
    assert any(PAYLOAD in example["excerpt"] for row in job.report["rows"] for example in row["worst"])
    for raw in RAW:
        assert raw not in html
    assert ESCAPED in html and "<pre>" in html


# --- A run's page -------------------------------------------------------------------------------------------------

def test_an_oracle_run_wins_every_comparison_and_never_flips(client):
    project = multicondition_project()
    run = oracle_run(project)
    client.force_login(members(project)[VIEWER])
    html = client.get(reverse("labeling:run_robustness", args=[project.slug, run.id])).content.decode()
    # It ranks d_K above d_(k-1) and d_k above d_(k-1) for every item, in both styles: by hand, every Win Rate is 1
    # and, the two styles agreeing everywhere, every Flip Rate 0.
    for key, value in (("task1", "1.000"), ("task2", "1.000"), ("task3", "0.000")):
        task = section(html, f'class="robustness-task" data-task="{key}"')
        assert 'data-task-verdict>robust<' in task
        means = re.findall(r"<td class=\"num\" data-mean><strong>([\d.]+)</strong>", task)
        assert means == [value] * (2 if key == "task1" else 1)  # Task 1: one mean per query style
        values = re.findall(r'<td class="num">([\d.]+)</td>', task)
        assert len(values) >= 10 and set(values) == {value[:4]}  # every k of every domain
    assert "a run's scores are fixed" in unescape(section(html, 'class="robustness-task" data-task="task4"'))


def test_a_project_without_multicondition_items_says_so_on_the_run_page(client):
    project = ProjectFactory(slug="flat")
    QueryFactory(project=project)
    run = project.runs.create(name="bm25", kind="bm25")
    client.force_login(members(project)[ADMIN])
    response = client.get(reverse("labeling:run_robustness", args=[project.slug, run.id]))
    assert response.status_code == 200
    assert "data-unavailable" in response.content.decode()
    assert "has no multi-condition items" in unescape(response.content.decode())


def test_markup_in_a_judge_name_is_shown_as_text_on_its_pages(client):
    world = build_world(judge_name=f"judge {PAYLOAD}", name=f"project {PAYLOAD}")
    client.force_login(world.users[VIEWER])
    for url in (robustness(world.project, world.judge), detail(world.audit)):
        html = client.get(url).content.decode()
        for raw in RAW:
            assert raw not in html
        assert ESCAPED in html and f"judge {PAYLOAD}" in unescape(html)

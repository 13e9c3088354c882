"""A degenerate judge (every pair P = 0.9: every pair relevant) beside a good one, through what a user reads: the
Systems page and API and `evaluate_runs` warn where it grades and mark no run best under it, the Validation page
warns and never marks it the best while the good judge is, and the qrels export (page form, API, command) and a
release frozen from it warn. Kappa of the good judge checked against scikit-learn."""
from __future__ import annotations

import io
import re
from html import unescape

import numpy as np
import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient
from sklearn.metrics import cohen_kappa_score

from labeling.models import Membership, Project, Run, RunEntry
from labeling.services.validation import validation_result_ensure
from tests.factories import (
    JudgeFactory,
    JudgmentFactory,
    MembershipFactory,
    PairFactory,
    PassageFactory,
    ProjectFactory,
    QueryFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

QUERIES, PASSAGES = 6, 10
RUNS = ("bm25", "dense", "random")


def _project() -> tuple[Project, np.ndarray, np.ndarray]:
    """6 queries x 10 passages, every pair with a reference grade (4 of 10 relevant per query), judged by `flat`
    (P 0.9 everywhere), `good` (P 0.8 on relevant pairs, 0.2 on the others, wrong on one pair in ten) and `fair`
    (0.7 and 0.3, wrong on one pair in five); three runs in different orders. Returns the project, gold's binary
    grades and good's binary calls, in pair order."""
    rng = np.random.default_rng(7)
    project = ProjectFactory(slug="degenerate")
    flat, good = JudgeFactory(project=project, name="flat"), JudgeFactory(project=project, name="good")
    fair = JudgeFactory(project=project, name="fair")
    passages = [PassageFactory(project=project, external_id=f"d{i}") for i in range(PASSAGES)]
    gold, calls = [], []
    for q in range(QUERIES):
        query = QueryFactory(project=project, external_id=f"q{q}")
        for i, passage in enumerate(passages):
            relevant = i < 4
            pair = PairFactory(project=project, query=query, passage=passage, reference_grade=2 if relevant else 0)
            JudgmentFactory(pair=pair, judge=flat, p_relevant=0.9)
            call = relevant if (q * PASSAGES + i) % 10 else not relevant
            JudgmentFactory(pair=pair, judge=good, p_relevant=0.8 if call else 0.2)
            JudgmentFactory(pair=pair, judge=fair, p_relevant=0.7 if relevant == bool((q * PASSAGES + i) % 5) else 0.3)
            gold.append(relevant)
            calls.append(call)
        for name in RUNS:
            run = Run.objects.get_or_create(project=project, name=name, kind=Run.Kind.IMPORTED)[0]
            order = {"bm25": range(PASSAGES), "dense": [1, 0, 2, 3, 5, 4, 6, 7, 8, 9],
                     "random": rng.permutation(PASSAGES)}[name]
            RunEntry.objects.bulk_create(RunEntry(run=run, query=query, passage=passages[int(d)], rank=rank,
                                                  score=100.0 - rank) for rank, d in enumerate(order, 1))
    return project, np.array(gold), np.array(calls)


@pytest.fixture
def built():
    return _project()


def _admin(project: Project):
    user = UserFactory(username="admin-degenerate")
    MembershipFactory(project=project, user=user, role=Membership.Role.ADMIN)
    return user


def _board(html: str, key: str) -> str:
    return re.search(rf'<table class="data metrics" data-leaderboard="{re.escape(key)}">(.*?)</table>', html,
                     re.DOTALL).group(1)


def test_the_systems_page_warns_under_the_degenerate_judge_and_marks_no_run_best_there(client, built):
    project, _, _ = built
    client.force_login(_admin(project))
    html = client.get(reverse("labeling:systems", args=[project.slug])).content.decode()
    warning = re.search(r'<p class="warning small" data-degenerate-warning="judge:flat">(.*?)</p>', html, re.DOTALL)
    assert warning is not None
    assert "calls 60 of the 60 pairs it judged relevant" in warning.group(1)
    assert 'data-degenerate-warning="judge:good"' not in html and 'data-degenerate-warning="human"' not in html
    # Every run is perfect under flat (all relevant): the ties would all be "best".
    assert 'data-mark="best"' not in _board(html, "judge:flat")
    assert 'data-mark="best"' in _board(html, "judge:good") and 'data-mark="best"' in _board(html, "human")


def test_the_systems_api_and_evaluate_runs_name_the_degenerate_source(built):
    project, _, _ = built
    api = APIClient()
    api.force_authenticate(_admin(project))
    data = api.get(reverse("api:systems-evaluation", args=[project.slug]),
                   {"qrels": ["human", "judge:flat", "judge:good", "expected:flat"]}).json()
    assert set(data["degenerate"]) == {"judge:flat", "expected:flat"}
    flat = data["degenerate"]["judge:flat"]
    assert (flat["n"], flat["n_relevant"], flat["one_side"], flat["chance"], flat["kappa"]) == (60, 60, True, True, 0.0)
    # Its nDCG@10 is 1 for every run: what the warning is for.
    assert {data["runs"][run]["judge:flat"]["nDCG@10"] for run in RUNS} == {1.0}
    # The threshold asked decides: above every P both judges call every pair not relevant.
    above = api.get(reverse("api:systems-evaluation", args=[project.slug]),
                    {"qrels": ["judge:flat", "judge:good"], "threshold": "0.95"}).json()
    assert set(above["degenerate"]) == {"judge:flat@0.95", "judge:good@0.95"}
    assert "calls 60 of the 60 pairs it judged not relevant" in above["degenerate"]["judge:flat@0.95"]["reason"]

    err = io.StringIO()
    call_command("evaluate_runs", project=project.slug, qrels=["judge:flat", "judge:good"], draws=0, as_json=True,
                 stdout=io.StringIO(), stderr=err)
    assert "Warning: judge:flat is graded by a degenerate judge" in err.getvalue()
    assert "judge:good" not in err.getvalue()


def test_validation_never_marks_the_degenerate_judge_best_and_marks_the_good_one(client, built):
    project, gold, calls = built
    validation_result_ensure(project=project)
    client.force_login(_admin(project))
    html = client.get(reverse("labeling:validation", args=[project.slug])).content.decode()
    body = re.search(r'<table class="data metrics">.*?<tbody>(.*?)</tbody>', html, re.DOTALL).group(1)
    columns = [re.findall(r'<td class="num" data-metric="[^"]+"[^>]*>(.*?)</td>', line, re.DOTALL)
               for line in re.findall(r"<tr>(.*?)</tr>", body, re.DOTALL)]
    headers = re.findall(r'<th class="num" data-judge="([^"]+)">', html)
    assert headers == ["fair", "flat", "good"]
    # flat's recall of 1 (good's is 0.9) would win its line: it wins none, and good wins the lines.
    assert not any("data-best" in cells[1] for cells in columns if cells)
    best = [line for line, cells in enumerate(columns) if cells and "data-best" in cells[2]]
    assert len(best) >= 5
    assert 'data-degenerate="flat"' in html and 'data-degenerate="good"' not in html
    warning = unescape(re.search(r'data-degenerate-warning="flat">(.*?)</p>', html, re.DOTALL).group(1))
    assert "Cohen's kappa 0.000 on 60 gold pairs" in warning
    data = validation_result_ensure(project=project).data
    sections = {section["name"]: section["degenerate"] for section in data["judges"]}
    assert sections["flat"]["degenerate"] and not sections["good"]["degenerate"]
    assert sections["good"]["kappa"] == pytest.approx(cohen_kappa_score(gold, calls))


def test_the_export_form_api_command_and_a_release_warn_of_the_degenerate_judge(client, built, tmp_path):
    project, _, _ = built
    admin = _admin(project)
    client.force_login(admin)
    validation_result_ensure(project=project)  # the form reads the report the worker keeps
    html = client.get(reverse("labeling:project_detail", args=[project.slug])).content.decode()
    assert 'data-export-degenerate="flat"' in html and 'data-export-degenerate="good"' not in html

    api = APIClient()
    api.force_authenticate(admin)
    response = api.get(reverse("api:qrels", args=[project.slug]), {"source": "judge:flat"})
    assert response.status_code == 200
    assert "degenerate" in response["X-Qrels-Warning"] and "60 of the 60" in response["X-Qrels-Warning"]
    b"".join(response.streaming_content)
    good = api.get(reverse("api:qrels", args=[project.slug]), {"source": "judge:good"})
    assert "X-Qrels-Warning" not in good
    b"".join(good.streaming_content)

    err = io.StringIO()
    call_command("export_qrels", project=project.slug, format="trec", source="combined:flat",
                 output=str(tmp_path / "q.trec"), stderr=err)
    assert "Warning: judge flat is degenerate" in err.getvalue()

    made = api.post(reverse("api:release-list", args=[project.slug]), {"name": "v1", "source": "judge:flat"},
                    format="json")
    assert made.status_code == 201
    assert "60 of the 60" in made.json()["warning"]
    human = api.post(reverse("api:release-list", args=[project.slug]), {"name": "v2"}, format="json")
    assert human.json()["warning"] is None

"""DIRAS Table 5 through the database: a run's scores and a judge's P stored as rows, the per-query tau-b
counted by hand here, through the selector, the API and the command."""
from __future__ import annotations

import json
import math
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from labeling.exceptions import NotFound
from labeling.models import Membership, Run, RunEntry
from labeling.selectors.systems_pair_tau import pair_tau_report
from tests.factories import (
    JudgeFactory,
    JudgmentFactory,
    MembershipFactory,
    PairFactory,
    PassageFactory,
    ProjectFactory,
    QueryFactory,
)

pytestmark = pytest.mark.django_db

# q1: run scores 4 > 3 > 2 > 1 on d1..d4; P puts d3 above d2: one discordant pair of six, tau = 4 / 6.
# q2: scores 2, 1 on d1, d2; P 0.2, 0.6: the one pair discordant, tau = -1. d3 is retrieved but not judged.
# q3: one judged pair: no tau. Mean over q1, q2: (4/6 - 1) / 2.
RUN = {"q1": {"d1": 4.0, "d2": 3.0, "d3": 2.0, "d4": 1.0}, "q2": {"d1": 2.0, "d2": 1.0, "d3": 0.5},
       "q3": {"d1": 1.0}}
P = {("q1", "d1"): 0.9, ("q1", "d2"): 0.4, ("q1", "d3"): 0.6, ("q1", "d4"): 0.1,
     ("q2", "d1"): 0.2, ("q2", "d2"): 0.6, ("q3", "d1"): 0.8}
EXPECTED = {"q1": 4 / 6, "q2": -1.0, "q3": None}


def _project():
    project = ProjectFactory(slug="tau")
    queries = {q: QueryFactory(project=project, external_id=q) for q in RUN}
    passages = {d: PassageFactory(project=project, external_id=d) for d in ("d1", "d2", "d3", "d4")}
    judge = JudgeFactory(project=project, name="tok")
    for (q, d), p in P.items():
        JudgmentFactory(pair=PairFactory(project=project, query=queries[q], passage=passages[d]), judge=judge,
                        p_relevant=p)
    run = Run.objects.create(project=project, name="bge", kind=Run.Kind.IMPORTED)
    RunEntry.objects.bulk_create(
        RunEntry(run=run, query=queries[q], passage=passages[d], rank=rank, score=score)
        for q, docs in RUN.items() for rank, (d, score) in enumerate(docs.items(), 1))
    return project


def test_per_query_tau_and_the_mean_over_queries_that_have_one():
    report = pair_tau_report(project=_project(), judge="tok")
    tau = report.runs["bge"]
    assert {row.query: row.tau for row in tau.queries} == pytest.approx(EXPECTED)
    assert {row.query: row.pairs for row in tau.queries} == {"q1": 4, "q2": 2, "q3": 1}
    assert tau.mean == pytest.approx((4 / 6 - 1) / 2)


def test_unknown_judge_or_run_is_refused_by_name():
    project = _project()
    with pytest.raises(NotFound, match="nobody"):
        pair_tau_report(project=project, judge="nobody")
    with pytest.raises(NotFound, match="no run 'bm25'"):
        pair_tau_report(project=project, judge="tok", runs=["bm25"])


def test_the_api_and_the_command_give_the_same_numbers(client):
    project = _project()
    client.force_login(MembershipFactory(project=project, role=Membership.Role.ADMIN).user)
    body = client.get(reverse("api:systems-pair-tau", args=[project.slug])).json()  # the only judge by default
    assert body["judge"] == "tok"
    assert body["runs"]["bge"]["mean_tau"] == pytest.approx((4 / 6 - 1) / 2)
    assert [row["tau"] for row in body["runs"]["bge"]["per_query"]] == pytest.approx([4 / 6, -1.0, None])
    assert client.get(reverse("api:systems-pair-tau", args=[project.slug]), {"judge": "x"}).status_code == 404
    out = StringIO()
    call_command("pair_tau", "--project", project.slug, "--judge", "tok", "--json", stdout=out)
    assert json.loads(out.getvalue()) == body
    out = StringIO()
    call_command("pair_tau", "--project", project.slug, stdout=out)
    assert f"{(4 / 6 - 1) / 2:.3f}" in out.getvalue()
    with pytest.raises(CommandError, match="no run 'bm25'"):
        call_command("pair_tau", "--project", project.slug, "--run", "bm25")
    assert not math.isnan(body["runs"]["bge"]["mean_tau"])


def test_the_systems_page_shows_the_mean_tau_for_the_judge_asked(client):
    project = _project()
    client.force_login(MembershipFactory(project=project, role=Membership.Role.ADMIN).user)
    url = reverse("labeling:systems", args=[project.slug])
    page = client.get(url).content.decode()
    assert 'data-tau-judge' in page and "data-pair-tau=" not in page  # computed only when asked
    page = client.get(url, {"tau_judge": "tok"}).content.decode()
    assert 'data-pair-tau="tok"' in page
    assert f"<td class=\"num\" data-mean-tau>{(4 / 6 - 1) / 2:.3f}</td>" in page
    assert "<td class=\"num\" data-with-tau>2 of 3</td>" in page
    assert "data-pair-tau-error" in client.get(url, {"tau_judge": "nobody"}).content.decode()

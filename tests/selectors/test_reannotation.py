"""DIRAS App. M through the database: gold grades and a judge's P stored as rows; the sample's cells and bands and
the curve's agreement counted by hand here; the selector, the API and the command agree."""
from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from labeling.exceptions import NotFound
from labeling.models import Membership, Project
from labeling.selectors.reannotation import ReannotationError, reannotation_report
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

# (query, doc) -> (gold grade on the 0/1/2 scale, relevant from 1; the judge's P).
PAIRS = {
    ("q1", "d1"): (2, 0.97),  # judge Yes, human Yes, high
    ("q1", "d2"): (0, 0.95),  # judge Yes, human No (the paper's FN), high
    ("q1", "d3"): (0, 0.92),  # FN, high
    ("q1", "d4"): (0, 0.93),  # FN, high
    ("q1", "d5"): (0, 0.8),   # FN, mid
    ("q1", "d6"): (1, 0.6),   # judge Yes, human Yes, low
    ("q1", "d7"): (1, 0.2),   # judge No, human Yes (FP), mid (confidence 0.8)
    ("q1", "d8"): (0, 0.05),  # judge No, human No (TN), high
    ("q2", "d1"): (0, 0.55),  # FN, low
    ("q2", "d2"): (0, 0.01),  # TN, high
}
# ("q2", "d3"): in the pool, no grade, P 0.9: human No only with all_pairs.


def _project():
    project = ProjectFactory(slug="appm")
    queries = {q: QueryFactory(project=project, external_id=q) for q in ("q1", "q2")}
    passages = {d: PassageFactory(project=project, external_id=d) for d in ("d1", "d2", "d3", "d4", "d5", "d6",
                                                                            "d7", "d8")}
    judge = JudgeFactory(project=project, name="tok")
    for (q, d), (grade, p) in PAIRS.items():
        pair = PairFactory(project=project, query=queries[q], passage=passages[d], reference_grade=grade)
        JudgmentFactory(pair=pair, judge=judge, p_relevant=p)
    JudgmentFactory(pair=PairFactory(project=project, query=queries["q2"], passage=passages["d3"]), judge=judge,
                    p_relevant=0.9)
    return project


def test_each_cell_is_sampled_per_query_and_band():
    found = reannotation_report(project=_project(), judge="tok", per_band=2, seed=1)
    assert found.cells == {"judge_yes_human_yes": 2, "judge_yes_human_no": 5, "judge_no_human_yes": 1,
                           "judge_no_human_no": 2}
    fn = [(row.query, row.doc, row.band) for row in found.sample if row.cell == "judge_yes_human_no"]
    # q1 high has three (d2, d3, d4): two are drawn; q1 mid d5; q2 low d1.
    assert len(fn) == 4
    assert {doc for q, doc, band in fn if q == "q1" and band == "high"} < {"d2", "d3", "d4"}
    assert ("q1", "d5", "mid") in fn and ("q2", "d1", "low") in fn
    fp = [(row.query, row.doc, row.band, row.confidence) for row in found.sample if row.cell == "judge_no_human_yes"]
    assert fp == [("q1", "d7", "mid", pytest.approx(0.8))]
    assert reannotation_report(project=_project_again(), judge="tok", per_band=2, seed=1).sample == found.sample


def _project_again() -> Project:
    return Project.objects.get(slug="appm")


def test_the_curve_counts_agreement_and_data_remaining():
    found = reannotation_report(project=_project(), judge="tok")
    yes = {round(point.threshold, 2): point for point in found.curves["judge_yes"]}
    # judge Yes: d1 .97 agree, d2 .95 no, d3 .92 no, d4 .93 no, d5 .8 no, d6 .6 agree, q2 d1 .55 no: 2 of 7
    assert yes[0.5].kept == 7 and yes[0.5].agreement == pytest.approx(2 / 7) and yes[0.5].remaining == 1.0
    # from 0.9: .97, .95, .92, .93: 1 of 4, 4 of 7 remaining
    assert yes[0.9].agreement == pytest.approx(1 / 4) and yes[0.9].remaining == pytest.approx(4 / 7)
    assert yes[0.99].kept == 0 and yes[0.99].agreement is None
    everything = found.curves["all"][0]
    # all ten: agreement d1, d6, q1 d8, q2 d2 = 4 of 10; judge 7 Yes / 3 No, human 3 Yes / 7 No:
    # chance (7*3 + 3*7) / 100 = 0.42, kappa (0.4 - 0.42) / 0.58
    assert everything.agreement == pytest.approx(0.4) and everything.kappa == pytest.approx((0.4 - 0.42) / 0.58)
    assert found.n_unjudged == 0
    with_pool = reannotation_report(project=_project_again(), judge="tok", all_pairs=True)
    assert with_pool.cells["judge_yes_human_no"] == 6  # the ungraded pool pair, P 0.9, counts as human No


def test_bad_arguments_are_refused_by_name():
    project = _project()
    with pytest.raises(NotFound, match="nobody"):
        reannotation_report(project=project, judge="nobody")
    with pytest.raises(ReannotationError, match="threshold must be between 0 and 1"):
        reannotation_report(project=project, judge="tok", threshold=1.0)
    with pytest.raises(ReannotationError, match="per_band must be 1 or more"):
        reannotation_report(project=project, judge="tok", per_band=0)


def test_the_api_and_the_command_give_the_same_sample(client):
    project = _project()
    client.force_login(MembershipFactory(project=project, role=Membership.Role.ADMIN).user)
    url = reverse("api:validation-reannotation", args=[project.slug])
    body = client.get(url, {"seed": "4", "per_band": "1"}).json()
    assert body["judge"] == "tok" and body["cells"]["judge_yes_human_no"] == {"pairs": 5, "paper": "FN"}
    assert len([row for row in body["sample"] if row["cell"] == "judge_yes_human_no"]) == 3  # q1 high, mid; q2 low
    out = StringIO()
    call_command("reannotation_sample", "--project", project.slug, "--judge", "tok", "--seed", "4", "--per-band", "1",
                 "--json", stdout=out)
    assert json.loads(out.getvalue()) == body
    assert client.get(url, {"threshold": "1.5"}).status_code == 400
    assert client.get(url, {"per_band": "0"}).status_code == 400
    assert client.get(url, {"judge": "nobody"}).status_code == 404
    out = StringIO()
    call_command("reannotation_sample", "--project", project.slug, "--judge", "tok", stdout=out)
    assert re.search(r"judge_yes_human_no\s+FN\s+5\n", out.getvalue())
    with pytest.raises(CommandError, match="threshold must be between 0 and 1"):
        call_command("reannotation_sample", "--project", project.slug, "--judge", "tok", "--threshold", "0")


def test_the_validation_page_shows_the_curve_for_the_judge_asked(client):
    project = _project()
    client.force_login(MembershipFactory(project=project, role=Membership.Role.ADMIN).user)
    url = reverse("labeling:validation", args=[project.slug])
    page = client.get(url).content.decode()
    assert "data-reannotation-judge" in page and "data-reannotation-curve" not in page  # computed when asked
    page = client.get(url, {"reannotation_judge": "tok"}).content.decode()
    assert 'data-reannotation-curve="tok"' in page
    row = re.search(r'<tr data-threshold="0.9">(.*?)</tr>', page, re.DOTALL)[1]
    # judge Yes from 0.9: 4 pairs, 4/7 remaining, 1 of 4 agree (counted in the curve test above)
    assert re.findall(r'<td class="num">([^<]*)</td>', row)[:2] == ["4", "0.57"]
    assert '<td class="num" data-agreement>0.250</td>' in row
    assert "data-reannotation-error" in client.get(url, {"reannotation_judge": "nobody"}).content.decode()

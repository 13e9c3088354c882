"""The `sample` qrels source: the human gold of the random validation sample, each pair standing for 1/pi pairs of its
query's pool, evaluated with statAP and infNDCG@10 (Systems page, API, evaluate_runs). The expected values are
computed here from the formulas on the sample the test draws."""
from __future__ import annotations

import json
from io import StringIO
from math import log2

import pytest
from django.core.management import call_command
from django.urls import reverse

from labeling.models import Membership, Pair
from labeling.selectors.qrels_sources import SystemsError, qrels_source_parse, sample_design
from labeling.selectors.systems import systems_report
from labeling.selectors.systems_reusability import pool_reusability
from tests.factories import MembershipFactory, UserFactory
from tests.selectors.test_systems import human_qrels, systems_project

pytestmark = pytest.mark.django_db

# The pairs of the random validation sample: graded pairs placed first in the random order, then an ungraded pair
# (q1, d5: only the judge has it) that ends the sample; every other pair comes after it.
SAMPLE = [("q1", "d1"), ("q1", "d3"), ("q2", "d4"), ("q3", "d7"), ("q3", "d6"), ("q4", "d11")]
FRONTIER = ("q1", "d5")


@pytest.fixture
def built():
    built = systems_project()
    keys = {pair: 0.01 * (i + 1) for i, pair in enumerate(SAMPLE)} | {FRONTIER: 0.4}
    for pair in Pair.objects.filter(project=built.project).select_related("query", "passage"):
        key = (pair.query.external_id, pair.passage.external_id)
        pair.sample_key = keys.get(key, 0.5 + 0.01 * pair.id % 0.4)
        pair.save(update_fields=["sample_key"])
    return built


def _pools(project) -> dict[str, list[str]]:
    pools: dict[str, list[str]] = {}
    for query, passage in Pair.objects.filter(project=project).values_list("query__external_id",
                                                                          "passage__external_id"):
        pools.setdefault(query, []).append(passage)
    return pools


def _expected(built, run: str) -> tuple[float, float]:
    """Mean statAP and infNDCG@10 over the queries with a sampled pair, from the formulas: one stratum per query,
    pi = sampled / pool pairs of the query."""
    gold = {(q, d): grade for q, docs in human_qrels().items() for d, grade in docs.items()}
    pools = _pools(built.project)
    stat, inf = [], []
    for query in sorted({q for q, _ in SAMPLE}):
        sampled = {d: gold[(q, d)] for q, d in SAMPLE if q == query}
        pi = len(sampled) / len(pools[query])
        docs = built.rankings[run].get(query, [])
        relevant = [d for d, grade in sampled.items() if grade >= 1]
        total, seen = 0.0, 0
        for rank, doc in enumerate(docs, 1):
            if doc in relevant:
                total += (1 / pi) * (1 + seen / pi) / rank
                seen += 1
        stat.append(total / (len(relevant) / pi) if relevant else 0.0)
        mean_gain = sum(sampled.values()) / len(sampled)
        dcg = sum((sampled[d] if d in sampled else mean_gain if d in pools[query] else 0) / log2(r + 2)
                  for r, d in enumerate(docs[:10]))
        counts = {g: int(sum(1 for grade in sampled.values() if grade == g) / pi + 0.5) for g in (2, 1)}  # halves up
        ideal_gains = [2] * counts[2] + [1] * counts[1]
        ideal = sum(g / log2(r + 2) for r, g in enumerate(ideal_gains[:10]))
        inf.append(dcg / ideal if ideal else 0.0)
    return sum(stat) / len(stat), sum(inf) / len(inf)


def test_the_design_is_the_random_samples_gold_over_each_querys_pool(built):
    design = sample_design(project=built.project)
    gold = {(q, d): grade for q, docs in human_qrels().items() for d, grade in docs.items()}
    assert {(q, d): g for q, sample in design.items() for d, g in sample.grades.items()} == {
        pair: gold[pair] for pair in SAMPLE}
    assert {q: sorted(sample.strata) for q, sample in design.items()} == {
        q: sorted(docs) for q, docs in _pools(built.project).items()}


def test_sample_source_gives_stat_ap_and_inf_ndcg_and_nothing_it_cannot_define(built):
    report = systems_report(project=built.project, sources=["human", "sample"], draws=50)
    assert "statAP" in report.measures and "infNDCG@10" in report.measures
    assert report.overall.queries["sample"] == 4  # q5 has no sampled pair
    for run in built.rankings:
        stat, inf = _expected(built, run)
        scores = report.scores[run]["sample"]
        assert scores["statAP"].mean == pytest.approx(stat)
        assert scores["infNDCG@10"].mean == pytest.approx(inf)
        assert scores["nDCG@10"].mean is None and scores["AP"].mean is None
        assert report.scores[run]["human"]["statAP"].mean is None


def test_default_sources_leave_the_sample_out_and_an_empty_sample_is_refused(built):
    assert "sample" not in [source.key for source in systems_report(project=built.project, draws=0).sources]
    Pair.objects.filter(project=built.project).update(sample_key=0.9)
    first = Pair.objects.filter(project=built.project, query__external_id="q1", passage__external_id="d5")
    first.update(sample_key=0.0)  # an ungraded pair first: the sample is empty
    with pytest.raises(SystemsError, match="sample qrels .* are empty"):
        systems_report(project=built.project, sources=["sample"], draws=0)


def test_leave_one_run_out_refuses_a_sample(built):
    assert qrels_source_parse(project=built.project, key="sample").sampled
    with pytest.raises(SystemsError, match="a sample grades only part of the pool"):
        pool_reusability(project=built.project, source="sample")


def test_command_and_api_give_the_same_numbers(built, client):
    out = StringIO()
    call_command("evaluate_runs", project=built.project.slug, qrels=["sample"], draws=0, as_json=True, stdout=out)
    data = json.loads(out.getvalue())
    stat, inf = _expected(built, "bm25")
    assert data["runs"]["bm25"]["sample"]["statAP"] == pytest.approx(stat)
    assert data["runs"]["bm25"]["sample"]["infNDCG@10"] == pytest.approx(inf)
    from tests.api.test_systems_api import _client, _url

    response = _client(built, "admin").get(_url(built), {"qrels": ["sample"], "measure": ["statAP"]})
    assert response.status_code == 200, response.content
    assert response.json()["runs"]["bm25"]["sample"]["statAP"] == pytest.approx(stat)


def test_the_systems_page_orders_the_sample_board_on_stat_ap(built, client):
    admin = UserFactory(username="sample-admin")
    MembershipFactory(project=built.project, user=admin, role=Membership.Role.ADMIN)
    client.force_login(admin)
    page = client.get(reverse("labeling:systems", args=[built.project.slug]), {"source": ["human", "sample"]})
    assert page.status_code == 200
    html = page.content.decode()
    board = html[html.index('data-leaderboard="sample"'):]
    board = board[:board.index("</table>")]
    order = sorted(built.rankings, key=lambda run: (-_expected(built, run)[0], run))
    positions = [board.index(f'<td class="run-name">{run}') for run in order]
    assert positions == sorted(positions)
    assert 'data-measure="statAP"' in board

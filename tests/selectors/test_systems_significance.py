"""Significance on the Systems page, the API and `evaluate_runs --compare` (#34), through the real chain: the runs'
per-query nDCG@10 computed here by pytrec_eval (trec_eval) on hand-written qrels, then scipy's paired t-test on
them, against what the product reports."""
import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient
from scipy import stats

from labeling.models import Membership
from labeling.selectors.systems import systems_report
from labeling.selectors.systems_significance import significance_options, systems_significance
from tests.factories import MembershipFactory, UserFactory
from tests.selectors.test_systems import RUN_NAMES, human_qrels, systems_project, trec_per_query

pytestmark = pytest.mark.django_db


@pytest.fixture
def built():
    return systems_project()


def reference_p(built, a: str, b: str) -> float:
    qrels = human_qrels()
    first, second = (trec_per_query(built.rankings[name], qrels) for name in (a, b))
    queries = sorted(qrels)
    return stats.ttest_rel([first[q]["nDCG@10"] for q in queries], [second[q]["nDCG@10"] for q in queries]).pvalue


def test_the_t_test_on_trec_evals_per_query_scores_is_what_the_report_says(built):
    report = systems_report(project=built.project, sources=["human"])
    found = systems_significance(report, significance_options(test="t", correction="none"))["human"]["nDCG@10"]
    assert found.queries == len(human_qrels()) and len(found.pairs) == 6
    for pair in found.pairs:
        assert pair.p == pytest.approx(reference_p(built, pair.a, pair.b), rel=1e-9)
    assert "judged@10" not in systems_significance(report)["human"]


def member(project, role):
    user = UserFactory()
    MembershipFactory(project=project, user=user, role=role)
    return user


def test_the_page_marks_the_best_and_opens_the_p_values(built, client):
    client.force_login(member(built.project, Membership.Role.VIEWER))
    page = reverse("labeling:systems", args=[built.project.slug])
    html = client.get(page, {"source": "human", "test": "t", "correction": "none"}).content.decode()
    report = systems_report(project=built.project, sources=["human"])
    found = systems_significance(report, significance_options(test="t", correction="none"))["human"]["nDCG@10"]
    assert html.count('data-mark="best"') == 1 and f'data-run="{found.best}"' in html
    assert html.count('data-mark="tied"') == len(found.tied_with_best) - 1
    assert 'data-pvalues="human" data-measure="nDCG@10"' in html and "t, none" in html
    any_pair = found.pairs[0]
    assert f"p {any_pair.p:.4f}" in html
    bad = client.get(page, {"source": "human", "test": "sign"}).content.decode()
    assert "test must be one of" in bad and 'data-mark="best"' in bad  # the defaults stand in
    client.force_login(member(built.project, Membership.Role.EXPERT))
    assert "data-pvalues" not in client.get(page).content.decode()  # blind first: no scores, no p-values


def test_the_command_and_the_api_compare_runs(built):
    out = io.StringIO()
    call_command("evaluate_runs", project=built.project.slug, qrels=["human"], measure=["nDCG@10"], compare=True,
                 test="t", correction="holm", json=True, stdout=out)
    significance = json.loads(out.getvalue())["significance"]["human"]["nDCG@10"]
    raw = {frozenset((pair["a"], pair["b"])): pair["p"] for pair in significance["pairs"]}
    assert raw[frozenset(RUN_NAMES[:2])] == pytest.approx(reference_p(built, *RUN_NAMES[:2]), rel=1e-9)
    assert significance["correction"] == "holm" and all(
        pair["p_corrected"] >= pair["p"] for pair in significance["pairs"])
    text = io.StringIO()
    call_command("evaluate_runs", project=built.project.slug, qrels=["human"], measure=["nDCG@10"], compare=True,
                 permutations=2000, stdout=text)
    assert "paired randomization, 2,000 draws, holm correction" in text.getvalue() and "Best: " in text.getvalue()
    with pytest.raises(CommandError, match="go with --compare"):
        call_command("evaluate_runs", project=built.project.slug, test="t", stdout=io.StringIO())
    with pytest.raises(CommandError, match="alpha must be"):
        call_command("evaluate_runs", project=built.project.slug, compare=True, alpha=2.0, stdout=io.StringIO())

    api = APIClient()
    api.force_authenticate(member(built.project, Membership.Role.ADMIN))
    url = f"/api/projects/{built.project.slug}/systems/evaluation/"
    answer = api.get(url, {"qrels": "human", "measure": "nDCG@10", "compare": "true", "test": "t",
                           "correction": "holm"}).json()
    assert answer["significance"]["human"]["nDCG@10"]["pairs"] == significance["pairs"]
    assert "significance" not in api.get(url, {"qrels": "human"}).json()
    refused = api.get(url, {"compare": "true", "correction": "bonferroni"})
    assert refused.status_code == 400 and "correction must be one of" in str(refused.json()), refused.json()


def test_measures_for_incomplete_judgments_on_the_page_and_in_the_report(built, client):
    """bpref and infAP under the human qrels, every pool pair without a gold grade pooled but unjudged (-1), equal
    trec_eval's on the same rankings; the page shows the columns when asked and says what each assumes."""
    import pytrec_eval

    from labeling.models import Pair

    report = systems_report(project=built.project, sources=["human"], measures=["bpref", "infAP", "AP'"])
    qrels = human_qrels()
    pool: dict[str, set[str]] = {}
    for q, d in Pair.objects.filter(project=built.project).values_list("query__external_id", "passage__external_id"):
        pool.setdefault(q, set()).add(d)
    marked = {q: {**{d: -1 for d in pool.get(q, ()) if d not in docs}, **docs} for q, docs in qrels.items()}
    for run in RUN_NAMES:
        ranking = {q: {d: float(100 - i) for i, d in enumerate(docs)} for q, docs in built.rankings[run].items()
                   if q in qrels}
        reference = pytrec_eval.RelevanceEvaluator(marked, {"bpref", "infAP"}).evaluate(ranking)
        scores = report.per_query[run]["human"]
        for i, q in enumerate(scores.queries):
            expected = reference.get(q, {"bpref": 0.0, "infAP": 0.0})
            assert scores.values["bpref"][i] == pytest.approx(expected["bpref"])
            assert scores.values["infAP"][i] == pytest.approx(expected["infAP"])
    client.force_login(member(built.project, Membership.Role.VIEWER))
    page = reverse("labeling:systems", args=[built.project.slug])
    html = client.get(page, {"source": "human", "incomplete": "true"}).content.decode()
    assert 'data-measure="bpref"' in html and "data-measure=\"nDCG'@10\"" in html.replace("&#x27;", "'")
    assert "assumes the judged pool pairs are a random sample" in html
    assert 'data-measure="bpref"' not in client.get(page, {"source": "human"}).content.decode()

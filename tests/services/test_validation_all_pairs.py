"""The validation report's options (#18 item 4): pool pairs nobody graded as irrelevant (the TREC convention,
DIRAS's ClimRetrieve all-pairs setting), ranking units by a passage metadata key, and nDCG/MAP cut-offs, through
the command, the services, the API and the page. Numbers are checked against scikit-learn, pytrec_eval and a hand
ECE on arrays built straight from the bundle files."""
import io
import json
import random

import numpy as np
import pytest
import pytrec_eval
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient
from sklearn.metrics import brier_score_loss, roc_auc_score

from labeling.models import Judge, Judgment, Membership, Pair, Project
from labeling.selectors.definition_metrics import judge_metrics_by_definition
from labeling.selectors.validation import ReportOptionsError, report_options
from labeling.services.bundle_import import bundle_import
from labeling.services.validation import validation_compute, validation_refresh, validation_request
from tests.factories import JudgeFactory, MembershipFactory, UserFactory
from tests.services.test_bundle_import import SAMPLE, jsonl, write_bundle

pytestmark = pytest.mark.django_db

LLAMA3 = ("llama3-tok-generic", "llama3-ask-generic")


def sample_all_pairs_arrays(judge_name: str) -> tuple[list[tuple[str, str]], np.ndarray, dict]:
    """Every query x passage of the sample (16 x 446), read from the files, whether the qrels grade it 1 or more
    (the qrels list relevant pairs only), and the judge's P by pair where it has a judgment: its confidence for
    a yes, 1 - confidence for a no."""
    queries = [json.loads(line)["_id"] for line in (SAMPLE / "queries.jsonl").read_text().splitlines()]
    docs = [json.loads(line)["_id"] for line in (SAMPLE / "corpus.jsonl").read_text().splitlines()]
    grades = {}
    for line in (SAMPLE / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        q, d, score = line.split("\t")
        grades[(q, d)] = int(score)
    p = {}
    for line in (SAMPLE / "judgments.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["judge"] == judge_name:
            c = record["confidence"]
            p[(record["query_id"], record["doc_id"])] = c if record["guess"] == "yes" else 1 - c
    keys = [(q, d) for q in queries for d in docs]
    return keys, np.array([grades.get(key, 0) >= 1 for key in keys]), p


def full_pool_p(key: tuple[str, str], relevant: bool) -> float:
    """A judge that scored every pair of the pool: a P drawn per pair from a generator seeded by the pair's ids,
    higher on the relevant pairs, so the test can rebuild it without the database."""
    rng = random.Random(f"{key[0]}/{key[1]}")
    return min(1.0, max(0.0, rng.gauss(0.7 if relevant else 0.3, 0.2)))


def hand_ece(relevant: np.ndarray, p: np.ndarray, bins: int = 10) -> float:
    """Equal-width ECE by hand: bin k holds P in (k/10, (k+1)/10], the first also P = 0."""
    total = 0.0
    for k in range(bins):
        members = [i for i, value in enumerate(p) if next(b for b in range(bins) if value <= (b + 1) / bins) == k]
        if members:
            total += len(members) / p.size * abs(p[members].mean() - relevant[members].mean())
    return total


def test_all_pairs_on_the_sample_gives_7136_pairs_and_calibration_numbers_that_match_sklearn():
    bundle_import(path=SAMPLE, project_slug="cr", all_pairs=True)
    project = Project.objects.get(slug="cr")
    keys, relevant, _ = sample_all_pairs_arrays(LLAMA3[0])
    # The published Llama-3 judgments cover only the 595 graded pairs (all relevant): a judge that scored the
    # whole pool, as DIRAS's all-pairs runs did, is what all-pairs AUROC, ECE and Brier are about.
    full = JudgeFactory(project=project, name="full-pool")
    pair_of = {(q, d): pair_id for q, d, pair_id in
               Pair.objects.filter(project=project).values_list("query__external_id", "passage__external_id", "id")}
    now = timezone.now()
    Judgment.objects.bulk_create(
        Judgment(pair_id=pair_of[key], judge=full, p_relevant=full_pool_p(key, rel), created_at=now)
        for key, rel in zip(keys, relevant))
    out = io.StringIO()
    call_command("validation_report", "--project", "cr", "--judge", "full-pool",
                 *(arg for name in LLAMA3 for arg in ("--judge", name)),
                 "--all-pairs", "--json", "--bootstrap", "0", stdout=out)
    report = json.loads(out.getvalue())
    assert report["options"]["all_pairs"] is True
    assert report["counts"]["pairs"] == report["counts"]["gold"] == 7136 == 16 * 446
    assert report["counts"]["added"] == report["counts"]["ungraded"] == 7136 - 595
    sections = {section["name"]: section for section in report["judges"]}

    section = sections["full-pool"]
    p = np.array([full_pool_p(key, rel) for key, rel in zip(keys, relevant)])
    assert section["n"] == relevant.size == 7136 and section["n_relevant"] == relevant.sum() == 595
    assert section["n_unjudged"] == 0
    for metric in ("auroc", "ece", "brier"):
        assert section[metric] is not None, section["null_reasons"].get(metric)
    assert section["auroc"] == pytest.approx(roc_auc_score(relevant, p), abs=1e-12)
    assert section["brier"] == pytest.approx(brier_score_loss(relevant, p), abs=1e-12)
    assert section["ece"] == pytest.approx(hand_ece(relevant, p), abs=1e-12)

    # A judge's pairs without a P are not given one: the per-pair metrics are on the pairs it judged (all
    # relevant here, so AUROC is undefined and says why), and the pool pairs count only as unjudged.
    for name in LLAMA3:
        _, _, judged_p = sample_all_pairs_arrays(name)
        judged = np.array([key in judged_p for key in keys])
        section = sections[name]
        assert section["n"] == judged.sum() and section["n_unjudged"] == 7136 - judged.sum()
        assert section["auroc"] is None and "non-relevant" in section["null_reasons"]["auroc"]
        p = np.array([judged_p[key] for key in keys if key in judged_p])
        assert section["brier"] == pytest.approx(brier_score_loss(relevant[judged], p), abs=1e-12)
        assert section["ece"] == pytest.approx(hand_ece(relevant[judged], p), abs=1e-12)

    # Without the option the full-pool judge is also evaluated on the graded pairs only: one class, no AUROC.
    default = validation_compute(project=project, bootstrap_draws=0).to_dict()
    assert default["counts"]["gold"] == 595 and default["counts"]["ungraded"] == 6541
    assert default["counts"]["added"] == 0
    assert {section["auroc"] for section in default["judges"]} == {None}


def test_table_output_names_what_all_pairs_and_units_add():
    bundle_import(path=SAMPLE, project_slug="cr", all_pairs=True)
    out = io.StringIO()
    call_command("validation_report", "--project", "cr", "--judge", LLAMA3[0], "--all-pairs", "--unit-key",
                 "report", "--cutoffs", "15,5,10", "--bootstrap", "0", stdout=out)
    text = out.getvalue()
    assert "+6,541 unjudged pool pairs counted as irrelevant" in text
    assert "Ranking units: query x report" in text
    rows = [line.split()[0] for line in text.splitlines()]
    assert [row for row in rows if row.startswith(("nDCG@", "MAP@"))] == [
        "nDCG@5", "MAP@5", "nDCG@10", "MAP@10", "nDCG@15", "MAP@15"]
    with pytest.raises(CommandError, match="metadata key 'nope'"):
        call_command("validation_report", "--project", "cr", "--judge", LLAMA3[0], "--unit-key", "nope")
    with pytest.raises(CommandError, match="cut-offs"):
        call_command("validation_report", "--project", "cr", "--judge", LLAMA3[0], "--cutoffs", "5,x")


# A small bundle for the ranking checks: 2 queries x (3 reports x 12 passages + 2 passages without a report),
# every pair in the pool, a grade for about 60% of them, a P (all distinct, so no tie is left to trec_eval's
# tie-break) for about 80%: some graded pairs have no P (the run lacks them) and some P have no grade.
REPORTS = ("A", "B", "C")


@pytest.fixture
def units_bundle(tmp_path):
    rng = random.Random(18)
    docs = [{"_id": f"{r}{i}", "text": f"Passage {r}{i}.", "metadata": {"report": r}} for r in REPORTS
            for i in range(12)] + [{"_id": f"x{i}", "text": f"Passage x{i}."} for i in range(2)]
    queries = [{"_id": q, "text": f"Question {q}?", "definition": f"Definition {q}."} for q in ("q1", "q2")]
    grades, ps = {}, {}
    values = rng.sample(range(1, 10**6), len(docs) * len(queries))
    for q in queries:
        for d in docs:
            key = (q["_id"], d["_id"])
            if rng.random() < 0.6:
                grades[key] = rng.choice([0, 0, 1, 2])
            if rng.random() < 0.8:
                ps[key] = values.pop() / 10**6
    for q in queries:  # every unit has a relevant graded pair the judge judged, so each unit counts in the mean
        for r in REPORTS:
            grades[(q["_id"], f"{r}0")], ps[(q["_id"], f"{r}0")] = 2, 0.5 + rng.random() / 4
    root = write_bundle(tmp_path / "units", {
        "queries.jsonl": jsonl(*queries),
        "corpus.jsonl": jsonl(*docs),
        "pairs.tsv": "query-id\tcorpus-id\n" + "".join(f"{q['_id']}\t{d['_id']}\n" for q in queries for d in docs),
        "qrels/test.tsv": "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{g}\n" for (q, d), g in grades.items()),
        "judgments.jsonl": jsonl(*({"query_id": q, "doc_id": d, "judge": "j", "p_relevant": p}
                                   for (q, d), p in ps.items())),
    })
    bundle_import(path=root, project_slug="units")
    report_of = {d["_id"]: d.get("metadata", {}).get("report") for d in docs}
    return Project.objects.get(slug="units"), grades, ps, report_of


MEASURES = {"ndcg": "ndcg", "map": "map", **{f"ndcg_cut_{k}": f"ndcg@{k}" for k in (5, 10, 15)},
            **{f"map_cut_{k}": f"map@{k}" for k in (5, 10, 15)}}


def trec_reference(qrels_pairs: dict, run_pairs: dict, unit_of) -> dict[str, float]:
    """pytrec_eval on qrels and a run keyed by unit id ("query|report"): the mean of each measure over the units
    with a relevant pair (the report leaves the others out: no order of them is better than another); a unit
    the run retrieves nothing from scores 0 (trec_eval -c)."""
    qrels, run = {}, {}
    for (q, d), grade in qrels_pairs.items():
        qrels.setdefault(unit_of(q, d), {})[d] = grade
    for (q, d), p in run_pairs.items():
        run.setdefault(unit_of(q, d), {})[d] = p
    units = [u for u, docs in qrels.items() if any(g >= 1 for g in docs.values())]
    scores = pytrec_eval.RelevanceEvaluator(qrels, set(MEASURES)).evaluate(run)
    return {ours: float(np.mean([scores.get(u, {}).get(measure, 0.0) for u in units]))
            for measure, ours in MEASURES.items()}


def by_report(report_of):
    return lambda q, d: f"{q}|{report_of[d]}"


def test_units_by_report_and_cutoffs_match_pytrec_eval_on_query_report_ids(units_bundle):
    project, grades, ps, report_of = units_bundle
    options = report_options(project=project, unit_key="report", cutoffs="5,10,15")
    report = validation_compute(project=project, bootstrap_draws=0, options=options).to_dict()
    section = report["judges"][0]
    # Without all pairs: the graded pairs the judge judged, on both sides.
    both = {key: grade for key, grade in grades.items() if key in ps}
    expected = trec_reference(both, {key: ps[key] for key in both}, by_report(report_of))
    # (query, report A/B/C or none) units that hold a graded pair
    assert report["options"]["n_units"] == len({by_report(report_of)(q, d) for q, d in grades}) >= 2 * 3
    for metric, value in expected.items():
        assert section[metric] == pytest.approx(value, abs=1e-12), metric
    by_query = validation_compute(project=project, bootstrap_draws=0,
                                  options=report_options(project=project, cutoffs="5,10,15")).to_dict()["judges"][0]
    per_query = trec_reference(both, {key: ps[key] for key in both}, lambda q, d: q)
    for metric, value in per_query.items():
        assert by_query[metric] == pytest.approx(value, abs=1e-12), metric
    assert by_query["ndcg@5"] != pytest.approx(section["ndcg@5"])  # the units change the ranking evaluated


def test_all_pairs_ranking_is_trec_eval_on_the_raw_qrels_and_run(units_bundle):
    # trec_eval's own convention: a run's document the qrels lack is not relevant, a qrels document the run
    # lacks is not retrieved. The report with all pairs gives exactly that, per unit and at every cut-off.
    project, grades, ps, report_of = units_bundle
    options = report_options(project=project, all_pairs=True, unit_key="report", cutoffs="5,10,15")
    section = validation_compute(project=project, bootstrap_draws=0, options=options).to_dict()["judges"][0]
    expected = trec_reference(grades, ps, by_report(report_of))
    for metric, value in expected.items():
        assert section[metric] == pytest.approx(value, abs=1e-12), metric
    assert section["n"] == len(ps) and section["n_unjudged"] == 2 * 38 - len(ps)  # pairs without a P: ranked last only

    # The metrics by definition version (all judgments under v1 here) rank the same way.
    judge = Judge.objects.get(project=project, name="j")
    comparison = judge_metrics_by_definition(judge=judge, options=options)
    (group,) = comparison.by_version.groups
    assert comparison.cutoffs == [5, 10, 15]
    assert group.gold.ndcg == pytest.approx(expected["ndcg"], abs=1e-12)
    assert group.gold.map == pytest.approx(expected["map"], abs=1e-12)
    for k in (5, 10, 15):
        assert group.gold.at_cutoffs[f"ndcg@{k}"] == pytest.approx(expected[f"ndcg@{k}"], abs=1e-12)
        assert group.gold.at_cutoffs[f"map@{k}"] == pytest.approx(expected[f"map@{k}"], abs=1e-12)


def test_options_are_checked(units_bundle):
    project, *_ = units_bundle
    for bad in ("0", "5,abc", "2000", ","):
        with pytest.raises(ReportOptionsError):
            report_options(project=project, cutoffs=bad)
    with pytest.raises(ReportOptionsError, match="report"):
        report_options(project=project, unit_key="title")
    assert report_options(project=project, cutoffs=" 10, 5,10").cutoffs == (5, 10)
    assert report_options(project=project).is_default


@pytest.fixture
def sample():
    bundle_import(path=SAMPLE, project_slug="cr", all_pairs=True)
    project = Project.objects.get(slug="cr")
    validation_request(project=project)
    validation_refresh(project_id=project.id)
    return project


def reader(project, role=Membership.Role.VIEWER):
    user = UserFactory()
    MembershipFactory(project=project, user=user, role=role)
    return user


def test_api_computes_other_options_on_request_and_refuses_bad_ones(sample):
    api = APIClient()
    api.force_authenticate(reader(sample))
    url = reverse("api:validation", args=["cr"])
    cached = api.get(url).json()
    assert cached["options"] == {"all_pairs": False, "unit_key": None, "cutoffs": [10], "n_units": 16}
    assert cached["counts"]["ungraded"] == 6541
    body = api.get(url, {"judge": LLAMA3[0], "all_pairs": "true", "unit_key": "report", "cutoffs": "5,10,15"}).json()
    assert body["stale"] is False and body["options"]["unit_key"] == "report"
    assert body["counts"]["added"] == 6541 and body["judge"]["n_unjudged"] == 6541 and body["judge"]["n"] == 595
    # It judged the graded pairs only, all relevant: no AUROC, whatever the option adds; rankings are there.
    assert body["judge"]["auroc"] is None and body["judge"]["ndcg@15"] is not None
    assert api.get(url, {"cutoffs": "ten"}).status_code == 400
    assert api.get(url, {"unit_key": "nope"}).status_code == 404  # no passage has that key
    assert api.get(url, {"all_pairs": "true", "judge": "nobody"}).status_code == 404

    by_definition = reverse("api:judge-metrics-by-definition", args=["cr", LLAMA3[0]])
    body = api.get(by_definition, {"all_pairs": "true", "cutoffs": "5,10,15"}).json()
    gold = body["by_version"]["groups"][0]["gold"]
    assert body["n_gold"] == 7136 and body["options"]["all_pairs"] is True
    assert gold["auroc"] is None and gold["ndcg"] is not None and gold["n"] == 595
    assert set(gold["at_cutoffs"]) == {f"{m}@{k}" for m in ("ndcg", "map") for k in (5, 10, 15)}
    cached = api.get(by_definition).json()
    assert set(cached["by_version"]["groups"][0]["gold"]["at_cutoffs"]) == {"ndcg@10", "map@10"}


def test_expert_gets_no_report_with_options(sample):
    api = APIClient()
    api.force_authenticate(reader(sample, Membership.Role.EXPERT))
    assert api.get(reverse("api:validation", args=["cr"]), {"all_pairs": "true"}).status_code == 403


def test_page_offers_the_options_with_the_pairs_they_add_and_shows_the_report_for_them(client, sample):
    client.force_login(reader(sample))
    url = reverse("labeling:validation", args=["cr"])
    html = client.get(url).content.decode()
    assert "(+6541 unjudged pool pairs counted as irrelevant)" in html
    assert '<option value="report">' in html
    html = client.get(url, {"all_pairs": "1", "unit_key": "report", "cutoffs": "5,10,15"}).content.decode()
    assert "data-on-request" in html and 'data-added="6541"' in html
    assert "hx-trigger=\"every 3s\"" not in html  # computed for the request: nothing to wait for
    assert "nDCG@15" in html and "passage <code>report</code>" in html
    assert 'name="all_pairs" value="1" checked' in html
    html = client.get(url, {"cutoffs": "5,x"}).content.decode()
    assert "data-options-error" in html and "data-on-request" not in html


def test_page_shows_a_report_cached_before_the_options_while_it_is_recomputed(client, sample):
    result = sample.validation_result
    data = dict(result.data)
    del data["options"]
    type(result).objects.filter(id=result.id).update(data=data)
    client.force_login(reader(sample))
    response = client.get(reverse("labeling:validation", args=["cr"]))
    assert response.status_code == 200 and "nDCG@10" in response.content.decode()
    sample.validation_result.refresh_from_db()
    assert sample.validation_result.is_stale  # the old report asks for a new one

"""The perturbation audit on a small project: its parameters, the seeded sample of gold pairs (the gold rule's, with
each query's current definition), and a whole audit of the MiniLM judge run in this process, whose report agrees
with the stored probes re-scored independently and which never creates a pair or a judgment."""
import random

import pytest
from django.test import override_settings

from labeling.llm_adapter import judge_config
from labeling.models import AuditJob, Judgment, Pair, Passage, Query
from labeling.services.audit import audit_estimate, audit_probes, audit_request, audit_run
from labeling.services.audit_errors import AuditError
from labeling.services.audit_perturbation import perturbation_parameters
from models_llm.audit import PERTURBATION_TESTS
from models_llm.backends import load_scorer
from tests.factories import (
    LabelFactory,
    PairFactory,
    PairSourceFactory,
    PassageFactory,
    ProjectFactory,
    QueryFactory,
    RelevanceDefinitionFactory,
)
from tests.scoring_fixtures import minilm_judge

pytestmark = pytest.mark.django_db
KIND = AuditJob.Kind.PERTURBATION
WORDS = ("river flood barrier insurance plant site warming scenario board dividend emissions scope supplier "
         "water drought storm heat coast").split()


def passage_text(rng: random.Random) -> str:
    return " ".join(" ".join(rng.choice(WORDS) for _ in range(9)).capitalize() + "." for _ in range(rng.randint(3, 8)))


@pytest.fixture
def project():
    """3 queries x 5 passages; gold: reference grades on 4 pairs of each query, plus one pair whose two annotators
    agree; one pair whose annotators disagree is unresolved (not gold). q0 has no definition, q1's newest version
    is an LLM draft (its current one is version 1)."""
    rng = random.Random(0)
    project = ProjectFactory(slug="audited")
    queries = [QueryFactory(project=project, external_id=f"q{i}", text=t) for i, t in enumerate((
        "Does the company assess flood risk at its plants?", "Does the company report scope 3 emissions?",
        "Does the company plan for drought and water stress?"))]
    RelevanceDefinitionFactory(query=queries[1], text="Emissions of the supply chain, in tonnes.")
    RelevanceDefinitionFactory(query=queries[1], text="A draft nobody reviewed.", is_draft=True,
                               origin="llm_draft")
    RelevanceDefinitionFactory(query=queries[2], text="Water scarcity plans and drought exposure.")
    for q, query in enumerate(queries):
        for d in range(5):
            passage = PassageFactory(project=project, external_id=f"d{q}{d}", text=passage_text(rng))
            pair = PairFactory(project=project, query=query, passage=passage,
                               reference_grade=(d % 3) if d < 4 else None)
            if d == 4 and q < 2:
                LabelFactory(pair=pair, grade=2 if q == 0 else 0)
                LabelFactory(pair=pair, grade=2 if q == 0 else 1)  # q0: agree (gold 2); q1: disagree (no gold)
    return project


def gold_ids(project) -> list[int]:
    """By hand: the pairs with a reference grade, and q0's pair whose annotators agree."""
    ids = set(Pair.objects.filter(project=project, reference_grade__isnull=False).values_list("id", flat=True))
    ids.add(Pair.objects.get(project=project, passage__external_id="d04").id)
    return sorted(ids)


def test_parameters_defaults_and_refusals(settings):
    settings.AUDIT_MAX_SAMPLE = 300
    assert perturbation_parameters({}) == {"sample": 200, "seed": 0, "tests": list(PERTURBATION_TESTS)}
    assert perturbation_parameters({"sample": "12", "seed": 4, "tests": "consistency, length"}) == {
        "sample": 12, "seed": 4, "tests": ["length", "consistency"]}
    for raw, message in (({"tests": ["length", "flattery"]}, "'flattery'"), ({"tests": []}, "at least one"),
                         ({"sample": 0}, "sample"), ({"sample": 301}, "1 to 300"), ({"sample": True}, "sample"),
                         ({"seed": -1}, "seed"), ({"pairs": 3}, "'pairs'")):
        with pytest.raises(AuditError, match=message):
            perturbation_parameters(raw)


def test_a_project_without_gold_pairs_is_refused():
    project = ProjectFactory()
    PairFactory(project=project)
    judge = minilm_judge(project)
    with pytest.raises(AuditError, match="has no gold pairs"):
        audit_request(project=project, judge=judge, kind=KIND, parameters={})


def test_the_sample_is_a_seeded_draw_of_the_gold_pairs_with_their_current_definitions(project):
    judge = minilm_judge(project)
    probes = audit_probes(project=project, judge=judge, kind=KIND,
                          parameters={"sample": 6, "seed": 3, "tests": ["definition"]})
    originals = [p for p in probes if p.role == "original"]
    expected = sorted(random.Random(3).sample(gold_ids(project), 6))
    assert [int(p.item) for p in originals] == expected
    pairs = Pair.objects.select_related("query", "passage").in_bulk(expected)
    definitions = {"q0": None, "q1": "Emissions of the supply chain, in tonnes.",
                   "q2": "Water scarcity plans and drought exposure."}
    for probe in originals:
        pair = pairs[int(probe.item)]
        assert (probe.pair.query, probe.pair.passage) == (pair.query.text, pair.passage.text)
        assert probe.pair.definition == definitions[probe.query_key]
    assert [p.pair.pair_id for p in probes] == list(range(len(probes)))
    all_gold = audit_probes(project=project, judge=judge, kind=KIND, parameters={"sample": 200, "tests": ["length"]})
    assert sorted(int(p.item) for p in all_gold if p.role == "original") == gold_ids(project)


def test_borrowed_text_and_bases_come_from_other_queries(project):
    judge = minilm_judge(project)
    probes = audit_probes(project=project, judge=judge, kind=KIND, parameters={"tests": ["length", "stuffing"]})
    passages = [(pair.id, pair.query.external_id, pair.passage.text.split())
                for pair in Pair.objects.filter(project=project).select_related("query", "passage")]
    relevant = set(Pair.objects.filter(project=project, reference_grade__gte=1).values_list("id", flat=True))
    relevant.add(Pair.objects.get(project=project, passage__external_id="d04").id)  # agreed grade 2
    originals = {probe.item: probe for probe in probes if probe.role == "original"}
    for probe in probes:
        if probe.role == "stuffing_base":
            own = originals[probe.item].doc_key
            # an irrelevant item is its own base; a relevant one borrows a passage not relevant to its query
            assert (probe.doc_key != own) == (int(probe.item) in relevant)
            borrowed = Pair.objects.filter(query__external_id=probe.query_key, passage__external_id=probe.doc_key)
            assert not any(pair.id in relevant for pair in borrowed)
        if probe.role == "length512":
            added = probe.pair.passage.split()[len(originals[probe.item].pair.passage.split()):]
            assert len(probe.pair.passage.split()) == 512
            # the padding starts with a whole passage, which is not relevant to the item's query (another query's
            # passage, or one of its own graded irrelevant)
            starts = {(pair_id, query) for pair_id, query, words in passages if added[:len(words)] == words}
            assert starts and not any(query == probe.query_key and pair_id in relevant for pair_id, query in starts)


def test_an_all_pairs_pool_still_lends_text_but_never_a_passage_about_the_items_query(project):
    """DIRAS's all-pairs setting pairs every passage with every query: being in the pool says nothing. A passage is
    about a query when it is graded relevant for it, or when a system retrieved it for it (a pool source)."""
    judge = minilm_judge(project)
    queries = {query.external_id: query for query in Query.objects.filter(project=project)}
    for query in queries.values():
        for passage in Passage.objects.filter(project=project):
            Pair.objects.get_or_create(project=project, query=query, passage=passage)
    # d10 (q1's) is also graded relevant for q0; d20 (q2's) was retrieved for q0 by a system.
    Pair.objects.filter(query=queries["q0"], passage__external_id="d10").update(reference_grade=2)
    PairSourceFactory(pair=Pair.objects.get(query=queries["q0"], passage__external_id="d20"), system="bm25", rank=1)
    about_q0 = {"d00", "d01", "d02", "d04", "d10", "d20"} - {"d00"}  # d00 is graded 0 for q0: not about it
    probes = audit_probes(project=project, judge=judge, kind=KIND,
                          parameters={"sample": 200, "tests": ["length", "stuffing"]})
    originals = {probe.item: probe for probe in probes if probe.role == "original"}
    texts = {p.external_id: p.text for p in Passage.objects.filter(project=project)}
    bases = [probe for probe in probes if probe.role == "stuffing_base" and probe.doc_key != originals[probe.item].doc_key]
    padded = [probe for probe in probes if probe.role == "length512"]
    assert bases and len(padded) == len(originals)
    for probe in bases:
        assert probe.query_key != "q0" or probe.doc_key not in about_q0
    for probe in padded:
        if probe.query_key == "q0":
            added = probe.pair.passage[len(originals[probe.item].pair.passage):]
            assert not any(texts[key] in added for key in about_q0 - {originals[probe.item].doc_key})


@override_settings(AUDIT_BATCH=7)
def test_an_audit_of_minilm_reports_what_its_probes_score_and_writes_no_pair_or_judgment(project, monkeypatch):
    judge = minilm_judge(project)
    # An embedding judge samples nothing: its consistency probes are asked of the same loaded model, no second copy.
    monkeypatch.setattr("labeling.services.audit._sampled_scorer", lambda config: pytest.fail("a second model"))
    pairs, judgments = Pair.objects.count(), Judgment.objects.count()
    estimate = audit_estimate(project=project, judge=judge, kind=KIND, parameters={"sample": 8, "seed": 1})
    assert estimate.tokens is None and estimate.cost_usd is None  # an embedding judge: no prompt, no token
    job = audit_request(project=project, judge=judge, kind=KIND, parameters={"sample": 8, "seed": 1})
    assert job.total == estimate.probes and estimate.sampled_probes == 16  # consistency: 2 sampled probes per item
    audit_run(job_id=job.id)
    job.refresh_from_db()
    assert job.status == AuditJob.Status.DONE and job.done == job.total
    assert (Pair.objects.count(), Judgment.objects.count()) == (pairs, judgments)
    report = job.report
    assert report["kind"] == "perturbation" and report["judge"] == "minilm" and report["items"] == 8
    rows = {row["test"]: row for row in report["rows"]}
    assert list(rows) == ["length512", "length1024", "stuffing", "injection", "definition", "consistency"]

    # The stored probes, re-scored here with the judge's own configuration, give the report's numbers.
    probes = audit_probes(project=project, judge=judge, kind=KIND, parameters=job.parameters)
    assert len(probes) == job.total
    scorer = load_scorer(judge_config(judge))
    p = {probe.pair.pair_id: v.p for probe, v in zip(probes, scorer.score([probe.pair for probe in probes]))}
    index = {(probe.item, probe.role): probe.pair.pair_id for probe in probes}
    compared = {"length512": ("original", "length512"), "length1024": ("original", "length1024"),
                "stuffing": ("stuffing_base", "stuffing"), "injection": ("stuffing_base", "injection"),
                "definition": ("original", "definition"), "consistency": ("consistency_a", "consistency_b")}
    for test, (before, after) in compared.items():
        deltas = [p[index[item, after]] - p[index[item, before]] for item, role in index if role == after]
        flips = [(p[index[item, after]] >= 0.5) != (p[index[item, before]] >= 0.5) for item, role in index
                 if role == after]
        row = rows[test]
        assert row["n"] == len(deltas) and row["failed"] == 0
        assert row["mean_delta"] == pytest.approx(sum(deltas) / len(deltas), abs=1e-6)
        assert row["decision_flips"] == pytest.approx(sum(flips) / len(flips))
        assert row["mean_delta_ci"][0] <= row["mean_delta"] <= row["mean_delta_ci"][1]
        assert row["verdict"] in ("robust", "watch", "sensitive")
    assert rows["consistency"]["mean_delta"] == pytest.approx(0, abs=1e-6)  # the same model, batched differently
    assert "samples nothing" in rows["consistency"]["note"]
    definitions_left_out = sum(1 for item, role in index if role == "original" and (item, "definition") not in index)
    assert rows["definition"]["n"] == 8 - definitions_left_out

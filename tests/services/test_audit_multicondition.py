"""The multi-condition audit of a judge (labeling.services.audit_multicondition): its parameters, the prompts it
asks, the report from the answers, and a real MiniLM judge audited end to end on the example bundle through the
generic audit service, which stores nothing but the audit's row."""
from __future__ import annotations

from pathlib import Path

import pytest

from labeling.models import AuditJob, Judgment, Pair, Passage, Project, Query
from labeling.services.audit import audit_request, audit_run
from labeling.services.audit_errors import AuditError
from labeling.services.audit_multicondition import (
    multicondition_parameters,
    multicondition_probes,
    multicondition_report,
)
from labeling.services.bundle_import import bundle_import
from models_llm.audit.multicondition import PAPER_FILLER, FillerPadder, sentences
from models_llm.types import Verdict
from tests.factories import ProjectFactory, QueryFactory, RelevanceDefinitionFactory
from tests.scoring_fixtures import minilm_judge

pytestmark = pytest.mark.django_db
EXAMPLE = Path(__file__).resolve().parents[2] / "data" / "multicondition-example"


@pytest.fixture
def project() -> Project:
    bundle_import(path=EXAMPLE, project_slug="mc")
    return Project.objects.get(slug="mc")


def test_parameters_fill_defaults_and_refuse_bad_values():
    assert multicondition_parameters({}) == {"pads": [512, 1024], "filler": PAPER_FILLER}
    assert multicondition_parameters({"pads": [1024, 256, 256], "filler": " Fill  this. "}) == {
        "pads": [256, 1024], "filler": "Fill this."}
    assert multicondition_parameters({"pads": []})["pads"] == []
    for bad in ({"pads": [0]}, {"pads": "512"}, {"pads": [True]}, {"filler": ""}, {"filler": 5},
                {"filler": "a\x00b"}, {"filler": "x" * 2001}, {"seed": 1}, {"sample": 10}):
        with pytest.raises(AuditError):
            multicondition_parameters(bad)


def test_probes_ask_each_query_document_and_pad_once_with_the_current_definition(project):
    definition = RelevanceDefinitionFactory(query=Query.objects.get(project=project, external_id="b01-ins-5"),
                                            text="A book meeting every condition listed.")
    judge = minilm_judge(project)
    probes = multicondition_probes(project=project, judge=judge, parameters=multicondition_parameters({}))
    # 40 (query, document, pad) per item (tests/models_llm/test_audit_multicondition.py), 6 items.
    assert len(probes) == 240 and [p.pair.pair_id for p in probes] == list(range(240))
    assert len({(p.query_key, p.doc_key, p.pad) for p in probes}) == 240
    assert {p.role for p in probes} == {"mc"} and {p.pad for p in probes} == {0, 512, 1024}
    texts = dict(Query.objects.filter(project=project).values_list("external_id", "text"))
    documents = dict(Passage.objects.filter(project=project).values_list("external_id", "text"))
    for probe in probes:
        assert probe.pair.query == texts[probe.query_key] and probe.item == probe.doc_key.split("-")[0]
        if probe.pad:
            # MultiConIR's filler between the document's sentences, up to the pad.
            assert len(probe.pair.passage.split()) == probe.pad
            assert probe.pair.passage == FillerPadder().pad(documents[probe.doc_key], probe.pad)
            own = sentences(documents[probe.doc_key])
            assert probe.pair.passage.startswith(own[0] + " The grass is green.")
        else:
            assert probe.pair.passage == documents[probe.doc_key]
        assert probe.pair.definition == (definition.text if probe.query_key == "b01-ins-5" else None)
    again = multicondition_probes(project=project, judge=judge, parameters=multicondition_parameters({}))
    assert again == probes


def test_an_answer_without_p_is_a_missing_score(project):
    judge = minilm_judge(project)
    parameters = multicondition_parameters({})
    probes = multicondition_probes(project=project, judge=judge, parameters=parameters)
    met = {p.external_id: p.metadata["multicondition"]["satisfies"] for p in Passage.objects.filter(project=project)}
    k_of = {q.external_id: q.metadata["multicondition"]["k"] for q in Query.objects.filter(project=project)}
    verdicts = [Verdict(pair_id=i, status="ok", method="embedding", p=min(met[p.doc_key], k_of[p.query_key]) / 5)
                for i, p in enumerate(probes)]
    # (b01-ins-5, b01-doc-0) is compared in Task 2 at k = 1 for b01 (d1 over d0 under the full query), and so in
    # Task 3's flip at k = 1 too (Task 4's unpadded curve is Task 2's, not counted again).
    lost = next(i for i, p in enumerate(probes) if (p.query_key, p.doc_key, p.pad) == ("b01-ins-5", "b01-doc-0", 0))
    verdicts[lost] = Verdict(pair_id=lost, status="parse_error", method="embedding", raw_output="maybe")
    report = multicondition_report(project=project, judge=judge, parameters=parameters, probes=probes,
                                   verdicts=verdicts)
    assert report["subject"] == "judge:minilm" and report["skipped"] == 2
    # The oracle wins everything else: books' Task 2 at k = 1 is measured on its two other items.
    assert report["task2"]["average"] == [1.0] * 5 and report["task3"]["mean"] == 0.0


def test_a_project_without_items_cannot_start_the_audit():
    project = ProjectFactory(slug="plain")
    QueryFactory(project=project)
    with pytest.raises(AuditError, match="metadata.multicondition"):
        audit_request(project=project, judge=minilm_judge(project), kind=AuditJob.Kind.MULTICONDITION, parameters={})


def test_minilm_audited_end_to_end_leaves_no_pair_or_judgment(project):
    judge = minilm_judge(project)
    pairs = Pair.objects.count()
    job = audit_request(project=project, judge=judge, kind=AuditJob.Kind.MULTICONDITION, parameters={})
    audit_run(job_id=job.id)
    job.refresh_from_db()
    assert job.status == AuditJob.Status.DONE and job.done == job.total == 240
    report = job.report
    assert (report["kind"], report["subject"], report["items"], report["max_k"], report["skipped"]) == (
        "multicondition", "judge:minilm", 6, 5, 0)
    curves = [*report["task1"]["styles"].values(), report["task2"], report["task3"],
              *report["task4"]["pads"].values()]
    assert list(report["task4"]["pads"]) == ["0", "512", "1024"]
    for curve in curves:
        assert all(v is not None and 0.0 <= v <= 1.0 for values in curve["by_domain"].values() for v in values)
        assert curve["average"] == pytest.approx([(a + b) / 2 for a, b in zip(*curve["by_domain"].values(),
                                                                                strict=True)])
    for task in ("task1", "task2", "task3", "task4"):
        assert report[task]["verdict"] in {"robust", "watch", "sensitive"} and report[task]["why"]
    assert Pair.objects.count() == pairs and not Judgment.objects.exists()

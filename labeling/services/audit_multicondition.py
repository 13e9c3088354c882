"""The multi-condition audit (MultiConIR's four tests, models_llm/audit/multicondition.py) of a judge: its
parameters, the prompts the tests need (each (query, document, pad) once) and the report from the judge's answers.
The generic audit service (labeling/services/audit.py) runs them."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from labeling.models import Judge, Project
from labeling.selectors.audit_multicondition import multicondition_definitions, project_multicondition_items
from labeling.services.audit_errors import AuditError
from models_llm.audit.multicondition import PAPER_FILLER, FillerPadder, ScoreKey, multicondition_needs
from models_llm.audit.multicondition import multicondition_report as report_of
from models_llm.audit.types import PAD_WORDS, Probe
from models_llm.types import PairInput, Verdict

DEFAULTS = {"pads": list(PAD_WORDS), "filler": PAPER_FILLER}
MAX_PAD = 8192
MAX_FILLER_CHARS = 2000


def multicondition_parameters(raw: Mapping) -> dict:
    """`pads`: the lengths in words Task 4 pads documents to (default [512, 1024]; [] leaves Task 4 out) and `filler`,
    the text whose sentences are inserted between a document's sentences (default MultiConIR's, PAPER_FILLER).
    AuditError on an unknown key or a bad value."""
    unknown = sorted(set(raw) - set(DEFAULTS))
    if unknown:
        raise AuditError(f"unknown multi-condition parameter(s) {unknown}: known are {sorted(DEFAULTS)}")
    pads, filler = raw.get("pads", DEFAULTS["pads"]), raw.get("filler", DEFAULTS["filler"])
    if not isinstance(pads, list | tuple) or not all(
            isinstance(p, int) and not isinstance(p, bool) and 1 <= p <= MAX_PAD for p in pads):
        raise AuditError(f"pads must be a list of word counts from 1 to {MAX_PAD}, got {pads!r}")
    if (not isinstance(filler, str) or not filler.split() or len(filler) > MAX_FILLER_CHARS
            or any(ord(c) < 32 and c not in "\t\n" for c in filler)):
        raise AuditError(f"filler must be text of 1 to {MAX_FILLER_CHARS:,} characters with a word and no control "
                         f"characters, got {str(filler)[:80]!r}")
    return {"pads": sorted(set(pads)), "filler": " ".join(filler.split())}


def multicondition_probes(*, project: Project, judge: Judge, parameters: Mapping) -> list[Probe]:
    """One probe per (query, document, pad) the four tests compare, in the items' order: the query's text and
    current definition, the document's text padded to `pad` words (0: as stored)."""
    items = project_multicondition_items(project)
    needs = multicondition_needs(items, parameters["pads"])
    owner = {d.key: item for item in items for d in item.documents.values()}
    texts = {q.key: q.text for item in items for q in item.queries.values()}
    documents = {d.key: d.text for item in items for d in item.documents.values()}
    definitions = multicondition_definitions(project, {query for query, _, _ in needs})
    padder = FillerPadder(parameters.get("filler", PAPER_FILLER))
    return [Probe(pair=PairInput(pair_id=index, query=texts[query], passage=padder.pad(documents[document], pad),
                                 definition=definitions.get(query)),
                  role="mc", item=owner[document].item, query_key=query, doc_key=document, pad=pad)
            for index, (query, document, pad) in enumerate(needs)]


def multicondition_report(*, project: Project, judge: Judge, parameters: Mapping, probes: Sequence[Probe],
                          verdicts: Sequence[Verdict]) -> dict:
    """The report (subject `judge:NAME`) with the judge's P as the score; an answer without a P is missing."""
    scores: dict[ScoreKey, float | None] = {
        (probe.query_key, probe.doc_key, probe.pad): verdict.p if verdict.status == "ok" else None
        for probe, verdict in zip(probes, verdicts, strict=True)}
    return report_of(project_multicondition_items(project), scores, subject=f"judge:{judge.name}",
                     pads=parameters["pads"])

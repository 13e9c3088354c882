"""Reads of a project's multi-condition items (the `multicondition` objects of its queries' and passages' metadata,
docs/bundle-format.md#multi-condition-items-multiconir) and a run's MultiConIR report, scored from its ranks."""
from __future__ import annotations

import math

from labeling.models import Passage, Project, Query, Run, RunEntry
from labeling.selectors.definitions import current_definitions
from labeling.services.audit_errors import AuditConflict, AuditError
from models_llm.audit.multicondition import McItem, McRecord, ScoreKey, multicondition_items, multicondition_needs
from models_llm.audit.multicondition import multicondition_report as build_report

NO_ITEMS = ("project {slug!r} has no multi-condition items: give its queries metadata.multicondition = {{item, "
            "domain, k, style}} and its passages metadata.multicondition = {{item, satisfies}} "
            "(docs/bundle-format.md#multi-condition-items-multiconir)")
RUN_UNPADDED = "a run's scores are fixed: its documents cannot be re-scored padded"


def _query_rows(project: Project) -> list[tuple[int, str, str, dict]]:
    return list(Query.objects.filter(project=project, metadata__has_key="multicondition").order_by("id")
                .values_list("id", "external_id", "text", "metadata"))


def project_multicondition_items(project: Project) -> list[McItem]:
    """The project's multi-condition items, or AuditError: none (saying which metadata to add), or a metadata
    problem naming the query or passage."""
    return _items(project, _query_rows(project))


def _items(project: Project, queries: list[tuple[int, str, str, dict]]) -> list[McItem]:
    passages = (Passage.objects.filter(project=project, metadata__has_key="multicondition").order_by("id")
                .values_list("external_id", "text", "metadata"))
    try:
        items = multicondition_items((McRecord(key, text, meta) for _, key, text, meta in queries),
                                     (McRecord(key, text, meta) for key, text, meta in passages))
    except ValueError as exc:
        raise AuditError(f"multi-condition metadata: {exc}") from None
    if not items:
        raise AuditConflict(NO_ITEMS.format(slug=project.slug))
    return items


def multicondition_definitions(project: Project, query_keys: set[str]) -> dict[str, str]:
    """Query external id -> the text of its current relevance definition (queries without one are absent)."""
    ids = dict(Query.objects.filter(project=project, external_id__in=query_keys).values_list("id", "external_id"))
    return {ids[query_id]: definition.text for query_id, definition in current_definitions(ids).items()}


def run_multicondition_report(run: Run) -> dict:
    """The MultiConIR report of a run (subject `run:NAME`), its score for (query, passage) being minus the rank:
    a passage it did not retrieve for a query it ranked comes below every retrieved one (two such passages tie,
    and a tie is no win); a query it did not rank at all has no scores (its comparisons are skipped). Task 4 is
    unavailable: the run's rankings cannot be redone on padded documents. AuditError as
    project_multicondition_items."""
    queries = _query_rows(run.project)
    items = _items(run.project, queries)
    query_keys = {pk: key for pk, key, _, _ in queries}
    passage_keys = {d.key for item in items for d in item.documents.values()}
    passages = dict(Passage.objects.filter(project=run.project, external_id__in=passage_keys)
                    .values_list("id", "external_id"))
    ranks: dict[str, dict[str, int]] = {}
    entries = RunEntry.objects.filter(run=run, query_id__in=list(query_keys)).values_list("query_id", "passage_id",
                                                                                          "rank")
    for query_id, passage_id, rank in entries.iterator(chunk_size=20_000):
        ranking = ranks.setdefault(query_keys[query_id], {})
        if passage_id in passages:
            ranking[passages[passage_id]] = rank
    scores: dict[ScoreKey, float | None] = {}
    for query, document, pad in multicondition_needs(items, ()):
        ranking = ranks.get(query)
        scores[query, document, pad] = None if ranking is None else -ranking.get(document, math.inf)
    return build_report(items, scores, subject=f"run:{run.name}", pads=(), unavailable=RUN_UNPADDED)

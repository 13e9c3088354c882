"""Reads behind LLM-drafted definitions: the judges that can write text, the passages experts labelled relevant
(the examples a refined draft learns from), a query's draft requests and the version an admin reviews."""
from __future__ import annotations

from collections import defaultdict

from django.db.models import QuerySet

from labeling.gold import LabelView, gold_grade
from labeling.models import DefinitionDraft, Judge, Label, Passage, Project, Query, RelevanceDefinition

MAX_REFINE_EXAMPLES = 8
RECENT_DRAFT_REQUESTS = 10


def generative_judges(*, project: Project) -> QuerySet[Judge]:
    """The project's judges whose model writes text (imported and embedding judges cannot draft), by name."""
    return Judge.objects.filter(project=project, backend__in=Judge.Backend.generative()).order_by("name")


def relevant_example_passages(*, query: Query, limit: int = MAX_REFINE_EXAMPLES) -> list[str]:
    """The texts of the query's passages whose current expert labels make them relevant, newest label first, at
    most `limit`. A pair's grade from its labels is the gold rule without a reference grade (the newest
    adjudication, else the annotators' grade when they agree) and relevance is the project's scale cut-off:
    imported qrels are not expert judgments, and a disputed pair teaches nothing."""
    scale = query.project.label_scale
    labels = (
        Label.objects.filter(pair__query=query, superseded_at__isnull=True)
        .order_by("pair_id", "id")
        .values_list("pair_id", "pair__passage_id", "id", "grade", "role", "created_at")
    )
    by_pair: dict[int, list[tuple]] = defaultdict(list)
    for row in labels:
        by_pair[row[0]].append(row)
    relevant = []
    for rows in by_pair.values():
        grade = gold_grade(None, [LabelView(grade=row[3], role=row[4], label_id=row[2]) for row in rows])
        if grade is not None and scale.is_relevant(grade):
            newest = max(rows, key=lambda row: (row[5], row[2]))
            relevant.append(((newest[5], newest[2]), newest[1]))
    relevant.sort(reverse=True)
    passage_ids = [passage_id for _, passage_id in relevant[:limit]]
    texts = dict(Passage.objects.filter(id__in=passage_ids).values_list("id", "text"))
    return [texts[passage_id] for passage_id in passage_ids]


def draft_requests(*, query: Query, limit: int = RECENT_DRAFT_REQUESTS) -> list[DefinitionDraft]:
    """The query's newest draft requests (pending, failed or done) with their judge, requester and version."""
    return list(
        DefinitionDraft.objects.filter(query=query)
        .select_related("judge", "requested_by", "definition")
        .order_by("-created_at", "-id")[:limit]
    )


def definition_of_query(*, query: Query, definition_id: int) -> RelevanceDefinition | None:
    """The query's version with this id (a draft an admin reviews), or None when the id is not one of them."""
    return RelevanceDefinition.objects.filter(query=query, id=definition_id).select_related("drafted_by").first()

"""Definition reads: a query's current version (the newest that is not an LLM draft) and version history, the
word diff between two versions, and the judgments made under a definition that is no longer current (stale) with
the pairs already queued for re-scoring. The word diff itself is labeling.textdiff."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Exists, F, IntegerField, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from labeling.models import Judge, Judgment, Label, Project, Query, RelevanceDefinition
from labeling.selectors.scoring import queued_pairs
from labeling.textdiff import TextDiff, text_diff


@dataclass(frozen=True)
class DefinitionVersion:
    """A version with its diff against `compared_to` (the version number; None: nothing before it, so all of it
    is new); `is_current` marks the newest non-draft version, and `reviewed_as` the versions saved from a draft."""

    definition: RelevanceDefinition
    diff: TextDiff
    compared_to: int | None = None
    is_current: bool = False
    reviewed_as: tuple[int, ...] = ()


def definition_diff(*, older: RelevanceDefinition | None, newer: RelevanceDefinition) -> TextDiff:
    """The changes from `older` (None: the first version, all of it inserted) to `newer` (labeling.textdiff)."""
    return text_diff(older.text if older is not None else None, newer.text)


@dataclass(frozen=True)
class DefinitionNews:
    """What changed in a query's definition since the version an expert last labelled under."""

    since_version: int
    diff: TextDiff


def definition_news(*, annotator: AbstractBaseUser, definition: RelevanceDefinition) -> DefinitionNews | None:
    """The changes an expert has not yet labelled under: the version of their latest label on the query's pairs
    against `definition`, the whole text with its changed words marked. None once they have labelled an item
    under `definition`, or when they never labelled under an earlier version (nothing they knew changed)."""
    labels = Label.objects.filter(annotator=annotator, pair__query_id=definition.query_id, definition__isnull=False)
    if labels.filter(definition=definition).exists():
        return None
    known = (labels.filter(definition__version__lt=definition.version).select_related("definition")
             .order_by("-definition__version").first())
    if known is None:
        return None
    return DefinitionNews(since_version=known.definition.version,
                          diff=text_diff(known.definition.text, definition.text, context_lines=None))


def current_definition(*, query: Query | int) -> RelevanceDefinition | None:
    """The current definition of the query (or query id): its newest version that is not an LLM draft (None: it
    has none)."""
    return RelevanceDefinition.objects.in_use().filter(query=query).order_by("-version").first()


def current_definitions(query_ids: Iterable[int]) -> dict[int, RelevanceDefinition]:
    """query id -> its current definition (as current_definition), for many queries in one read; a query without
    one is absent."""
    current: dict[int, RelevanceDefinition] = {}
    rows = RelevanceDefinition.objects.in_use().filter(query_id__in=list(query_ids)).order_by("query_id", "version")
    for definition in rows:
        current[definition.query_id] = definition
    return current


@dataclass(frozen=True)
class DefinitionSummary:
    """A query's definition as the Definitions page lists it: the current version (None: none yet), how many
    versions it has (LLM drafts included, numbered with the others), how many LLM drafts wait for an admin's review
    (those newer than the current version: a reviewed draft has the version saved from it after it), and when the
    current version was saved and by whom (None: it came with an import)."""

    query: Query
    current_version: int | None
    versions: int
    drafts_waiting: int
    changed_at: datetime | None
    changed_by: str | None


def definition_summaries(*, queries: Iterable[Query]) -> list[DefinitionSummary]:
    """DefinitionSummary of each of the given queries (a page of them), in their order: one read of their
    versions, since a query has a handful."""
    queries = list(queries)
    versions: dict[int, list[RelevanceDefinition]] = defaultdict(list)
    rows = (RelevanceDefinition.objects.filter(query_id__in=[query.id for query in queries]).select_related("author")
            .only("id", "query_id", "version", "is_draft", "created_at", "author", "author__username")
            .order_by("query_id", "version"))
    for definition in rows:
        versions[definition.query_id].append(definition)
    summaries = []
    for query in queries:
        history = versions[query.id]
        current = next((d for d in reversed(history) if not d.is_draft), None)
        newest_in_use = current.version if current is not None else 0
        summaries.append(DefinitionSummary(
            query=query,
            current_version=current.version if current is not None else None,
            versions=len(history),
            drafts_waiting=sum(1 for d in history if d.is_draft and d.version > newest_in_use),
            changed_at=current.created_at if current is not None else None,
            changed_by=current.author.get_username() if current is not None and current.author else None,
        ))
    return summaries


def queries_with_a_definition(*, project: Project) -> int:
    """How many of the project's queries have a current definition (a version that is not an LLM draft)."""
    return Query.objects.filter(project=project).filter(Exists(RelevanceDefinition.objects.in_use()
                                                               .filter(query=OuterRef("pk")))).count()


def definition_history(*, query: Query) -> QuerySet[RelevanceDefinition]:
    """The query's definition versions (drafts included), newest first, with their author, the judge that drafted
    them and the draft they are based on, and how many current labels and judgments were made under each."""
    labels = (
        Label.objects.filter(definition=OuterRef("pk"), superseded_at__isnull=True)
        .order_by().values("definition").annotate(n=Count("pk")).values("n")
    )
    judgments = (
        Judgment.objects.filter(definition=OuterRef("pk")).order_by().values("definition").annotate(n=Count("pk"))
        .values("n")
    )
    return (
        RelevanceDefinition.objects.filter(query=query)
        .select_related("author", "drafted_by", "based_on")
        .annotate(
            label_count=Coalesce(Subquery(labels, output_field=IntegerField()), 0),
            judgment_count=Coalesce(Subquery(judgments, output_field=IntegerField()), 0),
        )
        .order_by("-version")
    )


def definition_versions(*, query: Query) -> list[DefinitionVersion]:
    """definition_history, each version with its diff against the version it changes: a version saved from an LLM
    draft against that draft (what the reviewer changed), any other against the newest non-draft version before it
    (what the LLM proposes to change in the definition in use, or what a person changed). Without drafts that is
    simply the version before."""
    history = list(definition_history(query=query))
    by_id = {definition.id: definition for definition in history}
    current = next((d.id for d in history if not d.is_draft), None)
    reviewed: dict[int, list[int]] = defaultdict(list)
    for definition in reversed(history):
        if definition.based_on_id is not None:
            reviewed[definition.based_on_id].append(definition.version)
    versions = []
    for index, newer in enumerate(history):
        older = by_id.get(newer.based_on_id) or next((d for d in history[index + 1:] if not d.is_draft), None)
        versions.append(DefinitionVersion(
            definition=newer, diff=definition_diff(older=older, newer=newer),
            compared_to=older.version if older is not None else None,
            is_current=newer.id == current, reviewed_as=tuple(reviewed[newer.id]),
        ))
    return versions


def _pair_current_definition() -> Subquery:
    """The id of the current definition of a judgment's pair's query (null: the query has none)."""
    return Subquery(RelevanceDefinition.objects.in_use().filter(query=OuterRef("pair__query"))
                    .order_by("-version").values("id")[:1])


def stale_judgments(*, project: Project, query: Query | None = None) -> QuerySet[Judgment]:
    """Judgments (any status) of pairs that their judge has not judged under the query's current definition:
    made under an older version, or before the query had one. A query without a definition has none."""
    under_current = Judgment.objects.filter(
        pair=OuterRef("pair"), judge=OuterRef("judge"), definition=OuterRef("current_definition")
    )
    judgments = Judgment.objects.filter(pair__project=project)
    if query is not None:
        judgments = judgments.filter(pair__query=query)
    return (
        judgments.annotate(current_definition=_pair_current_definition())
        .filter(current_definition__isnull=False)
        .filter(~Exists(under_current))
    )


def pairs_judged_under_current_definition(*, judge: Judge) -> QuerySet:
    """Ids of the pairs `judge` has an ok judgment of under their query's current definition (any ok judgment when
    the query has none): what the judge has scored of the project as it stands. A pair whose only judgments are
    stale (stale_judgments) or failed is not among them."""
    return (
        Judgment.objects.filter(judge=judge, status=Judgment.Status.OK)
        .annotate(current_definition=_pair_current_definition())
        .filter(Q(current_definition__isnull=True) | Q(definition_id=F("current_definition")))
        .values_list("pair_id", flat=True).distinct()
    )


def _stale_pairs_by_judge(*, project: Project, query: Query) -> dict[int, set[int]]:
    stale: dict[int, set[int]] = defaultdict(set)
    for judge_id, pair_id in stale_judgments(project=project, query=query).values_list("judge_id", "pair_id"):
        stale[judge_id].add(pair_id)
    return stale


@dataclass(frozen=True)
class StalePairs:
    """One judge's stale pairs of one query: `pair_ids` all of them, `queued_ids` those that a running job
    has queued and no worker has written yet (re-scoring them again would judge them twice)."""

    judge: Judge
    pair_ids: frozenset[int]
    queued_ids: frozenset[int]

    @property
    def to_rescore(self) -> frozenset[int]:
        return self.pair_ids - self.queued_ids


def stale_pairs(*, project: Project, query: Query, judge: Judge | None = None) -> list[StalePairs]:
    """The judges (by name; only `judge` when given) with stale judgments of the query, each with its stale
    pairs and those already queued for re-scoring. At most three queries, however many judges."""
    stale = _stale_pairs_by_judge(project=project, query=query)
    if judge is not None:
        stale = {judge.id: stale[judge.id]} if judge.id in stale else {}
    # A chunk reads its query's current definition when it runs, so whatever job queued it (any scope), its
    # pairs are judged under the current definition once a worker writes it.
    queued = queued_pairs(query=query, judge_ids=list(stale))
    return [
        StalePairs(judge=found, pair_ids=frozenset(stale[found.id]),
                   queued_ids=frozenset(stale[found.id] & queued[found.id]))
        for found in Judge.objects.filter(id__in=list(stale)).order_by("name")
    ]


def stale_counts_for_queries(*, project: Project, queries: Iterable[Query]) -> list[tuple[Query, int]]:
    """Each of the given queries (a page of the project's queries) with its number of stale judgments: one per
    pair and judge whose judgments of the pair are all stale, the sum of what each judge's re-score would
    re-judge. One grouped query for the page."""
    queries = list(queries)
    rows = (
        stale_judgments(project=project)
        .filter(pair__query_id__in=[query.id for query in queries])
        .order_by()
        .values("pair__query_id", "judge_id")
        .annotate(n=Count("pair_id", distinct=True))
        .values_list("pair__query_id", "n")
    )
    counts: dict[int, int] = defaultdict(int)
    for query_id, n in rows:
        counts[query_id] += n
    return [(query, counts[query.id]) for query in queries]

"""Query sets (DisastIR's LVHQ, #35): a query belongs to a set (`human`, `llm`, ...) named by its metadata key
`query_set`, and may name its twin in another set (the query written from the same passage for the same intent) by
the twin's external id under `twin`. The import stores them as it stores any metadata (or sets `query_set` on the
queries that lack one, `import_bundle --query-set`); query generation writes both. One reading of them, here."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from labeling.exceptions import DomainError
from labeling.models import Project, Query
from labeling.names import clean_name

SET_KEY = "query_set"
TWIN_KEY = "twin"
# The metadata key that DisastIR's six search intents are read from, for the per-intent LVHQ.
INTENT_KEY = "intent"
MAX_SET_CHARS = 100


class QuerySetError(DomainError):
    """A query's set or twin that cannot be read (names the query), or a set the project lacks."""


@dataclass(frozen=True)
class QuerySets:
    """The project's query sets: set name -> its queries' external ids (in id order); `twins` maps a query to its
    twins both ways (a human query may be the twin of a query of each of two generated sets); `intents` each query's
    intent (metadata `intent`), where given."""

    sets: dict[str, tuple[str, ...]]
    twins: dict[str, frozenset[str]]
    intents: dict[str, str]

    def of(self, name: str) -> tuple[str, ...]:
        if name not in self.sets:
            known = ", ".join(self.sets) or "none: no query has metadata 'query_set'"
            raise QuerySetError(f"no query set {name!r} (sets: {known})")
        return self.sets[name]

    def twin_pairs(self, a: Sequence[str], b: Sequence[str]) -> list[tuple[str, str]]:
        """The twin pairs (query of a, query of b) among the queries `a` and `b`, in a's order."""
        members = set(b)
        return [(query, twin) for query in a for twin in sorted(self.twins.get(query, ())) if twin in members]


def query_set_name(raw: str) -> str:
    """A query set's name as a person gives it (an import's set, a generation's), kept to the rule of every name
    (labeling.names): NameRefused (a DomainError) saying what is wrong."""
    return clean_name(raw, what="query set name", max_length=MAX_SET_CHARS)


def _text(metadata: object, key: str, external_id: str) -> str | None:
    value = metadata.get(key) if isinstance(metadata, dict) else None
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise QuerySetError(f"query {external_id!r}: metadata {key!r} must be a non-empty text, got {value!r}")
    return value.strip()


def query_sets(project: Project) -> QuerySets:
    """Read every query's set, twin and intent. QuerySetError naming the query when a value is not a text, a twin
    is not a query of the project, is in the same set or in none, or does not name the query back (when it names
    a twin at all)."""
    sets: dict[str, list[str]] = {}
    named: dict[str, str] = {}
    intents: dict[str, str] = {}
    of_query: dict[str, str | None] = {}
    rows = Query.objects.filter(project=project).order_by("id").values_list("external_id", "metadata")
    for external_id, metadata in rows.iterator():
        name = _text(metadata, SET_KEY, external_id)
        of_query[external_id] = name
        if name is not None:
            sets.setdefault(name, []).append(external_id)
        twin = _text(metadata, TWIN_KEY, external_id)
        if twin is not None:
            named[external_id] = twin
        intent = metadata.get(INTENT_KEY) if isinstance(metadata, dict) else None
        if intent is not None:
            intents[external_id] = str(intent)
    for query, twin in named.items():
        where = f"query {query!r}: its twin {twin!r}"
        if twin not in of_query:
            raise QuerySetError(f"{where} is not a query of project {project.slug!r}")
        if of_query[query] is None or of_query[twin] is None:
            raise QuerySetError(f"{where}: both need a query set (metadata {SET_KEY!r})")
        if of_query[query] == of_query[twin]:
            raise QuerySetError(f"{where} is in the same query set, {of_query[query]!r}: a twin is in another set")
        if named.get(twin, query) != query:
            raise QuerySetError(f"{where} names {named[twin]!r} as its twin, not {query!r}")
    twins: dict[str, set[str]] = {}
    for query, twin in named.items():
        twins.setdefault(query, set()).add(twin)
        twins.setdefault(twin, set()).add(query)
    return QuerySets(sets={name: tuple(members) for name, members in sorted(sets.items())},
                     twins={query: frozenset(found) for query, found in twins.items()},
                     intents=intents)

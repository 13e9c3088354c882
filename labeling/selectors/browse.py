"""Reads behind the browse pages: a query's pairs one keyset page at a time (filtered by gold grade, a judge's P,
disagreement and passage text) with their labels, judges' P, stale flags and pool sources, and everything known
about one pair. Blind first is applied here, item by item (labeling.selectors.disclosure)."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Count, Exists, F, Max, Min, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce, Greatest, Lower, StrIndex, Substr

from labeling.exceptions import DomainError
from labeling.gold import LabelView, gold_grade
from labeling.highlight import Segment
from labeling.ids import IdError, parse_id
from labeling.models import Judge, Judgment, Label, Pair, PairSource, Project, Query
from labeling.selectors.definitions import current_definition
from labeling.selectors.disclosure import Disclosure, item_disclosure
from labeling.selectors.export import calibrators
from models_llm.calibration import Calibrator

PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
SNIPPET_CHARS = 280
# With a search, the snippet starts this many characters before the first match, so the match is in it.
SNIPPET_LEAD = 80
MAX_SEARCH_CHARS = 200
NO_GOLD = "none"
DISAGREEMENTS = {
    "experts": "experts disagree: the pair's current expert (annotator) labels are not all the same grade",
    "judge": "judge vs gold: the pair has a gold grade, and the chosen judge's raw P >= the threshold "
             "(relevant) while the gold grade is below the scale's relevant grade, or the other way round",
}


class BrowseError(DomainError):
    """A filter or cursor the browse page cannot use, with what is wrong (a 400 at the edge)."""


@dataclass(frozen=True)
class BrowseFilters:
    """What a query's pairs are narrowed to. `gold`: a grade, NO_GOLD (no gold grade yet) or None (any);
    `p_min`/`p_max` bound `judge`'s raw P; `disagreement`: a key of DISAGREEMENTS or ""; `search`: passage
    title or text contains it, case-insensitively (SQL icontains: a scan of the query's passages)."""

    judge: Judge | None = None
    gold: int | str | None = None
    p_min: float | None = None
    p_max: float | None = None
    disagreement: str = ""
    threshold: float = 0.5
    search: str = ""

    @property
    def blind(self) -> bool:
        """Whether a member who labels blind may use these filters: only a text search tells nothing of gold,
        labels or P (a filter on them would, by which pairs it lists)."""
        return self.gold is None and self.p_min is None and self.p_max is None and not self.disagreement


def _number(params: Mapping[str, str], name: str, *, low: float = 0.0, high: float = 1.0) -> float | None:
    value = (params.get(name) or "").strip()
    if not value:
        return None
    try:
        number = float(value)
    except ValueError:
        number = None
    if number is None or not low <= number <= high:
        raise BrowseError(f"{name} must be a number from {low:g} to {high:g}, got {value[:40]!r}")
    return number


def browse_filters_parse(*, project: Project, params: Mapping[str, str], judges: list[Judge]) -> BrowseFilters:
    """The filters a page's query string asks for. The judge is named (`judge`), defaulting to the project's
    queue judge, else its first judge by name."""
    scale = project.label_scale
    gold = (params.get("gold") or "").strip()
    if gold and gold != NO_GOLD:
        if not gold.isdigit() or int(gold) not in scale.values:
            raise BrowseError(f"gold must be one of the grades {list(scale.values)} or {NO_GOLD!r}, got {gold[:40]!r}")
        gold = int(gold)
    disagreement = (params.get("disagreement") or "").strip()
    if disagreement and disagreement not in DISAGREEMENTS:
        raise BrowseError(f"disagreement must be one of {', '.join(DISAGREEMENTS)}, got {disagreement[:40]!r}")
    name = (params.get("judge") or "").strip()
    by_name = {judge.name: judge for judge in judges}
    if name and name not in by_name:
        raise BrowseError(f"the project has no judge {name[:200]!r}")
    judge = by_name.get(name) or next((j for j in judges if j.id == project.queue_judge_id), None) or (
        judges[0] if judges else None)
    filters = BrowseFilters(
        judge=judge, gold=gold or None, p_min=_number(params, "p_min"), p_max=_number(params, "p_max"),
        disagreement=disagreement, threshold=_number(params, "threshold") or 0.5,
        search=(params.get("q") or "").strip()[:MAX_SEARCH_CHARS],
    )
    if judge is None and (filters.p_min is not None or filters.p_max is not None or disagreement == "judge"):
        raise BrowseError("the project has no judge: there is no P to filter by")
    return filters


def _current_labels() -> QuerySet[Label]:
    return Label.objects.filter(pair=OuterRef("pk"), superseded_at__isnull=True)


def _annotator_spread() -> QuerySet[Label]:
    # One group (the outer pair's), so MIN and MAX of its annotator labels come back as one row.
    return (_current_labels().filter(role=Label.Role.ANNOTATOR).order_by().values("pair")
            .annotate(low=Min("grade"), high=Max("grade")))


def gold_grade_sql() -> Coalesce:
    """labeling.gold.gold_grade as an SQL expression on Pair: the newest adjudicator label, else the reference
    grade, else the annotators' grade when they all agree, else NULL. The same rule, so change both together
    (tests/selectors/test_browse.py checks that they agree)."""
    adjudicated = _current_labels().filter(role=Label.Role.ADJUDICATOR).order_by("-id").values("grade")[:1]
    agreed = _annotator_spread().filter(low=F("high")).values("low")
    return Coalesce(Subquery(adjudicated), F("reference_grade"), Subquery(agreed))


def judge_p_sql(judge: Judge) -> Subquery:
    """The judge's raw P of the outer pair as the exports use it (labeling.selectors.streams.judge_rows): its ok
    judgment under the newest definition version it judged (index judgment_judge_pair)."""
    newest = (Judgment.objects.filter(pair=OuterRef("pk"), judge=judge, status=Judgment.Status.OK)
              .order_by(F("definition__version").desc(nulls_last=True)).values("p_relevant")[:1])
    return Subquery(newest)


def filtered_pairs(*, project: Project, query: Query, filters: BrowseFilters) -> QuerySet[Pair]:
    """The query's pairs that pass `filters`, in pool order (index pair_project_query_order), each with
    `snippet` (the passage text from just before the first search match)."""
    pairs = Pair.objects.filter(project=project, query=query)
    start = Value(1)
    if filters.search:
        pairs = pairs.filter(Q(passage__text__icontains=filters.search) | Q(passage__title__icontains=filters.search))
        start = Greatest(StrIndex(Lower("passage__text"), Lower(Value(filters.search))) - SNIPPET_LEAD, 1)
    # One character more than shown says whether the text goes on past the snippet.
    pairs = pairs.annotate(snippet=Substr("passage__text", start, SNIPPET_CHARS + 1), snippet_start=start)
    # alias(), not annotate(): the page shows gold and P from its own reads, and a subquery in SELECT would run
    # once more per row on top of the filter's.
    if filters.gold is not None or filters.disagreement == "judge":
        pairs = pairs.alias(gold=gold_grade_sql())
    if filters.gold == NO_GOLD:
        pairs = pairs.filter(gold__isnull=True)
    elif filters.gold is not None:
        pairs = pairs.filter(gold=filters.gold)
    if filters.judge is not None and (filters.p_min is not None or filters.p_max is not None
                                      or filters.disagreement == "judge"):
        pairs = pairs.alias(judge_p=judge_p_sql(filters.judge))
        # One BETWEEN for both bounds: each comparison would evaluate the subquery again.
        if filters.p_min is not None and filters.p_max is not None:
            pairs = pairs.filter(judge_p__range=(filters.p_min, filters.p_max))
        elif filters.p_min is not None:
            pairs = pairs.filter(judge_p__gte=filters.p_min)
        elif filters.p_max is not None:
            pairs = pairs.filter(judge_p__lte=filters.p_max)
    if filters.disagreement == "experts":
        pairs = pairs.filter(Exists(_annotator_spread().filter(low__lt=F("high"))))
    elif filters.disagreement == "judge":
        relevant = project.label_scale.relevant_from
        pairs = pairs.filter(
            Q(gold__gte=relevant, judge_p__lt=filters.threshold) | Q(gold__lt=relevant, judge_p__gte=filters.threshold)
        )
    return pairs.select_related("passage").only(
        "id", "query_id", "passage_id", "reference_grade", "reference_source",
        "passage__id", "passage__external_id", "passage__title",
    )


# --- what a member sees of a page of pairs --------------------------------------------------------------------

@dataclass(frozen=True)
class LabelCell:
    annotator: str
    grade: int
    grade_name: str
    role: str
    unsure: bool
    note: str
    mine: bool


@dataclass(frozen=True)
class JudgeCell:
    """A judge's P of a pair (raw and calibrated; None with the status when its newest judgment failed), and
    whether it is stale: the judge has not judged the pair under the query's current definition."""

    judge: str
    p: float | None
    p_calibrated: float | None
    status: str
    definition_version: int | None
    stale: bool


@dataclass(frozen=True)
class BrowseRow:
    pair: Pair
    title: tuple[Segment, ...]
    snippet: tuple[Segment, ...]  # SNIPPET_CHARS of the text from `pair.snippet_start`
    snippet_cut: bool  # the text goes on after the snippet
    disclosure: Disclosure
    labelled: bool  # the viewing member has a current label on it
    gold: int | None  # None: no gold grade, or not disclosed
    labels: tuple[LabelCell, ...]  # the current labels the member may see
    judges: tuple[JudgeCell | None, ...]  # per BrowsePage.judges; None: not judged; () when P is not disclosed
    sources: tuple[PairSource, ...]  # those the member may see


@dataclass(frozen=True)
class BrowsePage:
    rows: tuple[BrowseRow, ...]
    judges: tuple[Judge, ...]
    calibrated: frozenset[str]  # the judges (by name) with a calibrator: the others' calibrated P is their raw P
    size: int
    next_after: int | None  # the cursor of the next page (None: this is the last)
    previous_before: int | None  # the cursor of the page before (None: this is the first)


def snippet_segments(text: str, search: str) -> tuple[Segment, ...]:
    """`text` split into plain pieces and case-insensitive matches of `search`, for the template to mark."""
    if not search:
        return (Segment(text, False),)
    segments, lowered, needle, at = [], text.lower(), search.lower(), 0
    while (found := lowered.find(needle, at)) >= 0:
        segments += [Segment(text[at:found], False), Segment(text[found:found + len(needle)], True)]
        at = found + len(needle)
    segments.append(Segment(text[at:], False))
    return tuple(segment for segment in segments if segment.text)


def _newest_per_judge(rows: list[tuple]) -> dict[tuple[int, int], tuple]:
    """(pair id, judge id) -> the judgment shown: the ok one under the newest version (as judge_p_sql), else the
    newest of any status. Rows: (pair id, judge id, definition id, version, p, status)."""
    chosen: dict[tuple[int, int], tuple] = {}
    for row in rows:
        key, held = (row[0], row[1]), chosen.get((row[0], row[1]))
        rank = (row[5] == Judgment.Status.OK, row[3] or 0)
        if held is None or rank > (held[5] == Judgment.Status.OK, held[3] or 0):
            chosen[key] = row
    return chosen


def _judge_cells(pairs: list[Pair], judges: list[Judge], found: dict[int, Calibrator],
                 current_id: int | None) -> dict[int, tuple]:
    rows = list(Judgment.objects.filter(pair_id__in=[pair.id for pair in pairs]).values_list(
        "pair_id", "judge_id", "definition_id", "definition__version", "p_relevant", "status"))
    under_current = {(row[0], row[1]) for row in rows if current_id is not None and row[2] == current_id}
    chosen = _newest_per_judge(rows)
    cells: dict[tuple[int, int], JudgeCell] = {}
    for judge in judges:
        mine = [row for row in chosen.values() if row[1] == judge.id]
        raw = [row[4] for row in mine if row[4] is not None]
        calibrated = iter(found[judge.id].apply(np.asarray(raw, dtype=float)).tolist()
                          if judge.id in found and raw else raw)
        for row in mine:
            cells[(row[0], judge.id)] = JudgeCell(
                judge=judge.name, p=row[4], p_calibrated=next(calibrated) if row[4] is not None else None,
                status=row[5], definition_version=row[3],
                stale=current_id is not None and (row[0], judge.id) not in under_current,
            )
    return {pair.id: tuple(cells.get((pair.id, judge.id)) for judge in judges) for pair in pairs}


def _label_cells(project: Project, pairs: list[Pair], user: AbstractBaseUser,
                 sees_others: bool) -> dict[int, list[tuple[Label, LabelCell]]]:
    labels = Label.objects.filter(pair_id__in=[pair.id for pair in pairs], superseded_at__isnull=True)
    if not sees_others:
        labels = labels.filter(annotator=user)
    names = grade_names(project)
    by_pair: dict[int, list[tuple[Label, LabelCell]]] = defaultdict(list)
    for label in labels.select_related("annotator").order_by("id"):
        by_pair[label.pair_id].append((label, LabelCell(
            annotator=label.annotator.get_username(), grade=label.grade, grade_name=names.get(label.grade, OFF_SCALE),
            role=label.role, unsure=label.unsure, note=label.note, mine=label.annotator_id == user.pk)))
    return by_pair


def grade_names(project: Project) -> dict[int, str]:
    """Grade value -> name; a label given before the scale changed may hold a grade no longer on it."""
    return {grade.value: grade.name for grade in project.label_scale.grades}


OFF_SCALE = "not on the scale"


def _cursor(params: Mapping[str, str], name: str) -> int | None:
    value = params.get(name)
    if not value:
        return None
    try:
        return parse_id(value, name=name)
    except IdError as exc:
        raise BrowseError(str(exc)) from None


def page_size(params: Mapping[str, str]) -> int:
    value = (params.get("n") or "").strip()
    if not value:
        return PAGE_SIZE
    if not value.isdigit() or not 1 <= int(value) <= MAX_PAGE_SIZE:
        raise BrowseError(f"n (pairs per page) must be a whole number from 1 to {MAX_PAGE_SIZE}, got {value[:40]!r}")
    return int(value)


def browse_page(*, project: Project, query: Query, user: AbstractBaseUser, role: str | None,
                filters: BrowseFilters, judges: list[Judge], params: Mapping[str, str]) -> BrowsePage:
    """One page of the query's filtered pairs after the cursor `after` (or before `before`; `n` per page), in pool
    order, with what `role` may see of each and the P of `judges` (the project's, by name). A fixed number of SQL queries whatever the page size: the page's pairs, then
    their labels, judgments and sources by the page's pair ids."""
    if not filters.blind and not item_disclosure(project=project, role=role, labelled=False).everything:
        raise BrowseError("experts label blind: only the passage text search is open to them")
    size, after, before = page_size(params), _cursor(params, "after"), _cursor(params, "before")
    pairs = filtered_pairs(project=project, query=query, filters=filters)
    if before is not None:
        found = list(pairs.filter(id__lt=before).order_by("-id")[:size + 1])
        more_before, found = len(found) > size, found[:size][::-1]
        more_after = bool(found) and pairs.filter(id__gt=found[-1].id).exists()
    else:
        found = list((pairs.filter(id__gt=after) if after is not None else pairs).order_by("id")[:size + 1])
        more_after, found = len(found) > size, found[:size]
        more_before = after is not None and bool(found) and pairs.filter(id__lt=found[0].id).exists()
    sees_others = item_disclosure(project=project, role=role, labelled=True).others_labels
    labels = _label_cells(project, found, user, sees_others) if found else {}
    # What the member may see of the items they labelled bounds what they see of any item.
    may_see_p = bool(found) and item_disclosure(project=project, role=role, labelled=True).judge_p
    judged, calibrated = {}, {}
    if may_see_p:
        current, calibrated = current_definition(query=query), calibrators(judges)
        judged = _judge_cells(found, judges, calibrated, current.id if current else None)
    sources: dict[int, list[PairSource]] = defaultdict(list)
    for source in PairSource.objects.filter(pair_id__in=[pair.id for pair in found]).order_by("pair_id", "rank", "id"):
        sources[source.pair_id].append(source)
    rows = []
    for pair in found:
        mine = [cell for _label, cell in labels.get(pair.id, []) if cell.mine]
        disclosure = item_disclosure(project=project, role=role, labelled=bool(mine))
        views = [LabelView(grade=label.grade, role=label.role, label_id=label.id) for label, _ in labels.get(pair.id, [])]
        shown = [cell for _label, cell in labels.get(pair.id, []) if cell.mine or disclosure.others_labels]
        rows.append(BrowseRow(
            pair=pair, title=snippet_segments(pair.passage.title, filters.search),
            snippet=snippet_segments(pair.snippet[:SNIPPET_CHARS], filters.search),
            snippet_cut=len(pair.snippet) > SNIPPET_CHARS, disclosure=disclosure,
            labelled=bool(mine), gold=gold_grade(pair.reference_grade, views) if disclosure.reference_grade else None,
            labels=tuple(shown), judges=judged.get(pair.id, ()) if disclosure.judge_p else (),
            sources=disclosure.sources(sources[pair.id]),
        ))
    return BrowsePage(
        rows=tuple(rows), judges=tuple(judges) if may_see_p else (),
        calibrated=frozenset(judge.name for judge in judges if judge.id in calibrated),
        size=size, next_after=found[-1].id if found and more_after else None,
        previous_before=found[0].id if found and more_before else None,
    )


def query_pair_counts(*, project: Project, queries: list[Query]) -> dict[int, tuple[int, int]]:
    """Query id -> (pairs, pairs with a current label) for a page of the project's queries: two grouped reads."""
    ids = [query.id for query in queries]
    pairs = dict(Pair.objects.filter(project=project, query_id__in=ids).order_by().values("query_id")
                 .annotate(n=Count("id")).values_list("query_id", "n"))
    labelled = dict(Label.objects.filter(pair__project=project, pair__query_id__in=ids, superseded_at__isnull=True)
                    .order_by().values("pair__query_id").annotate(n=Count("pair_id", distinct=True))
                    .values_list("pair__query_id", "n"))
    return {query_id: (pairs.get(query_id, 0), labelled.get(query_id, 0)) for query_id in ids}

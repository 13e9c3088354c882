"""Definition reads: a query's current version (the newest that is not an LLM draft) and version history, the
word diff between two versions, and the judgments made under a definition that is no longer current (stale) with
the pairs already queued for re-scoring."""
from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from difflib import SequenceMatcher
from os.path import commonprefix
from typing import Literal

from django.db.models import Count, Exists, IntegerField, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce

from labeling.models import Judge, Judgment, Label, Project, Query, RelevanceDefinition, ScoringChunk, ScoringJob

DIFF_CONTEXT_LINES = 3
# Above this many token comparisons a changed stretch is shown as removed and re-added as a whole: word
# matching costs up to the product of the two lengths, and a page must not hang on a rewritten essay.
MAX_WORD_DIFF_WORK = 4_000_000
# A word or a punctuation mark with the whitespace after it: a changed word shows as a whole word, and
# the tokens join back into the exact text.
_TOKEN = re.compile(r"\w+\s*|[^\w\s]\s*|\s+", re.UNICODE)
_WORD = re.compile(r"\w+", re.UNICODE)
# Cut after a sentence's end and its first whitespace character, and after every line break.
_SENTENCE_END = re.compile(r"(?<=[.!?]\s)|(?<=\n)")

Op = Literal["equal", "insert", "delete"]


@dataclass(frozen=True)
class DiffPiece:
    op: Op
    text: str


@dataclass(frozen=True)
class DiffBlock:
    """A run of changed lines with their context, or (`skipped_lines` > 0, no pieces) unchanged lines left out."""

    pieces: tuple[DiffPiece, ...] = ()
    skipped_lines: int = 0


@dataclass(frozen=True)
class DefinitionDiff:
    blocks: tuple[DiffBlock, ...]
    words_added: int
    words_removed: int


@dataclass(frozen=True)
class DefinitionVersion:
    """A version with its diff against `compared_to` (the version number; None: nothing before it, so all of it
    is new); `is_current` marks the newest non-draft version, and `reviewed_as` the versions saved from a draft."""

    definition: RelevanceDefinition
    diff: DefinitionDiff
    compared_to: int | None = None
    is_current: bool = False
    reviewed_as: tuple[int, ...] = ()


def _word_count(text: str) -> int:
    return len(_WORD.findall(text))


def _opcodes(a: list[str], b: list[str]) -> list[tuple[str, int, int, int, int]]:
    # Elements are compared without the whitespace they end with: "target" before a full stop and "target "
    # before more words are the same word, and the line that ends the text matches one with a line break.
    keys = ([x.rstrip() for x in a], [y.rstrip() for y in b])
    return SequenceMatcher(None, *keys, autojunk=False).get_opcodes()


def _opcode_pieces(
    a: list[str], b: list[str], opcodes: Iterable[tuple[str, int, int, int, int]],
    changed: Callable[[str, str], list[DiffPiece]],
) -> list[DiffPiece]:
    """Pieces for difflib opcodes over token lists `a` and `b`; `changed(old, new)` splits a replacement."""
    pieces: list[DiffPiece] = []
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            # Equal elements may still differ in their trailing whitespace: that difference is the change.
            for old, new in zip(a[i1:i2], b[j1:j2]):
                same = commonprefix([old, new])
                pieces.extend(
                    DiffPiece(op, text) for op, text in (("equal", same), ("delete", old[len(same):]),
                                                         ("insert", new[len(same):])) if text
                )
        elif tag == "replace":
            pieces.extend(changed("".join(a[i1:i2]), "".join(b[j1:j2])))
        elif tag == "delete":
            pieces.append(DiffPiece("delete", "".join(a[i1:i2])))
        else:
            pieces.append(DiffPiece("insert", "".join(b[j1:j2])))
    return pieces


def _word_pieces(old: str, new: str) -> list[DiffPiece]:
    a, b = _TOKEN.findall(old), _TOKEN.findall(new)
    if len(a) * len(b) > MAX_WORD_DIFF_WORK:
        return [DiffPiece("delete", old), DiffPiece("insert", new)]
    return _opcode_pieces(a, b, _opcodes(a, b), lambda o, n: [DiffPiece("delete", o), DiffPiece("insert", n)])


def _sentence_pieces(old: str, new: str) -> list[DiffPiece]:
    """Changed lines matched sentence by sentence, then the changed sentences word by word: a small edit in
    a long paragraph costs the length of its sentence, not of the paragraph."""
    a = [s for s in _SENTENCE_END.split(old) if s]
    b = [s for s in _SENTENCE_END.split(new) if s]
    return _opcode_pieces(a, b, _opcodes(a, b), _word_pieces)


def _merged(pieces: list[DiffPiece]) -> tuple[DiffPiece, ...]:
    """Adjacent pieces of the same kind joined, deletions before insertions within a change, and whitespace
    that both sides of a change end with moved out of it (so "the cat " -> "a dog " underlines no space)."""
    out: list[DiffPiece] = []
    pending = {"delete": "", "insert": ""}

    def flush() -> None:
        deleted, inserted = pending["delete"], pending["insert"]
        tail = ""
        if deleted and inserted:
            shared = len(deleted) - len(deleted.rstrip())
            shared = min(shared, len(inserted) - len(inserted.rstrip()))
            if shared and deleted[-shared:] == inserted[-shared:]:
                tail, deleted, inserted = deleted[-shared:], deleted[:-shared], inserted[:-shared]
        out.extend(DiffPiece(op, text) for op, text in (("delete", deleted), ("insert", inserted)) if text)
        if tail:
            append_equal(tail)
        pending.update(delete="", insert="")

    def append_equal(text: str) -> None:
        if out and out[-1].op == "equal":
            out[-1] = DiffPiece("equal", out[-1].text + text)
        else:
            out.append(DiffPiece("equal", text))

    for piece in pieces:
        if piece.op == "equal":
            flush()
            append_equal(piece.text)
        else:
            pending[piece.op] += piece.text
    flush()
    return tuple(piece for piece in out if piece.text)


def definition_diff(*, older: RelevanceDefinition | None, newer: RelevanceDefinition) -> DefinitionDiff:
    """The changes from `older` (None: the first version, all of it inserted) to `newer`: lines are matched
    first, then changed lines sentence by sentence and word by word. Unchanged lines further than
    DIFF_CONTEXT_LINES from a change are left out and counted. The pieces are plain text for the template
    to escape and wrap."""
    old_lines = older.text.splitlines(keepends=True) if older is not None else []
    new_lines = newer.text.splitlines(keepends=True)
    keys = ([line.rstrip() for line in old_lines], [line.rstrip() for line in new_lines])
    matcher = SequenceMatcher(None, *keys, autojunk=False)
    blocks: list[DiffBlock] = []
    shown_to = 0  # index in old_lines after the last block shown
    for group in matcher.get_grouped_opcodes(DIFF_CONTEXT_LINES):
        if group[0][1] > shown_to:
            blocks.append(DiffBlock(skipped_lines=group[0][1] - shown_to))
        blocks.append(DiffBlock(pieces=_merged(_opcode_pieces(old_lines, new_lines, group, _sentence_pieces))))
        shown_to = group[-1][2]
    if blocks and shown_to < len(old_lines):
        blocks.append(DiffBlock(skipped_lines=len(old_lines) - shown_to))
    pieces = [piece for block in blocks for piece in block.pieces]
    return DefinitionDiff(
        blocks=tuple(blocks),
        words_added=sum(_word_count(p.text) for p in pieces if p.op == "insert"),
        words_removed=sum(_word_count(p.text) for p in pieces if p.op == "delete"),
    )


def current_definition(*, query: Query | int) -> RelevanceDefinition | None:
    """The current definition of the query (or query id): its newest version that is not an LLM draft (None: it
    has none)."""
    return RelevanceDefinition.objects.in_use().filter(query=query).order_by("-version").first()


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


def stale_judgments(*, project: Project, query: Query | None = None) -> QuerySet[Judgment]:
    """Judgments (any status) of pairs that their judge has not judged under the query's current definition:
    made under an older version, or before the query had one. A query without a definition has none."""
    current = (
        RelevanceDefinition.objects.in_use().filter(query=OuterRef("pair__query"))
        .order_by("-version").values("id")[:1]
    )
    under_current = Judgment.objects.filter(
        pair=OuterRef("pair"), judge=OuterRef("judge"), definition=OuterRef("current_definition")
    )
    judgments = Judgment.objects.filter(pair__project=project)
    if query is not None:
        judgments = judgments.filter(pair__query=query)
    return (
        judgments.annotate(current_definition=Subquery(current))
        .filter(current_definition__isnull=False)
        .filter(~Exists(under_current))
    )


def _stale_pairs_by_judge(*, project: Project, query: Query) -> dict[int, set[int]]:
    stale: dict[int, set[int]] = defaultdict(set)
    for judge_id, pair_id in stale_judgments(project=project, query=query).values_list("judge_id", "pair_id"):
        stale[judge_id].add(pair_id)
    return stale


def _queued_pairs_by_judge(*, query: Query, judge_ids: Iterable[int]) -> dict[int, set[int]]:
    # A chunk reads its query's current definition when it runs, so whatever job queued it (any scope), its
    # pairs are judged under the current definition once a worker writes it.
    queued: dict[int, set[int]] = defaultdict(set)
    chunks = ScoringChunk.objects.filter(
        query=query, finished_at__isnull=True, job__status=ScoringJob.Status.RUNNING, job__judge_id__in=judge_ids
    )
    for judge_id, pair_ids in chunks.values_list("job__judge_id", "pair_ids"):
        queued[judge_id].update(pair_ids)
    return queued


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
    queued = _queued_pairs_by_judge(query=query, judge_ids=list(stale))
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

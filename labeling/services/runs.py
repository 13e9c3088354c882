"""Runs: storing a retrieval system's ranked passages per query, read from a TREC run file or handed over by a
built-in retriever, with ranks decided once as trec_eval decides them; and deleting a run whole."""
from __future__ import annotations

import math
import zlib
from array import array
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db import IntegrityError, connection, transaction

from labeling.bundle_reader import Problems, iter_lines
from labeling.decompress import ExpansionLimits
from labeling.exceptions import DomainError
from labeling.models import Passage, Project, Query, Run, RunEntry, RunKind
from labeling.names import NameRefused, clean_name
from labeling.staging import StagingTable
from models_llm.systems.evaluation import trec_order

TREC_COLUMNS = "qid Q0 docid rank score tag"
MAX_NAME_LENGTH = Run._meta.get_field("name").max_length
MAX_SOURCE_LENGTH = Run._meta.get_field("source").max_length
# The entries go straight into the table with the staging writer (COPY on PostgreSQL): the run is new, so
# there is nothing to merge with.
_ENTRY_COLUMNS = [
    ("run_id", "bigint"), ("query_id", "bigint"), ("passage_id", "bigint"), ("rank", "integer"),
    ("score", "double precision"),
]


class RunImportError(DomainError):
    """No run was stored; `problems` lists what is wrong, each as `file:line: what is wrong` (or naming the
    argument or query that is wrong)."""

    def __init__(self, problems: Problems) -> None:
        self.problems = problems
        super().__init__(f"{problems.total} problem(s); no run was stored:\n{problems.summary()}")


@dataclass(frozen=True)
class RunFile:
    """A TREC run file read and checked, not stored yet. Entry i gives query `query_exts[queries[i]]` the passage
    `passage_exts[passages[i]]` with `scores[i]`; `tag` is the file's run tag (one per file)."""

    query_exts: list[str]
    passage_exts: list[str]
    queries: np.ndarray  # int64
    passages: np.ndarray  # int64
    scores: np.ndarray  # float64
    tag: str | None

    @property
    def entries(self) -> int:
        return len(self.scores)


def run_name_clean(name: str) -> str:
    """The run name as it is stored (labeling.names); NameRefused saying what is wrong."""
    return clean_name(name, what="run name", max_length=MAX_NAME_LENGTH)


def run_name_check(*, project: Project, name: str, where: str, problems: Problems) -> str:
    """The run name as it is stored; a problem at `where` if labeling.names refuses it or the project has a run of
    that name."""
    try:
        name = run_name_clean(name)
    except NameRefused as exc:
        problems.add(where, str(exc))
        return name
    if Run.objects.filter(project=project, name=name).exists():
        problems.add(where, f"a run named {name!r} exists")
    return name


def run_file_read(
    path: Path, *, name: str, queries: Container[str], passages: Container[str], problems: Problems,
    expand_limits: ExpansionLimits | None = None,
) -> RunFile:
    """Read the TREC run at `path` (gzip when the name ends in .gz, within `expand_limits` when given) line by line,
    reporting each bad line as `name:line: ...`: a line without the 6 columns, a score that is not a finite number,
    a query or passage id not in `queries` / `passages`, a tag other than the first line's, a document given twice
    for one query. The rank column is ignored, as trec_eval ignores it. Memory holds each distinct id once and 32
    bytes an entry."""
    query_pos: dict[str, int] = {}
    passage_pos: dict[str, int] = {}
    query_exts: list[str] = []
    passage_exts: list[str] = []
    qs, ps, scores, lines = array("q"), array("q"), array("d"), array("q")
    tag, tag_line, other_tags, read = None, 0, set(), 0
    # Locals and try/except instead of attribute lookups and dict.get: this loop runs a million times a file.
    isfinite = math.isfinite
    add_query, add_passage, add_score, add_line = qs.append, ps.append, scores.append, lines.append
    try:
        for number, text in iter_lines(path, name, problems, max_line_bytes=settings.IMPORT_MAX_LINE_BYTES,
                                       expand_limits=expand_limits):
            read += 1
            cells = text.split()
            if len(cells) != 6:
                problems.add(f"{name}:{number}", f"expected 6 columns ({TREC_COLUMNS}), got {len(cells)}")
                continue
            qext, _, pext, _, raw, line_tag = cells
            ok = True
            try:
                score = float(raw)
            except ValueError:
                problems.add(f"{name}:{number}", f"score must be a number, got {raw!r}")
                ok = False
            else:
                if not isfinite(score):
                    problems.add(f"{name}:{number}", f"score must be finite, got {raw!r}")
                    ok = False
            try:
                q = query_pos[qext]
            except KeyError:
                q = query_pos[qext] = len(query_exts) if qext in queries else -1
                if q >= 0:
                    query_exts.append(qext)
            if q < 0:
                problems.add(f"{name}:{number}", f"unknown query {qext!r}")
                ok = False
            try:
                p = passage_pos[pext]
            except KeyError:
                p = passage_pos[pext] = len(passage_exts) if pext in passages else -1
                if p >= 0:
                    passage_exts.append(pext)
            if p < 0:
                problems.add(f"{name}:{number}", f"unknown passage {pext!r}")
                ok = False
            if line_tag != tag:
                if tag is None:
                    tag, tag_line = line_tag, number
                elif line_tag not in other_tags:
                    other_tags.add(line_tag)
                    problems.add(f"{name}:{number}", f"run tag {line_tag!r} differs from {tag!r} (line {tag_line}): "
                                 "one run per file")
            if ok:
                add_query(q)
                add_passage(p)
                add_score(score)
                add_line(number)
    except (OSError, EOFError, zlib.error) as exc:
        # A file that is missing, unreadable, or a gzip file that is truncated or corrupt.
        problems.add(name, f"cannot be read ({exc})")
    if not read:
        problems.add(name, "no ranking lines: the run is empty")
    run_file = RunFile(
        query_exts=query_exts, passage_exts=passage_exts, queries=np.frombuffer(qs, dtype=np.int64),
        passages=np.frombuffer(ps, dtype=np.int64), scores=np.frombuffer(scores, dtype=np.float64), tag=tag,
    )
    _report_duplicates(run_file, np.frombuffer(lines, dtype=np.int64), name, problems)
    return run_file


def _report_duplicates(run_file: RunFile, lines: np.ndarray, name: str, problems: Problems) -> None:
    """A problem at each later line that ranks a passage a query's ranking already holds (trec_eval refuses
    such runs too), in line order."""
    key = run_file.queries * max(len(run_file.passage_exts), 1) + run_file.passages
    order = np.lexsort((lines, key))
    key, by_key = key[order], lines[order]
    if len(key) < 2:
        return
    later = np.flatnonzero(key[1:] == key[:-1]) + 1
    if not len(later):
        return
    starts = np.where(np.r_[True, key[1:] != key[:-1]], np.arange(len(key)), 0)
    first_line = by_key[np.maximum.accumulate(starts)]
    for i in later[np.argsort(by_key[later], kind="stable")].tolist():
        entry = order[i]
        qext = run_file.query_exts[run_file.queries[entry]]
        pext = run_file.passage_exts[run_file.passages[entry]]
        problems.add(f"{name}:{by_key[i]}", f"passage {pext!r} is ranked twice for query {qext!r} "
                     f"(first at line {first_line[i]})")


def trec_ranking(
    queries: np.ndarray, docs: np.ndarray, doc_ids: Sequence[str], scores: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(order, ranks): the entries by query, each query's in the order trec_eval ranks them (trec_order: score
    descending, then document id descending), and each one's rank (1 is the best) in that order. Entry i is
    document `doc_ids[docs[i]]`; a query holds a document once."""
    n = len(queries)
    if not n:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    by_query = np.argsort(queries, kind="stable")
    grouped = queries[by_query]
    starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
    ends = np.r_[starts[1:], n]
    within = np.empty(n, np.int64)
    all_docs, all_scores = docs[by_query].tolist(), scores[by_query].tolist()
    for start, end in zip(starts.tolist(), ends.tolist()):
        names = [doc_ids[doc] for doc in all_docs[start:end]]
        place = {name: k for k, name in enumerate(names, start=start)}
        within[start:end] = [place[name] for name in trec_order(names, all_scores[start:end])]
    return by_query[within], np.arange(1, n + 1) - np.repeat(starts, ends - starts)


def _run_file_ids(
    run_file: RunFile, query_ids: Mapping[str, int], passage_ids: Mapping[str, int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(query ids, passage ids, scores, ranks) of the file's entries, ranked by trec_ranking."""
    order, ranks = trec_ranking(run_file.queries, run_file.passages, run_file.passage_exts, run_file.scores)
    queries = np.fromiter((query_ids[e] for e in run_file.query_exts), np.int64, len(run_file.query_exts))
    passages = np.fromiter((passage_ids[e] for e in run_file.passage_exts), np.int64, len(run_file.passage_exts))
    return queries[run_file.queries[order]], passages[run_file.passages[order]], run_file.scores[order], ranks


def run_file_store(
    *, project: Project, name: str, run_file: RunFile, query_ids: Mapping[str, int], passage_ids: Mapping[str, int],
    description: str = "", source: str = "", user=None,
) -> Run:
    """Store a checked run file as run `name` (kind imported); `query_ids` / `passage_ids` map the project's
    external ids to row ids."""
    queries, passages, scores, ranks = _run_file_ids(run_file, query_ids, passage_ids)
    return _run_write(
        project=project, name=name, kind=RunKind.IMPORTED, description=description, source=source, user=user,
        parameters={"tag": run_file.tag} if run_file.tag is not None else {},
        queries=queries, passages=passages, scores=scores, ranks=ranks,
    )


def run_file_matches(
    *, run: Run, run_file: RunFile, query_ids: Mapping[str, int], passage_ids: Mapping[str, int]
) -> bool:
    """Whether `run` holds exactly the rankings (passages, ranks and scores) the file would store."""
    if run.entries != run_file.entries:
        return False
    queries, passages, scores, ranks = _run_file_ids(run_file, query_ids, passage_ids)
    ours = np.rec.fromarrays([queries, passages, ranks, scores])
    ours = ours[np.lexsort((ours.f2, ours.f0))]
    stored = list(RunEntry.objects.filter(run=run).order_by("query_id", "rank")
                  .values_list("query_id", "passage_id", "rank", "score"))
    stored_rec = np.rec.fromrecords(stored, dtype=ours.dtype) if stored else ours[:0]
    return bool(np.array_equal(ours, stored_rec))


def run_import(
    *, project: Project, path: Path, name: str, description: str = "", user=None, source: str | None = None,
    expand_limits: ExpansionLimits | None = None,
) -> Run:
    """Store the TREC run file at `path` (`qid Q0 docid rank score tag`, gzip when the name ends in .gz) as run
    `name` of the project. Every line is checked first (see run_file_read; ids are the project's external
    ids; an upload's gzip within `expand_limits`) and any problem, or a name already taken, raises RunImportError
    with nothing stored. The run's tag is kept in its parameters; `source` defaults to the file's name."""
    path = Path(path)
    problems = Problems()
    name = run_name_check(project=project, name=name, where=path.name, problems=problems)
    query_ids = dict(Query.objects.filter(project=project).values_list("external_id", "id"))
    passage_ids = dict(Passage.objects.filter(project=project).values_list("external_id", "id")
                       .iterator(chunk_size=50_000))
    run_file = run_file_read(path, name=path.name, queries=query_ids, passages=passage_ids, problems=problems,
                             expand_limits=expand_limits)
    if problems:
        raise RunImportError(problems)
    return run_file_store(
        project=project, name=name, run_file=run_file, query_ids=query_ids, passage_ids=passage_ids,
        description=description, source=(path.name if source is None else source)[:MAX_SOURCE_LENGTH], user=user,
    )


def run_store(
    *, project: Project, name: str, kind: str, rankings: Iterable[tuple[int, Sequence[int], Sequence[float]]],
    parameters: dict, description: str = "", source: str = "", user=None,
) -> Run:
    """Store a built-in retriever's output as run `name`: (query id, passage ids, scores) per query, row ids of
    the project. Ranks follow the same rule as imported runs (score descending, ties by passage external id
    descending). A query given twice, a passage twice in one ranking, an id of another project or a score that
    is not finite raises RunImportError naming the query, with nothing stored."""
    problems = Problems()
    name = run_name_check(project=project, name=name, where="name", problems=problems)
    if kind not in RunKind.values:
        problems.add("kind", f"must be one of {', '.join(RunKind.values)}, got {kind!r}")
    known_queries = set(Query.objects.filter(project=project).values_list("id", flat=True))
    external = dict(Passage.objects.filter(project=project).values_list("id", "external_id").iterator(chunk_size=50_000))
    query_parts, passage_parts, score_parts, seen = [], [], [], set()
    for query_id, passage_ids, scores in rankings:
        where = f"query {query_id}"
        ids, values = np.asarray(passage_ids, dtype=np.int64), np.asarray(scores, dtype=np.float64)
        if query_id not in known_queries:
            problems.add(where, f"not a query of project {project.slug!r}")
        elif query_id in seen:
            problems.add(where, "ranked twice")
        elif ids.shape != values.shape or ids.ndim != 1:
            problems.add(where, f"{ids.size} passage ids but {values.size} scores")
        elif not np.isfinite(values).all():
            problems.add(where, "a score that is not finite")
        elif len(np.unique(ids)) != len(ids):
            problems.add(where, "a passage ranked twice")
        elif unknown := [i for i in ids.tolist() if i not in external]:
            problems.add(where, f"passages {unknown[:5]} are not in project {project.slug!r}")
        else:
            seen.add(query_id)
            query_parts.append(np.full(len(ids), query_id, dtype=np.int64))
            passage_parts.append(ids)
            score_parts.append(values)
    if problems:
        raise RunImportError(problems)
    queries = np.concatenate(query_parts) if query_parts else np.zeros(0, np.int64)
    passages = np.concatenate(passage_parts) if passage_parts else np.zeros(0, np.int64)
    scores = np.concatenate(score_parts) if score_parts else np.zeros(0, np.float64)
    distinct = np.unique(passages)
    order, ranks = trec_ranking(queries, np.searchsorted(distinct, passages),
                                [external[i] for i in distinct.tolist()], scores)
    return _run_write(
        project=project, name=name, kind=kind, description=description, source=source, user=user,
        parameters=parameters, queries=queries[order], passages=passages[order], scores=scores[order], ranks=ranks,
    )


def _run_write(
    *, project: Project, name: str, kind: str, description: str, source: str, user, parameters: dict,
    queries: np.ndarray, passages: np.ndarray, scores: np.ndarray, ranks: np.ndarray,
) -> Run:
    """The Run row and all its entries (ranked by trec_ranking) in one transaction."""
    with transaction.atomic():
        try:
            with transaction.atomic():
                run = Run.objects.create(
                    project=project, name=name, kind=kind, description=description, parameters=parameters,
                    source=source, created_by=user, queries=len(np.unique(queries)), entries=len(queries),
                    depth=int(ranks.max()) if len(ranks) else 0,
                )
        except IntegrityError:
            # Another import took the name since it was checked.
            problems = Problems()
            problems.add(source or "name", f"a run named {name!r} exists")
            raise RunImportError(problems) from None
        table = StagingTable(connection, RunEntry._meta.db_table, _ENTRY_COLUMNS)
        with table.writer() as write:
            for row in zip(repeat(run.id), queries.tolist(), passages.tolist(), ranks.tolist(), scores.tolist()):
                write(row)
    return run


@transaction.atomic
def run_delete(*, run: Run) -> None:
    """Delete the run and its entries. The pool keeps the pairs it brought and their PairSource rows: they
    record which system found a pair, whether or not its run is still stored."""
    run.delete()

"""Reading a bundle into staging tables: the file layout (BEIR-style bundle or DIRAS input), the checks
that need ids from several files, and the order in which pairs enter the pool. Run files are checked here too
and held in memory until the merge has stored the ids they name."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from django.db.backends.base.base import BaseDatabaseWrapper

from labeling.bundle_reader import (
    Problems,
    clean_guess,
    clean_id,
    clean_int,
    clean_metadata,
    clean_probability,
    clean_text,
    iter_jsonl,
    iter_tsv,
)
from labeling.decompress import ExpansionLimits
from labeling.exceptions import DomainError
from labeling.models import Label
from labeling.names import NameRefused, clean_name
from labeling.scale import LabelScale, ScaleError
from labeling.selectors.query_sets import SET_KEY
from labeling.services.judges import NAME_MAX_LENGTH as JUDGE_NAME_MAX_LENGTH
from labeling.services.runs import RunFile, run_file_read, run_name_clean
from labeling.staging import StagingTable

# A pair's key is query index * PAIR_KEY_BASE + passage index: exact, and far smaller than a tuple; a
# (pair, name) key is pair key * PAIR_KEY_BASE + name index the same way.
PAIR_KEY_BASE = 1 << 32
MAX_USERNAME_LENGTH = 150
ROLES = {choice.value for choice in Label.Role}


class BundleLayoutError(DomainError):
    """The folder is not a bundle (no queries file, missing corpus...)."""


@dataclass(frozen=True)
class BundleLayout:
    root: Path
    diras: bool
    project_json: Path | None
    queries: Path
    corpus: Path
    pairs: Path | None
    qrels: tuple[Path, ...]
    labels: Path | None
    judgments: Path | None
    runs: tuple[Path, ...] = ()

    @classmethod
    def locate(cls, root: Path) -> BundleLayout:
        if not root.is_dir():
            raise BundleLayoutError(f"{root}: not a folder")

        def optional(name: str) -> Path | None:
            candidate = root / name
            return candidate if candidate.is_file() else None

        diras = not (root / "queries.jsonl").is_file() and (root / "question.jsonl").is_file()
        queries = root / ("question.jsonl" if diras else "queries.jsonl")
        corpus = root / ("document.jsonl" if diras else "corpus.jsonl")
        if not queries.is_file():
            raise BundleLayoutError(f"{root}: no queries.jsonl (bundle) or question.jsonl (DIRAS input)")
        if not corpus.is_file():
            raise BundleLayoutError(f"{root}: {queries.name} is there but {corpus.name} is missing")
        qrels_dir = root / "qrels"
        qrels = tuple(sorted(qrels_dir.glob("*.tsv"))) if qrels_dir.is_dir() else ()
        runs_dir = root / "runs"
        runs = tuple(sorted(
            path for pattern in ("*.trec", "*.trec.gz") for path in runs_dir.glob(pattern) if path.is_file()
        )) if runs_dir.is_dir() else ()
        return cls(
            root=root,
            diras=diras,
            project_json=optional("project.json"),
            queries=queries,
            corpus=corpus,
            pairs=optional("pairs.tsv"),
            qrels=qrels,
            labels=optional("labels.jsonl"),
            judgments=optional("judgments.jsonl"),
            runs=runs,
        )

    def name(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()


def staging_tables(connection: BaseDatabaseWrapper) -> dict[str, StagingTable]:
    text, seq = "text", "bigint"
    specs = {
        "query": [("seq", seq), ("src", text), ("ext", text), ("text", text), ("definition", text), ("metadata", text)],
        "passage": [("seq", seq), ("src", text), ("ext", text), ("title", text), ("text", text), ("metadata", text)],
        "source": [
            ("seq", seq), ("src", text), ("qext", text), ("pext", text), ("pool_seq", seq), ("system", text),
            ("rnk", "integer"),
        ],
        "qrel": [
            ("seq", seq), ("src", text), ("qext", text), ("pext", text), ("pool_seq", seq), ("grade", "integer"),
            ("source", text),
        ],
        "label": [
            ("seq", seq), ("src", text), ("qext", text), ("pext", text), ("pool_seq", seq), ("annotator", text),
            ("grade", "integer"),
            ("role", text), ("note", text),
        ],
        "judgment": [
            ("seq", seq), ("src", text), ("qext", text), ("pext", text), ("pool_seq", seq), ("judge", text),
            ("p", "double precision"),
            ("guess", "integer"), ("confidence", "double precision"),
        ],
    }
    return {key: StagingTable(connection, f"import_stage_{key}", columns) for key, columns in specs.items()}


def run_name_of(path: Path) -> str:
    """A bundle's run is named after its file: runs/bm25.trec and runs/bm25.trec.gz are run 'bm25'."""
    return path.name.removesuffix(".gz").removesuffix(".trec")


@dataclass(frozen=True)
class StagedRun:
    name: str
    where: str  # the file, as problems name it
    run_file: RunFile


class BundleStager:
    """Validates a bundle's files line by line and streams the good rows into staging tables.

    `known_queries` and `known_passages` are the external ids already stored in the project: a file may
    refer to them as well as to the bundle's own ids. A .gz file is read within `expand_limits` (an upload's)."""

    def __init__(
        self,
        *,
        layout: BundleLayout,
        tables: dict[str, StagingTable],
        scale: LabelScale,
        known_queries: list[str],
        known_passages: list[str],
        max_line_bytes: int,
        problems: Problems,
        expand_limits: ExpansionLimits | None = None,
        query_set: str | None = None,
    ) -> None:
        self.layout = layout
        self.query_set = query_set.strip() if query_set else None
        self.tables = tables
        self.scale = scale
        self.max_line_bytes, self.expand_limits = max_line_bytes, expand_limits
        self.problems = problems
        self.query_index = {ext: i for i, ext in enumerate(known_queries)}
        self.passage_index = {ext: i for i, ext in enumerate(known_passages)}
        self.pool: set[int] = set()
        self.pool_seq = 0
        self.qrel_keys: set[int] = set()
        self.annotators: set[str] = set()
        self.judges: set[str] = set()
        self._judge_names: dict[str, str] = {}  # as given -> as stored
        self.runs: list[StagedRun] = []

    def stage_all(self) -> None:
        self.stage_queries()
        self.stage_passages()
        # Each staged row carries pool_seq when it is the first mention of its pair: the pool is those rows
        # in pool_seq order (one open COPY at a time, no table of a million pair mentions).
        if self.layout.pairs is not None:
            self.stage_pairs()
        for path in self.layout.qrels:
            self.stage_qrels(path)
        if self.layout.labels is not None:
            self.stage_labels()
        if self.layout.judgments is not None:
            self.stage_judgments()
        self.stage_runs()

    def _jsonl(self, path: Path):
        return iter_jsonl(path, self.layout.name(path), self.problems, max_line_bytes=self.max_line_bytes,
                          expand_limits=self.expand_limits)

    def _tsv(self, path: Path, required: tuple[str, ...], optional: tuple[str, ...] = ()):
        return iter_tsv(
            path, self.layout.name(path), self.problems, required=required, optional=optional,
            max_line_bytes=self.max_line_bytes, expand_limits=self.expand_limits,
        )

    def stage_queries(self) -> None:
        problems, seen = self.problems, {}
        with self.tables["query"].writer() as write:
            for number, (where, record) in enumerate(self._jsonl(self.layout.queries), start=1):
                if self.layout.diras:
                    ext = f"q{number}"
                    text = clean_text(record.get("question"), "question", where, problems, required=True)
                    definition = clean_text(record.get("explanation"), "explanation", where, problems, required=False)
                    metadata: dict | None = {}
                else:
                    ext = clean_id(record.get("_id"), "_id", where, problems)
                    text = clean_text(record.get("text"), "text", where, problems, required=True)
                    definition = clean_text(record.get("definition"), "definition", where, problems, required=False)
                    metadata = clean_metadata(record.get("metadata"), where, problems)
                if ext is not None and ext in seen:
                    problems.add(where, f"duplicate query id {ext!r} (first at line {seen[ext]})")
                    continue
                if ext is None or text is None or definition is None or metadata is None:
                    continue
                if self.query_set is not None:
                    metadata.setdefault(SET_KEY, self.query_set)
                seen[ext] = where.rsplit(":", 1)[1]
                self.query_index.setdefault(ext, len(self.query_index))
                write((number, where, ext, text, definition.strip() or None, json.dumps(metadata)))

    def stage_passages(self) -> None:
        problems, seen = self.problems, {}
        with self.tables["passage"].writer() as write:
            for number, (where, record) in enumerate(self._jsonl(self.layout.corpus), start=1):
                if self.layout.diras:
                    ext = f"d{number}"
                    text = clean_text(record.get("document"), "document", where, problems, required=True)
                    title = clean_text(record.get("report"), "report", where, problems, required=False)
                    metadata: dict | None = {"report": title} if title else {}
                else:
                    ext = clean_id(record.get("_id"), "_id", where, problems)
                    text = clean_text(record.get("text"), "text", where, problems, required=True)
                    title = clean_text(record.get("title"), "title", where, problems, required=False)
                    metadata = clean_metadata(record.get("metadata"), where, problems)
                if ext is not None and ext in seen:
                    problems.add(where, f"duplicate passage id {ext!r} (first at line {seen[ext]})")
                    continue
                if ext is None or text is None or title is None or metadata is None:
                    continue
                seen[ext] = where.rsplit(":", 1)[1]
                self.passage_index.setdefault(ext, len(self.passage_index))
                write((number, where, ext, title, text, json.dumps(metadata)))

    def _pair_key(self, where: str, qext: str | None, pext: str | None) -> int | None:
        """The pair's key, or None (with a problem reported) when an id is unknown."""
        if qext is None or pext is None:
            return None
        query = self.query_index.get(qext)
        passage = self.passage_index.get(pext)
        if query is None:
            self.problems.add(where, f"unknown query id {qext!r}")
        if passage is None:
            self.problems.add(where, f"unknown passage id {pext!r}")
        if query is None or passage is None:
            return None
        return query * PAIR_KEY_BASE + passage

    def _pool_seq(self, key: int) -> int | None:
        """The pair's place in the pool if this is its first mention, else None."""
        if key in self.pool:
            return None
        self.pool.add(key)
        self.pool_seq += 1
        return self.pool_seq

    def stage_pairs(self) -> None:
        problems, systems, seen = self.problems, {}, set()
        with self.tables["source"].writer() as write:
            rows = self._tsv(self.layout.pairs, ("query-id", "corpus-id"), ("system", "rank"))
            for number, (where, row) in enumerate(rows, start=1):
                qext = clean_id(row["query-id"], "query-id", where, problems)
                pext = clean_id(row["corpus-id"], "corpus-id", where, problems)
                key = self._pair_key(where, qext, pext)
                system = row.get("system", "")
                rank = None
                if row.get("rank"):
                    rank = clean_int(row["rank"], "rank", where, problems, minimum=1)
                    if rank is None:
                        continue
                if key is None:
                    continue
                if len(system) > 200:
                    problems.add(where, "system name longer than 200 characters")
                    continue
                if rank is not None and not system:
                    problems.add(where, "a rank needs a system name")
                    continue
                source_key = key * PAIR_KEY_BASE + systems.setdefault(system, len(systems))
                if source_key in seen:
                    by = f" for system {system!r}" if system else ""
                    problems.add(where, f"duplicate pair ({qext!r}, {pext!r}){by}")
                    continue
                seen.add(source_key)
                write((number, where, qext, pext, self._pool_seq(key), system, rank))

    def stage_runs(self) -> None:
        """Check each run file against the bundle's and the project's ids; the import stores them after the merge."""
        named: dict[str, str] = {}
        for path in self.layout.runs:
            where = self.layout.name(path)
            try:
                name = run_name_clean(run_name_of(path))
            except NameRefused as exc:
                self.problems.add(where, f"{exc} (a run is named after its file, without .trec)")
                continue
            if name in named:
                self.problems.add(where, f"a second run named {name!r} (after {named[name]})")
                continue
            named[name] = where
            run_file = run_file_read(
                path, name=where, queries=self.query_index, passages=self.passage_index, problems=self.problems,
                expand_limits=self.expand_limits,
            )
            self.runs.append(StagedRun(name=name, where=where, run_file=run_file))

    def stage_qrels(self, path: Path) -> None:
        problems, seen = self.problems, self.qrel_keys
        source = self.layout.name(path)
        with self.tables["qrel"].writer() as write:
            for number, (where, row) in enumerate(self._tsv(path, ("query-id", "corpus-id", "score")), start=1):
                qext = clean_id(row["query-id"], "query-id", where, problems)
                pext = clean_id(row["corpus-id"], "corpus-id", where, problems)
                grade = self._grade(row["score"], where)
                key = self._pair_key(where, qext, pext)
                if key is None or grade is None:
                    continue
                if key in seen:
                    problems.add(where, f"duplicate reference grade for ({qext!r}, {pext!r})")
                    continue
                seen.add(key)
                write((number, where, qext, pext, self._pool_seq(key), grade, source))

    def _grade(self, raw: object, where: str) -> int | None:
        try:
            return self.scale.parse(raw)
        except ScaleError as exc:
            self.problems.add(where, str(exc))
            return None

    def stage_labels(self) -> None:
        problems, seen, names = self.problems, set(), {}
        with self.tables["label"].writer() as write:
            for number, (where, record) in enumerate(self._jsonl(self.layout.labels), start=1):
                qext = clean_id(record.get("query_id"), "query_id", where, problems)
                pext = clean_id(record.get("doc_id"), "doc_id", where, problems)
                annotator = clean_id(record.get("annotator"), "annotator", where, problems)
                grade = None
                if "label" not in record:
                    problems.add(where, "missing field 'label'")
                else:
                    grade = self._grade(record["label"], where)
                role = record.get("role", Label.Role.ANNOTATOR.value)
                if role not in ROLES:
                    problems.add(where, f"role must be one of {sorted(ROLES)}, got {role!r}")
                    continue
                note = clean_text(record.get("note"), "note", where, problems, required=False)
                key = self._pair_key(where, qext, pext)
                if annotator is not None and len(annotator) > MAX_USERNAME_LENGTH:
                    problems.add(where, f"annotator name longer than {MAX_USERNAME_LENGTH} characters")
                    continue
                if key is None or annotator is None or grade is None or note is None:
                    continue
                label_key = key * PAIR_KEY_BASE + names.setdefault(annotator, len(names))
                if label_key in seen:
                    problems.add(where, f"duplicate label by {annotator!r} for ({qext!r}, {pext!r})")
                    continue
                seen.add(label_key)
                self.annotators.add(annotator)
                write((number, where, qext, pext, self._pool_seq(key), annotator, grade, role, note))

    def stage_judgments(self) -> None:
        problems, seen, names = self.problems, set(), {}
        with self.tables["judgment"].writer() as write:
            for number, (where, record) in enumerate(self._jsonl(self.layout.judgments), start=1):
                qext = clean_id(record.get("query_id"), "query_id", where, problems)
                pext = clean_id(record.get("doc_id"), "doc_id", where, problems)
                judge = clean_id(record.get("judge"), "judge", where, problems)
                if judge is not None:
                    judge = self._judge_name(judge, where)
                p, guess, confidence, ok = self._judgment_values(record, where)
                key = self._pair_key(where, qext, pext)
                if key is None or judge is None or not ok:
                    continue
                judgment_key = key * PAIR_KEY_BASE + names.setdefault(judge, len(names))
                if judgment_key in seen:
                    problems.add(where, f"duplicate judgment by {judge!r} for ({qext!r}, {pext!r})")
                    continue
                seen.add(judgment_key)
                self.judges.add(judge)
                guess_flag = None if guess is None else int(guess)
                write((number, where, qext, pext, self._pool_seq(key), judge, p, guess_flag, confidence))

    def _judge_name(self, given: str, where: str) -> str | None:
        """The judge name a judgment line gives, as the judge is stored (labeling.names); None, with the problem
        at `where`, when it is refused. Each name is checked once: a file repeats a few names on every line."""
        name = self._judge_names.get(given)
        if name is None:
            try:
                name = self._judge_names[given] = clean_name(given, what="judge name", max_length=JUDGE_NAME_MAX_LENGTH)
            except NameRefused as exc:
                self.problems.add(where, str(exc))
        return name

    def _judgment_values(self, record: dict, where: str) -> tuple[float | None, bool | None, float | None, bool]:
        """P(relevant), guess and confidence of a judgment line; P is p_relevant, else the confidence of a
        yes guess, else 1 - the confidence of a no guess."""
        problems = self.problems
        has_p, has_guess, has_conf = "p_relevant" in record, "guess" in record, "confidence" in record
        if not has_p and not (has_guess and has_conf):
            if has_guess or has_conf:
                missing = "confidence" if has_guess else "guess"
                problems.add(where, f"missing field {missing!r} (guess and confidence go together)")
            else:
                problems.add(where, "missing field 'p_relevant' (or 'guess' and 'confidence')")
            return None, None, None, False
        p = guess = confidence = None
        ok = True
        if has_guess:
            guess = clean_guess(record["guess"], where, problems)
            ok = ok and guess is not None
        if has_conf:
            confidence = clean_probability(record["confidence"], "confidence", where, problems)
            ok = ok and confidence is not None
        if has_p:
            p = clean_probability(record["p_relevant"], "p_relevant", where, problems)
            ok = ok and p is not None
        elif ok:
            p = confidence if guess else 1.0 - confidence
        return p, guess, confidence, ok

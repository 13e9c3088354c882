"""What the qrels exports write: the pool in pool order with grades from human gold, one judge (its
calibrated P when it has a calibrator), or both combined; and the JSONL record of everything known per pair.
The lines of each format are made here once, for export_qrels, the project page's download and the API alike.

Each table is read once through a server-side cursor ordered by pair id and merged in Python, so memory
stays flat however large the project is."""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date
from enum import StrEnum
from itertools import islice
from typing import Any

import numpy as np
import orjson
from django.db.models import F
from django.utils.text import slugify

from labeling.exceptions import DomainError, NotFound
from labeling.llm_adapter import judge_relevance_rule
from labeling.models import Judge, JudgeCalibration, Judgment, PairSource, Project
from labeling.selectors.disclosure import sees_reports
from labeling.selectors.projects import Need
from labeling.selectors.streams import (
    CHUNK,
    GoldPair,
    Grouped,
    JudgeRow,
    definition_version_numbers,
    external_ids,
    gold_pairs,
    judge_rows,
    pair_stream,
)
from models_llm.calibration import Calibrator
from models_llm.relevance_rule import POINTWISE, RelevanceRule, threshold_rule

BATCH = 5_000


class ExportError(DomainError):
    """The export cannot run as asked (unknown judge, threshold out of range...)."""


class ExportSourceNotFound(ExportError, NotFound):
    """The source names a judge the project does not have (404 in the API)."""


@dataclass(frozen=True)
class ExportSource:
    """Where exported grades come from: human gold grades (`judge` None); one judge's P under a relevance rule;
    or, `combined`, the human gold where there is one and the judge elsewhere. A judge's grade is the scale's
    `relevant_from` grade when its P is relevant under `rule` (the judge's own rule unless a threshold was
    given: judge_relevance_rule), else its lowest grade. `calibrator` is the judge's calibrator in use; the rule
    says whether the grades read the calibrated P (`grading_calibrator`)."""

    judge: Judge | None = None
    rule: RelevanceRule = POINTWISE
    combined: bool = False
    calibrator: Calibrator | None = None

    @property
    def judge_label(self) -> str:
        return f"judge:{self.judge.name}" if self.judge else "human"

    @property
    def threshold(self) -> float:
        return self.rule.threshold

    @property
    def grading_calibrator(self) -> Calibrator | None:
        """The calibrator the grades read P through: None when the rule compares the judge's own P."""
        return self.calibrator if self.rule.calibrated else None


@dataclass(frozen=True)
class PairRow:
    """One exported pair: ids, the grade (None: no grade from the source) and where it came from."""

    query_id: str
    doc_id: str
    grade: int | None
    grade_source: str | None


def calibrators(judges: Iterable[Judge]) -> dict[int, Calibrator]:
    """Judge id -> its calibrator in use (its newest calibration), for judges that have one, in one read and
    without loading what each was fitted on."""
    found: dict[int, Calibrator] = {}
    rows = (JudgeCalibration.objects.filter(judge__in=list(judges)).order_by("judge_id", "-created_at", "-id")
            .values_list("judge_id", "method", "params"))
    for judge_id, method, params in rows:
        found.setdefault(judge_id, Calibrator.from_json({"method": method, "params": params}))
    return found


def judge_calibrator(judge: Judge) -> Calibrator | None:
    """The judge's calibrator in use: its newest calibration, if any."""
    return calibrators([judge]).get(judge.id)


def export_source_parse(*, project: Project, source: str, threshold: float | None) -> ExportSource:
    """Parse `human`, `judge:NAME` or `combined:NAME` (and the judge threshold) for `project`."""
    if source == "human":
        if threshold is not None:
            raise ExportError("--threshold applies to a judge source (judge:NAME or combined:NAME), not to human labels")
        return ExportSource()
    kind, _, name = source.partition(":")
    if kind not in ("judge", "combined") or not name:
        raise ExportError(f"source must be 'human', 'judge:NAME' or 'combined:NAME', got {source!r}")
    judge = Judge.objects.filter(project=project, name=name).first()
    if judge is None:
        names = ", ".join(Judge.objects.filter(project=project).values_list("name", flat=True)) or "none"
        raise ExportSourceNotFound(f"project {project.slug!r} has no judge {name!r} (its judges: {names})")
    if threshold is None:
        rule = judge_relevance_rule(judge)
    elif not 0.0 <= threshold <= 1.0:
        raise ExportError(f"--threshold must be within [0, 1], got {threshold}")
    else:
        rule = threshold_rule(threshold)
    return ExportSource(judge=judge, rule=rule, combined=kind == "combined", calibrator=judge_calibrator(judge))


def _calibrated(rows: list[JudgeRow], calibrator: Calibrator | None) -> list[float]:
    raw = [row.p for row in rows]
    return raw if calibrator is None else calibrator.apply(np.asarray(raw, dtype=float)).tolist()


def judge_probabilities(source: ExportSource, *, grading: bool = True) -> Iterator[tuple[int, float]]:
    """(pair id, P) of the source judge, in pair order, calibrated in batches: the P its grades read (`grading`:
    raw when the rule compares the judge's own P), else the calibrated P where it has a calibrator."""
    calibrator = source.grading_calibrator if grading else source.calibrator
    rows = judge_rows(source.judge, versions=definition_version_numbers(source.judge.project))
    while batch := list(islice(rows, BATCH)):
        yield from zip((row.pair_id for row in batch), _calibrated(batch, calibrator))


def _judge_grade(p: float, source: ExportSource, low: int, relevant: int) -> int:
    return relevant if source.rule.relevant(p) else low


def qrels_rows(*, project: Project, source: ExportSource) -> Iterator[PairRow]:
    """The pairs that have a grade from `source`, in pool order."""
    queries, passages = external_ids(project)
    scale = project.label_scale
    low, relevant = scale.values[0], scale.relevant_from
    if source.judge is None:
        for pair in gold_pairs(project):
            if pair.gold is not None:
                yield PairRow(queries[pair.query_id], passages[pair.passage_id], pair.gold, "human")
        return
    judged = Grouped(judge_probabilities(source))
    if not source.combined:
        for pair_id, query_id, passage_id, _reference in pair_stream(project):
            rows = judged.take(pair_id)
            if rows:
                grade = _judge_grade(rows[0][1], source, low, relevant)
                yield PairRow(queries[query_id], passages[passage_id], grade, source.judge_label)
        return
    for pair in gold_pairs(project, graded_only=False):
        rows = judged.take(pair.pair_id)
        if pair.gold is not None:
            yield PairRow(queries[pair.query_id], passages[pair.passage_id], pair.gold, "human")
        elif rows:
            grade = _judge_grade(rows[0][1], source, low, relevant)
            yield PairRow(queries[pair.query_id], passages[pair.passage_id], grade, source.judge_label)


def _judgments(project: Project) -> Iterator[tuple]:
    return (
        Judgment.objects.filter(pair__project=project)
        .order_by("pair_id", "judge__name", F("definition__version").desc(nulls_last=True))
        .values_list(
            "pair_id", "judge_id", "judge__name", "definition__version", "p_relevant", "guess", "confidence",
            "status", "error",
        )
        .iterator(chunk_size=CHUNK)
    )


def _sources(project: Project) -> Iterator[tuple]:
    return (
        PairSource.objects.filter(pair__project=project)
        .order_by("pair_id", "id")
        .values_list("pair_id", "system", "rank")
        .iterator(chunk_size=CHUNK)
    )


def _record(pair: GoldPair, judgment_rows: list[tuple], source_rows: list[tuple], queries, passages) -> dict:
    return {
        "query_id": queries[pair.query_id],
        "doc_id": passages[pair.passage_id],
        "grade": None,
        "grade_source": None,
        "gold_grade": pair.gold,
        "reference_grade": pair.reference_grade,
        "sources": [{"system": system, "rank": rank} for _, system, rank in source_rows],
        "labels": [
            {"annotator": name, "grade": grade, "role": role, "definition_version": version, "note": note}
            for _, _, name, grade, role, version, note in pair.labels
        ],
        "judgments": [
            {
                "judge": name,
                "definition_version": version,
                "p_relevant": p,
                "guess": None if guess is None else ("yes" if guess else "no"),
                "confidence": confidence,
                "status": status,
                **({"error": error} if error else {}),
            }
            for _, _, name, version, p, guess, confidence, status, error in judgment_rows
        ],
    }


def pair_records(*, project: Project, source: ExportSource) -> Iterator[dict[str, Any]]:
    """Every pair of the pool with everything known about it, in pool order (the JSONL export).

    Each judgment carries its raw `p_relevant` and, for a judge with a calibrator, `p_calibrated`; `grade`
    and `grade_source` are what a qrels export from `source` would write for the pair."""
    queries, passages = external_ids(project)
    in_use = calibrators(Judge.objects.filter(project=project))
    scale = project.label_scale
    low, relevant = scale.values[0], scale.relevant_from
    judgments = Grouped(_judgments(project))
    sources = Grouped(_sources(project))
    pairs = gold_pairs(project, graded_only=False)
    while batch := list(islice(pairs, BATCH)):
        records, calibrate = [], {judge_id: ([], []) for judge_id in in_use}
        for pair in batch:
            judgment_rows = judgments.take(pair.pair_id)
            record = _record(pair, judgment_rows, sources.take(pair.pair_id), queries, passages)
            for row, judgment in zip(judgment_rows, record["judgments"]):
                if row[1] in calibrate and judgment["p_relevant"] is not None:
                    calibrate[row[1]][0].append(judgment)
                    calibrate[row[1]][1].append(judgment["p_relevant"])
            records.append(record)
        # Calibrators run on arrays, once per judge and batch: per judgment they would cost more than the rest.
        for judge_id, (targets, raw) in calibrate.items():
            if targets:
                for judgment, p in zip(targets, in_use[judge_id].apply(np.asarray(raw, dtype=float)).tolist()):
                    judgment["p_calibrated"] = p
        for pair, record in zip(batch, records):
            _grade_record(record, pair, source, low, relevant)
            yield record


def _grade_record(record: dict, pair: GoldPair, source: ExportSource, low: int, relevant: int) -> None:
    if source.judge is None or (source.combined and pair.gold is not None):
        if pair.gold is not None:
            record["grade"], record["grade_source"] = pair.gold, "human"
        return
    # The source judge's judgment under the newest definition version it judged comes first (ordered by
    # judge name, then version descending).
    own = [j for j in record["judgments"] if j["judge"] == source.judge.name and j["status"] == Judgment.Status.OK]
    if own:
        p = own[0].get("p_calibrated", own[0]["p_relevant"]) if source.rule.calibrated else own[0]["p_relevant"]
        record["grade"], record["grade_source"] = _judge_grade(p, source, low, relevant), source.judge_label


# --- The export's lines, for the command, the page and the API ------------------------------------------------

class QrelsFormat(StrEnum):
    TREC = "trec"
    BEIR = "beir"
    JSONL = "jsonl"

    @property
    def extension(self) -> str:
        return {"trec": "qrels", "beir": "tsv", "jsonl": "jsonl"}[self.value]

    @property
    def media_type(self) -> str:
        return {
            "trec": "text/plain", "beir": "text/tab-separated-values", "jsonl": "application/x-ndjson",
        }[self.value] + "; charset=utf-8"


BEIR_HEADER = "query-id\tcorpus-id\tscore\n"
# Blind first: the qrels are the gold grades and the judges' P of items experts have not labelled, exactly what
# the validation reports are made of, so the same members may read both.
READ_QRELS = Need(allows=sees_reports, refused="Experts label blind: the qrels hold the gold grades and the judges' "
                                               "P of items they have not labelled.")
# A response written line by line would cost one socket write per line.
CHUNK_BYTES = 1 << 16


def qrels_lines(*, project: Project, format: QrelsFormat, source: ExportSource) -> Iterator[str]:
    """The export of `project` from `source` as `format`, line by line, each ending in a newline: TREC
    `qid 0 docid grade`, BEIR tsv under its header, or JSONL with everything known per pair."""
    if format is QrelsFormat.JSONL:
        # orjson: the same JSON (UTF-8, shortest float repr) about ten times faster than json.dumps, which was
        # half of the time of a large export.
        for record in pair_records(project=project, source=source):
            yield orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE).decode()
        return
    if format is QrelsFormat.BEIR:
        yield BEIR_HEADER
        template = "{}\t{}\t{}\n"
    else:
        template = "{} 0 {} {}\n"
    for row in qrels_rows(project=project, source=source):
        yield template.format(row.query_id, row.doc_id, row.grade)


@dataclass(frozen=True)
class QrelsRequest:
    """An export asked for over HTTP, parsed: its format and grade source."""

    format: QrelsFormat
    source: ExportSource

    def file_name(self, *, project: Project, day: date) -> str:
        """`<project>_qrels_<source>_<day>.<ext>`; a judge source names the judge and its threshold."""
        source = self.source
        if source.judge is None:
            said = "human"
        else:
            kind = "combined" if source.combined else "judge"
            said = f"{kind}-{slugify(source.judge.name) or source.judge.id}-{source.rule.slug}"
        return f"{project.slug}_qrels_{said}_{day.isoformat()}.{self.format.extension}"


def qrels_request_parse(*, project: Project, format: str, source: str, threshold: str) -> QrelsRequest:
    """The query string's `format` (trec, beir, jsonl), `source` (human, judge:NAME, combined:NAME) and
    `threshold` (empty: none given) for `project`; ExportError saying what is wrong."""
    try:
        parsed_format = QrelsFormat(format)
    except ValueError:
        raise ExportError(f"format must be one of {', '.join(QrelsFormat)}, got {format!r}") from None
    parsed_threshold = None
    if threshold.strip():
        try:
            parsed_threshold = float(threshold)
        except ValueError:
            raise ExportError(f"threshold must be a number within [0, 1], got {threshold!r}") from None
    return QrelsRequest(parsed_format, export_source_parse(project=project, source=source, threshold=parsed_threshold))


def utf8_chunks(lines: Iterable[str], size: int = CHUNK_BYTES) -> Iterator[bytes]:
    """`lines` joined and encoded as UTF-8 in chunks of about `size` characters, for a streamed response."""
    buffered: list[str] = []
    length = 0
    for line in lines:
        buffered.append(line)
        length += len(line)
        if length >= size:
            yield "".join(buffered).encode()
            buffered, length = [], 0
    if buffered:
        yield "".join(buffered).encode()

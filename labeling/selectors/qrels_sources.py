"""The qrels a project can evaluate its runs against, named as the exports name them (`human`, `judge:NAME`,
`combined:NAME`) plus `expected:NAME`, a judge's P as the probability of relevance; each built through the
qrels export's own reads, so a run is graded exactly as an exported qrels file would grade it."""
from __future__ import annotations

import re
from dataclasses import dataclass

from labeling.exceptions import DomainError, NotFound
from labeling.models import Judge, Label, Pair, Project, QrelsRelease
from labeling.selectors.completeness import random_sample_grades
from labeling.selectors.export import ExportError, export_source_parse, judge_probabilities, qrels_rows
from labeling.selectors.releases import release_by_name, release_records, release_verify
from labeling.selectors.scoring import judges_with_judgments
from labeling.selectors.streams import Grouped, external_ids, pair_stream
from models_llm.systems.sampled import QuerySample

HUMAN = "human"
JUDGE = "judge"
COMBINED = "combined"
EXPECTED = "expected"
RELEASE = "release"
SAMPLE = "sample"


class SystemsError(DomainError):
    """The evaluation cannot run as asked (a source the project does not have, no runs, empty qrels)."""


class SystemsSourceNotFound(SystemsError, NotFound):
    """The source names a judge the project does not have (404 in the API)."""


@dataclass(frozen=True)
class QrelsSource:
    """One way of grading a project's pairs. `key` is `human`, `judge:NAME`, `combined:NAME` or `expected:NAME`;
    `expected` sources give each pair the judge's P (calibrated when it has a calibrator) instead of a grade,
    and are evaluated as expected metrics. A judge's grades follow its own relevance rule
    (llm_adapter.judge_relevance_rule) unless the key names a threshold, `judge:NAME@T` or `combined:NAME@T`:
    relevant when the calibrated P >= T, as `export_qrels --threshold T` grades."""

    key: str
    label: str
    kind: str
    judge: str | None = None
    threshold: float | None = None

    @property
    def sampled(self) -> bool:
        """A sample with known inclusion probabilities: it defines statAP and infNDCG@10 only."""
        return self.kind == SAMPLE

    @property
    def expected(self) -> bool:
        return self.kind == EXPECTED


def _source(kind: str, judge: str | None = None, threshold: float | None = None) -> QrelsSource:
    at = "" if threshold is None else f" at P >= {threshold:g}"
    labels = {
        HUMAN: "human gold grades",
        SAMPLE: "human gold on the random validation sample, weighted by inclusion probability",
        JUDGE: f"judge {judge}{at}",
        COMBINED: f"human gold, else judge {judge}{at}",
        EXPECTED: f"expected under judge {judge}'s P",
    }
    key = kind if kind in (HUMAN, SAMPLE) else f"{kind}:{judge}" + ("" if threshold is None else f"@{threshold:g}")
    return QrelsSource(key=key, label=labels[kind], kind=kind, judge=judge, threshold=threshold)


def thresholded(keys: list[str], threshold: float | None) -> list[str]:
    """`keys` with `threshold` given to each judge and combined source that names none (`judge:NAME` ->
    `judge:NAME@T`): the Systems page's, the API's and `evaluate_runs`' threshold, as the export takes one."""
    if threshold is None:
        return list(keys)
    return [f"{key}@{threshold:g}" if key.partition(":")[0] in (JUDGE, COMBINED) and "@" not in key else key
            for key in keys]


def _named_threshold(project: Project, kind: str, name: str) -> tuple[str, float | None]:
    """`NAME@T` -> (NAME, T) for a judge or combined source, unless a judge is named `NAME@T` itself."""
    head, at, tail = name.rpartition("@")
    if kind not in (JUDGE, COMBINED) or not at or not head or not re.fullmatch(r"[0-9]*\.?[0-9]+", tail):
        return name, None
    if Judge.objects.filter(project=project, name=name).exists():
        return name, None
    return head, float(tail)


def _has_human_grades(project: Project) -> bool:
    # A gold grade needs a reference grade or a current label (labeling.gold): two index probes instead of the
    # whole gold stream. A project whose labels are all unresolved passes and gets empty human qrels.
    return (Pair.objects.filter(project=project, reference_grade__isnull=False).exists()
            or Label.objects.filter(pair__project=project, superseded_at__isnull=True).exists())


def _release(name: str) -> QrelsSource:
    return QrelsSource(key=f"{RELEASE}:{name}", label=f"frozen release {name}", kind=RELEASE)


def qrels_sources(project: Project) -> list[QrelsSource]:
    """The project's sources: `human` when any pair may have a gold grade, and then `sample`, its random validation
    sample weighted by inclusion probability (evaluated only when asked for); for every judge with a P,
    `judge:NAME` and `expected:NAME`, and `combined:NAME` when there are human grades to combine with; then every
    frozen release, `release:NAME`, newest first."""
    human = _has_human_grades(project)
    sources = [_source(HUMAN), _source(SAMPLE)] if human else []
    for name in judges_with_judgments(project=project).values_list("name", flat=True):
        sources += [_source(JUDGE, name), *([_source(COMBINED, name)] if human else []), _source(EXPECTED, name)]
    return sources + [_release(name) for name in QrelsRelease.objects.filter(project=project).order_by(
        "-created_at", "-id").values_list("name", flat=True)]


def qrels_source_parse(*, project: Project, key: str) -> QrelsSource:
    """The source named `key`; SystemsError naming the project's sources when it has no such source."""
    kind, _, name = key.partition(":")
    if kind in (HUMAN, SAMPLE) and not name:
        return _source(kind)
    if kind == RELEASE and name:
        if not QrelsRelease.objects.filter(project=project, name=name).exists():
            raise SystemsSourceNotFound(f"project {project.slug!r} has no release {name!r}")
        return _release(name)
    if kind in (JUDGE, COMBINED, EXPECTED) and name:
        name, threshold = _named_threshold(project, kind, name)
        try:
            export_source_parse(project=project, source=f"{JUDGE}:{name}", threshold=threshold)
        except ExportError as exc:
            raise (SystemsSourceNotFound if isinstance(exc, NotFound) else SystemsError)(str(exc)) from None
        return _source(kind, name, threshold)
    known = ", ".join(source.key for source in qrels_sources(project)) or "none"
    raise SystemsError(f"qrels source must be 'human', 'sample', 'judge:NAME', 'combined:NAME', 'expected:NAME' or "
                       f"'release:NAME', got {key!r} "
                       f"(project {project.slug!r} has: {known})")


def qrels_for(*, project: Project, source: QrelsSource) -> dict[str, dict[str, int]]:
    """query id -> doc id -> grade, as `export_qrels --source KEY` writes them (not for an expected source)."""
    if source.expected:
        raise SystemsError(f"{source.key} gives probabilities, not grades: use probabilities_for")
    if source.sampled:
        return {query: dict(design.grades) for query, design in sample_design(project=project).items()}
    if source.kind == RELEASE:
        release = release_by_name(project=project, name=source.key.partition(":")[2])
        release_verify(release)
        frozen: dict[str, dict[str, int]] = {}
        for record in release_records(release):
            if record["grade"] is not None:
                frozen.setdefault(record["query_id"], {})[record["doc_id"]] = record["grade"]
        return frozen
    key = source.kind if source.judge is None else f"{source.kind}:{source.judge}"
    export = export_source_parse(project=project, source=key, threshold=source.threshold)
    qrels: dict[str, dict[str, int]] = {}
    for row in qrels_rows(project=project, source=export):
        qrels.setdefault(row.query_id, {})[row.doc_id] = row.grade
    return qrels


def probabilities_for(*, project: Project, source: QrelsSource) -> dict[str, dict[str, float]]:
    """query id -> doc id -> the judge's P (calibrated when it has a calibrator) of every pair it judged: the P
    that `judge:NAME@T` thresholds."""
    export = export_source_parse(project=project, source=f"{JUDGE}:{source.judge}", threshold=None)
    queries, passages = external_ids(project)
    judged = Grouped(judge_probabilities(export, grading=False))
    probabilities: dict[str, dict[str, float]] = {}
    for pair_id, query_id, passage_id, _reference in pair_stream(project):
        rows = judged.take(pair_id)
        if rows:
            probabilities.setdefault(queries[query_id], {})[passages[passage_id]] = rows[0][1]
    return probabilities


def sample_design(*, project: Project) -> dict[str, QuerySample]:
    """query id -> the random validation sample on that query's pool: one stratum (its pool pairs), the sampled
    pairs with their gold grade, so each was drawn with probability (sampled pairs) / (pool pairs) of the query."""
    grades = random_sample_grades(project)
    design: dict[str, tuple[dict[str, str], dict[str, int]]] = {}
    for pair_id, query, passage in Pair.objects.filter(project=project).values_list(
            "id", "query__external_id", "passage__external_id").iterator():
        strata, sampled = design.setdefault(query, ({}, {}))
        strata[passage] = query
        if pair_id in grades:
            sampled[passage] = grades[pair_id]
    return {query: QuerySample(strata, sampled) for query, (strata, sampled) in design.items()}

"""Training sets for distillation (DIRAS section 3): DIRAS's sample of a run (inside and outside its top), whose pairs enter the
pool so that the teacher judges them as any pair, or the examples of a DIRAS-layout file with the teacher's
answers; either split into train and held-out by query (models_llm.finetune.split)."""
from __future__ import annotations

import hashlib
import io
import math
from typing import BinaryIO

from django.conf import settings
from django.db import IntegrityError, transaction

from labeling.exceptions import Conflict, DomainError, TooLarge
from labeling.models import (
    FineTuneJob,
    Judge,
    Pair,
    Project,
    Query,
    Run,
    ScoringJob,
    TrainingExample,
    TrainingSet,
)
from labeling.names import NameRefused, clean_name
from labeling.selectors.definitions import current_definitions
from labeling.selectors.finetune import teacher_answers
from labeling.selectors.finetune_diras_sample import (
    DIRAS_INSIDE,
    DIRAS_OUTSIDE,
    DIRAS_TOP,
    diras_sample,
    sample_size_problem,
)
from labeling.services.pooling import pool_sample_store, random_system
from labeling.services.scoring import scoring_request
from labeling.upload_limits import oversize_refusal
from models_llm.finetune.chat import DistillFormatError
from models_llm.finetune.files import FileRead, read_file_examples
from models_llm.finetune.split import split_groups

MAX_HELD_OUT = 0.9
DEFAULT_HELD_OUT = 0.2
# DIRAS section 3: "We split the questions into 11 for testing and 20 for training": 11 of 31 held out (held_out_count
# rounds 11/31 of 31 questions to 11).
DIRAS_HELD_OUT = 11 / 31
MAX_NAME = TrainingSet._meta.get_field("name").max_length
MAX_GROUP = TrainingExample._meta.get_field("group").max_length
SHOWN_SKIPPED = 20
_BATCH = 5_000


def training_set_upload_refusal(*, content_length: str | None) -> str | None:
    """Why a training file whose request has this Content-Length is too large to be read, or None
    (labeling.upload_limits): the page and the API refuse it before the body is read."""
    return oversize_refusal(
        content_length, limit=settings.RUN_UPLOAD_MAX_BYTES, what="training files", setting="RUN_UPLOAD_MAX_BYTES",
        instead="Import it on the server: manage.py training_set --project SLUG --name NAME --from-file FILE.")


class TrainingSetError(DomainError):
    """A training set that cannot be made or removed as asked: a name taken, sizes that make no sense, no run to
    sample, a file that cannot be read, a set a fine-tuning job still uses."""


class TrainingSetConflict(TrainingSetError, Conflict):
    """Refused by the project's state (409 in the API): a name taken, no dense run to sample."""


def _checked_name(project: Project, name: str) -> str:
    try:
        name = clean_name(name or "", what="training set name", max_length=MAX_NAME)
    except NameRefused as exc:
        raise TrainingSetError(str(exc)) from None
    if TrainingSet.objects.filter(project=project, name=name).exists():
        raise TrainingSetConflict(f"project {project.slug!r} already has a training set {name!r}: choose another name")
    return name


def _checked_held_out(held_out: float) -> float:
    if not isinstance(held_out, (int, float)) or math.isnan(held_out) or not 0.0 <= held_out <= MAX_HELD_OUT:
        raise TrainingSetError(f"the held-out share must be in [0, {MAX_HELD_OUT}], got {held_out!r}")
    return float(held_out)


def _checked_seed(seed: int) -> int:
    if not isinstance(seed, int) or seed < 0:
        raise TrainingSetError(f"the seed must be a non-negative integer, got {seed!r}")
    return seed


def _stored(project: Project, **fields) -> TrainingSet:
    try:
        with transaction.atomic():
            return TrainingSet.objects.create(project=project, **fields)
    except IntegrityError:
        # Another request took the name between the check and the insert.
        raise TrainingSetConflict(f"project {project.slug!r} already has a training set {fields['name']!r}") from None


def _stored_group(group: str) -> str:
    """The group as the column holds it: an over-long question keeps its start and a digest of the whole, so that
    two questions stay two groups (the split itself is made on the whole text)."""
    if len(group) <= MAX_GROUP:
        return group
    digest = hashlib.sha256(group.encode()).hexdigest()[:16]
    return f"{group[:MAX_GROUP - 18]}~{digest}"


def default_run(project: Project) -> Run:
    """The run a training set samples when none is named: the project's newest dense run."""
    run = Run.objects.filter(project=project, kind=Run.Kind.DENSE).order_by("-created_at", "-id").first()
    if run is None:
        raise TrainingSetConflict(
            f"project {project.slug!r} has no dense run to sample: retrieve one first "
            "(manage.py retrieve --retriever dense), or name a run"
        )
    return run


def _pair_ids(project: Project, wanted: set[tuple[int, int]]) -> dict[tuple[int, int], int]:
    query_ids = sorted({query_id for query_id, _ in wanted})
    found: dict[tuple[int, int], int] = {}
    for start in range(0, len(query_ids), 500):
        rows = Pair.objects.filter(project=project, query_id__in=query_ids[start:start + 500]).values_list(
            "id", "query_id", "passage_id").iterator(chunk_size=50_000)
        found.update({(q, p): pair_id for pair_id, q, p in rows if (q, p) in wanted})
    return found


def default_held_out(*, report_rule: bool) -> float:
    """The held-out share when none is given: DIRAS's split (section 3: "We split the questions into 11 for testing
    and 20 for training"), 11 of 31 questions, when the data is DIRAS's (the passages name their reports); else
    DEFAULT_HELD_OUT."""
    return DIRAS_HELD_OUT if report_rule else DEFAULT_HELD_OUT


@transaction.atomic
def training_set_create(
    *, project: Project, name: str, run: Run | None = None, top: int = DIRAS_TOP, inside: int = DIRAS_INSIDE,
    outside: int = DIRAS_OUTSIDE, seed: int = 0, held_out: float | None = None, user=None,
) -> TrainingSet:
    """DIRAS section 3's sample as a training set: for each query of `run` (default: the newest dense run), `inside`
    passages drawn at random from within its top `top` and `outside` drawn at random from the corpus outside that
    top, seeded (selectors.diras_sample, as pool_sample draws them; when the passages name their report, the top
    is each report's top `top`, as DIRAS's code has it). A query with fewer than asked on a side gives all it has,
    and the set's parameters count and list such queries. The pairs enter the pool with their provenance (the run's
    name and rank inside the top; random_system(seed) outside), so that the teacher scores them as any pair, and
    become examples (origin top with the run's rank, or random), split train / held-out by query with
    split_groups(query ids, held_out, seed); `held_out` None: default_held_out (DIRAS's 11 of 31 questions for
    report data).

    Everything or nothing is stored; TrainingSetError names what is wrong."""
    name = _checked_name(project, name)
    if problem := sample_size_problem(top, inside, outside):
        raise TrainingSetError(problem)
    seed = _checked_seed(seed)
    if held_out is not None:
        held_out = _checked_held_out(held_out)
    run = run if run is not None else default_run(project)
    if run.project_id != project.id:
        raise TrainingSetError(f"run {run.name!r} is not a run of project {project.slug!r}")
    sample = diras_sample(project=project, run=run, top=top, inside=inside, outside=outside, seed=seed)
    if not sample.rows:
        raise TrainingSetError(f"run {run.name!r} has no entries to sample")
    held_out_given = held_out is not None
    if held_out is None:
        held_out = default_held_out(report_rule=sample.report_rule)
    pooled = pool_sample_store(project=project, run=run, rows=sample.rows, seed=seed)
    training_set = _stored(
        project, name=name, source=f"run {run.name}"[:500], created_by=user,
        parameters={"run": run.name, "run_id": run.id, "top": top, "inside": inside, "outside": outside,
                    "seed": seed, "held_out": held_out,
                    "held_out_rule": "given" if held_out_given else "diras" if sample.report_rule else "default",
                    "report_rule": sample.report_rule, "random_system": random_system(seed), "pooled": pooled,
                    **sample.counts()},
    )
    rows = sample.rows
    pair_of = _pair_ids(project, {(query_id, passage_id) for query_id, passage_id, _ in rows})
    query_names = dict(Query.objects.filter(project=project, id__in={row[0] for row in rows})
                       .values_list("id", "external_id"))
    held = split_groups(list(query_names.values()), held_out, seed)
    TrainingExample.objects.bulk_create(
        (TrainingExample(
            training_set=training_set, pair_id=pair_of[(query_id, passage_id)], rank=rank,
            origin=TrainingExample.Origin.TOP if rank is not None else TrainingExample.Origin.RANDOM,
            group=query_names[query_id],
            split=TrainingExample.Split.HELD_OUT if query_names[query_id] in held else TrainingExample.Split.TRAIN,
        ) for query_id, passage_id, rank in rows),
        batch_size=_BATCH,
    )
    return training_set


class _Capped(io.RawIOBase):
    """A binary file read through, refused with TooLarge once more than `limit` bytes came out of it."""

    def __init__(self, file: BinaryIO, limit: int, name: str) -> None:
        self._file, self._limit, self._name, self._read = file, limit, name, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._file.read(len(buffer))
        self._read += len(data)
        if self._read > self._limit:
            raise TooLarge(f"{self._name} is larger than {self._limit:,} bytes (RUN_UPLOAD_MAX_BYTES)")
        buffer[:len(data)] = data
        return len(data)


def _lines(file: BinaryIO, name: str) -> io.TextIOWrapper:
    limit = settings.RUN_UPLOAD_MAX_BYTES
    if getattr(file, "size", None) is not None and file.size > limit:  # an upload says its size before it is read
        raise TooLarge(f"{name} is {file.size:,} bytes; at most {limit:,} (RUN_UPLOAD_MAX_BYTES)")
    return io.TextIOWrapper(io.BufferedReader(_Capped(file, limit, name)), encoding="utf-8-sig", newline="")


def training_set_import_check(*, project: Project, name: str, held_out: float, seed: int) -> tuple[str, float, int]:
    """The name, held-out share and seed of a file's import as it will store them (the name cleaned); refused with
    TrainingSetError (TrainingSetConflict for a name taken) before the file is read."""
    return _checked_name(project, name), _checked_held_out(held_out), _checked_seed(seed)


def training_file_read(*, file: BinaryIO, filename: str, skip_bad: bool = False) -> FileRead:
    """The examples of a DIRAS-layout CSV (`file` opened in binary, `filename` naming it in the problems;
    models_llm.finetune.files): every bad row is a TrainingSetError `file:line: ...`, or with `skip_bad` left out and
    listed in `skipped`. Files over RUN_UPLOAD_MAX_BYTES are refused (TooLarge)."""
    try:
        read = read_file_examples(_lines(file, filename), name=filename, skip_bad=skip_bad)
    except DistillFormatError as exc:
        raise TrainingSetError(str(exc)) from None
    except UnicodeDecodeError as exc:
        raise TrainingSetError(f"{filename}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if not read.examples:
        raise TrainingSetError(f"{filename}: no examples" + (" left once the bad rows were skipped"
                                                              if read.skipped else ""))
    return read


@transaction.atomic
def training_set_store(
    *, project: Project, name: str, read: FileRead, filename: str, held_out: float = 0.2, seed: int = 0, user=None,
) -> TrainingSet:
    """A file's examples as read by training_file_read, stored as a training set of file examples: the prompt's
    turns, the teacher's answer and P, split train / held-out by question with split_groups(questions, held_out,
    seed); the rows skipped are listed in the set's parameters."""
    name, held_out, seed = training_set_import_check(project=project, name=name, held_out=held_out, seed=seed)
    training_set = _stored(
        project, name=name, source=filename[:500], created_by=user,
        parameters={"file": filename, "layout": read.layout, "seed": seed, "held_out": held_out,
                    "skipped": len(read.skipped),
                    "skipped_rows": [f"{filename}:{row.line}: {row.reason}" for row in read.skipped[:SHOWN_SKIPPED]]},
    )
    held = split_groups([example.group for example in read.examples], held_out, seed)
    TrainingExample.objects.bulk_create(
        (TrainingExample(
            training_set=training_set, origin=TrainingExample.Origin.FILE, group=_stored_group(example.group),
            split=TrainingExample.Split.HELD_OUT if example.group in held else TrainingExample.Split.TRAIN,
            system=example.system, user=example.user, answer=example.answer, teacher_p=example.p,
        ) for example in read.examples),
        batch_size=_BATCH,
    )
    return training_set


def training_set_import(
    *, project: Project, name: str, file: BinaryIO, filename: str, held_out: float = 0.2, seed: int = 0, user=None,
    skip_bad: bool = False,
) -> TrainingSet:
    """A DIRAS-layout CSV as a training set of file examples (training_file_read, then training_set_store). Every
    bad row is an error `file:line: ...` with nothing stored; with `skip_bad` bad rows are left out and listed in
    the set's parameters. Files over RUN_UPLOAD_MAX_BYTES are refused (TooLarge)."""
    training_set_import_check(project=project, name=name, held_out=held_out, seed=seed)
    read = training_file_read(file=file, filename=filename, skip_bad=skip_bad)
    return training_set_store(project=project, name=name, read=read, filename=filename, held_out=held_out, seed=seed,
                              user=user)


@transaction.atomic
def training_set_delete(*, training_set: TrainingSet) -> None:
    """Delete the set and its examples (the pairs it pooled stay in the pool); refused while a fine-tuning job
    uses it, whose record of what it learnt from would be lost."""
    jobs = list(FineTuneJob.objects.filter(training_set=training_set).values_list("student_name", flat=True))
    if jobs:
        raise TrainingSetError(
            f"training set {training_set.name!r} is used by {len(jobs)} fine-tuning job(s) "
            f"({', '.join(sorted(jobs)[:5])}): delete them first"
        )
    training_set.delete()


def training_set_score(*, training_set: TrainingSet, judge: Judge, user=None) -> tuple[ScoringJob, bool]:
    """Have `judge` (the teacher) judge the set's pairs, train and held-out: an ordinary scoring job over the pairs
    it has no ok answer on yet (a paid teacher is never asked twice). (job, created) as scoring_request gives;
    TrainingSetError when the set holds no pairs or the judge has answered them all."""
    if judge.project_id != training_set.project_id:
        raise TrainingSetError(f"judge {judge.name!r} is not a judge of the training set's project")
    query_of = dict(TrainingExample.objects.filter(training_set=training_set, pair__isnull=False)
                    .values_list("pair_id", "pair__query_id"))
    if not query_of:
        raise TrainingSetError(f"training set {training_set.name!r} holds no pairs: its examples carry their "
                               "teacher's answers already")
    answered = teacher_answers(judge, query_of, current_definitions(set(query_of.values())))
    missing = sorted(set(query_of) - set(answered))
    if not missing:
        raise TrainingSetError(f"judge {judge.name!r} has answered all {len(query_of):,} pairs of training set "
                               f"{training_set.name!r} already")
    return scoring_request(project=training_set.project, judge=judge, scope=ScoringJob.Scope.SELECTION,
                           pair_ids=missing, user=user)

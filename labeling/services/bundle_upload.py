"""Bundle archives uploaded through the pages or the API: the upload is kept in Django's storage (a worker on
another machine reads it back from there), and a BundleImportJob's worker unpacks it into a fresh temporary folder
(labeling.bundle_archive, in a child process under limits, refuses what an untrusted archive must not do) and runs
the same import as `import_bundle`, with the .gz run files it holds read under the same expansion limits. A run file or
a training file too large to read in a web request is kept the same way and stored by the worker as a run or a
training set. The upload is removed from the storage when the job ends, done or failed."""
from __future__ import annotations

import shutil
import time
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone

from labeling.bundle_archive import ArchiveLimits, ArchiveRefused, archive_extract, archive_kind
from labeling.bundle_reader import Problems
from labeling.exceptions import Conflict, DomainError, TooLarge
from labeling.models import MAX_ERROR_CHARS, BundleImportJob, Project
from labeling.selectors.query_sets import query_set_name
from labeling.services.bundle_import import BundleImportError, UploadRights, bundle_import
from labeling.services.bundle_stage import BundleLayout, BundleLayoutError
from labeling.services.finetune_training_sets import (
    TrainingSetError,
    training_file_read,
    training_set_import_check,
    training_set_store,
)
from labeling.services.jobs import job_fail, job_heartbeat, job_scratch, job_take
from labeling.services.runs import RunImportError, run_import, run_name_check
from labeling.tasks import bundle_import_task
from labeling.upload_limits import MIB, oversize_refusal, upload_expansion_limits

STORAGE_PREFIX = "bundles"
# How often unpacking writes how far it got.
PROGRESS_SECONDS = 1.0
# A job whose worker died this many times (a bundle too large for its memory) is failed instead of taken again.
MAX_ATTEMPTS = 3


class BundleUploadError(DomainError):
    """An upload that is not taken (not an archive, too large): the message says why."""


class BundleImportFinished(BundleUploadError, Conflict):
    """A finished import asked to be cancelled (409)."""


class BundleTooLarge(BundleUploadError, TooLarge):
    """Over BUNDLE_UPLOAD_MAX_BYTES (413 in the API)."""


def bundle_upload_refusal(*, content_length: str | None) -> str | None:
    """Why a request whose Content-Length header is `content_length` is too large to be read, or None
    (labeling.upload_limits)."""
    return oversize_refusal(
        content_length, limit=settings.BUNDLE_UPLOAD_MAX_BYTES, what="bundle archives",
        setting="BUNDLE_UPLOAD_MAX_BYTES",
        instead="Import a larger bundle on the server: manage.py import_bundle FOLDER --project SLUG.")


def archive_limits() -> ArchiveLimits:
    expansion = upload_expansion_limits()
    return ArchiveLimits(
        max_bytes=expansion.max_bytes, max_members=settings.BUNDLE_MAX_MEMBERS, max_ratio=expansion.max_ratio,
        max_header_bytes=settings.BUNDLE_MAX_HEADER_BYTES, seconds=settings.BUNDLE_UNPACK_SECONDS,
        cpu_seconds=settings.BUNDLE_UNPACK_CPU_SECONDS, memory_mb=settings.BUNDLE_UNPACK_MEMORY_MB,
    )


def _file_name(upload: File) -> str:
    # Django keeps only the base name of what the browser sent; the storage name is ours, this one is shown.
    return Path(upload.name or "").name[:255]


@transaction.atomic
def bundle_import_request(
    *, project: Project, upload: File, all_pairs: bool = False, query_set: str = "",
    user: AbstractBaseUser | None = None
) -> BundleImportJob:
    """Keep the uploaded archive in the storage and queue a worker to import it into `project` (`all_pairs`: as
    `import_bundle --all-pairs`; `query_set`, unless empty: as `--query-set`). BundleUploadError for a file that is
    not a .zip or .tar.gz, or is larger than BUNDLE_UPLOAD_MAX_BYTES; NameRefused for a query set's name that
    breaks the rule of names."""
    if query_set.strip():
        query_set = query_set_name(query_set)
    name = _file_name(upload)
    if archive_kind(name) is None:
        raise BundleUploadError(f"{name or 'the file'}: upload a bundle as a .zip or .tar.gz archive")
    if upload.size > settings.BUNDLE_UPLOAD_MAX_BYTES:
        raise BundleTooLarge(f"{name}: {upload.size / MIB:,.1f} MiB is more than BUNDLE_UPLOAD_MAX_BYTES "
                                f"({settings.BUNDLE_UPLOAD_MAX_BYTES / MIB:,.0f} MiB)")
    job = BundleImportJob.objects.create(project=project, file_name=name, size=upload.size, all_pairs=all_pairs,
                                         query_set=query_set.strip(), requested_by=user)
    suffix = ".zip" if archive_kind(name) == "zip" else ".tar.gz"
    job.upload = default_storage.save(f"{STORAGE_PREFIX}/{project.id}/{job.id}{suffix}", upload)
    job.save(update_fields=["upload"])
    transaction.on_commit(lambda: bundle_import_task.delay(job.id))
    return job


@transaction.atomic
def run_file_import_request(
    *, project: Project, upload: File, name: str, description: str = "", user: AbstractBaseUser | None = None
) -> BundleImportJob:
    """Keep an uploaded TREC run file (too large to be read in a web request: labeling.runs_upload) in the storage
    and queue a worker to store it as run `name`, as run_import would. The name is checked now, the lines by the
    worker; RunImportError for a name refused or taken."""
    problems = Problems()
    name = run_name_check(project=project, name=name, where="name", problems=problems)
    if problems:
        raise RunImportError(problems)
    file_name = _file_name(upload) or "run.txt"
    job = BundleImportJob.objects.create(project=project, file_name=file_name, size=upload.size, run_name=name,
                                         run_description=description, requested_by=user)
    suffix = ".gz" if file_name.endswith(".gz") else ".txt"
    job.upload = default_storage.save(f"{STORAGE_PREFIX}/{project.id}/{job.id}-run{suffix}", upload)
    job.save(update_fields=["upload"])
    transaction.on_commit(lambda: bundle_import_task.delay(job.id))
    return job


@transaction.atomic
def training_file_import_request(
    *, project: Project, upload: File, name: str, held_out: float = 0.2, seed: int = 0, skip_bad: bool = False,
    user: AbstractBaseUser | None = None
) -> BundleImportJob:
    """Keep an uploaded DIRAS-layout training file (too large to be read in a web request:
    labeling.services.finetune_training_set_upload) in the storage and queue a worker to store it as training set
    `name`, as training_set_import would. The name, share and seed are checked now (TrainingSetError), the rows by the
    worker."""
    name, held_out, seed = training_set_import_check(project=project, name=name, held_out=held_out, seed=seed)
    job = BundleImportJob.objects.create(
        project=project, file_name=_file_name(upload) or "upload.csv", size=upload.size, training_set_name=name,
        training_set_options={"held_out": held_out, "seed": seed, "skip_bad": skip_bad}, requested_by=user)
    job.upload = default_storage.save(f"{STORAGE_PREFIX}/{project.id}/{job.id}-training.csv", upload)
    job.save(update_fields=["upload"])
    transaction.on_commit(lambda: bundle_import_task.delay(job.id))
    return job


class _Progress:
    """Unpacking's members and bytes, written at most every PROGRESS_SECONDS."""

    def __init__(self, job_id: int) -> None:
        self.job_id, self.last = job_id, float("-inf")
        self.members = self.unpacked = 0

    def __call__(self, members: int, unpacked: int) -> None:
        self.members, self.unpacked = members, unpacked
        now = time.monotonic()
        if now - self.last >= PROGRESS_SECONDS:
            self.last = now
            self.write()

    def write(self, **also: object) -> None:
        """Write how far unpacking got; _Stopped when the job no longer runs (cancelled, or given up by the sweep)."""
        running = BundleImportJob.objects.filter(id=self.job_id, status=BundleImportJob.Status.RUNNING)
        if not running.update(members=self.members, unpacked_bytes=self.unpacked, **also):
            raise _Stopped


class _Stopped(DomainError):
    """The job was cancelled or given up while this worker ran it: it stops, and what it did is rolled back."""


def _still_running(job_id: int) -> None:
    """Called inside the import's transaction just before it commits: the job's row lock makes a cancel (or the
    sweep) either come first, and then nothing is stored, or wait until the import is stored and finished."""
    running = BundleImportJob.objects.select_for_update().filter(id=job_id, status=BundleImportJob.Status.RUNNING)
    if not running.exists():
        raise _Stopped


def _import(job: BundleImportJob, folder: Path) -> dict[str, int]:
    """Unpack the stored upload under `folder` and import it: the rows written. ArchiveRefused, BundleImportError."""
    BundleImportJob.objects.filter(id=job.id).update(stage=BundleImportJob.Stage.UNPACKING)
    archive = folder / "upload"
    with default_storage.open(job.upload, "rb") as stored, archive.open("wb") as local:
        # zip reads its directory from the end: the archive needs a local, seekable copy whatever the storage is.
        shutil.copyfileobj(stored, local, 1 << 20)
    unpacked = folder / "bundle"
    unpacked.mkdir()
    progress = _Progress(job.id)
    root = archive_extract(source=archive, name=job.file_name, into=unpacked, limits=archive_limits(),
                           progress=progress)
    archive.unlink()
    progress.write(stage=BundleImportJob.Stage.IMPORTING)
    try:
        BundleLayout.locate(root)
    except BundleLayoutError as exc:
        # The folder's name is the worker's temporary one: the uploader is told about their archive instead.
        raise ArchiveRefused(f"{job.file_name}: {str(exc).removeprefix(f'{root}: ')} at the archive's top or in "
                             "its one top folder") from None
    uploader = job.requested_by
    rights = UploadRights(adjudicator_labels=uploader is not None and (uploader.is_staff or uploader.is_superuser))
    return bundle_import(path=root, project_slug=job.project.slug, all_pairs=job.all_pairs, upload=rights,
                         query_set=job.query_set or None, expand_limits=upload_expansion_limits(),
                         before_commit=lambda: _still_running(job.id)).written


def _local_name(file_name: str) -> str:
    """The name the upload's local copy bears (problems are reported as `NAME:line`, and a .gz is read through
    gzip): the uploaded file's name when it is a plain one."""
    plain = file_name and file_name not in (".", "..") and not set(file_name) & {"/", "\\", "\x00"}
    return file_name if plain else "run.txt"


def _import_run(job: BundleImportJob, folder: Path) -> dict[str, int]:
    """Store the job's uploaded run file as run `job.run_name`: the rows written. RunImportError, _Stopped."""
    _Progress(job.id).write(stage=BundleImportJob.Stage.IMPORTING)
    path = folder / _local_name(job.file_name)
    with default_storage.open(job.upload, "rb") as stored, path.open("wb") as local:
        shutil.copyfileobj(stored, local, 1 << 20)
    with transaction.atomic():
        run = run_import(project=job.project, path=path, name=job.run_name, description=job.run_description,
                         user=job.requested_by, expand_limits=upload_expansion_limits())
        _still_running(job.id)
    return {"runs": 1, "run entries": run.entries}


class _Counted:
    """The stored upload read through, the bytes read so far written as the job's progress (_Stopped, raised from a
    read, stops a job cancelled or given up meanwhile)."""

    def __init__(self, file: File, progress: _Progress) -> None:
        self._file, self._progress, self.size = file, progress, file.size

    def read(self, size: int = -1) -> bytes:
        data = self._file.read(size)
        self._progress(0, self._progress.unpacked + len(data))
        return data


def _import_training_set(job: BundleImportJob) -> dict[str, int]:
    """Store the job's uploaded training file as training set `job.training_set_name`: the rows written. The file is
    read (the long part, with its progress) outside the transaction that stores it, so that the job's row is never
    locked while it runs. TrainingSetError, TooLarge, _Stopped."""
    progress = _Progress(job.id)
    progress.write(stage=BundleImportJob.Stage.IMPORTING)
    options = job.training_set_options
    with default_storage.open(job.upload, "rb") as stored:
        read = training_file_read(file=_Counted(stored, progress), filename=job.file_name,
                                  skip_bad=options["skip_bad"])
    progress.write()
    with transaction.atomic():
        training_set_store(project=job.project, name=job.training_set_name, read=read, filename=job.file_name,
                           held_out=options["held_out"], seed=options["seed"], user=job.requested_by)
        _still_running(job.id)
    return {"training sets": 1, "examples": len(read.examples), "bad rows skipped": len(read.skipped)}


def bundle_import_run(*, job_id: int) -> BundleImportJob | None:
    """Unpack and import the job's upload (or store its run file, for a job with a `run_name`, or its training file,
    for a job with a `training_set_name`). A refused archive, a bundle with problems or a file with bad rows ends the
    job failed, with each problem as `file:line: what is wrong` and nothing stored; an import ends it done with the
    rows written. The upload is removed in every ending. A finished job is returned as it is (None: it is gone);
    other errors propagate for the task to retry or to record with bundle_import_fail."""
    job = BundleImportJob.objects.select_related("project", "requested_by").filter(id=job_id).first()
    if job is None or not job_take(BundleImportJob.objects.filter(id=job_id, finished_at__isnull=True)):
        return job
    job.refresh_from_db(fields=["attempts"])
    if job.attempts > MAX_ATTEMPTS:
        return bundle_import_fail(job_id=job_id, error=f"the worker stopped {MAX_ATTEMPTS} times while importing "
                                                       "this bundle (too large for its memory?)")
    with job_heartbeat(BundleImportJob.objects.filter(id=job_id)), job_scratch("bundle-import", job_id) as folder:
        try:
            if job.training_set_name:
                written = _import_training_set(job)
            else:
                written = _import_run(job, folder) if job.run_name else _import(job, folder)
        except _Stopped:
            # Cancelled or given up meanwhile: whoever ended it removed the upload.
            return BundleImportJob.objects.filter(id=job_id).first()
        except ArchiveRefused as exc:
            return _finish(job_id, problems=[str(exc)], total=1, error=str(exc))
        except (BundleImportError, RunImportError) as exc:
            return _finish(job_id, problems=exc.problems.shown, total=exc.problems.total,
                           error=f"{exc.problems.total:,} problem(s); nothing was imported")
        except (TrainingSetError, TooLarge) as exc:
            # A refused file's problems come one `file:line: ...` a line (models_llm.finetune.files).
            problems = str(exc).splitlines()
            return _finish(job_id, problems=problems, total=len(problems),
                           error=f"{len(problems):,} problem(s); nothing was imported")
    return _finish(job_id, written=written)


def bundle_import_cancel(*, job: BundleImportJob) -> BundleImportJob:
    """Stop an unfinished import: cancelled and finished, nothing imported (a running worker stops at its next
    progress report while unpacking, or rolls its import back before it commits), the upload removed.
    BundleImportFinished when it had finished already (done, failed or cancelled)."""
    with transaction.atomic():
        unfinished = BundleImportJob.objects.select_for_update().filter(id=job.id, finished_at__isnull=True)
        if unfinished.exists():
            _upload_delete(job.id)
            unfinished.update(status=BundleImportJob.Status.CANCELLED, stage=BundleImportJob.Stage.FINISHED,
                              finished_at=timezone.now(), upload="")
        else:
            job.refresh_from_db()
            raise BundleImportFinished(f"import {job.id} had finished ({job.status}) before it could be cancelled")
    job.refresh_from_db()
    return job


def _finish(job_id: int, *, written: dict[str, int] | None = None, problems: list[str] | None = None,
            total: int = 0, error: str = "") -> BundleImportJob | None:
    _upload_delete(job_id)
    BundleImportJob.objects.filter(id=job_id, finished_at__isnull=True).update(
        status=BundleImportJob.Status.FAILED if problems else BundleImportJob.Status.DONE,
        stage=BundleImportJob.Stage.FINISHED, finished_at=timezone.now(), written=written or {},
        problems=problems or [], problems_total=total, error=error[:MAX_ERROR_CHARS], upload="",
    )
    return BundleImportJob.objects.filter(id=job_id).first()


def bundle_import_fail(*, job_id: int, error: str) -> BundleImportJob | None:
    """Give up on a job (its retries are spent, or the sweep found it lost or overdue): failed with the error,
    nothing imported, the upload removed."""
    _upload_delete(job_id)
    with transaction.atomic():
        job_fail(BundleImportJob.objects.filter(id=job_id), error=error)
        BundleImportJob.objects.filter(id=job_id).update(stage=BundleImportJob.Stage.FINISHED, upload="")
    return BundleImportJob.objects.filter(id=job_id).first()


def _upload_delete(job_id: int) -> None:
    """Delete the job's upload from the storage, before the row that says the job ended: nobody ever finds an
    ended job whose upload is still kept. The row's `upload` is emptied with the ending."""
    stored = BundleImportJob.objects.filter(id=job_id).values_list("upload", flat=True).first()
    if stored:
        default_storage.delete(stored)


"""Bundle archives uploaded through the pages or the API: the upload is kept in Django's storage (a worker on
another machine reads it back from there), and a BundleImportJob's worker unpacks it into a fresh temporary folder
(labeling.archive refuses what an untrusted archive must not do) and runs the same import as `import_bundle`. The
upload is removed from the storage when the job ends, done or failed."""
from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone

from labeling.archive import ArchiveLimits, ArchiveRefused, archive_extract, archive_kind
from labeling.exceptions import DomainError, TooLarge
from labeling.models import MAX_ERROR_CHARS, BundleImportJob, Project
from labeling.services.bundle_import import BundleImportError, bundle_import
from labeling.services.bundle_stage import BundleLayout, BundleLayoutError
from labeling.services.jobs import job_fail, job_take
from labeling.tasks import bundle_import_task
from labeling.upload_limits import MIB, oversize_refusal

STORAGE_PREFIX = "bundles"
# How often unpacking writes how far it got.
PROGRESS_SECONDS = 1.0
# A job whose worker died this many times (a bundle too large for its memory) is failed instead of taken again.
MAX_ATTEMPTS = 3


class BundleUploadError(DomainError):
    """An upload that is not taken (not an archive, too large): the message says why."""


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
    return ArchiveLimits(max_bytes=settings.BUNDLE_EXPAND_MAX_BYTES, max_members=settings.BUNDLE_MAX_MEMBERS,
                         max_ratio=settings.BUNDLE_MAX_RATIO)


def _file_name(upload: File) -> str:
    # Django keeps only the base name of what the browser sent; the storage name is ours, this one is shown.
    return Path(upload.name or "").name[:255]


@transaction.atomic
def bundle_import_request(
    *, project: Project, upload: File, all_pairs: bool = False, user: AbstractBaseUser | None = None
) -> BundleImportJob:
    """Keep the uploaded archive in the storage and queue a worker to import it into `project` (`all_pairs`: as
    `import_bundle --all-pairs`). BundleUploadError for a file that is not a .zip or .tar.gz, or is larger than
    BUNDLE_UPLOAD_MAX_BYTES."""
    name = _file_name(upload)
    if archive_kind(name) is None:
        raise BundleUploadError(f"{name or 'the file'}: upload a bundle as a .zip or .tar.gz archive")
    if upload.size > settings.BUNDLE_UPLOAD_MAX_BYTES:
        raise BundleTooLarge(f"{name}: {upload.size / MIB:,.1f} MiB is more than BUNDLE_UPLOAD_MAX_BYTES "
                                f"({settings.BUNDLE_UPLOAD_MAX_BYTES / MIB:,.0f} MiB)")
    job = BundleImportJob.objects.create(project=project, file_name=name, size=upload.size, all_pairs=all_pairs,
                                         requested_by=user)
    suffix = ".zip" if archive_kind(name) == "zip" else ".tar.gz"
    job.upload = default_storage.save(f"{STORAGE_PREFIX}/{project.id}/{job.id}{suffix}", upload)
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
        BundleImportJob.objects.filter(id=self.job_id).update(members=self.members, unpacked_bytes=self.unpacked,
                                                              **also)


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
    return bundle_import(path=root, project_slug=job.project.slug, all_pairs=job.all_pairs).written


def bundle_import_run(*, job_id: int) -> BundleImportJob | None:
    """Unpack and import the job's upload. A refused archive or a bundle with problems ends the job failed, with
    each problem as `file:line: what is wrong` and nothing stored; an import ends it done with the rows written.
    The upload is removed either way. A finished job is returned as it is (None: it is gone); other errors
    propagate for the task to retry or to record with bundle_import_fail."""
    job = BundleImportJob.objects.select_related("project").filter(id=job_id).first()
    if job is None or not job_take(BundleImportJob.objects.filter(id=job_id, finished_at__isnull=True)):
        return job
    job.refresh_from_db(fields=["attempts"])
    if job.attempts > MAX_ATTEMPTS:
        return bundle_import_fail(job_id=job_id, error=f"the worker stopped {MAX_ATTEMPTS} times while importing "
                                                       "this bundle (too large for its memory?)")
    with tempfile.TemporaryDirectory(prefix="bundle-import-") as folder:
        try:
            written = _import(job, Path(folder))
        except ArchiveRefused as exc:
            return _finish(job_id, problems=[str(exc)], total=1, error=str(exc))
        except BundleImportError as exc:
            return _finish(job_id, problems=exc.problems.shown, total=exc.problems.total,
                           error=f"{exc.problems.total:,} problem(s); nothing was imported")
    return _finish(job_id, written=written)


def _finish(job_id: int, *, written: dict[str, int] | None = None, problems: list[str] | None = None,
            total: int = 0, error: str = "") -> BundleImportJob | None:
    BundleImportJob.objects.filter(id=job_id, finished_at__isnull=True).update(
        status=BundleImportJob.Status.FAILED if problems else BundleImportJob.Status.DONE,
        stage=BundleImportJob.Stage.FINISHED, finished_at=timezone.now(), written=written or {},
        problems=problems or [], problems_total=total, error=error[:MAX_ERROR_CHARS],
    )
    return _upload_remove(job_id)


def bundle_import_fail(*, job_id: int, error: str) -> BundleImportJob | None:
    """Give up on a job (its retries are spent): failed with the error, nothing imported, the upload removed."""
    job_fail(BundleImportJob.objects.filter(id=job_id), error=error)
    BundleImportJob.objects.filter(id=job_id).update(stage=BundleImportJob.Stage.FINISHED)
    return _upload_remove(job_id)


def _upload_remove(job_id: int) -> BundleImportJob | None:
    job = BundleImportJob.objects.filter(id=job_id).first()
    if job is not None and job.upload:
        default_storage.delete(job.upload)
        BundleImportJob.objects.filter(id=job_id).update(upload="")
        job.upload = ""
    return job

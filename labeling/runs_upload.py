"""A run file uploaded through the Systems page or the API: refused above RUN_UPLOAD_MAX_BYTES before its body is
read, else handed to run_import as a file on disk that bears the uploaded file's name, so that the `file:line`
problems name the caller's file (and a .gz upload is read through gzip, within the upload expansion limits). A file
above RUN_UPLOAD_INLINE_MAX_BYTES (decompressed) is not read in the web request: a worker stores it."""
from __future__ import annotations

import os
import tempfile
import zlib
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.files.uploadedfile import UploadedFile
from django.http import HttpRequest

from labeling.decompress import ExpansionRefused, gzip_bounded
from labeling.models import BundleImportJob, Project, Run
from labeling.services.bundle_upload import run_file_import_request
from labeling.services.runs import run_import
from labeling.upload_limits import oversize_refusal, upload_expansion_limits


def upload_refusal(request: HttpRequest) -> str | None:
    """Why the request is too large to be read, or None (labeling.upload_limits)."""
    return oversize_refusal(
        request.META.get("CONTENT_LENGTH"), limit=settings.RUN_UPLOAD_MAX_BYTES, what="run files",
        setting="RUN_UPLOAD_MAX_BYTES",
        instead="Import a larger file on the server: manage.py import_run FILE --project SLUG --name NAME (gzip it "
                "first: a .gz file is read as it is).")


def _file_name(upload: UploadedFile) -> str:
    # Django keeps only the base name of what the browser sent; an upload without one still needs a file name.
    return Path(upload.name or "").name or "run.txt"


def _read_inline(path: Path) -> bool:
    """Whether the file is small enough to read in the web request: at most RUN_UPLOAD_INLINE_MAX_BYTES, and for a
    .gz file, at most that many bytes once decompressed (counted here without parsing, up to the cap). A gzip file
    that breaks the expansion limits is read inline: it is refused within its first MiBs, with the reason."""
    limit = settings.RUN_UPLOAD_INLINE_MAX_BYTES
    if path.stat().st_size > limit:
        return False
    if not path.name.endswith(".gz"):
        return True
    try:
        with gzip_bounded(path.open("rb"), name=path.name, limits=upload_expansion_limits()) as stream:
            read = 0
            while read <= limit and (chunk := stream.read(1 << 20)):
                read += len(chunk)
    except (ExpansionRefused, OSError, EOFError, zlib.error):
        return True
    return read <= limit


def run_import_upload(
    *, project: Project, upload: UploadedFile, name: str, description: str = "", user: AbstractBaseUser | None = None
) -> Run | BundleImportJob:
    """run_import of the uploaded file (RunImportError as run_import raises it), or, for a file too large to read in
    a web request (RUN_UPLOAD_INLINE_MAX_BYTES, decompressed), a worker's job that stores it (the job is returned;
    its name is checked now). A large upload already lies in a temporary file, which is linked under its own name
    instead of being copied; a small one is written out."""
    with tempfile.TemporaryDirectory(prefix="run-upload-") as folder:
        path = Path(folder) / _file_name(upload)
        if hasattr(upload, "temporary_file_path"):
            os.symlink(upload.temporary_file_path(), path)
        else:
            with path.open("wb") as handle:
                for chunk in upload.chunks():
                    handle.write(chunk)
        if not _read_inline(path):
            upload.seek(0)
            return run_file_import_request(project=project, upload=upload, name=name, description=description,
                                           user=user)
        return run_import(project=project, path=path, name=name, description=description, user=user,
                          expand_limits=upload_expansion_limits())

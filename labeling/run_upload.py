"""A run file uploaded through the Systems page or the API: refused above RUN_UPLOAD_MAX_BYTES before its body is
read, else handed to run_import as a file on disk that bears the uploaded file's name, so that the `file:line`
problems name the caller's file (and a .gz upload is read through gzip)."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.files.uploadedfile import UploadedFile
from django.http import HttpRequest

from labeling.models import Project, Run
from labeling.services.runs import run_import
from labeling.upload_limits import oversize_refusal


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


def run_import_upload(
    *, project: Project, upload: UploadedFile, name: str, description: str = "", user: AbstractBaseUser | None = None
) -> Run:
    """run_import of the uploaded file (RunImportError as run_import raises it). A large upload already lies in a
    temporary file, which is linked under its own name instead of being copied; a small one is written out."""
    with tempfile.TemporaryDirectory(prefix="run-upload-") as folder:
        path = Path(folder) / _file_name(upload)
        if hasattr(upload, "temporary_file_path"):
            os.symlink(upload.temporary_file_path(), path)
        else:
            with path.open("wb") as handle:
                for chunk in upload.chunks():
                    handle.write(chunk)
        return run_import(project=project, path=path, name=name, description=description, user=user)

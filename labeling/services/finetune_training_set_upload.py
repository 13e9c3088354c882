"""A training file uploaded through the Fine-tuning page or the API: read in the web request up to
TRAINING_SET_INLINE_MAX_BYTES (the quick path), else kept in the storage and stored as a training set by a worker,
a bundle import job of its own on the Import page (a file's rows expand many times into prompts in memory)."""
from __future__ import annotations

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.files.uploadedfile import UploadedFile

from labeling.models import BundleImportJob, Project, TrainingSet
from labeling.services.bundle_upload import training_file_import_request
from labeling.services.finetune_training_sets import training_set_import


def training_set_import_upload(
    *, project: Project, upload: UploadedFile, name: str, held_out: float = 0.2, seed: int = 0,
    skip_bad: bool = False, user: AbstractBaseUser | None = None
) -> TrainingSet | BundleImportJob:
    """training_set_import of the uploaded file (TrainingSetError and TooLarge as it raises them), or, for a file
    larger than TRAINING_SET_INLINE_MAX_BYTES, a worker's job that stores it (the job is returned; its name, share
    and seed are checked now, its rows by the worker)."""
    options = {"project": project, "name": name, "held_out": held_out, "seed": seed, "skip_bad": skip_bad,
               "user": user}
    if upload.size > settings.TRAINING_SET_INLINE_MAX_BYTES:
        return training_file_import_request(upload=upload, **options)
    return training_set_import(file=upload, filename=upload.name or "upload.csv", **options)

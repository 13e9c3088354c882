"""Folders of files (a LoRA adapter, a training checkpoint) kept in Django's default storage, so that every worker
on every machine reads the same ones: a local folder by default, any S3-compatible store in production. Storage
has files, not folders: a folder is the files under a name prefix."""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path, PurePosixPath

from django.conf import settings
from django.core.files import File
from django.core.files.storage import default_storage

from labeling.exceptions import DomainError

# Storage prefixes that hold folders made by the product (a judge may name only these: never a user's upload).
ADAPTER_PREFIX = "adapters/"
CHECKPOINT_PREFIX = "finetune/"
COPY_CHUNK = 1 << 20


class StorageFolderError(DomainError):
    """A storage folder that is not where the product keeps such folders, or that holds no files."""


def _files(prefix: str) -> list[str]:
    """Every file name under `prefix` (recursively), relative to it."""
    found, todo = [], [""]
    while todo:
        sub = todo.pop()
        try:
            folders, names = default_storage.listdir(prefix + sub)
        except FileNotFoundError:
            continue
        found += [sub + name for name in names]
        todo += [sub + folder + "/" for folder in folders]
    return sorted(found)


def folder_upload(local: Path, prefix: str) -> str:
    """Copy every file of the local folder `local` to storage under `prefix` (ending with "/"), replacing what
    is there; returns the prefix."""
    folder_delete(prefix)
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        with path.open("rb") as handle:
            name = prefix + path.relative_to(local).as_posix()
            saved = default_storage.save(name, File(handle))
            if saved != name:
                raise StorageFolderError(f"storage stored {name!r} as {saved!r}: a file of that name was there")
    return prefix


def folder_download(prefix: str, local: Path) -> Path:
    """The files under `prefix` copied into the new local folder `local` (written beside it, then renamed, so a
    reader never sees half a folder); StorageFolderError when there are none."""
    names = _files(prefix)
    if not names:
        raise StorageFolderError(f"storage holds no files under {prefix!r}")
    local.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=local.parent, prefix=f".{local.name}-"))
    try:
        for name in names:
            target = staging / PurePosixPath(name)
            target.parent.mkdir(parents=True, exist_ok=True)
            with default_storage.open(prefix + name, "rb") as source, target.open("wb") as out:
                shutil.copyfileobj(source, out, COPY_CHUNK)
        try:
            os.rename(staging, local)
        except OSError:
            if not local.is_dir():  # another process put it there first: theirs is as good
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return local


def folder_delete(prefix: str) -> None:
    for name in _files(prefix):
        default_storage.delete(prefix + name)


def adapter_local(prefix: str, marker: str = "adapter_config.json") -> str:
    """A local copy of the adapter stored under `prefix` (a cross-encoder student's whole model folder: `marker`
    config.json), fetched once per machine into ADAPTER_CACHE_DIR (stored adapters never change: a new one has a
    new prefix)."""
    if not prefix.startswith(ADAPTER_PREFIX) or ".." in prefix.split("/") or not prefix.endswith("/"):
        raise StorageFolderError(f"{prefix!r} is not a stored adapter (adapters live under {ADAPTER_PREFIX})")
    local = Path(settings.ADAPTER_CACHE_DIR) / hashlib.sha256(prefix.encode()).hexdigest()[:24]
    if not (local / marker).is_file():
        folder_download(prefix, local)
    if not (local / marker).is_file():
        raise StorageFolderError(f"the stored adapter {prefix!r} holds no {marker}")
    return str(local)

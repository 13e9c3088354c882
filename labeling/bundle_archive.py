"""Unpacking an uploaded bundle archive (.zip, .tar.gz) that nobody vouches for into a fresh folder, in a child
process where a parser bomb costs a bounded time and nothing else: it runs labeling.bundle_archive_unpack (which checks
each header and member before acting on it) under a cap on its memory and CPU time, and is killed past a wall-clock
deadline. Whatever stops it ends as ArchiveRefused naming the reason, with the folder left empty. Plain Python: the
limits come from the caller."""
from __future__ import annotations

import json
import os
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from labeling.exceptions import DomainError

# The child's exit status when it ran out of memory (RLIMIT_AS) and could not say so on stdout.
EXIT_NO_MEMORY = 86
_CHILD = "labeling.bundle_archive_unpack"
# The child finds the labeling package from the folder that holds it.
_PROJECT_ROOT = Path(__file__).resolve().parent.parent
# Of the child's stderr, the end is kept: its last line says why it stopped when it did not say so itself.
_STDERR_KEPT = 4096

ProgressFn = Callable[[int, int], None]  # (members read, bytes written) so far


class ArchiveRefused(DomainError):
    """The archive is not unpacked: the message says why, naming the member or the limit."""


@dataclass(frozen=True)
class ArchiveLimits:
    max_bytes: int  # all members together, unpacked; for a tar.gz, every byte gunzipped (BUNDLE_EXPAND_MAX_BYTES)
    max_members: int  # every header, skipped members included (BUNDLE_MAX_MEMBERS)
    max_ratio: float  # unpacked bytes per compressed byte: a zip's member and whole archive, a tar.gz's stream
    max_header_bytes: int  # a tar's extended header (pax, GNU long name), read whole by tarfile
    seconds: int  # wall clock, from the child's start
    cpu_seconds: int
    memory_mb: int  # the child's address space


def archive_kind(name: str) -> str | None:
    """'zip' or 'tar.gz' by the file name's ending, None for anything else."""
    lowered = name.lower()
    if lowered.endswith(".zip"):
        return "zip"
    if lowered.endswith((".tar.gz", ".tgz")):
        return "tar.gz"
    return None


def archive_extract(*, source: Path, name: str, into: Path, limits: ArchiveLimits,
                    progress: ProgressFn | None = None) -> Path:
    """Unpack the archive at `source` (its kind from the uploaded file's `name`) into the empty folder `into` in a
    child process, and return the bundle's folder: `into` itself, or the one folder at its top when everything sits
    inside one. ArchiveRefused says why an archive is not unpacked, naming the member or the limit, with `into`
    emptied; `progress(members, bytes)` is called after each file."""
    if archive_kind(name) is None:
        raise ArchiveRefused(f"{name}: not a .zip or .tar.gz file")
    try:
        _unpack_in_child(source=source, name=name, into=into, limits=limits, progress=progress)
    except BaseException:
        # A part of a refused archive is of no use, and an error the task retries needs the folder empty again.
        _empty(into)
        raise
    return bundle_folder(into)


def bundle_folder(root: Path) -> Path:
    """`root`, or the one folder in it when it holds nothing else: a bundle zipped with its folder."""
    entries = list(root.iterdir())
    if len(entries) == 1 and entries[0].is_dir():
        return entries[0]
    return root


def _empty(folder: Path) -> None:
    for entry in folder.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _unpack_in_child(*, source: Path, name: str, into: Path, limits: ArchiveLimits,
                     progress: ProgressFn | None) -> None:
    request = json.dumps({"source": str(source.resolve()), "name": name, "into": str(into.resolve()),
                          "limits": asdict(limits)})
    # -E -s and an empty environment: no PYTHON* variable, user site or secret of the worker reaches the child.
    command = [sys.executable, "-E", "-s", "-X", "utf8", "-m", _CHILD, request]
    cpu_before = _children_cpu()
    deadline = time.monotonic() + limits.seconds
    with subprocess.Popen(command, cwd=_PROJECT_ROOT, env={}, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE) as child:
        try:
            outcome, errors = _follow(child, deadline=deadline, progress=progress)
            status = child.wait(timeout=max(deadline - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
            raise ArchiveRefused(f"{name}: unpacking took longer than {limits.seconds:,} s "
                                 "(BUNDLE_UNPACK_SECONDS)") from None
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    if outcome is not None and status == 0:
        if "refused" in outcome:
            raise ArchiveRefused(outcome["refused"])
        return
    if status == -signal.SIGXCPU or _children_cpu() - cpu_before >= limits.cpu_seconds:
        raise ArchiveRefused(f"{name}: unpacking used more than {limits.cpu_seconds:,} s of CPU "
                             "(BUNDLE_UNPACK_CPU_SECONDS)")
    if status == EXIT_NO_MEMORY or b"MemoryError" in errors:
        raise ArchiveRefused(f"{name}: unpacking needed more than {limits.memory_mb:,} MB of memory "
                             "(BUNDLE_UNPACK_MEMORY_MB)")
    last = errors.decode("utf-8", "replace").strip().rsplit("\n", 1)[-1]
    raise ArchiveRefused(f"{name}: unpacking stopped unexpectedly ({last or f'exit status {status}'})")


def _follow(child: subprocess.Popen, *, deadline: float,
            progress: ProgressFn | None) -> tuple[dict | None, bytes]:
    """Read the child's stdout and stderr until both end, passing its progress on: (its last message, the end of
    its stderr). subprocess.TimeoutExpired past the deadline."""
    outcome, pending, errors = None, b"", b""
    with selectors.DefaultSelector() as selector:
        selector.register(child.stdout, selectors.EVENT_READ)
        selector.register(child.stderr, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(child.args, 0)
            for key, _ in selector.select(left):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    selector.unregister(key.fileobj)
                elif key.fileobj is child.stderr:
                    errors = (errors + chunk)[-_STDERR_KEPT:]
                else:
                    *lines, pending = (pending + chunk).split(b"\n")
                    for line in lines:
                        message = json.loads(line)
                        if "members" not in message:
                            outcome = message
                        elif progress is not None:
                            progress(message["members"], message["bytes"])
    return outcome, errors

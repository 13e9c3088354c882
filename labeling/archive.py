"""Unpacking an uploaded bundle archive (.zip, .tar.gz) that nobody vouches for into a fresh folder. Every member
is checked before a byte of it is written: a path that leaves the folder, a link, a device, an encrypted member,
too many members, too many bytes (declared and actually unpacked) or an absurd expansion ratio stops the
extraction with a message naming the member. Plain Python: the limits come from the caller."""
from __future__ import annotations

import gzip
import re
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from labeling.exceptions import DomainError

ARCHIVE_SUFFIXES = (".zip", ".tar.gz", ".tgz")
CHUNK = 1 << 20
# Below this many bytes a member's ratio is not judged: a small file of blanks compresses a thousandfold honestly.
RATIO_FLOOR = 1 << 20
# What macOS's archiver adds beside the files (resource forks, folder settings): skipped, never written.
_MAC_LITTER = "__MACOSX"
_DRIVE = re.compile(r"^[A-Za-z]:")

ProgressFn = Callable[[int, int], None]  # (members written, bytes written) so far


class ArchiveRefused(DomainError):
    """The archive is not unpacked (the message says why, naming the member); the folder may hold a part of it."""


@dataclass(frozen=True)
class ArchiveLimits:
    max_bytes: int  # all members together, unpacked
    max_members: int
    max_ratio: float  # unpacked bytes per compressed byte, for a member (zip) or the whole stream (tar.gz)


def archive_kind(name: str) -> str | None:
    """'zip' or 'tar.gz' by the file name's ending, None for anything else."""
    lowered = name.lower()
    if lowered.endswith(".zip"):
        return "zip"
    if lowered.endswith((".tar.gz", ".tgz")):
        return "tar.gz"
    return None


def member_path(name: str) -> PurePosixPath | None:
    """The member's path inside the bundle, or None for a member that is skipped (macOS's litter, the folder '.');
    ArchiveRefused for a path that could land outside the folder."""
    if "\x00" in name or "\\" in name:
        raise ArchiveRefused(f"{name!r}: a path with a backslash or NUL; bundles use '/' between folders")
    if name.startswith("/") or _DRIVE.match(name):
        raise ArchiveRefused(f"{name!r}: an absolute path; bundle members are relative to the bundle")
    parts = [part for part in PurePosixPath(name).parts if part != "."]
    if ".." in parts:
        raise ArchiveRefused(f"{name!r}: a path with '..', which would leave the bundle's folder")
    if not parts or parts[0] == _MAC_LITTER or parts[-1] == ".DS_Store":
        return None
    return PurePosixPath(*parts)


class _Writer:
    """Writes members into `root`, counting members and bytes against the limits as the bytes come."""

    def __init__(self, root: Path, limits: ArchiveLimits, progress: ProgressFn | None) -> None:
        self.root, self.limits, self.progress = root, limits, progress
        self.members = 0
        self.written = 0
        self.seen: set[PurePosixPath] = set()

    def target(self, name: str, path: PurePosixPath) -> Path:
        if path in self.seen:
            raise ArchiveRefused(f"{name!r}: the archive holds this path twice")
        self.seen.add(path)
        self.members += 1
        if self.members > self.limits.max_members:
            raise ArchiveRefused(f"{name!r}: more than {self.limits.max_members:,} members (BUNDLE_MAX_MEMBERS)")
        target = self.root.joinpath(*path.parts)
        # member_path refused '..' and absolute paths; a folder of the bundle that is a file is refused here.
        for parent in reversed(target.relative_to(self.root).parents[:-1]):
            if (self.root / parent).is_file():
                raise ArchiveRefused(f"{name!r}: {parent.as_posix()!r} is a file, not a folder")
        return target

    def folder(self, name: str, path: PurePosixPath) -> None:
        self.target(name, path).mkdir(parents=True, exist_ok=True)

    def file(self, name: str, path: PurePosixPath, chunks: Iterator[bytes], *, declared: int,
             compressed: Callable[[], int], whole_stream: bool) -> None:
        """Write the member from `chunks`, stopping at the limits. The ratio is the member's (zip: `compressed()` is
        its compressed size) or, with `whole_stream`, the archive's so far (tar.gz: `compressed()` is how far the
        gzip stream has been read)."""
        target = self.target(name, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        size = 0
        with target.open("xb") as handle:
            for chunk in chunks:
                size += len(chunk)
                self.written += len(chunk)
                if size > declared:
                    raise ArchiveRefused(f"{name!r}: unpacks to more bytes than its header declares ({declared:,})")
                self._check_total(name)
                self._check_ratio(name, self.written if whole_stream else size, compressed())
                handle.write(chunk)
        if self.progress is not None:
            self.progress(self.members, self.written)

    def _check_total(self, name: str) -> None:
        if self.written > self.limits.max_bytes:
            raise ArchiveRefused(f"{name!r}: the archive unpacks to more than {self.limits.max_bytes:,} bytes "
                                 "(BUNDLE_EXPAND_MAX_BYTES)")

    def _check_ratio(self, name: str, unpacked: int, compressed: int) -> None:
        if unpacked > RATIO_FLOOR and unpacked > self.limits.max_ratio * max(compressed, 1):
            raise ArchiveRefused(f"{name!r}: expands more than {self.limits.max_ratio:g} times its compressed size "
                                 "(BUNDLE_MAX_RATIO): refused as a zip bomb")


def _chunks(handle: BinaryIO) -> Iterator[bytes]:
    while chunk := handle.read(CHUNK):
        yield chunk


def _file_type(info: zipfile.ZipInfo) -> int:
    """The member's file type bits (stat.S_IFMT): Unix archivers keep st_mode in the high 16 bits of external_attr;
    others, and writers that keep only permissions there, leave 0 (a plain file or folder)."""
    return stat.S_IFMT(info.external_attr >> 16) if info.create_system == 3 else 0


def _extract_zip(source: Path, writer: _Writer) -> None:
    with zipfile.ZipFile(source) as archive:
        infos = archive.infolist()
        if len(infos) > writer.limits.max_members:
            raise ArchiveRefused(f"the archive has {len(infos):,} members, more than {writer.limits.max_members:,} "
                                 "(BUNDLE_MAX_MEMBERS)")
        declared = sum(info.file_size for info in infos)
        if declared > writer.limits.max_bytes:
            raise ArchiveRefused(f"the archive declares {declared:,} bytes unpacked, more than "
                                 f"{writer.limits.max_bytes:,} (BUNDLE_EXPAND_MAX_BYTES)")
        for info in infos:
            path = member_path(info.filename)
            kind = _file_type(info)
            if kind == stat.S_IFLNK:
                raise ArchiveRefused(f"{info.filename!r}: a symbolic link; bundles hold only files and folders")
            if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
                raise ArchiveRefused(f"{info.filename!r}: a device, pipe or socket; bundles hold only files and "
                                     "folders")
            if info.flag_bits & 0x1:
                raise ArchiveRefused(f"{info.filename!r}: encrypted; upload the bundle without a password")
            if path is None:
                continue
            if info.is_dir():
                writer.folder(info.filename, path)
                continue
            if info.file_size > writer.limits.max_ratio * max(info.compress_size, 1) and info.file_size > RATIO_FLOOR:
                raise ArchiveRefused(f"{info.filename!r}: declares {info.file_size:,} bytes from "
                                     f"{info.compress_size:,} compressed, more than {writer.limits.max_ratio:g} "
                                     "times (BUNDLE_MAX_RATIO): refused as a zip bomb")
            with archive.open(info) as handle:
                # A member's own ratio: the bytes read from the archive are at most its compressed size.
                writer.file(info.filename, path, _chunks(handle), declared=info.file_size,
                            compressed=lambda size=info.compress_size: size, whole_stream=False)


def _extract_tar(source: Path, writer: _Writer) -> None:
    with source.open("rb") as raw, tarfile.open(fileobj=raw, mode="r|gz") as archive:
        for member in archive:
            path = member_path(member.name)
            if member.issym() or member.islnk():
                kind = "symbolic" if member.issym() else "hard"
                raise ArchiveRefused(f"{member.name!r}: a {kind} link to {member.linkname!r}; bundles hold only "
                                     "files and folders")
            if member.isdev():
                raise ArchiveRefused(f"{member.name!r}: a device or pipe; bundles hold only files and folders")
            if not (member.isreg() or member.isdir()):
                raise ArchiveRefused(f"{member.name!r}: not a plain file or folder")
            if path is None:
                continue
            if member.isdir():
                writer.folder(member.name, path)
                continue
            handle = archive.extractfile(member)
            writer.file(member.name, path, _chunks(handle), declared=member.size, compressed=raw.tell,
                        whole_stream=True)


def archive_extract(*, source: Path, name: str, into: Path, limits: ArchiveLimits,
                    progress: ProgressFn | None = None) -> Path:
    """Unpack the archive at `source` (its kind from the uploaded file's `name`) into the empty folder `into` and
    return the bundle's folder: `into` itself, or the one folder at its top when everything sits inside one.
    ArchiveRefused says why an archive is not unpacked, naming the member; `progress(members, bytes)` is called
    after each file."""
    kind = archive_kind(name)
    if kind is None:
        raise ArchiveRefused(f"{name}: not a .zip or .tar.gz file")
    writer = _Writer(into, limits, progress)
    try:
        if kind == "zip":
            _extract_zip(source, writer)
        else:
            _extract_tar(source, writer)
    except (zipfile.BadZipFile, tarfile.TarError, gzip.BadGzipFile, zlib.error, EOFError, NotImplementedError) as exc:
        raise ArchiveRefused(f"{name}: not a readable {kind} archive ({exc})") from None
    return bundle_folder(into)


def bundle_folder(root: Path) -> Path:
    """`root`, or the one folder in it when it holds nothing else: a bundle zipped with its folder."""
    entries = list(root.iterdir())
    if len(entries) == 1 and entries[0].is_dir():
        return entries[0]
    return root

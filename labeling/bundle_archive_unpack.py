"""Unpacking an archive in this process, checking each tar header before tarfile acts on it and every member before
a byte of it is written: what the child process that labeling.bundle_archive starts runs (`python -m
labeling.bundle_archive_unpack REQUEST`), under the memory and CPU limits it sets on itself first. Imports nothing from
Django: the child starts with the standard library and this package's plain modules."""
from __future__ import annotations

import ctypes
import ctypes.util
import gzip
import json
import os
import re
import resource
import signal
import stat
import sys
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from labeling.bundle_archive import EXIT_NO_MEMORY, ArchiveLimits, ArchiveRefused, ProgressFn, archive_kind
from labeling.decompress import RATIO_FLOOR, ExpansionLimits, ExpansionRefused, gzip_bounded

# prctl(2): the signal this process gets when the thread that started it ends.
PR_SET_PDEATHSIG = 1

CHUNK = 1 << 20
# What macOS's archiver adds beside the files (resource forks, folder settings): skipped, never written.
_MAC_LITTER = "__MACOSX"
_DRIVE = re.compile(r"^[A-Za-z]:")
# Headers that tarfile reads whole into memory and parses before it returns the member they describe.
_EXTENDED = (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE, tarfile.XGLTYPE,
             tarfile.SOLARIS_XHDTYPE)
# GNU tar and bsdtar put at most a global header, a pax header and a long name and link before a member; tarfile
# reads a chain of them by recursion, so a longer one is refused before it can pile up.
_MAX_EXTENDED_CHAIN = 4
# A pax record's length: at most 20 digits, so that finding it costs a bounded number of steps.
_PAX_LENGTH = re.compile(rb"(\d{1,20}) ")


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
    """Counts every member against the limits, skipped or not, and writes members into `root`, counting their bytes
    as they come."""

    def __init__(self, root: Path, limits: ArchiveLimits, progress: ProgressFn | None) -> None:
        self.root, self.limits, self.progress = root, limits, progress
        self.members = 0
        self.written = 0
        self.seen: set[PurePosixPath] = set()

    def count(self, name: str) -> None:
        self.members += 1
        if self.members > self.limits.max_members:
            raise ArchiveRefused(f"{name!r}: more than {self.limits.max_members:,} members (BUNDLE_MAX_MEMBERS)")

    def target(self, name: str, path: PurePosixPath) -> Path:
        if path in self.seen:
            raise ArchiveRefused(f"{name!r}: the archive holds this path twice")
        self.seen.add(path)
        target = self.root.joinpath(*path.parts)
        # member_path refused '..' and absolute paths; a folder of the bundle that is a file is refused here.
        for parent in reversed(target.relative_to(self.root).parents[:-1]):
            if (self.root / parent).is_file():
                raise ArchiveRefused(f"{name!r}: {parent.as_posix()!r} is a file, not a folder")
        return target

    def folder(self, name: str, path: PurePosixPath) -> None:
        self.target(name, path).mkdir(parents=True, exist_ok=True)

    def file(self, name: str, path: PurePosixPath, chunks: Iterator[bytes], *, declared: int) -> None:
        """Write the member from `chunks`, stopping at its declared size and at the archive's total."""
        target = self.target(name, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        size = 0
        with target.open("xb") as handle:
            for chunk in chunks:
                size += len(chunk)
                self.written += len(chunk)
                if size > declared:
                    raise ArchiveRefused(f"{name!r}: unpacks to more bytes than its header declares ({declared:,})")
                if self.written > self.limits.max_bytes:
                    raise ArchiveRefused(f"{name!r}: the archive unpacks to more than {self.limits.max_bytes:,} "
                                         "bytes (BUNDLE_EXPAND_MAX_BYTES)")
                handle.write(chunk)
        if self.progress is not None:
            self.progress(self.members, self.written)


def _chunks(handle: BinaryIO) -> Iterator[bytes]:
    while chunk := handle.read(CHUNK):
        yield chunk


def _file_type(info: zipfile.ZipInfo) -> int:
    """The member's file type bits (stat.S_IFMT): Unix archivers keep st_mode in the high 16 bits of external_attr;
    others, and writers that keep only permissions there, leave 0 (a plain file or folder)."""
    return stat.S_IFMT(info.external_attr >> 16) if info.create_system == 3 else 0


def _zip_bomb(who: str, unpacked: int, compressed: int, ratio: float) -> ArchiveRefused:
    return ArchiveRefused(f"{who} declares {unpacked:,} bytes from {compressed:,} compressed, more than {ratio:g} "
                          "times (BUNDLE_MAX_RATIO): refused as a zip bomb")


def _extract_zip(source: Path, writer: _Writer) -> None:
    limits = writer.limits
    with zipfile.ZipFile(source) as archive:
        infos = archive.infolist()
        if len(infos) > limits.max_members:
            raise ArchiveRefused(f"the archive has {len(infos):,} members, more than {limits.max_members:,} "
                                 "(BUNDLE_MAX_MEMBERS)")
        # zipfile never returns more than a member's declared size: the declared sizes bound what is unpacked,
        # member by member and for the whole archive, before a byte is.
        declared = sum(info.file_size for info in infos)
        if declared > limits.max_bytes:
            raise ArchiveRefused(f"the archive declares {declared:,} bytes unpacked, more than {limits.max_bytes:,} "
                                 "(BUNDLE_EXPAND_MAX_BYTES)")
        size = source.stat().st_size
        if declared > RATIO_FLOOR and declared > limits.max_ratio * size:
            raise _zip_bomb("the archive", declared, size, limits.max_ratio)
        for info in infos:
            writer.count(info.filename)
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
            # A small member of blanks compresses a thousandfold honestly; the whole archive's ratio bounds many.
            if info.file_size > RATIO_FLOOR and info.file_size > limits.max_ratio * max(info.compress_size, 1):
                raise _zip_bomb(f"{info.filename!r}:", info.file_size, info.compress_size, limits.max_ratio)
            with archive.open(info) as handle:
                writer.file(info.filename, path, _chunks(handle), declared=info.file_size)


class _HeaderGuard:
    """Refuses a tar header before tarfile reads what follows it: a sparse file, an extended header (long name,
    pax) larger than BUNDLE_MAX_HEADER_BYTES (tarfile reads one whole into memory), a chain of them, and global
    headers larger than that together (they apply to every later member)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.chain = 0
        self.global_bytes = 0

    def check(self, info: tarfile.TarInfo) -> None:
        if info.type == tarfile.GNUTYPE_SPARSE:
            raise _sparse(info)
        if info.type not in _EXTENDED:
            self.chain = 0
            return
        where = f"the extended header at byte {info.offset:,}"
        self.chain += 1
        if self.chain > _MAX_EXTENDED_CHAIN:
            raise ArchiveRefused(f"{where}: more than {_MAX_EXTENDED_CHAIN} extended headers before one member")
        if info.size > self.max_bytes:
            raise ArchiveRefused(f"{where}: {info.size:,} bytes, more than {self.max_bytes:,} "
                                 "(BUNDLE_MAX_HEADER_BYTES)")
        if info.type == tarfile.XGLTYPE:
            self.global_bytes += info.size
            if self.global_bytes > self.max_bytes:
                raise ArchiveRefused(f"{where}: global headers of more than {self.max_bytes:,} bytes together "
                                     "(BUNDLE_MAX_HEADER_BYTES)")


def _sparse(member: tarfile.TarInfo) -> ArchiveRefused:
    return ArchiveRefused(f"{member.name!r}: a sparse file; bundles hold only plain files and folders")


def _pax_records(buf: bytes, where: str) -> list[tuple[bytes, bytes]]:
    """(keyword, value) of each record `LENGTH keyword=value\\n` of a pax header, each found from the length before
    it: linear in the header's size (tarfile 3.11.7 searches the header in quadratic time, CVE-2024-6232)."""
    records, pos = [], 0
    while pos < len(buf) and buf[pos] != 0:
        match = _PAX_LENGTH.match(buf, pos)
        length = int(match.group(1)) if match else 0
        end = pos + length - 1
        keyword, equals, value = buf[match.end():end].partition(b"=") if match else (b"", b"", b"")
        # The shortest record is '5 k=\n'.
        if length < 5 or end >= len(buf) or buf[end] != ord("\n") or not keyword or not equals:
            raise ArchiveRefused(f"{where}: a record at byte {pos:,} is not `LENGTH keyword=value`")
        records.append((keyword, value))
        pos += length
    return records


def _guarded_tarinfo(guard: _HeaderGuard) -> type[tarfile.TarInfo]:
    """A TarInfo whose headers `guard` checks first and whose pax headers are parsed in linear time. tarfile parses
    a header in TarInfo._proc_member and the _proc_* methods, which its source names as the place for a subclass to
    step in. A refusal is not a tarfile.HeaderError, which tarfile takes, past the first header, for the archive's
    end (a truncated bundle would be imported)."""

    class GuardedTarInfo(tarfile.TarInfo):
        def _proc_member(self, archive: tarfile.TarFile) -> tarfile.TarInfo:
            guard.check(self)
            return super()._proc_member(archive)

        def _proc_pax(self, archive: tarfile.TarFile) -> tarfile.TarInfo:
            """tarfile's, with _pax_records; a sparse member is refused instead of having its map read."""
            records = _pax_records(archive.fileobj.read(self._block(self.size)),
                                   f"the pax header at byte {self.offset:,}")
            headers = archive.pax_headers if self.type == tarfile.XGLTYPE else archive.pax_headers.copy()
            binary = (b"hdrcharset", b"BINARY") in records or headers.get("hdrcharset") == "BINARY"
            encoding = archive.encoding if binary else "utf-8"
            for raw_keyword, raw_value in records:
                keyword = self._decode_pax_field(raw_keyword, "utf-8", "utf-8", archive.errors)
                headers[keyword] = (
                    self._decode_pax_field(raw_value, encoding, archive.encoding, archive.errors)
                    if keyword in tarfile.PAX_NAME_FIELDS
                    else self._decode_pax_field(raw_value, "utf-8", "utf-8", archive.errors))
            try:
                member = self.fromtarfile(archive)
            except tarfile.HeaderError as exc:
                raise tarfile.SubsequentHeaderError(str(exc)) from None
            if any(keyword.startswith("GNU.sparse.") for keyword in headers):
                raise _sparse(member)
            if self.type in (tarfile.XHDTYPE, tarfile.SOLARIS_XHDTYPE):
                member._apply_pax_info(headers, archive.encoding, archive.errors)
                member.offset = self.offset
                if "size" in headers:
                    # The pax size replaces the header's: the next header starts after the member's data.
                    offset = member.offset_data
                    if member.isreg() or member.type not in tarfile.SUPPORTED_TYPES:
                        offset += member._block(member.size)
                    archive.offset = offset
            return member

    return GuardedTarInfo


def _extract_tar(source: Path, name: str, writer: _Writer) -> None:
    limits = writer.limits
    # Every byte gunzipped counts (headers, skipped members, padding), not only those written.
    expansion = ExpansionLimits(max_bytes=limits.max_bytes, max_ratio=limits.max_ratio)
    tarinfo = _guarded_tarinfo(_HeaderGuard(limits.max_header_bytes))
    with gzip_bounded(source.open("rb"), name=name, limits=expansion) as stream, \
            tarfile.open(fileobj=stream, mode="r|", tarinfo=tarinfo) as archive:
        while (member := archive.next()) is not None:
            # A stream's members are not looked up again; tarfile would keep every header it read.
            archive.members.clear()
            writer.count(member.name)
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
            try:
                writer.file(member.name, path, _chunks(archive.extractfile(member)), declared=member.size)
            except ExpansionRefused as exc:
                raise ArchiveRefused(f"{member.name!r}: {exc.reason}") from None


def archive_unpack(*, source: Path, name: str, into: Path, limits: ArchiveLimits,
                   progress: ProgressFn | None = None) -> None:
    """Unpack the archive at `source` (its kind from the uploaded file's `name`) into the empty folder `into`, in
    this process: ArchiveRefused says why not, naming the member or the limit; the folder may then hold a part of
    it. `progress(members, bytes)` is called after each file. The limits on time and memory are
    labeling.bundle_archive's, which runs this in a child process."""
    kind = archive_kind(name)
    if kind is None:
        raise ArchiveRefused(f"{name}: not a .zip or .tar.gz file")
    writer = _Writer(into, limits, progress)
    try:
        if kind == "zip":
            _extract_zip(source, writer)
        else:
            _extract_tar(source, name, writer)
    except ExpansionRefused as exc:
        # Met between members, while tarfile reads a header or skips a member: the message names the archive.
        raise ArchiveRefused(str(exc)) from None
    except (zipfile.BadZipFile, tarfile.TarError, gzip.BadGzipFile, zlib.error, EOFError, NotImplementedError) as exc:
        raise ArchiveRefused(f"{name}: not a readable {kind} archive ({exc})") from None


def _lower_limit(kind: int, soft: int, hard: int) -> None:
    """Set a resource limit no higher than the one this process was given."""
    _, given = resource.getrlimit(kind)
    if given != resource.RLIM_INFINITY:
        soft, hard = min(soft, given), min(hard, given)
    resource.setrlimit(kind, (soft, hard))


def _die_with_parent() -> None:
    """On Linux, end with the worker that started this child: a worker killed outright (SIGKILL) would otherwise
    leave it unpacking until its CPU limit, since the wall clock is the parent's to keep."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError, TypeError):
        return  # no prctl here: the CPU limit still ends it
    if os.getppid() == 1:  # the parent died before prctl: nobody will read what this child writes
        os._exit(1)


def _report(**message: object) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main(argv: list[str]) -> None:
    """The child: ARGV[1] is the request as JSON ({source, name, into, limits}); each line on stdout is JSON, the
    progress ({members, bytes}) and last the outcome ({ok} or {refused: message})."""
    request = json.loads(argv[1])
    limits = ArchiveLimits(**request["limits"])
    _die_with_parent()
    _lower_limit(resource.RLIMIT_AS, limits.memory_mb << 20, limits.memory_mb << 20)
    # SIGXCPU ends the child at the soft limit; the hard one a second later, should it be caught.
    _lower_limit(resource.RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds + 1)
    # No core file of a child ended by SIGXCPU.
    _lower_limit(resource.RLIMIT_CORE, 0, 0)
    try:
        archive_unpack(source=Path(request["source"]), name=request["name"], into=Path(request["into"]),
                       limits=limits, progress=lambda members, written: _report(members=members, bytes=written))
    except ArchiveRefused as exc:
        _report(refused=str(exc))
    except MemoryError:
        # Saying so could need the memory that ran out: the exit status says it.
        os._exit(EXIT_NO_MEMORY)
    else:
        _report(ok=True)


if __name__ == "__main__":
    main(sys.argv)

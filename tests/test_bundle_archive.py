"""labeling.bundle_archive on hostile archives, built here byte by byte with zipfile, tarfile and zlib: paths that leave
the folder, links, devices, bombs, too many members and parser bombs (CVE-2024-6232's pax header, a 300 MB long name)
are refused with a message naming the member or the limit, within seconds and a bounded memory, and the folder is
left empty; the child process's own limits (wall clock, CPU, memory) hold; honest bundles unpack, at the top or
inside one folder, with progress reported."""
from __future__ import annotations

import gzip
import io
import os
import resource
import stat
import struct
import subprocess
import sys
import tarfile
import time
import zipfile
import zlib
from dataclasses import replace
from pathlib import Path

import pytest

from labeling.bundle_archive import ArchiveLimits, ArchiveRefused, archive_extract

MIB = 1 << 20
# The settings' defaults: what a worker unpacks an upload with.
DEFAULTS = ArchiveLimits(max_bytes=8 << 30, max_members=10_000, max_ratio=200, max_header_bytes=64 << 10,
                         seconds=600, cpu_seconds=300, memory_mb=256)
LIMITS = replace(DEFAULTS, max_bytes=64 * MIB, max_members=100)
BUNDLE = {"queries.jsonl": b'{"_id": "q1", "text": "a question"}\n', "corpus.jsonl": b'{"_id": "d1", "text": "x"}\n'}
# What refusing a hostile archive may cost: wall clock, and growth of this process's peak memory. The child's is
# capped by memory_mb (256 MB): past it, the refusal would name BUNDLE_UNPACK_MEMORY_MB instead of the cause.
SECONDS = 5
PARENT_GROWTH = 50 * MIB


def _zip(path: Path, members: dict[str, bytes], *, method: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression=method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]], **options: object) -> Path:
    with tarfile.open(path, "w:gz", **options) as archive:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _file(name: str) -> tarfile.TarInfo:
    return tarfile.TarInfo(name)


def _header(name: str, kind: bytes, size: int) -> bytes:
    """One 512-byte tar header declaring `size` bytes, whatever follows it."""
    info = tarfile.TarInfo(name)
    info.type, info.size = kind, size
    return info.tobuf(format=tarfile.GNU_FORMAT)


def _member(name: str, data: bytes) -> bytes:
    return _header(name, tarfile.REGTYPE, len(data)) + data + b"\0" * (-len(data) % 512)


END = b"\0" * 1024


def _zeros_after(prefix: bytes, *, mib: int) -> bytes:
    """A gzip stream of `prefix` and then `mib` MiB of zeros, cut off there (whoever reads it stops first): 1 KB a
    MiB, built from one deflated MiB repeated, since deflate codes every MiB of zeros after the first alike."""
    zeros = b"\0" * MIB
    deflate = zlib.compressobj(9, zlib.DEFLATED, 31)
    first = deflate.compress(prefix + zeros) + deflate.flush(zlib.Z_SYNC_FLUSH)
    again = deflate.compress(zeros) + deflate.flush(zlib.Z_SYNC_FLUSH)
    assert again == deflate.compress(zeros) + deflate.flush(zlib.Z_SYNC_FLUSH)
    return first + again * (mib - 1)


def _zip_of_zeros(path: Path, *, members: int, size: int) -> Path:
    """A zip of `members` files of `size` zeros, written by hand: the member is deflated once (zipfile would deflate
    each of 8,000 again, for 10 s)."""
    zeros = b"\0" * size
    data, crc = zlib.compress(zeros, 9)[2:-4], zlib.crc32(zeros)
    local, central, offset = [], [], 0
    for i in range(members):
        name = f"runs/{i}.trec".encode()
        # version needed, flags, method, time, date (1980-01-01), CRC, sizes, name and extra lengths
        fields = struct.pack("<5H3L2H", 20, 0, zipfile.ZIP_DEFLATED, 0, 0x21, crc, len(data), size, len(name), 0)
        local.append(b"PK\x03\x04" + fields + name + data)
        # made by, the fields, then comment length, disk, internal and external attributes, local header offset
        central.append(b"PK\x01\x02" + struct.pack("<H", 20) + fields + struct.pack("<3H2L", 0, 0, 0, 0, offset) + name)
        offset += len(local[-1])
    directory = b"".join(central)
    end = b"PK\x05\x06" + struct.pack("<4H2LH", 0, 0, members, members, len(directory), offset, 0)
    path.write_bytes(b"".join(local) + directory + end)
    return path


def _refused(tmp_path: Path, archive: Path, limits: ArchiveLimits = LIMITS) -> str:
    into = tmp_path / "into"
    into.mkdir(parents=True)
    with pytest.raises(ArchiveRefused) as caught:
        archive_extract(source=archive, name=archive.name, into=into, limits=limits)
    assert list(into.iterdir()) == []
    return str(caught.value)


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _refused_quickly(tmp_path: Path, archive: Path, limits: ArchiveLimits = DEFAULTS) -> str:
    """The refusal of a hostile archive, within SECONDS and with this process's peak memory grown by less than
    PARENT_GROWTH."""
    before, start = _peak_rss(), time.monotonic()
    message = _refused(tmp_path, archive, limits)
    assert time.monotonic() - start < SECONDS, message
    assert _peak_rss() - before < PARENT_GROWTH
    return message


def test_a_bundle_at_the_top_of_a_zip_unpacks_there(tmp_path):
    archive = _zip(tmp_path / "b.zip", BUNDLE)
    into = tmp_path / "into"
    into.mkdir()
    root = archive_extract(source=archive, name="b.zip", into=into, limits=LIMITS)
    assert root == into
    assert {path.name: path.read_bytes() for path in root.iterdir()} == BUNDLE


def test_a_bundle_in_one_top_folder_of_a_tar_gz_is_found_there_and_macos_litter_is_skipped(tmp_path):
    members = [(_file(f"climretrieve/{name}"), data) for name, data in BUNDLE.items()]
    members.append((_file("__MACOSX/climretrieve/._queries.jsonl"), b"resource fork"))
    folder = tarfile.TarInfo("climretrieve")
    folder.type = tarfile.DIRTYPE
    archive = _tar(tmp_path / "b.tar.gz", [(folder, None), *members])
    into = tmp_path / "into"
    into.mkdir()
    progress = []
    root = archive_extract(source=archive, name="b.tar.gz", into=into, limits=LIMITS,
                           progress=lambda members, written: progress.append((members, written)))
    assert root == into / "climretrieve"
    assert {path.name: path.read_bytes() for path in root.iterdir()} == BUNDLE
    assert not (into / "__MACOSX").exists()
    # After each file written: the members read so far (the folder first) and the bytes written.
    sizes = [len(data) for data in BUNDLE.values()]
    assert progress == [(2, sizes[0]), (3, sizes[0] + sizes[1])]


def test_a_progress_callback_that_raises_stops_the_child_and_empties_the_folder(tmp_path):
    # As a cancelled job's progress does (bundle_upload's _Stopped): the error goes on to the caller.
    archive = _tar(tmp_path / "b.tar.gz", [(_file(name), data) for name, data in BUNDLE.items()])
    into = tmp_path / "into"
    into.mkdir()

    class Cancelled(Exception):
        pass

    def cancelled(members: int, written: int) -> None:
        raise Cancelled

    with pytest.raises(Cancelled):
        archive_extract(source=archive, name="b.tar.gz", into=into, limits=LIMITS, progress=cancelled)
    assert list(into.iterdir()) == []


def test_the_child_imports_nothing_of_django():
    # It starts with an empty environment and the standard library: no settings, no secret, no database.
    script = "import sys, labeling.bundle_archive_unpack; print(sorted({name.split('.')[0] for name in sys.modules}))"
    loaded = subprocess.run([sys.executable, "-E", "-c", script], cwd=Path(__file__).resolve().parent.parent, env={},
                            capture_output=True, text=True, check=True).stdout
    assert "'labeling'" in loaded and "django" not in loaded


@pytest.mark.parametrize("options", [{"format": tarfile.PAX_FORMAT, "pax_headers": {"comment": "git commit id"}},
                                     {"format": tarfile.GNU_FORMAT}])
def test_pax_and_gnu_headers_of_honest_archivers_are_read(tmp_path, options):
    # Names past ustar's 100 bytes and outside ASCII, which pax headers or GNU long names carry; a global pax header
    # as git archive writes one.
    name = f"bündle/{'deep/' * 30}queries.jsonl"
    archive = _tar(tmp_path / "b.tar.gz", [(_file(name), b"{}\n"), (_file("bündle/corpus.jsonl"), b"[]\n")], **options)
    into = tmp_path / "into"
    into.mkdir()
    root = archive_extract(source=archive, name="b.tar.gz", into=into, limits=LIMITS)
    assert root == into / "bündle"
    assert (into / name).read_bytes() == b"{}\n" and (root / "corpus.jsonl").read_bytes() == b"[]\n"


@pytest.mark.parametrize("member", ["../evil.txt", "bundle/../../evil.txt", "/tmp/evil.txt", "C:/evil.txt",
                                    "bundle\\..\\evil.txt"])
def test_zip_slip_is_refused_naming_the_member_and_nothing_lands_outside(tmp_path, member):
    archive = _zip(tmp_path / "slip.zip", {**BUNDLE, member: b"owned"})
    message = _refused(tmp_path, archive)
    assert repr(member) in message
    assert not (tmp_path / "evil.txt").exists() and not Path("/tmp/evil.txt").exists()


def test_a_tar_gz_with_a_dotdot_member_is_refused_and_what_came_before_it_is_removed(tmp_path):
    archive = _tar(tmp_path / "slip.tar.gz", [(_file("queries.jsonl"), b"{}\n"), (_file("../evil.txt"), b"owned")])
    message = _refused(tmp_path, archive)  # the folder is empty: queries.jsonl was written, then removed
    assert "'../evil.txt'" in message and "'..'" in message
    assert not (tmp_path / "evil.txt").exists()


def test_a_zip_member_that_is_a_symlink_is_refused(tmp_path):
    archive = tmp_path / "link.zip"
    with zipfile.ZipFile(archive, "w") as out:
        out.writestr("queries.jsonl", BUNDLE["queries.jsonl"])
        link = zipfile.ZipInfo("corpus.jsonl")
        link.create_system = 3  # Unix: the high bits of external_attr are st_mode
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        out.writestr(link, "/etc/passwd")
    message = _refused(tmp_path, archive)
    assert "'corpus.jsonl'" in message and "symbolic link" in message


@pytest.mark.parametrize(("kind", "word"), [(tarfile.SYMTYPE, "symbolic link"), (tarfile.LNKTYPE, "hard link")])
def test_a_tar_link_is_refused(tmp_path, kind, word):
    link = _file("corpus.jsonl")
    link.type, link.linkname = kind, "/etc/passwd"
    archive = _tar(tmp_path / "link.tar.gz", [(_file("queries.jsonl"), b"{}\n"), (link, None)])
    message = _refused(tmp_path, archive)
    assert "'corpus.jsonl'" in message and word in message and "/etc/passwd" in message


def test_a_tar_device_and_a_sparse_file_are_refused(tmp_path):
    device = _file("corpus.jsonl")
    device.type, device.devmajor, device.devminor = tarfile.CHRTYPE, 1, 3
    message = _refused(tmp_path, _tar(tmp_path / "dev.tar.gz", [(device, None)]))
    assert "'corpus.jsonl'" in message and "device" in message
    sparse = gzip.compress(_header("queries.jsonl", tarfile.GNUTYPE_SPARSE, 0) + END)
    (tmp_path / "sparse.tar.gz").write_bytes(sparse)
    assert "'queries.jsonl': a sparse file" in _refused(tmp_path / "s", tmp_path / "sparse.tar.gz")


def test_a_zip_bomb_is_refused_from_its_declared_sizes_before_unpacking(tmp_path):
    # A member's own ratio: beside 1 MiB that does not compress, the archive as a whole expands 32 times.
    zeros = b"\0" * (32 * MIB)
    archive = _zip(tmp_path / "bomb.zip", {"corpus.jsonl": os.urandom(MIB), "queries.jsonl": zeros})
    assert archive.stat().st_size * LIMITS.max_ratio > len(zeros) + MIB  # the premise
    message = _refused(tmp_path, archive)
    assert message.startswith("'queries.jsonl': declares") and "zip bomb" in message


def test_a_zip_bomb_alone_is_refused_by_the_whole_archives_ratio(tmp_path):
    zeros = b"\0" * (32 * MIB)
    archive = _zip(tmp_path / "bomb.zip", {"queries.jsonl": zeros})
    message = _refused(tmp_path, archive)
    assert message.startswith("the archive declares") and "zip bomb" in message


def test_many_small_zip_members_of_zeros_are_refused_by_the_whole_archives_ratio(tmp_path):
    # 8,000 members of 1 MiB each (none over the 1 MiB below which a member's own ratio is not judged): 7.8 GiB,
    # within BUNDLE_EXPAND_MAX_BYTES, from 9 MB.
    archive = _zip_of_zeros(tmp_path / "many.zip", members=8000, size=MIB)
    assert 8000 * MIB < DEFAULTS.max_bytes < DEFAULTS.max_ratio * 8000 * MIB / archive.stat().st_size * MIB
    message = _refused_quickly(tmp_path, archive)
    assert message.startswith(f"the archive declares {8000 * MIB:,} bytes from {archive.stat().st_size:,} compressed")
    assert "BUNDLE_MAX_RATIO" in message


def test_a_zip_over_the_expanded_size_limit_is_refused_from_its_declared_total(tmp_path):
    archive = _zip(tmp_path / "big.zip", {"a.jsonl": os.urandom(3000), "b.jsonl": os.urandom(3000)})
    assert "BUNDLE_EXPAND_MAX_BYTES" in _refused(tmp_path, archive, replace(LIMITS, max_bytes=5000))


def test_a_tar_gz_bomb_stops_while_unpacking_at_the_ratio(tmp_path):
    # A tar declares sizes per member as it goes: the stream's actual expansion is what stops it.
    archive = tmp_path / "bomb.tar.gz"
    archive.write_bytes(_zeros_after(_header("queries.jsonl", tarfile.REGTYPE, 4 << 30), mib=4096))
    message = _refused_quickly(tmp_path, archive)
    assert "'queries.jsonl'" in message and "BUNDLE_MAX_RATIO" in message


def test_the_bytes_of_skipped_tar_members_count_toward_the_ratio(tmp_path):
    # macOS's litter is never written, but tarfile gunzips it to get past it: 4 GiB of zeros in 4 MB.
    archive = tmp_path / "litter.tar.gz"
    archive.write_bytes(_zeros_after(_header("__MACOSX/._queries.jsonl", tarfile.REGTYPE, 4 << 30), mib=4096))
    message = _refused_quickly(tmp_path, archive)
    assert message.startswith("litter.tar.gz: unpacks to more than 200 times") and "BUNDLE_MAX_RATIO" in message


def test_a_tar_gz_stops_at_the_expanded_size_limit_while_unpacking(tmp_path):
    archive = _tar(tmp_path / "big.tar.gz", [(_file("a.jsonl"), os.urandom(3000)), (_file("b.jsonl"), os.urandom(3000))])
    assert "BUNDLE_EXPAND_MAX_BYTES" in _refused(tmp_path, archive, replace(LIMITS, max_bytes=5000))


def test_a_pax_header_in_the_shape_of_cve_2024_6232_is_refused_before_it_is_read(tmp_path):
    # 100 KB of digits, which tarfile 3.11.7 searches in quadratic time (20 s; 48 s for the 312-byte original). It
    # comes after a good member: a header error there would read as the archive's end.
    digits = b"1" * 100_000
    archive = tmp_path / "pax.tar.gz"
    archive.write_bytes(gzip.compress(_member("queries.jsonl", b"{}\n") + _header("PaxHeader", tarfile.XHDTYPE, 100_000)
                                      + digits + b"\0" * (-len(digits) % 512) + _member("corpus.jsonl", b"{}\n") + END))
    assert archive.stat().st_size < 400
    message = _refused_quickly(tmp_path, archive)
    assert message == (f"the extended header at byte 1,024: 100,000 bytes, more than {DEFAULTS.max_header_bytes:,} "
                       "(BUNDLE_MAX_HEADER_BYTES)")


def test_a_pax_header_under_the_cap_is_read_in_linear_time(tmp_path):
    # 60 KB of digits would cost tarfile 7 s; its records are found from their lengths instead.
    digits = b"1" * 60_000
    archive = tmp_path / "pax.tar.gz"
    archive.write_bytes(gzip.compress(_header("PaxHeader", tarfile.XHDTYPE, len(digits)) + digits
                                      + b"\0" * (-len(digits) % 512) + _member("queries.jsonl", b"{}\n") + END))
    start = time.monotonic()
    message = _refused_quickly(tmp_path, archive)
    assert time.monotonic() - start < 1
    assert message == "the pax header at byte 0: a record at byte 0 is not `LENGTH keyword=value`"


@pytest.fixture(scope="module")
def long_name(tmp_path_factory) -> Path:
    """A GNU long name declaring 300 MB, with all 300 MB of it (1.4 MB gzipped), which tarfile would read whole."""
    archive = tmp_path_factory.mktemp("long") / "long.tar.gz"
    chunk = b"a" * MIB
    with gzip.open(archive, "wb", compresslevel=1) as out:
        out.write(_header("././@LongLink", tarfile.GNUTYPE_LONGNAME, 300 * MIB))
        for _ in range(300):
            out.write(chunk)
        out.write(_member("queries.jsonl", b"{}\n") + END)
    return archive


def test_a_300_mb_gnu_long_name_is_refused_before_it_is_read(tmp_path, long_name):
    message = _refused_quickly(tmp_path, long_name)
    assert message == (f"the extended header at byte 0: {300 * MIB:,} bytes, more than {DEFAULTS.max_header_bytes:,} "
                       "(BUNDLE_MAX_HEADER_BYTES)")


def test_the_memory_limit_ends_a_child_that_reads_too_much(tmp_path, long_name):
    # Without the header cap and the ratio, tarfile reads the 300 MB name: the child's address space stops it.
    limits = replace(DEFAULTS, max_header_bytes=1 << 30, max_ratio=1e9, memory_mb=128)
    message = _refused_quickly(tmp_path, long_name, limits)
    assert message == "long.tar.gz: unpacking needed more than 128 MB of memory (BUNDLE_UNPACK_MEMORY_MB)"


def test_the_cpu_limit_ends_a_child_that_computes_too_long(tmp_path):
    # 8 GiB of zeros to gunzip past, allowed by every other limit.
    archive = tmp_path / "slow.tar.gz"
    archive.write_bytes(_zeros_after(_header("__MACOSX/._queries.jsonl", tarfile.REGTYPE, (8 << 30) - 1), mib=8192))
    limits = replace(DEFAULTS, max_bytes=1 << 40, max_ratio=1e9, cpu_seconds=1)
    message = _refused_quickly(tmp_path, archive, limits)
    assert message == "slow.tar.gz: unpacking used more than 1 s of CPU (BUNDLE_UNPACK_CPU_SECONDS)"


def test_the_wall_clock_limit_kills_a_child_that_waits(tmp_path):
    # A named pipe that nobody writes: the child waits, using no CPU, until it is killed.
    archive = tmp_path / "stuck.tar.gz"
    os.mkfifo(archive)
    message = _refused_quickly(tmp_path, archive, replace(DEFAULTS, seconds=1))
    assert message == "stuck.tar.gz: unpacking took longer than 1 s (BUNDLE_UNPACK_SECONDS)"


def test_too_many_members_are_refused(tmp_path):
    archive = _zip(tmp_path / "many.zip", {f"runs/{i}.trec": b"q1 Q0 d1 1 1.0 x\n" for i in range(5)})
    limits = replace(LIMITS, max_members=3)
    assert "BUNDLE_MAX_MEMBERS" in _refused(tmp_path, archive, limits)
    tar = _tar(tmp_path / "many.tar.gz", [(_file(f"{i}.jsonl"), b"{}\n") for i in range(5)])
    message = _refused(tmp_path / "tar", tar, limits)
    assert "'3.jsonl'" in message and "BUNDLE_MAX_MEMBERS" in message


def test_skipped_members_count_toward_the_member_limit(tmp_path):
    # 20,000 members that are never written (macOS's litter, the folder '.'): each still costs a header's reading.
    headers = (_header(".", tarfile.DIRTYPE, 0) + _header("__MACOSX/._x", tarfile.REGTYPE, 0)) * 10_000
    archive = tmp_path / "litter.tar.gz"
    archive.write_bytes(gzip.compress(headers + _member("queries.jsonl", b"{}\n") + END))
    message = _refused_quickly(tmp_path, archive)
    assert message == f"'.': more than {DEFAULTS.max_members:,} members (BUNDLE_MAX_MEMBERS)"


def test_a_path_given_twice_is_refused(tmp_path):
    archive = _tar(tmp_path / "twice.tar.gz", [(_file("queries.jsonl"), b"{}\n"), (_file("./queries.jsonl"), b"[]\n")])
    assert "twice" in _refused(tmp_path, archive)


@pytest.mark.parametrize("name", ["junk.zip", "junk.tar.gz"])
def test_a_file_that_is_not_an_archive_is_refused(tmp_path, name):
    junk = tmp_path / name
    junk.write_bytes(b"queries.jsonl is not here\n" * 10)
    assert "not a readable" in _refused(tmp_path, junk)


def test_another_kind_of_file_is_refused_by_its_name(tmp_path):
    plain = tmp_path / "bundle.rar"
    plain.write_bytes(b"x")
    assert "not a .zip or .tar.gz" in _refused(tmp_path, plain)

"""labeling.archive on hostile archives, built here byte by byte with zipfile and tarfile: paths that leave the
folder, links, devices, bombs and too many members are refused with a message naming the member, and nothing is
written outside the folder; honest bundles unpack, at the top or inside one folder."""
from __future__ import annotations

import io
import os
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

from labeling.archive import RATIO_FLOOR, ArchiveLimits, ArchiveRefused, archive_extract

LIMITS = ArchiveLimits(max_bytes=64 * 1024 * 1024, max_members=100, max_ratio=200)
BUNDLE = {"queries.jsonl": b'{"_id": "q1", "text": "a question"}\n', "corpus.jsonl": b'{"_id": "d1", "text": "x"}\n'}


def _zip(path: Path, members: dict[str, bytes], *, method: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression=method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _file(name: str) -> tarfile.TarInfo:
    return tarfile.TarInfo(name)


def _refused(tmp_path: Path, archive: Path, limits: ArchiveLimits = LIMITS) -> str:
    into = tmp_path / "into"
    into.mkdir(parents=True)
    with pytest.raises(ArchiveRefused) as caught:
        archive_extract(source=archive, name=archive.name, into=into, limits=limits)
    return str(caught.value)


def _written(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


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
    root = archive_extract(source=archive, name="b.tar.gz", into=into, limits=LIMITS)
    assert root == into / "climretrieve"
    assert {path.name: path.read_bytes() for path in root.iterdir()} == BUNDLE
    assert not (into / "__MACOSX").exists()


@pytest.mark.parametrize("member", ["../evil.txt", "bundle/../../evil.txt", "/tmp/evil.txt", "C:/evil.txt",
                                    "bundle\\..\\evil.txt"])
def test_zip_slip_is_refused_naming_the_member_and_nothing_lands_outside(tmp_path, member):
    archive = _zip(tmp_path / "slip.zip", {**BUNDLE, member: b"owned"})
    message = _refused(tmp_path, archive)
    assert repr(member) in message
    assert not (tmp_path / "evil.txt").exists() and not Path("/tmp/evil.txt").exists()


def test_a_tar_gz_with_a_dotdot_member_is_refused(tmp_path):
    archive = _tar(tmp_path / "slip.tar.gz", [(_file("queries.jsonl"), b"{}\n"), (_file("../evil.txt"), b"owned")])
    message = _refused(tmp_path, archive)
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
    assert not (tmp_path / "into" / "corpus.jsonl").exists()


def test_a_tar_device_is_refused(tmp_path):
    device = _file("corpus.jsonl")
    device.type, device.devmajor, device.devminor = tarfile.CHRTYPE, 1, 3
    message = _refused(tmp_path, _tar(tmp_path / "dev.tar.gz", [(device, None)]))
    assert "'corpus.jsonl'" in message and "device" in message


def test_a_zip_bomb_is_refused_from_its_declared_sizes_before_unpacking(tmp_path):
    zeros = b"\0" * (32 * 1024 * 1024)
    archive = _zip(tmp_path / "bomb.zip", {"queries.jsonl": zeros})
    assert archive.stat().st_size * LIMITS.max_ratio < len(zeros)  # the premise: an absurd ratio
    message = _refused(tmp_path, archive)
    assert "'queries.jsonl'" in message and "zip bomb" in message
    assert _written(tmp_path / "into") == 0


def test_a_zip_over_the_expanded_size_limit_is_refused_from_its_declared_total(tmp_path):
    archive = _zip(tmp_path / "big.zip", {"a.jsonl": os.urandom(3000), "b.jsonl": os.urandom(3000)})
    limits = ArchiveLimits(max_bytes=5000, max_members=100, max_ratio=200)
    assert "BUNDLE_EXPAND_MAX_BYTES" in _refused(tmp_path, archive, limits)
    assert _written(tmp_path / "into") == 0


def test_a_tar_gz_bomb_stops_while_unpacking_at_the_ratio(tmp_path):
    # A tar declares sizes per member as it goes: the stream's actual expansion is what stops it.
    zeros = b"\0" * (64 * 1024 * 1024)
    archive = _tar(tmp_path / "bomb.tar.gz", [(_file("queries.jsonl"), zeros)])
    message = _refused(tmp_path, archive)
    assert "'queries.jsonl'" in message and "zip bomb" in message
    # It stopped within a chunk of where the ratio was first exceeded, far short of the 64 MiB.
    assert _written(tmp_path / "into") <= RATIO_FLOOR + (1 << 20)


def test_a_tar_gz_stops_at_the_expanded_size_limit_while_unpacking(tmp_path):
    archive = _tar(tmp_path / "big.tar.gz", [(_file("a.jsonl"), os.urandom(3000)), (_file("b.jsonl"), os.urandom(3000))])
    limits = ArchiveLimits(max_bytes=5000, max_members=100, max_ratio=200)
    message = _refused(tmp_path, archive, limits)
    assert "'b.jsonl'" in message and "BUNDLE_EXPAND_MAX_BYTES" in message
    assert _written(tmp_path / "into") <= 3000  # b.jsonl's bytes were never written


def test_too_many_members_are_refused(tmp_path):
    archive = _zip(tmp_path / "many.zip", {f"runs/{i}.trec": b"q1 Q0 d1 1 1.0 x\n" for i in range(5)})
    limits = ArchiveLimits(max_bytes=LIMITS.max_bytes, max_members=3, max_ratio=200)
    assert "BUNDLE_MAX_MEMBERS" in _refused(tmp_path, archive, limits)
    tar = _tar(tmp_path / "many.tar.gz", [(_file(f"{i}.jsonl"), b"{}\n") for i in range(5)])
    message = _refused(tmp_path / "tar", tar, limits)
    assert "'3.jsonl'" in message and "BUNDLE_MAX_MEMBERS" in message


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

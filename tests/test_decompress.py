"""labeling.decompress and bundle_reader.iter_lines on gzip files built here: an honest file reads as gzip reads it
(incompressible, multi-member and small ones included); a bomb, a stream past the total, zero padding and a flood of
empty members are refused within a second, naming the file and the setting; iter_lines reports the refusal as the
file's problem, and reads on without limits when given none (the operator's own files)."""
from __future__ import annotations

import gzip
import io
import os
import time
from pathlib import Path

import pytest

from labeling.bundle_reader import Problems, iter_lines
from labeling.decompress import ExpansionLimits, ExpansionRefused, gzip_bounded

MIB = 1 << 20
# The settings' defaults (BUNDLE_EXPAND_MAX_BYTES, BUNDLE_MAX_RATIO).
LIMITS = ExpansionLimits(max_bytes=8 << 30, max_ratio=200)


def _read(data: bytes, limits: ExpansionLimits = LIMITS) -> bytes:
    with gzip_bounded(io.BytesIO(data), name="run.trec.gz", limits=limits) as stream:
        return stream.read()


def _refusal(data: bytes, limits: ExpansionLimits = LIMITS) -> str:
    start = time.monotonic()
    with pytest.raises(ExpansionRefused) as caught:
        _read(data, limits)
    assert time.monotonic() - start < 1
    return str(caught.value)


@pytest.mark.parametrize("data", [
    b"",
    b"".join(f"q{i // 1000} Q0 d{i * 7919 % 100_003} {i % 1000 + 1} {1 - i % 1000 / 1000:.4f} bm25\n".encode()
             for i in range(100_000)),
    os.urandom(3 * MIB),  # deflate stores what it cannot compress: about as large unpacked as packed
    b" " * 900_000,  # a thousandfold, under the 1 MiB below which the ratio is not judged
], ids=["empty", "run", "random", "blanks"])
def test_honest_files_read_as_gzip_reads_them(data):
    assert _read(gzip.compress(data)) == data


def test_a_file_of_several_members_reads_whole():
    # As `cat a.gz b.gz` and bgzip write them.
    chunks = [os.urandom(64 * 1024) + b"\n" * 1000 for _ in range(40)]
    assert _read(b"".join(gzip.compress(chunk) for chunk in chunks)) == b"".join(chunks)


def test_a_bomb_stops_at_the_ratio():
    message = _refusal(gzip.compress(b"\n" * (20 * MIB)))
    assert message == ("run.trec.gz: unpacks to more than 200 times its compressed size (BUNDLE_MAX_RATIO): refused "
                       "as a decompression bomb")


def test_a_stream_stops_at_the_total():
    message = _refusal(gzip.compress(os.urandom(2 * MIB)), ExpansionLimits(max_bytes=MIB, max_ratio=200))
    assert message == f"run.trec.gz: unpacks to more than {MIB:,} bytes (BUNDLE_EXPAND_MAX_BYTES)"


def test_zero_padding_after_the_stream_is_refused():
    # gzip skips padding one byte per call: 20 MiB of it took 7 s.
    message = _refusal(gzip.compress(b"q1 Q0 d1 1 1.0 t\n") + b"\0" * (20 * MIB))
    assert message.startswith("run.trec.gz: a gzip stream padded or cut into pieces too small")


def test_a_flood_of_empty_members_is_refused():
    # 13 µs each to parse: 2 MB of them took 1.3 s, 512 MB would take 6 minutes.
    message = _refusal(gzip.compress(b"q1 Q0 d1 1 1.0 t\n") + gzip.compress(b"", mtime=0) * 100_000)
    assert message.startswith("run.trec.gz: a gzip stream that unpacks to less than 0.5 times its compressed size")


def test_iter_lines_reports_a_bomb_as_the_files_problem_and_reads_no_further(tmp_path):
    # A run file of 20 MB of newlines in 20 KB.
    path = tmp_path / "run.trec.gz"
    path.write_bytes(gzip.compress(b"q1 Q0 d1 1 1.0 t\n" + b"\n" * (20 * MIB)))
    problems = Problems()
    start = time.monotonic()
    lines = list(iter_lines(path, "runs/bm25.trec.gz", problems, max_line_bytes=MIB, expand_limits=LIMITS))
    assert time.monotonic() - start < 5
    assert lines == [(1, "q1 Q0 d1 1 1.0 t")]
    assert problems.shown == [("runs/bm25.trec.gz: unpacks to more than 200 times its compressed size "
                               "(BUNDLE_MAX_RATIO): refused as a decompression bomb")]


# 64 MiB of blanks on one line and a ranking line: a thousandfold in gzip.
BLANKS = b" " * (64 * MIB) + b"\nq1 Q0 d1 1 1.0 t\n"


def test_iter_lines_without_limits_reads_the_whole_file(tmp_path):
    path = tmp_path / "run.trec.gz"
    path.write_bytes(gzip.compress(BLANKS))
    problems = Problems()
    assert list(iter_lines(path, "run.trec.gz", problems, max_line_bytes=128 * MIB)) == [(2, "q1 Q0 d1 1 1.0 t")]
    assert not problems


def test_iter_lines_reads_a_plain_file_as_it_is(tmp_path):
    path: Path = tmp_path / "run.trec"
    path.write_bytes(BLANKS)  # not gzip: the limits do not apply
    problems = Problems()
    assert list(iter_lines(path, "run.trec", problems, max_line_bytes=128 * MIB, expand_limits=LIMITS)) == [
        (2, "q1 Q0 d1 1 1.0 t")]
    assert not problems

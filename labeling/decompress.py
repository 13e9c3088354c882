"""Reading a gzip file that nobody vouches for: its bytes are counted as they come, and reading stops with
ExpansionRefused, naming the file and the setting, past a total, past an expansion ratio, or when the stream is
built to hold the reader for minutes (gzip parses some of it one byte, or one empty member, at a time). Plain
Python: the limits come from the caller."""
from __future__ import annotations

import gzip
import io
from dataclasses import dataclass
from typing import BinaryIO

from labeling.exceptions import DomainError

# Below this many decompressed bytes the expansion ratio is not judged: a small file of blanks compresses a
# thousandfold honestly.
RATIO_FLOOR = 1 << 20
# gzip reads a member's body 8 KiB at a time, but its header's name and comment, and the zero padding after the
# last member, one byte per call (0.4 µs each: 512 MiB of padding would take minutes). An honest file needs a few
# calls per member; past this many, one call per _BYTES_PER_READ compressed bytes is all a stream may cost.
_READ_ALLOWANCE = 1 << 16
_BYTES_PER_READ = 512
# Deflate never makes data much larger, so an honest stream unpacks to about its size or more; one that, past its
# first _YIELD_FLOOR bytes, unpacks to less than this share of it is made of empty members (13 µs each to parse) or
# padding.
_MIN_YIELD = 0.5
_YIELD_FLOOR = 1 << 18
_BUFFER = 1 << 16


class ExpansionRefused(DomainError):
    """The gzip file was not read to its end: `reason` says which limit it passed; the message names the file too."""

    def __init__(self, name: str, reason: str) -> None:
        self.name, self.reason = name, reason
        super().__init__(f"{name}: {reason}")


@dataclass(frozen=True)
class ExpansionLimits:
    max_bytes: int  # decompressed bytes in all (BUNDLE_EXPAND_MAX_BYTES)
    max_ratio: float  # decompressed bytes per compressed byte, past RATIO_FLOOR (BUNDLE_MAX_RATIO)


class _Meter:
    """The compressed file as gzip reads it, with the counts the limits are checked against: the compressed bytes
    and calls at each of gzip's reads (it may parse many members in one), the decompressed bytes as they come out."""

    def __init__(self, handle: BinaryIO, name: str, limits: ExpansionLimits) -> None:
        self.handle, self.name, self.limits = handle, name, limits
        self.compressed = self.reads = self.unpacked = 0

    def read(self, size: int = -1) -> bytes:
        self.reads += 1
        if self.reads > _READ_ALLOWANCE + self.compressed // _BYTES_PER_READ:
            raise ExpansionRefused(self.name, "a gzip stream padded or cut into pieces too small for an honest file "
                                              f"(more than one read per {_BYTES_PER_READ} bytes)")
        if self.compressed > _YIELD_FLOOR and self.unpacked < _MIN_YIELD * self.compressed:
            raise ExpansionRefused(self.name, f"a gzip stream that unpacks to less than {_MIN_YIELD:g} times its "
                                              "compressed size (empty members or padding)")
        data = self.handle.read(size)
        self.compressed += len(data)
        return data

    def count(self, unpacked: int) -> None:
        self.unpacked += unpacked
        if self.unpacked > self.limits.max_bytes:
            raise ExpansionRefused(self.name, f"unpacks to more than {self.limits.max_bytes:,} bytes "
                                              "(BUNDLE_EXPAND_MAX_BYTES)")
        if self.unpacked > RATIO_FLOOR and self.unpacked > self.limits.max_ratio * max(self.compressed, 1):
            raise ExpansionRefused(self.name, f"unpacks to more than {self.limits.max_ratio:g} times its compressed "
                                              "size (BUNDLE_MAX_RATIO): refused as a decompression bomb")


class _Bounded(io.RawIOBase):
    """The decompressed bytes, each read counted by the meter."""

    def __init__(self, meter: _Meter) -> None:
        self.meter = meter
        self.gzip = gzip.GzipFile(fileobj=meter, mode="rb")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:
        count = self.gzip.readinto1(buffer)
        self.meter.count(count)
        return count

    def close(self) -> None:
        if not self.closed:
            self.gzip.close()
            self.meter.handle.close()
        super().close()


def gzip_bounded(handle: BinaryIO, *, name: str, limits: ExpansionLimits) -> BinaryIO:
    """The decompressed content of the gzip file open in `handle` (closed with it), read as any binary file;
    ExpansionRefused, naming the file as `name`, once a read passes the limits. The ratio compares the bytes
    decompressed so far with those read from `handle`, so a bomb stops within a read of where it passed."""
    return io.BufferedReader(_Bounded(_Meter(handle, name, limits)), buffer_size=_BUFFER)

"""Streaming readers for bundle files: each yields validated records and reports every bad line as
`file:line: what is wrong`. Plain Python (no database): the import service feeds what they yield to the
database, and the ids they check against come from the service."""
from __future__ import annotations

import gzip
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from labeling.decompress import ExpansionLimits, ExpansionRefused, gzip_bounded

MAX_ID_LENGTH = 200
SHOWN_PROBLEMS = 20


@dataclass
class Problems:
    """The problems found so far: the first SHOWN_PROBLEMS in full, and how many there are in all."""

    shown: list[str] = field(default_factory=list)
    total: int = 0

    def add(self, where: str, message: str) -> None:
        self.total += 1
        if len(self.shown) < SHOWN_PROBLEMS:
            self.shown.append(f"{where}: {message}")

    def __bool__(self) -> bool:
        return self.total > 0

    def summary(self) -> str:
        lines = list(self.shown)
        if self.total > len(self.shown):
            lines.append(f"... and {self.total - len(self.shown)} more problems")
        return "\n".join(lines)


def _open(path: Path, name: str, expand_limits: ExpansionLimits | None) -> BinaryIO:
    if path.suffix != ".gz":
        return path.open("rb")
    if expand_limits is None:
        return gzip.open(path, "rb")
    return gzip_bounded(path.open("rb"), name=name, limits=expand_limits)


def iter_lines(
    path: Path, name: str, problems: Problems, *, max_line_bytes: int, expand_limits: ExpansionLimits | None = None
) -> Iterator[tuple[int, str]]:
    """Yield (line number, text) for each non-blank line, decoded as strict UTF-8.

    A line that is not UTF-8 or longer than max_line_bytes is reported and skipped; an over-long line is
    never held in memory whole. A file whose name ends in .gz is read through gzip: with `expand_limits` (an
    upload's), one that expands past them is reported as a problem at `name` and read no further."""
    with _open(path, name, expand_limits) as handle:
        try:
            yield from _lines(handle, name, problems, max_line_bytes=max_line_bytes)
        except ExpansionRefused as exc:
            problems.add(name, exc.reason)


def _lines(handle: BinaryIO, name: str, problems: Problems, *, max_line_bytes: int) -> Iterator[tuple[int, str]]:
    number = 0
    while True:
        raw = handle.readline(max_line_bytes + 1)
        if not raw:
            return
        number += 1
        if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):
                raw = handle.readline(1 << 20)
            problems.add(f"{name}:{number}", f"line longer than {max_line_bytes} bytes")
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.add(f"{name}:{number}", f"bytes that are not UTF-8 (byte {exc.start + 1} of the line)")
            continue
        if number == 1 and text.startswith("\ufeff"):
            text = text[1:]
        text = text.rstrip("\r\n")
        if text.strip():
            yield number, text


def iter_jsonl(
    path: Path, name: str, problems: Problems, *, max_line_bytes: int, expand_limits: ExpansionLimits | None = None
) -> Iterator[tuple[str, dict]]:
    """Yield ("file:line", object) for each line that holds a JSON object."""
    for number, text in iter_lines(path, name, problems, max_line_bytes=max_line_bytes, expand_limits=expand_limits):
        where = f"{name}:{number}"
        try:
            record = json.loads(text)
        except ValueError as exc:
            problems.add(where, f"malformed JSON ({exc})")
            continue
        if not isinstance(record, dict):
            problems.add(where, f"expected a JSON object, got {type(record).__name__}")
            continue
        yield where, record


def iter_tsv(
    path: Path, name: str, problems: Problems, *, required: tuple[str, ...], optional: tuple[str, ...] = (),
    max_line_bytes: int, expand_limits: ExpansionLimits | None = None,
) -> Iterator[tuple[str, dict[str, str]]]:
    """Yield ("file:line", {column: value}) for each data row of a tab-separated file with a header."""
    columns: list[str] | None = None
    for number, text in iter_lines(path, name, problems, max_line_bytes=max_line_bytes, expand_limits=expand_limits):
        where = f"{name}:{number}"
        cells = text.split("\t")
        if columns is None:
            header = [cell.strip() for cell in cells]
            unknown = [c for c in header if c not in required + optional]
            missing = [c for c in required if c not in header]
            if missing or unknown or len(set(header)) != len(header):
                expected = "<TAB>".join(required) + "".join(f" [<TAB>{c}]" for c in optional)
                problems.add(where, f"header must be {expected}, got {'<TAB>'.join(header)!r}")
                return
            columns = header
            continue
        if len(cells) != len(columns):
            problems.add(where, f"expected {len(columns)} tab-separated columns, got {len(cells)}")
            continue
        yield where, dict(zip(columns, [cell.strip() for cell in cells], strict=True))
    if columns is None:
        problems.add(f"{name}:1", "missing header line")


def clean_id(value: Any, what: str, where: str, problems: Problems) -> str | None:
    """An external id: a non-empty string (a JSON integer is taken as its decimal text)."""
    # Fast path for the common case, a short clean string: this runs for every id of every line.
    if type(value) is str and 0 < len(value) <= MAX_ID_LENGTH and "\x00" not in value and value == value.strip():
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        problems.add(where, f"missing field {what!r}" if value is None else f"{what} must be a string")
        return None
    value = value.strip()
    if not value:
        problems.add(where, f"empty {what}")
        return None
    if len(value) > MAX_ID_LENGTH:
        problems.add(where, f"{what} longer than {MAX_ID_LENGTH} characters")
        return None
    if "\x00" in value:
        problems.add(where, f"{what} contains a NUL character")
        return None
    return value


def clean_text(value: Any, what: str, where: str, problems: Problems, *, required: bool) -> str | None:
    """A text field; required ones must be non-empty. Returns "" for an absent optional field."""
    if value is None:
        if required:
            problems.add(where, f"missing field {what!r}")
            return None
        return ""
    if not isinstance(value, str):
        problems.add(where, f"{what} must be a string")
        return None
    if required and not value.strip():
        problems.add(where, f"empty {what}")
        return None
    if "\x00" in value:
        problems.add(where, f"{what} contains a NUL character")
        return None
    return value


def clean_metadata(value: Any, where: str, problems: Problems) -> dict | None:
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.add(where, "metadata must be a JSON object")
        return None
    return value


def clean_probability(value: Any, what: str, where: str, problems: Problems) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        problems.add(where, f"{what} must be a number, got {value!r}")
        return None
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        problems.add(where, f"{what} {value!r} is outside [0, 1]")
        return None
    return float(value)


def clean_guess(value: Any, where: str, problems: Problems) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"yes", "no"}:
        return value.strip().lower() == "yes"
    problems.add(where, f'guess must be "yes" or "no", got {value!r}')
    return None


def clean_int(value: str, what: str, where: str, problems: Problems, *, minimum: int) -> int | None:
    try:
        number = int(value)
    except ValueError:
        problems.add(where, f"{what} must be an integer, got {value!r}")
        return None
    if number < minimum:
        problems.add(where, f"{what} must be at least {minimum}, got {number}")
        return None
    return number

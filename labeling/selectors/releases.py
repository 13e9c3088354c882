"""Reads of frozen qrels releases (#34): a release's exports, byte for byte what they were when it was frozen (TREC
and BEIR are derived from the stored JSONL records in their stored order, JSONL is the stored bytes), checked
against the SHA-256 recorded then; and the difference between two releases."""
from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import orjson
from django.core.files.storage import default_storage
from django.db.models import Q
from django.utils.text import slugify

from labeling.exceptions import Conflict, DomainError, NotFound
from labeling.models import Project, QrelsRelease
from labeling.selectors.export import BEIR_HEADER, QrelsFormat

READ_BLOCK = 1 << 20


class ReleaseNotFound(NotFound):
    """No release by that name in the project."""


class ReleaseDamaged(DomainError):
    """The stored file is missing or its content is not what was frozen (the SHA-256 differs)."""


def releases_of(project: Project) -> list[QrelsRelease]:
    return list(QrelsRelease.objects.filter(project=project).select_related("created_by").order_by("-created_at",
                                                                                                     "-id"))


def release_file_name(release: QrelsRelease, format: QrelsFormat) -> str:
    """The name a downloaded export of `release` is saved under, by the page and the API alike."""
    return f"{release.project.slug}_release_{slugify(release.name) or release.id}.{format.extension}"


def release_by_name(*, project: Project, name: str) -> QrelsRelease:
    found = QrelsRelease.objects.filter(project=project, name=name).first()
    if found is None:
        names = ", ".join(QrelsRelease.objects.filter(project=project).values_list("name", flat=True)) or "none"
        raise ReleaseNotFound(f"project {project.slug!r} has no release {name!r} (its releases: {names})")
    return found


class NoEarlierRelease(Conflict):
    """A diff against "the release before" of the project's first release."""


def release_before(release: QrelsRelease) -> QrelsRelease:
    """The project's release frozen just before `release` (NoEarlierRelease: it is the first)."""
    found = (QrelsRelease.objects.filter(project_id=release.project_id)
             .filter(Q(created_at__lt=release.created_at) | Q(created_at=release.created_at, id__lt=release.id))
             .order_by("-created_at", "-id").first())
    if found is None:
        raise NoEarlierRelease(f"release {release.name!r} is the project's first: name the release to compare with")
    return found


def _unreadable(release: QrelsRelease, exc: OSError) -> ReleaseDamaged:
    return ReleaseDamaged(f"release {release.name!r}: its stored file {release.storage!r} cannot be read "
                          f"({type(exc).__name__})")


def _check(release: QrelsRelease, sha256: str) -> None:
    if sha256 != release.sha256:
        raise ReleaseDamaged(f"release {release.name!r}: its stored file has changed since it was frozen "
                             f"(SHA-256 {sha256[:12]}..., frozen as {release.sha256[:12]}...)")


def release_verify(release: QrelsRelease) -> None:
    """ReleaseDamaged unless the stored file is there and hashes to the recorded SHA-256 (read once, in blocks):
    for a reader that wants the answer before its first byte (a response that has not started yet)."""
    digest = hashlib.sha256()
    try:
        with default_storage.open(release.storage, "rb") as handle:
            while block := handle.read(READ_BLOCK):
                digest.update(block)
    except OSError as exc:
        raise _unreadable(release, exc) from None
    _check(release, digest.hexdigest())


def _raw_lines(release: QrelsRelease) -> Iterator[bytes]:
    """The stored file's lines, hashed as they are read: ReleaseDamaged in place of the last line when they are
    not the bytes that were frozen. Whatever reads a release reads these, so content changed after an earlier
    check is never taken for the release, and a download of it ends in an error rather than complete."""
    digest, held = hashlib.sha256(), None
    try:
        with default_storage.open(release.storage, "rb") as handle:
            for line in handle:
                digest.update(line)
                if held is not None:
                    yield held
                held = line
    except OSError as exc:
        raise _unreadable(release, exc) from None
    _check(release, digest.hexdigest())
    if held is not None:
        yield held


def release_records(release: QrelsRelease) -> Iterator[dict]:
    """The frozen records, in their stored (pool) order; ReleaseDamaged in place of the last one when the file read
    is not what was frozen."""
    for line in _raw_lines(release):
        yield orjson.loads(line)


def release_lines(release: QrelsRelease, format: QrelsFormat, *, verify: bool = True) -> Iterator[str]:
    """The release exported as `format`, line by line, as qrels_lines writes the live export: TREC `qid 0 docid
    grade`, BEIR under its header, JSONL the stored records. Verified against its SHA-256 first (ReleaseDamaged;
    `verify` False: the caller did), and again as it is read (ReleaseDamaged in place of the last line)."""
    if verify:
        release_verify(release)
    if format is QrelsFormat.JSONL:
        for line in _raw_lines(release):
            yield line.decode("utf-8")
        return
    if format is QrelsFormat.BEIR:
        yield BEIR_HEADER
        template = "{}\t{}\t{}\n"
    else:
        template = "{} 0 {} {}\n"
    for record in release_records(release):
        if record["grade"] is not None:
            yield template.format(record["query_id"], record["doc_id"], record["grade"])


@dataclass
class ReleaseDiff:
    """What changed from release `a` to release `b`, over the graded pairs: pairs added (graded in b only), removed
    (graded in a only) and whose grade changed, each as (query id, doc id[, grade a, grade b]), and per query."""

    a: str
    b: str
    added: list[tuple[str, str, int]] = field(default_factory=list)
    removed: list[tuple[str, str, int]] = field(default_factory=list)
    changed: list[tuple[str, str, int, int]] = field(default_factory=list)

    def per_query(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for kind in ("added", "removed", "changed"):
            for row in getattr(self, kind):
                out.setdefault(row[0], {"added": 0, "removed": 0, "changed": 0})[kind] += 1
        return dict(sorted(out.items()))

    def as_json(self) -> dict:
        return {"a": self.a, "b": self.b,
                "added": [{"query_id": q, "doc_id": d, "grade": g} for q, d, g in self.added],
                "removed": [{"query_id": q, "doc_id": d, "grade": g} for q, d, g in self.removed],
                "changed": [{"query_id": q, "doc_id": d, "grade_a": ga, "grade_b": gb}
                            for q, d, ga, gb in self.changed],
                "per_query": self.per_query()}


def _grades(release: QrelsRelease) -> dict[tuple[str, str], int]:
    release_verify(release)
    return {(record["query_id"], record["doc_id"]): record["grade"] for record in release_records(release)
            if record["grade"] is not None}


def release_diff(a: QrelsRelease, b: QrelsRelease) -> ReleaseDiff:
    """The graded pairs added, removed and changed from `a` to `b` (sorted by query, then doc id)."""
    first, second = _grades(a), _grades(b)
    diff = ReleaseDiff(a=a.name, b=b.name)
    for key in sorted(first.keys() | second.keys()):
        if key not in first:
            diff.added.append((*key, second[key]))
        elif key not in second:
            diff.removed.append((*key, first[key]))
        elif first[key] != second[key]:
            diff.changed.append((*key, first[key], second[key]))
    return diff

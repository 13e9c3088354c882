"""Freezing qrels (#34): an admin freezes the current qrels of a source under a name. The release stores the JSONL
export of that moment (every pool pair with its grade from the source, the judges' raw and calibrated P, the
labels and the systems that found it) once in Django's storage, with its SHA-256, the definition versions, the
judge and calibrator in use, the threshold and the counts. Nothing changes a release afterwards: its exports are
read from the stored bytes (labeling/selectors/releases.py)."""
from __future__ import annotations

import hashlib
import tempfile
import uuid

import orjson
from django.contrib.auth.models import AbstractBaseUser
from django.core.files import File
from django.core.files.storage import default_storage
from django.db import IntegrityError, transaction

from labeling.exceptions import Conflict, DomainError, Forbidden
from labeling.models import Membership, Project, QrelsRelease, Query
from labeling.names import NameRefused, clean_name
from labeling.selectors.definitions import current_definitions
from labeling.selectors.export import ExportError, export_source_parse, pair_records
from labeling.selectors.projects import project_role

RELEASE_PREFIX = "releases/"
NAME_MAX_LENGTH = QrelsRelease._meta.get_field("name").max_length


class ReleaseError(DomainError):
    """A release that cannot be made as asked (the message names what)."""


class ReleaseForbidden(ReleaseError, Forbidden):
    """Someone other than a project admin tried to freeze qrels."""


class ReleaseConflict(ReleaseError, Conflict):
    """The name is taken: a release is never replaced."""


def release_create(*, project: Project, by: AbstractBaseUser, name: str, source: str = "human",
                   threshold: float | None = None, description: str = "") -> QrelsRelease:
    """Freeze the project's qrels from `source` (human, judge:NAME, combined:NAME; `threshold` for a judge's P)
    under `name`. Project admins only; ReleaseError names a bad field, ReleaseConflict a name taken."""
    if project_role(user=by, project=project) != Membership.Role.ADMIN:
        raise ReleaseForbidden("only a project admin can freeze qrels")
    try:
        name = clean_name(name, what="release name", max_length=NAME_MAX_LENGTH)
        parsed = export_source_parse(project=project, source=source, threshold=threshold)
    except (NameRefused, ExportError) as exc:
        raise ReleaseError(str(exc)) from None
    if QrelsRelease.objects.filter(project=project, name=name).exists():
        raise ReleaseConflict(f"project {project.slug!r} has a release named {name!r} already: a release is never "
                              "replaced, choose another name")
    relevant_from = project.label_scale.relevant_from
    digest, counts, graded_queries = hashlib.sha256(), {"pairs": 0, "graded": 0, "relevant": 0}, set()
    with tempfile.TemporaryFile() as handle:
        for record in pair_records(project=project, source=parsed):
            line = orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)
            digest.update(line)
            handle.write(line)
            counts["pairs"] += 1
            if record["grade"] is not None:
                counts["graded"] += 1
                counts["relevant"] += record["grade"] >= relevant_from
                graded_queries.add(record["query_id"])
        handle.seek(0)
        stored = default_storage.save(f"{RELEASE_PREFIX}{project.id}/{uuid.uuid4().hex}.jsonl", File(handle))
    queries = dict(Query.objects.filter(project=project).values_list("id", "external_id"))
    definitions = {queries[query_id]: definition.version
                   for query_id, definition in current_definitions(queries).items()}
    try:
        with transaction.atomic():
            return QrelsRelease.objects.create(
                project=project, name=name, description=description, source=parsed.judge_label if not parsed.combined
                else f"combined:{parsed.judge.name}", threshold=parsed.threshold if parsed.judge else None,
                rule=parsed.rule.text if parsed.judge else "", judge_name=parsed.judge.name if parsed.judge else "",
                calibrator=parsed.grading_calibrator.to_json() if parsed.grading_calibrator else None, definitions=definitions,
                relevant_from=relevant_from, storage=stored, sha256=digest.hexdigest(), queries=len(graded_queries),
                created_by=by, **counts)
    except IntegrityError:
        default_storage.delete(stored)
        raise ReleaseConflict(f"project {project.slug!r} has a release named {name!r} already") from None

"""Bundle import: validate every line of a bundle folder, then merge it into a project in one transaction.

All or nothing: any problem (a bad line, an unknown id, a conflict with stored data) leaves the database
as it was and is reported as `file:line: what is wrong`. Importing the same bundle again writes nothing."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.validators import validate_slug
from django.db import connection, transaction
from django.utils import timezone

from labeling.bundle_reader import Problems
from labeling.decompress import ExpansionLimits
from labeling.exceptions import DomainError
from labeling.models import Judge, Label, Membership, Passage, Project, Query, Run
from labeling.names import NameRefused, clean_name
from labeling.scale import DEFAULT_SCALE, LabelScale, ScaleError
from labeling.selectors.query_sets import query_set_name
from labeling.services.bundle_merge import BundleMerger
from labeling.services.bundle_stage import (
    MAX_USERNAME_LENGTH,
    BundleLayout,
    BundleLayoutError,
    BundleStager,
    staging_tables,
)
from labeling.services.projects import NAME_MAX_LENGTH, project_name_refusal
from labeling.services.runs import run_file_matches, run_file_store
from labeling.services.validation import validation_request
from labeling.staging import StagingTable

# Writes that change what the validation report shows.
# Rows whose change makes the validation report and the Systems page's cached evaluation stale (query metadata holds
# the query sets and intents that LVHQ and the per-intent figures read).
_VALIDATION_INPUTS = ("pairs", "reference grades", "labels", "labels superseded", "judgments", "definitions",
                      "queries", "query metadata updated")


class BundleImportError(DomainError):
    """The bundle was not imported; `problems` lists what is wrong, each naming its file and line."""

    def __init__(self, problems: Problems) -> None:
        self.problems = problems
        super().__init__(f"{problems.total} problem(s); nothing was imported:\n{problems.summary()}")


@dataclass(frozen=True)
class ImportReport:
    project_slug: str
    project_created: bool
    written: dict[str, int] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return self.project_created or any(self.written.values())


@dataclass(frozen=True)
class UploadRights:
    """What a bundle uploaded through the pages or the API may write, against the operator's `import_bundle`
    (which passes no rights and may write anything): its labels are attributed to members of the project, or to
    imported annotators of their own (IMPORTED_PREFIX + name, who cannot log in), never to other accounts; and
    adjudicator labels, which become gold, only when `adjudicator_labels` (the uploader is staff)."""

    adjudicator_labels: bool


# No account can be given such a name otherwise: Django's user name validator refuses ':'.
IMPORTED_PREFIX = "import:"


@dataclass(frozen=True)
class _ProjectFields:
    name: str | None
    description: str | None
    scale: LabelScale | None


def bundle_import(*, path: Path, project_slug: str, all_pairs: bool = False,
                  upload: UploadRights | None = None, expand_limits: ExpansionLimits | None = None,
                  before_commit: Callable[[], None] | None = None, admin: str | None = None,
                  query_set: str | None = None) -> ImportReport:
    """Import the bundle folder at `path` into project `project_slug` (created when missing).

    project.json's name and description fill a new project's, or an existing project's that are empty: the name
    and description a person gave when creating the project are kept. A new project's name (project.json's, else
    the slug) that another project has, whatever the case, is a problem. `admin`: the user name of an account made
    an admin member of the project (the operator's command names one, since a project it creates has no member).

    The pool is pairs.tsv in file order, then every other pair that qrels, labels or judgments name; with
    `all_pairs` (always for DIRAS input) it is completed to every query x passage. `upload`: the rights of an
    archive uploaded by a project admin (UploadRights); None for the operator's command. `expand_limits`: how far
    an uploaded bundle's .gz files may expand; None (no limit) for the operator's own files. `before_commit` is
    called inside the import's transaction once everything is written: what it raises rolls the import back (a
    job that was cancelled meanwhile). `query_set`: the query set (LVHQ, labeling.selectors.query_sets) of the
    bundle's queries whose metadata names none."""
    problems = Problems()
    if query_set is not None:
        try:
            query_set = query_set_name(query_set)
        except NameRefused as exc:
            problems.add("--query-set", str(exc))
            raise BundleImportError(problems) from None
    try:
        validate_slug(project_slug)
    except ValidationError:
        problems.add("--project", f"{project_slug!r} is not a slug (letters, digits, '-' and '_')")
        raise BundleImportError(problems) from None
    try:
        layout = BundleLayout.locate(Path(path))
    except BundleLayoutError as exc:
        problems.add(str(path), str(exc).removeprefix(f"{path}: "))
        raise BundleImportError(problems) from None
    fields = _read_project_json(layout, problems)
    if problems:
        raise BundleImportError(problems)

    with transaction.atomic():
        project, created = _project_upsert(slug=project_slug, fields=fields, problems=problems)
        if project is None or problems:
            raise BundleImportError(problems)
        admin_written = _admin_ensure(project=project, username=admin, problems=problems)
        if problems:
            raise BundleImportError(problems)
        tables = staging_tables(connection)
        for table in tables.values():
            table.create()
        stager = BundleStager(
            layout=layout,
            tables=tables,
            scale=project.label_scale,
            known_queries=list(Query.objects.filter(project=project).values_list("external_id", flat=True)),
            known_passages=list(Passage.objects.filter(project=project).values_list("external_id", flat=True)),
            max_line_bytes=settings.IMPORT_MAX_LINE_BYTES,
            problems=problems,
            expand_limits=expand_limits,
            query_set=query_set,
        )
        stager.stage_all()
        all_pairs = all_pairs or layout.diras
        if all_pairs:
            _check_all_pairs_size(stager, problems)
        if problems:
            raise BundleImportError(problems)
        written = admin_written | _merge(project=project, stager=stager, tables=tables, all_pairs=all_pairs,
                                         problems=problems, upload=upload)
        if problems:
            raise BundleImportError(problems)
        for table in tables.values():
            table.drop()
        if any(written.get(key) for key in _VALIDATION_INPUTS):
            validation_request(project=project)
        if before_commit is not None:
            before_commit()
    return ImportReport(project_slug=project.slug, project_created=created, written=written)


def _merge(
    *, project: Project, stager: BundleStager, tables: dict[str, StagingTable], all_pairs: bool, problems: Problems,
    upload: UploadRights | None,
) -> dict[str, int]:
    merger = BundleMerger(connection=connection, project_id=project.id, now=timezone.now(), report=problems.add)
    written = merger.queries()
    curdef = StagingTable(
        connection, "import_stage_curdef", [("qext", "text"), ("query_id", "bigint"), ("definition_id", "bigint")]
    )
    tables["curdef"] = curdef
    merger.current_definitions(curdef)
    written |= merger.passages()
    written |= merger.pairs(all_pairs=all_pairs)
    names, namespaced = stager.annotators, 0
    if upload is not None:
        names, namespaced = _labels_restrict(project=project, table=tables["label"], names=names, upload=upload,
                                             problems=problems)
        if problems:
            return {}
    written["annotators"] = _annotators_ensure(project=project, names=names)
    if namespaced:
        written["annotators imported as import:NAME"] = namespaced
    written |= merger.labels()
    written["judges"] = _judges_ensure(project=project, names=stager.judges)
    written |= merger.judgments()
    written |= _runs_store(project=project, stager=stager, problems=problems)
    return written


def _runs_store(*, project: Project, stager: BundleStager, problems: Problems) -> dict[str, int]:
    """Store the bundle's runs, now that the ids they name are stored. A run of the same name that holds the same
    rankings is left alone (a re-import writes nothing); one that differs is a problem."""
    if not stager.runs:
        return {}
    query_ids = dict(Query.objects.filter(project=project).values_list("external_id", "id"))
    passage_ids = dict(Passage.objects.filter(project=project).values_list("external_id", "id")
                       .iterator(chunk_size=50_000))
    stored = {run.name: run for run in Run.objects.filter(project=project, name__in=[r.name for r in stager.runs])}
    new = []
    for staged in stager.runs:
        run = stored.get(staged.name)
        if run is None:
            new.append(staged)
        elif not run_file_matches(run=run, run_file=staged.run_file, query_ids=query_ids, passage_ids=passage_ids):
            problems.add(staged.where, f"a run named {staged.name!r} exists (with other rankings)")
    if problems:
        return {}
    for staged in new:
        run_file_store(project=project, name=staged.name, run_file=staged.run_file, query_ids=query_ids,
                       passage_ids=passage_ids, source=staged.where)
    return {"runs": len(new), "run entries": sum(staged.run_file.entries for staged in new)}


def _read_project_json(layout: BundleLayout, problems: Problems) -> _ProjectFields:
    if layout.project_json is None:
        return _ProjectFields(name=None, description=None, scale=None)
    where = layout.name(layout.project_json)
    try:
        data = json.loads(layout.project_json.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        problems.add(f"{where}:1", f"bytes that are not UTF-8 (byte {exc.start + 1})")
        return _ProjectFields(None, None, None)
    except ValueError as exc:
        problems.add(f"{where}:{getattr(exc, 'lineno', 1)}", f"malformed JSON ({exc})")
        return _ProjectFields(None, None, None)
    if not isinstance(data, dict):
        problems.add(f"{where}:1", "expected a JSON object")
        return _ProjectFields(None, None, None)
    name, description, scale = data.get("name"), data.get("description"), None
    for key, value in (("name", name), ("description", description)):
        if value is not None and not isinstance(value, str):
            problems.add(where, f"{key} must be a string")
    if isinstance(name, str) and not 0 < len(name.strip()) <= 200:
        problems.add(where, "name must be 1 to 200 characters")
    if "scale" in data:
        try:
            scale = LabelScale.from_json(data["scale"])
        except ScaleError as exc:
            problems.add(where, f"scale: {exc}")
    return _ProjectFields(name=name, description=description, scale=scale)


def _project_name(name: str, *, where: str, project: Project | None, problems: Problems) -> str:
    """`name` as a project's name (labeling.names), or "" with the problem: a name the rule refuses, or one another
    project has."""
    try:
        name = clean_name(name, what="project name", max_length=NAME_MAX_LENGTH)
    except NameRefused as exc:
        problems.add(where, str(exc))
        return ""
    refusal = project_name_refusal(name=name, project=project)
    if refusal is not None:
        problems.add(where, refusal)
        return ""
    return name


def _project_upsert(*, slug: str, fields: _ProjectFields, problems: Problems) -> tuple[Project | None, bool]:
    """The project `slug` and whether it was created (None: it could not be, see `problems`). project.json fills
    what is empty only: the name and description someone gave the project are theirs."""
    project = Project.objects.select_for_update().filter(slug=slug).first()
    if project is None:
        name = _project_name(fields.name or slug, where="project.json" if fields.name else "--project", project=None,
                             problems=problems)
        if not name:
            return None, False
        project = Project.objects.create(
            slug=slug,
            name=name,
            description=fields.description or "",
            scale=(fields.scale or DEFAULT_SCALE).to_json(),
        )
        return project, True
    changed = []
    if fields.name is not None and not project.name:
        name = _project_name(fields.name, where="project.json", project=project, problems=problems)
        if name:
            project.name = name
            changed.append("name")
    if fields.description and not project.description:
        project.description = fields.description
        changed.append("description")
    if fields.scale is not None and fields.scale != project.label_scale:
        if project.pairs.exists():
            problems.add("project.json", f"the scale differs from the one project {slug!r} already uses for its pairs")
        else:
            project.scale = fields.scale.to_json()
            changed.append("scale")
    if changed:
        project.save(update_fields=changed)
    return project, False


def _admin_ensure(*, project: Project, username: str | None, problems: Problems) -> dict[str, int]:
    """Make the account `username` an admin member of the project (None: nobody); a name no account has is a
    problem."""
    if username is None:
        return {}
    user_model = get_user_model()
    user = user_model.objects.filter(**{user_model.USERNAME_FIELD: username}).first()
    if user is None:
        problems.add("--admin", f"there is no user named {username!r} (manage.py ensure_admin creates one)")
        return {}
    membership, created = Membership.objects.get_or_create(project=project, user=user,
                                                           defaults={"role": Membership.Role.ADMIN})
    if created or membership.role == Membership.Role.ADMIN:
        return {"admins": int(created)}
    membership.role = Membership.Role.ADMIN
    membership.save(update_fields=["role"])
    return {"admins": 1}


def _check_all_pairs_size(stager: BundleStager, problems: Problems) -> None:
    size = len(stager.query_index) * len(stager.passage_index)
    if size > settings.IMPORT_MAX_ALL_PAIRS:
        problems.add(
            "--all-pairs",
            f"every query x passage is {len(stager.query_index):,} x {len(stager.passage_index):,} = {size:,} pairs, "
            f"more than IMPORT_MAX_ALL_PAIRS={settings.IMPORT_MAX_ALL_PAIRS:,}; give a pairs.tsv pool instead",
        )


def _labels_restrict(*, project: Project, table: StagingTable, names: set[str], upload: UploadRights,
                     problems: Problems) -> tuple[set[str], int]:
    """An upload's staged labels as an upload may write them: an adjudicator row without the right is a problem;
    an annotator who is not a member of the project is renamed IMPORTED_PREFIX + name, so an upload never writes
    in the name of an account it does not own. Returns the annotator names after renaming and how many were."""
    with connection.cursor() as cursor:
        if not upload.adjudicator_labels:
            cursor.execute(f"SELECT src FROM {table.name} WHERE role = %s ORDER BY seq",
                           [Label.Role.ADJUDICATOR.value])
            for (where,) in cursor.fetchall():
                problems.add(where, "an adjudicator label (gold) needs a staff account to upload; ask staff, or import "
                                    "the bundle on the server with manage.py import_bundle")
        members = set(Membership.objects.filter(project=project, user__username__in=names)
                      .values_list("user__username", flat=True))
        outsiders = sorted(names - members)
        for name in outsiders:
            if len(IMPORTED_PREFIX + name) > MAX_USERNAME_LENGTH:
                cursor.execute(f"SELECT MIN(src) FROM {table.name} WHERE annotator = %s", [name])
                problems.add(cursor.fetchone()[0], f"annotator {name!r} is not a member of the project, and its name "
                             f"is too long to be kept as {IMPORTED_PREFIX}NAME (at most "
                             f"{MAX_USERNAME_LENGTH - len(IMPORTED_PREFIX)} characters)")
        cursor.executemany(f"UPDATE {table.name} SET annotator = %s WHERE annotator = %s",
                           [(IMPORTED_PREFIX + name, name) for name in outsiders])
    return members | {IMPORTED_PREFIX + name for name in outsiders}, len(outsiders)


def _annotators_ensure(*, project: Project, names: set[str]) -> int:
    """Users for the annotators a file names. New ones cannot log in (no usable password); imported annotators
    (IMPORTED_PREFIX) are not even active accounts."""
    user_model = get_user_model()
    existing = set(user_model.objects.filter(username__in=names).values_list("username", flat=True))
    new_users = []
    for name in sorted(names - existing):
        user = user_model(username=name, is_active=not name.startswith(IMPORTED_PREFIX))
        user.set_unusable_password()
        new_users.append(user)
    user_model.objects.bulk_create(new_users)
    users = user_model.objects.filter(username__in=names)
    members = set(Membership.objects.filter(project=project, user__in=users).values_list("user_id", flat=True))
    Membership.objects.bulk_create(
        Membership(project=project, user=user, role=Membership.Role.EXPERT) for user in users if user.id not in members
    )
    return len(new_users)


def _judges_ensure(*, project: Project, names: set[str]) -> int:
    existing = set(Judge.objects.filter(project=project, name__in=names).values_list("name", flat=True))
    new = [Judge(project=project, name=name, backend=Judge.Backend.IMPORT) for name in sorted(names - existing)]
    Judge.objects.bulk_create(new)
    return len(new)

"""Frozen qrels releases (#34): a release exports byte for byte what the live export gave when it was frozen, and
still does after new labels; the diff of two releases lists exactly the pairs that changed; a damaged file, a name
taken, a non-admin and bad sources are refused."""
import hashlib
import io
import json
from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.core.management import CommandError, call_command

from labeling.models import Membership, Pair, QrelsRelease
from labeling.selectors.export import QrelsFormat, export_source_parse, qrels_lines
from labeling.selectors.releases import ReleaseDamaged, release_diff, release_lines
from labeling.services.releases import ReleaseConflict, ReleaseError, ReleaseForbidden, release_create
from tests.factories import MembershipFactory, UserFactory
from tests.selectors.test_systems import systems_project

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    built = systems_project()
    admin, viewer = UserFactory(username="admin1"), UserFactory()
    MembershipFactory(project=built.project, user=admin, role=Membership.Role.ADMIN)
    MembershipFactory(project=built.project, user=viewer, role=Membership.Role.VIEWER)
    return built.project, admin, viewer


def exported(release, fmt) -> str:
    return "".join(release_lines(release, fmt))


def live(project, fmt, source="human", threshold=None) -> str:
    return "".join(qrels_lines(project=project, format=fmt,
                               source=export_source_parse(project=project, source=source, threshold=threshold)))


def test_a_release_exports_what_it_froze_forever_and_the_diff_lists_the_changes(world):
    project, admin, _ = world
    first = release_create(project=project, by=admin, name="v1")
    frozen = {fmt: exported(first, fmt) for fmt in QrelsFormat}
    for fmt in QrelsFormat:
        assert frozen[fmt] == live(project, fmt), fmt
    assert first.graded == len(frozen[QrelsFormat.TREC].splitlines()) and first.sha256
    # New grades: one pair graded for the first time, one regraded, one grade withdrawn.
    pairs = {(p.query.external_id, p.passage.external_id): p for p in
             Pair.objects.filter(project=project).select_related("query", "passage")}
    new, regraded, withdrawn = pairs[("q1", "d5")], pairs[("q1", "d1")], pairs[("q3", "d7")]
    assert new.reference_grade is None and regraded.reference_grade == 2 and withdrawn.reference_grade == 2
    Pair.objects.filter(id=new.id).update(reference_grade=2)
    Pair.objects.filter(id=regraded.id).update(reference_grade=0)
    Pair.objects.filter(id=withdrawn.id).update(reference_grade=None)
    assert live(project, QrelsFormat.TREC) != frozen[QrelsFormat.TREC]
    for fmt in QrelsFormat:
        assert exported(first, fmt) == frozen[fmt]  # byte-identical after the new labels
    second = release_create(project=project, by=admin, name="v2")
    diff = release_diff(first, second)
    assert diff.added == [("q1", "d5", 2)] and diff.changed == [("q1", "d1", 2, 0)]
    assert diff.removed == [("q3", "d7", 2)]
    assert diff.per_query() == {"q1": {"added": 1, "removed": 0, "changed": 1},
                                "q3": {"added": 0, "removed": 1, "changed": 0}}
    judge = release_create(project=project, by=admin, name="llm", source="judge:llm", threshold=0.6)
    assert exported(judge, QrelsFormat.BEIR) == live(project, QrelsFormat.BEIR, "judge:llm", 0.6)
    assert (judge.source, judge.threshold, judge.judge_name) == ("judge:llm", 0.6, "llm")


def test_what_cannot_be_frozen_or_read_is_refused(world):
    project, admin, viewer = world
    made = release_create(project=project, by=admin, name="v1")
    with pytest.raises(ReleaseConflict, match="never replaced"):
        release_create(project=project, by=admin, name=" v1 ")
    with pytest.raises(ReleaseForbidden):
        release_create(project=project, by=viewer, name="v9")
    with pytest.raises(ReleaseError, match="threshold"):
        release_create(project=project, by=admin, name="v9", threshold=0.5)
    with pytest.raises(ReleaseError, match="no judge"):
        release_create(project=project, by=admin, name="v9", source="judge:missing")
    with pytest.raises(ReleaseError, match="control"):
        release_create(project=project, by=admin, name="v\x009")
    assert QrelsRelease.objects.count() == 1
    default_storage.delete(made.storage)
    default_storage.save(made.storage, ContentFile(b'{"query_id": "q1", "doc_id": "d1", "grade": 2}\n'))
    with pytest.raises(ReleaseDamaged, match="has changed since it was frozen"):
        exported(QrelsRelease.objects.get(), QrelsFormat.TREC)


def test_the_command_freezes_lists_exports_and_diffs(world, tmp_path):
    project, _, _ = world
    out = io.StringIO()
    call_command("qrels_release", "create", project=project.slug, name="v1", by="admin1", stdout=out)
    assert "Release 'v1' frozen" in out.getvalue()
    Pair.objects.filter(project=project, query__external_id="q1", passage__external_id="d5").update(
        reference_grade=1)
    call_command("qrels_release", "create", project=project.slug, name="v2", by="admin1", stdout=io.StringIO())
    listing = io.StringIO()
    call_command("qrels_release", "list", project=project.slug, as_json=True, stdout=listing)
    assert [row["name"] for row in json.loads(listing.getvalue())] == ["v2", "v1"]
    target = tmp_path / "v1.qrels"
    call_command("qrels_release", "export", project=project.slug, name="v1", format="trec", output=str(target),
                 stderr=io.StringIO())
    assert target.read_text() == exported(QrelsRelease.objects.get(name="v1"), QrelsFormat.TREC)
    diff = io.StringIO()
    call_command("qrels_release", "diff", "v1", "v2", project=project.slug, as_json=True, stdout=diff)
    assert json.loads(diff.getvalue())["added"] == [{"query_id": "q1", "doc_id": "d5", "grade": 1}]
    with pytest.raises(CommandError, match="no release 'v3'"):
        call_command("qrels_release", "diff", "v1", "v3", project=project.slug, stdout=io.StringIO())


def test_the_api_freezes_exports_and_diffs(world):
    from rest_framework.test import APIClient

    project, admin, viewer = world
    api = APIClient()
    api.force_authenticate(admin)
    base = f"/api/projects/{project.slug}/releases/"
    made = api.post(base, {"name": "v1"}, format="json")
    assert made.status_code == 201 and made.json()["graded"] == QrelsRelease.objects.get().graded
    assert api.post(base, {"name": "v1"}, format="json").status_code == 409
    assert api.get(f"{base}v1/diff/").status_code == 409  # the first release: nothing before it
    Pair.objects.filter(project=project, query__external_id="q1", passage__external_id="d5").update(
        reference_grade=1)
    api.post(base, {"name": "v2"}, format="json")
    api.force_authenticate(viewer)
    body = b"".join(api.get(f"{base}v1/export/", {"format": "beir"}).streaming_content).decode()
    assert body == exported(QrelsRelease.objects.get(name="v1"), QrelsFormat.BEIR)
    assert api.get(f"{base}v2/diff/").json()["added"] == [{"query_id": "q1", "doc_id": "d5", "grade": 1}]
    assert api.get(f"{base}v2/diff/", {"against": "v9"}).status_code == 404
    assert api.post(base, {"name": "v3"}, format="json").status_code == 403


def test_a_release_file_on_disk_is_private_to_the_service_account(world, settings):
    from rest_framework.test import APIClient

    project, admin, _ = world
    api = APIClient()
    api.force_authenticate(admin)
    assert api.post(f"/api/projects/{project.slug}/releases/", {"name": "v1"}, format="json").status_code == 201
    path = Path(settings.MEDIA_ROOT) / QrelsRelease.objects.get().storage
    assert path.stat().st_mode & 0o777 == 0o600
    for folder in (path.parent, path.parent.parent):  # releases/<project>/, made by this save
        assert folder.stat().st_mode & 0o777 == 0o700, folder


@pytest.mark.parametrize("fmt", list(QrelsFormat))
def test_a_release_file_changed_between_the_check_and_the_stream_breaks_the_download(world, monkeypatch, fmt):
    """The export checks the file before its first byte, then reads it again to stream it: a change in between
    must end the download in an error, never deliver the changed content as the release."""
    from rest_framework.test import APIClient

    from labeling.api import releases as releases_api

    project, admin, viewer = world
    made = release_create(project=project, by=admin, name="v1")
    path = Path(default_storage.path(made.storage))
    stored = path.read_bytes()
    assert b'"grade":2' in stored
    checked = releases_api.release_verify

    def check_then_change(release):
        checked(release)
        path.write_bytes(stored.replace(b'"grade":2', b'"grade":0', 1))  # in place: the same file, regraded

    monkeypatch.setattr(releases_api, "release_verify", check_then_change)
    api = APIClient()
    api.force_authenticate(viewer)
    response = api.get(f"/api/projects/{project.slug}/releases/v1/export/", {"format": fmt.value})
    assert response.status_code == 200
    received = []
    with pytest.raises(ReleaseDamaged, match="has changed since it was frozen"):
        received.extend(response.streaming_content)  # keeps the chunks that came before the error
    changed = QrelsRelease(name="v1", storage=made.storage, sha256=hashlib.sha256(path.read_bytes()).hexdigest())
    assert len(b"".join(received)) < len(exported(changed, fmt).encode())  # its last line is never sent


def test_runs_are_evaluated_on_a_release_as_on_the_qrels_it_froze(world):
    from labeling.selectors.systems import systems_report

    project, admin, _ = world
    before = systems_report(project=project, sources=["human"])
    release_create(project=project, by=admin, name="v1")
    Pair.objects.filter(project=project, reference_grade__isnull=False).update(reference_grade=0)
    after = systems_report(project=project, sources=["human", "release:v1"])
    for run in before.runs:
        frozen, then = after.per_query[run]["release:v1"], before.per_query[run]["human"]
        assert frozen.queries == then.queries
        for measure, values in then.values.items():
            assert list(frozen.values[measure]) == pytest.approx(list(values)), (run, measure)
    assert any(after.per_query[run]["human"].mean("nDCG@10") != before.per_query[run]["human"].mean("nDCG@10")
               for run in before.runs)
    from labeling.selectors.qrels_sources import SystemsError, qrels_sources
    assert "release:v1" in [source.key for source in qrels_sources(project)]
    with pytest.raises(SystemsError, match="no release 'v9'"):
        systems_report(project=project, sources=["release:v9"])

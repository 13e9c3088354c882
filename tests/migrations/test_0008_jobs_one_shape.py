"""Migration 0008 gives the rows already stored the shape of every job without losing what they held: a scoring
job's requester and error under their new names, a status derived from what held it before, and the way back."""
from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("labeling", "0007_judge_backend_choices")]
AFTER = [("labeling", "0008_jobs_one_shape")]


@pytest.fixture
def migrate_to():
    """Migrate the test database to a node and return the models as they are there; back to the newest after."""
    def to(nodes):
        executor = MigrationExecutor(connection)
        executor.migrate(nodes)
        return MigrationExecutor(connection).loader.project_state(nodes).apps

    yield to
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def test_stored_jobs_keep_their_requester_error_and_state(migrate_to):
    apps = migrate_to(BEFORE)
    User, Project = apps.get_model("auth", "User"), apps.get_model("labeling", "Project")
    admin = User.objects.create(username="admin")
    one, two, three = (Project.objects.create(slug=slug, name=slug) for slug in ("one", "two", "three"))
    query = apps.get_model("labeling", "Query").objects.create(project=one, external_id="q1", text="net zero")
    judge = apps.get_model("labeling", "Judge").objects.create(project=one, name="gpt", backend="openai")
    job = apps.get_model("labeling", "ScoringJob").objects.create(
        project=one, judge=judge, scope="all", status="done", total=4, done=4, failed=2, last_error="503 twice",
        created_by=admin,
    )
    for attempts in (1, 3):
        job.chunks.create(query=query, pair_ids=[1, 2], size=2, attempts=attempts)
    Draft = apps.get_model("labeling", "DefinitionDraft")
    now = timezone.now()
    pending = Draft.objects.create(query=query, judge=judge, requested_by=admin)
    done = Draft.objects.create(query=query, judge=judge, finished_at=now, raw_output="Meaning: ...")
    failed = Draft.objects.create(query=query, judge=judge, finished_at=now, error="not a definition")
    Result = apps.get_model("labeling", "ValidationResult")
    hour_ago = now - timedelta(hours=1)
    Result.objects.create(project=one, data={}, computed_at=hour_ago, requested_at=hour_ago - timedelta(minutes=1))
    Result.objects.create(project=two, data={}, computed_at=hour_ago, requested_at=now)
    Result.objects.create(project=three, computed_at=None, requested_at=hour_ago, error="ZeroDivisionError: 1 / 0")

    apps = migrate_to(AFTER)
    job = apps.get_model("labeling", "ScoringJob").objects.get()
    assert (job.status, job.error, job.requested_by_id, job.attempts) == ("done", "503 twice", admin.id, 4)
    Draft = apps.get_model("labeling", "DefinitionDraft")
    assert {draft.id: draft.status for draft in Draft.objects.all()} == {
        pending.id: "pending", done.id: "done", failed.id: "failed"}
    assert Draft.objects.get(id=pending.id).requested_by_id == admin.id
    assert Draft.objects.get(id=failed.id).error == "not a definition"
    results = {r.project.slug: r for r in apps.get_model("labeling", "ValidationResult").objects.all()}
    assert (results["one"].status, results["one"].finished_at, results["one"].created_at) == (
        "done", hour_ago, hour_ago - timedelta(minutes=1))
    assert (results["two"].status, results["two"].finished_at, results["two"].requested_at) == ("pending", None, now)
    assert (results["three"].status, results["three"].error) == ("failed", "ZeroDivisionError: 1 / 0")

    apps = migrate_to(BEFORE)
    job = apps.get_model("labeling", "ScoringJob").objects.get()
    assert (job.last_error, job.created_by_id) == ("503 twice", admin.id)

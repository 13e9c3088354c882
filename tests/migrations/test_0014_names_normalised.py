"""Migration 0014 renames the names stored before labeling.names, so that each can be opened (its URL resolves)
and deleted again: repaired, unique in the project, ensembles following their members; names that keep the rule
are left alone, and open invitations under a name the rule changes are revoked."""
from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse
from django.utils import timezone

from labeling.names import clean_name

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("labeling", "0013_invitations")]
AFTER = [("labeling", "0014_names_normalised")]


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


def test_stored_names_that_break_the_rule_are_repaired_made_unique_and_followed(migrate_to):
    apps = migrate_to(BEFORE)
    get = apps.get_model
    Project, Judge, Run = get("labeling", "Project"), get("labeling", "Judge"), get("labeling", "Run")
    one = Project.objects.create(slug="one", name="Flood\nplans")
    two = Project.objects.create(slug="two", name="BM25 réglé")
    broken = Judge.objects.create(project=one, name="nl\njudge", backend="import")
    kept = Judge.objects.create(project=one, name="nl judge", backend="import")
    full_width = Judge.objects.create(project=one, name="\uff47\uff50\uff54", backend="import")
    invisible = Judge.objects.create(project=one, name="\u202e\u200b", backend="import")
    ensemble = Judge.objects.create(project=one, name="both", backend="ensemble",
                                    parameters={"members": ["\uff47\uff50\uff54", "nl\njudge"]})
    elsewhere = Judge.objects.create(project=two, name="nl\njudge", backend="import")
    accents = Judge.objects.create(project=two, name="BM25 réglé", backend="import")
    run = Run.objects.create(project=one, name="run\r\nx", kind="imported")
    long_run = Run.objects.create(project=one, name="x" * 199 + "\n", kind="imported")
    TrainingSet = get("labeling", "TrainingSet")
    header = TrainingSet.objects.create(project=one, name="nl\r\nSet-Cookie: x=1")
    dots = TrainingSet.objects.create(project=one, name="..")
    get("labeling", "RetrievalJob").objects.create(project=one, retriever="bm25", name="nl\nrun")
    get("labeling", "FineTuneJob").objects.create(project=one, training_set=header, base_model="m",
                                                  student_name="stu\ndent")
    Invitation, now = get("labeling", "Invitation"), timezone.now()
    invitation = {name: Invitation.objects.create(
        project=one, username=name, role="expert", token_sha256=name.encode().hex().ljust(64, "0"), created_at=now,
        expires_at=now + timedelta(days=7)) for name in ("\uff41dmin", "carol")}

    apps = migrate_to(AFTER)
    get = apps.get_model
    judges = dict(get("labeling", "Judge").objects.values_list("id", "name"))
    assert judges == {broken.id: "nl judge (2)", kept.id: "nl judge", full_width.id: "gpt",
                      invisible.id: f"renamed-{invisible.id}", ensemble.id: "both", elsewhere.id: "nl judge",
                      accents.id: "BM25 réglé"}
    assert get("labeling", "Judge").objects.get(id=ensemble.id).parameters == {"members": ["gpt", "nl judge (2)"]}
    assert dict(get("labeling", "Run").objects.values_list("id", "name")) == {run.id: "run x", long_run.id: "x" * 199}
    sets = dict(get("labeling", "TrainingSet").objects.values_list("id", "name"))
    assert sets == {header.id: "nl Set-Cookie: x=1", dots.id: "__"}
    assert get("labeling", "RetrievalJob").objects.get().name == "nl run"
    assert get("labeling", "FineTuneJob").objects.get().student_name == "stu dent"
    assert dict(get("labeling", "Project").objects.values_list("slug", "name")) == {"one": "Flood plans",
                                                                                    "two": "BM25 réglé"}
    open_ones = get("labeling", "Invitation").objects.filter(revoked_at__isnull=True)
    assert list(open_ones.values_list("id", flat=True)) == [invitation["carol"].id]
    # Every name keeps the rule now, and the pages' links to each resolve.
    for name in [*judges.values(), *sets.values()]:
        assert clean_name(name, what="name", max_length=200) == name
    for slug, name in get("labeling", "Judge").objects.values_list("project__slug", "name"):
        reverse("labeling:job_start", args=[slug, name])
    for name in sets.values():
        reverse("labeling:training_set_delete", args=["one", name])

    apps = migrate_to(BEFORE)  # the way back keeps the new names
    assert apps.get_model("labeling", "Run").objects.get(id=run.id).name == "run x"

"""Migration 0017 makes project names unique whatever their case: the projects that share a name with an older one
are renamed "NAME (2)", "NAME (3)"... (a suffix another project already bears is skipped), the oldest keeps its name,
the others are left alone; afterwards the database refuses a name that differs from another only in case."""
import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("labeling", "0016_scoring_fair_dispatch")]
AFTER = [("labeling", "0017_project_names_unique")]


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


def test_duplicate_names_are_renamed_oldest_first_then_refused(migrate_to):
    project_model = migrate_to(BEFORE).get_model("labeling", "Project")
    names = ["Flood", "flood", "Heat", "FLOOD", "Flood (2)", "heat", "Drought", "x" * 200, "X" * 200]
    ids = [project_model.objects.create(slug=f"p{n}", name=name).id for n, name in enumerate(names)]

    project_model = migrate_to(AFTER).get_model("labeling", "Project")
    renamed = dict(project_model.objects.values_list("id", "name"))
    # "Flood (2)" was taken (by p4, which keeps it): p1 gets " (3)", p3 " (4)". A name at the length limit is cut
    # to make room for its suffix.
    assert [renamed[project_id] for project_id in ids] == [
        "Flood", "flood (3)", "Heat", "FLOOD (4)", "Flood (2)", "heat (2)", "Drought", "x" * 200, "X" * 196 + " (2)"]
    with pytest.raises(IntegrityError), transaction.atomic():
        project_model.objects.create(slug="again", name="dROUGHT")

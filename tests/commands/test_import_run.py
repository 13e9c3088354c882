"""The import_run command: a run stored with a line saying what, a bad file refused naming file and line."""
import io

import pytest
from django.core.management import CommandError, call_command

from labeling.models import Run, RunEntry
from labeling.selectors.runs import run_rankings
from tests.factories import PassageFactory, ProjectFactory, QueryFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def project():
    project = ProjectFactory(slug="cr")
    QueryFactory(project=project, external_id="q1")
    for ext in ("d1", "d2"):
        PassageFactory(project=project, external_id=ext)
    return project


def test_import_run_stores_and_reports(project, tmp_path):
    path = tmp_path / "bm25.trec"
    path.write_text("q1 Q0 d1 1 0.5 bm25\nq1 Q0 d2 2 0.7 bm25\n")
    out = io.StringIO()
    call_command("import_run", str(path), "--project", "cr", "--name", "bm25", "--description", "BM25", stdout=out)
    assert "Stored run 'bm25' in 'cr': 2 entries for 1 queries (depth 2)" in out.getvalue()
    run = Run.objects.get()
    assert run_rankings(run) == {"q1": ["d2", "d1"]} and run.description == "BM25"


def test_import_run_refuses_a_bad_file(project, tmp_path):
    path = tmp_path / "bad.trec"
    path.write_text("q1 Q0 d1 1 0.5 bm25\nq1 Q0 d3 2 0.7 bm25\n")
    with pytest.raises(CommandError, match=r"bad\.trec:2: unknown passage 'd3'"):
        call_command("import_run", str(path), "--project", "cr", "--name", "bm25", stdout=io.StringIO())
    with pytest.raises(CommandError, match="no project 'nope'"):
        call_command("import_run", str(path), "--project", "nope", "--name", "bm25", stdout=io.StringIO())
    assert (Run.objects.count(), RunEntry.objects.count()) == (0, 0)

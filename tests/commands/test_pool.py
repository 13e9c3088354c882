"""The pool command: the preview then the write, --dry-run, DIRAS sampling, and the errors it turns away."""
import io

import pytest
from django.core.management import CommandError, call_command

from labeling.models import Pair, PairSource
from labeling.services.judges import judge_create
from labeling.services.runs import run_import
from tests.factories import PassageFactory, ProjectFactory, QueryFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def project(tmp_path):
    project = ProjectFactory(slug="cr")
    for ext in ("q1", "q2"):
        QueryFactory(project=project, external_id=ext)
    for i in range(1, 7):
        PassageFactory(project=project, external_id=f"d{i}")
    for name, docs in (("A", "d1 d2 d3"), ("B", "d3 d4 d5")):
        path = tmp_path / f"{name}.trec"
        path.write_text("".join(f"{q} Q0 {d} 0 {10 - i} {name}\n" for q in ("q1", "q2")
                                for i, d in enumerate(docs.split())))
        run_import(project=project, path=path, name=name)
    return project


def pool(*args: str) -> str:
    out = io.StringIO()
    call_command("pool", "--project", "cr", *args, stdout=out)
    return out.getvalue()


def test_dry_run_prints_the_preview_and_writes_nothing(project):
    judge_create(project=project, name="gpt", backend="openai", model="m", endpoint="unreachable",
                 price_in=1.0, price_out=2.0)
    out = pool("--runs", "A,B", "--depth", "2", "--dry-run", "--judge", "gpt")
    assert "Top 2 of A, B: 8 new pair(s) over 2 queries, 0 already in the pool, 8 source(s) to record." in out
    assert "  q1: 4 new, 0 in the pool" in out and "Judging the new pairs with 'gpt': about 8 model calls" in out
    assert Pair.objects.count() == 0


def test_pool_writes_after_the_preview_and_again_writes_nothing(project):
    out = pool("--runs", "A,B", "--depth", "3")
    assert "Pooled the top 3 of A, B: 10 new pair(s), 12 new source(s)." in out
    again = pool("--runs", "A", "--depth", "3")
    assert "0 new pair(s) over 2 queries, 6 already in the pool, 0 source(s)" in again and "0 new pair(s), 0 new source(s)" in again
    assert Pair.objects.count() == 10 and PairSource.objects.count() == 12


def test_diras_sampling(project):
    out = pool("--runs", "A", "--sample-top", "1", "--sample-random", "2", "--seed", "5")
    assert "Pooled the top 1 of 'A' + 2 as 'random:5': 6 new pair(s), 6 new source(s)." in out
    assert PairSource.objects.filter(system="random:5", rank__isnull=True).count() == 4


@pytest.mark.parametrize(("args", "message"), [
    (["--runs", "A"], "give either --depth K, or --sample-top N and --sample-random M"),
    (["--runs", "A", "--depth", "2", "--sample-top", "1"], "give either --depth K"),
    (["--runs", "A,B", "--sample-top", "1", "--sample-random", "1"], "DIRAS sampling takes one run"),
    (["--runs", "A", "--sample-top", "1", "--dry-run"], "--dry-run and --judge go with --depth"),
    (["--runs", "A,C", "--depth", "2"], r"project 'cr' has no run 'C' \(its runs: A, B\)"),
    (["--runs", "A", "--depth", "0"], "depth must be at least 1"),
    (["--runs", "A", "--depth", "2", "--judge", "nobody"], "has no judge 'nobody'"),
])
def test_errors_are_command_errors(project, args, message):
    with pytest.raises(CommandError, match=message):
        pool(*args)
    assert Pair.objects.count() == 0

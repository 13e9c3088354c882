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
    # Run A ranks d1 d2 d3 for both queries: its top 2 is d1 d2, the 4 others of the corpus are outside it.
    out = pool("--runs", "A", "--sample", "--sample-top", "2", "--sample-inside", "1", "--sample-outside", "2",
               "--seed", "5")
    assert ("Pooled the sample of 'A': 2 drawn inside its top 2 (asked 1 per query), 4 outside it as 'random:5' "
            "(asked 2): 6 new pair(s), 6 new source(s).") in out
    inside = set(PairSource.objects.filter(system="A").values_list("pair__query__external_id",
                                                                   "pair__passage__external_id", "rank"))
    assert len(inside) == 2 and all(passage in ("d1", "d2") for _, passage, _ in inside)
    outside = PairSource.objects.filter(system="random:5", rank__isnull=True)
    assert outside.count() == 4 and not outside.filter(pair__passage__external_id__in=["d1", "d2"]).exists()
    # DIRAS's sizes by default: 30 inside the top 5 and 30 outside; run A ranks 3 passages, the corpus has 6.
    out = pool("--runs", "A", "--sample", "--seed", "6")
    assert "6 drawn inside its top 5 (asked 30 per query), 6 outside it" in out
    assert "2 queries with fewer than asked (all taken)" in out


@pytest.mark.parametrize(("args", "message"), [
    (["--runs", "A"], r"give either --depth K, or --sample \(DIRAS sampling\)"),
    (["--runs", "A", "--depth", "2", "--sample"], "give either --depth K"),
    (["--runs", "A", "--depth", "2", "--sample-top", "1"], "go with --sample"),
    (["--runs", "A,B", "--sample"], "DIRAS sampling takes one run"),
    (["--runs", "A", "--sample", "--dry-run"], "--dry-run and --judge go with --depth"),
    (["--runs", "A", "--sample", "--sample-top", "0"], "the top must be at least 1"),
    (["--runs", "A,C", "--depth", "2"], r"project 'cr' has no run 'C' \(its runs: A, B\)"),
    (["--runs", "A", "--depth", "0"], "depth must be at least 1"),
    (["--runs", "A", "--depth", "2", "--judge", "nobody"], "has no judge 'nobody'"),
])
def test_errors_are_command_errors(project, args, message):
    with pytest.raises(CommandError, match=message):
        pool(*args)
    assert Pair.objects.count() == 0

"""Leave one run out (Zobel 1998, #34) on a pool built from three runs by pool_add, human grades on its pairs;
every number worked out by hand below."""
import pytest
from django.urls import reverse

from labeling.models import Membership, Pair, Project, Run, RunEntry
from labeling.selectors.qrels_sources import SystemsError
from labeling.selectors.systems_reusability import pool_reusability
from labeling.services.pooling import pool_add
from tests.factories import MembershipFactory, PassageFactory, ProjectFactory, QueryFactory, UserFactory

pytestmark = pytest.mark.django_db
RUNS = {"A": {"q1": ["d1", "d2", "d3", "d4"], "q2": ["d1", "d5", "d6"]},
        "B": {"q1": ["d2", "d1", "d5", "d3"], "q2": ["d5", "d1", "d6"]},
        "C": {"q1": ["d7", "d1", "d8"], "q2": ["d6", "d8", "d5"]}}
GRADES = {("q1", "d1"): 1, ("q1", "d2"): 0, ("q1", "d3"): 1, ("q1", "d5"): 0, ("q1", "d7"): 1, ("q1", "d8"): 0,
          ("q2", "d1"): 0, ("q2", "d5"): 1, ("q2", "d6"): 1, ("q2", "d8"): 1}


def reuse_project() -> Project:
    """The three runs, pooled to depth 3, with GRADES as the human grades (the command and API tests use it too)."""
    project = ProjectFactory(slug="reuse")
    queries = {q: QueryFactory(project=project, external_id=q) for q in ("q1", "q2")}
    passages = {d: PassageFactory(project=project, external_id=d) for d in [f"d{i}" for i in range(1, 9)]}
    runs = []
    for name, by_query in RUNS.items():
        run = Run.objects.create(project=project, name=name, kind=Run.Kind.IMPORTED)
        RunEntry.objects.bulk_create(RunEntry(run=run, query=queries[q], passage=passages[d], rank=rank,
                                              score=10.0 - rank)
                                     for q, docs in by_query.items() for rank, d in enumerate(docs, 1))
        runs.append(run)
    pool_add(project=project, runs=runs, depth=3)  # d4 (A's 4th for q1) and d3 (B's 4th) stay out for those runs
    for (q, d), grade in GRADES.items():
        Pair.objects.filter(project=project, query__external_id=q, passage__external_id=d).update(
            reference_grade=grade)
    return project


@pytest.fixture
def project():
    return reuse_project()


def test_each_runs_drop_and_rank_change_by_hand(project):
    # P@10 on the full qrels: A 2/10 and 2/10 (mean 0.2), B the same, C (d7, d1) and (d6, d8, d5): 0.25.
    # Only C found (q1, d7) and (q2, d8), both relevant: without them C scores 0.1 and 0.2, 0.15, from first to
    # third. Only A found (q1, d3) in the pool (B ranked it 4th, below the pool depth): A falls to 0.15, from
    # second to third. B found no relevant passage alone: no drop.
    found = pool_reusability(project=project, source="human", measure="P@10")
    rows = {row.run: row for row in found.runs}
    assert (rows["C"].unique_relevant, rows["C"].score, rows["C"].score_left_out) == (2, pytest.approx(0.25),
                                                                                      pytest.approx(0.15))
    assert rows["C"].drop == pytest.approx(0.1) and (rows["C"].rank, rows["C"].rank_left_out) == (1, 3)
    assert (rows["A"].unique_relevant, rows["A"].drop, rows["A"].rank, rows["A"].rank_change) == (
        1, pytest.approx(0.05), 2, 1)
    assert (rows["B"].unique_relevant, rows["B"].drop, rows["B"].rank_change) == (0, pytest.approx(0.0), 0)
    assert rows["A"].contributed == 6 and found.largest_move == 2 and found.flagged
    assert not pool_reusability(project=project, source="human", measure="P@10", threshold=2).flagged


def test_the_systems_page_shows_it_and_what_cannot_be_done_is_refused(project, client):
    with pytest.raises(SystemsError, match="measure must be"):
        pool_reusability(project=project, measure="judged@10")
    with pytest.raises(SystemsError, match="no judge"):
        pool_reusability(project=project, source="judge:none")
    user = UserFactory()
    MembershipFactory(project=project, user=user, role=Membership.Role.VIEWER)
    client.force_login(user)
    html = client.get(reverse("labeling:systems", args=[project.slug]), {"source": "human"}).content.decode()
    assert 'data-reusability="human"' in html and 'data-reusability-run="C"' in html
    # On nDCG@10 (the page's lead measure) C keeps first place, A falls from second to third: one place, not
    # more than the threshold, so no flag.
    assert "data-reusability-flag" not in html and "2 &rarr; <strong>3</strong>" in html

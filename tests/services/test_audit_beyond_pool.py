"""Beyond the pool (#33) with the real parts: two runs over the ClimRetrieve sample ranking every passage, a pool of
their top 4, and the bundled MiniLM judge scoring the entries below the pool. The report's counts are checked
against a set difference computed here, its estimate against the judge's own P on those entries; nothing enters
the pool or the judgments; the Systems page, the command and the refusals."""
import json
import random
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse
from scipy import stats

from labeling.llm_adapter import scorer_for
from labeling.models import AuditJob, Judge, Judgment, Membership, Pair, Passage, Query
from labeling.selectors.definitions import current_definitions
from labeling.services.audit import AuditError, audit_request, audit_run
from labeling.services.pooling import pool_add
from labeling.services.runs import run_import
from models_llm.types import PairInput
from tests.audit_fixtures import members
from tests.scoring_fixtures import minilm_judge, small_scoring_project

pytestmark = pytest.mark.django_db
DEPTH = 4


@pytest.fixture
def world(tmp_path):
    """Project (2 queries x 12 passages), runs A and B ranking all 12 per query in two seeded orders, the pool
    emptied and refilled with their top DEPTH, and the MiniLM judge. Returns (project, judge, rankings by hand)."""
    project = small_scoring_project(tmp_path / "bundle", slug="beyond", queries=2, passages=12)
    Pair.objects.filter(project=project).delete()
    queries = list(Query.objects.filter(project=project).values_list("external_id", flat=True))
    docs = list(Passage.objects.filter(project=project).values_list("external_id", flat=True))
    rankings, runs = {}, []
    for name, seed in (("A", 1), ("B", 2)):
        rng = random.Random(seed)
        rankings[name] = {query: rng.sample(docs, len(docs)) for query in queries}
        path = tmp_path / f"{name}.trec"
        path.write_text("".join(f"{query} Q0 {doc} {rank} {100 - rank} {name}\n" for query, ranked in
                                rankings[name].items() for rank, doc in enumerate(ranked, 1)))
        runs.append(run_import(project=project, path=path, name=name))
    pool_add(project=project, runs=runs, depth=DEPTH)
    return project, minilm_judge(project), rankings


def below_by_hand(rankings: dict, run: str) -> set[tuple[str, str]]:
    pooled = {(query, doc) for ranked in rankings.values() for query, docs in ranked.items() for doc in docs[:DEPTH]}
    return {(query, doc) for query, docs in rankings[run].items() for doc in docs} - pooled


def test_every_entry_below_the_pool_scored_gives_the_sum_of_the_judges_p(world):
    project, judge, rankings = world
    pairs_before = set(Pair.objects.filter(project=project).values_list("id", flat=True))
    job = audit_request(project=project, judge=judge, kind=AuditJob.Kind.BEYOND_POOL, parameters={"sample": 500})
    audit_run(job_id=job.id)
    job.refresh_from_db()
    assert job.status == AuditJob.Status.DONE, job.error
    rows = {row["run"]: row for row in job.report["runs"]}
    texts = {q.external_id: q for q in Query.objects.filter(project=project)}
    passages = {p.external_id: p for p in Passage.objects.filter(project=project)}
    scorer = scorer_for(judge)
    definitions = current_definitions({query.id for query in texts.values()})
    for run in ("A", "B"):
        below = sorted(below_by_hand(rankings, run))
        row = rows[run]
        assert (row["entries"], row["below"], row["scored"], row["failed"]) == (24, len(below), len(below), 0)
        inputs = [PairInput(pair_id=i, query=texts[q].text, passage=passages[d].text, title=passages[d].title,
                            definition=definitions[texts[q].id].text) for i, (q, d) in enumerate(below)]
        p = [v.p for v in scorer.score(inputs)]
        # A census: the estimate is the sum of P, its interval only the Bernoulli spread of those P.
        half = stats.norm.ppf(0.95) * sum(x * (1 - x) for x in p) ** 0.5
        assert row["expected"] == pytest.approx(sum(p), abs=1e-4)
        assert (row["low"], row["high"]) == pytest.approx((max(0, sum(p) - half), min(len(below), sum(p) + half)),
                                                        abs=1e-4)
    # Nothing scored entered the pool or the judgments.
    assert set(Pair.objects.filter(project=project).values_list("id", flat=True)) == pairs_before
    assert not Judgment.objects.filter(judge=judge).exists()


def test_a_sample_is_seeded_and_the_page_and_the_command_show_it(world, client):
    project, judge, rankings = world
    reports = []
    for seed in (0, 0, 5):
        job = audit_request(project=project, judge=judge, kind=AuditJob.Kind.BEYOND_POOL,
                            parameters={"sample": 6, "seed": seed})
        assert job.total == 12  # six per run
        audit_run(job_id=job.id)
        job.refresh_from_db()
        reports.append(job.report)
    assert reports[0] == reports[1] and reports[0] != reports[2]
    row = reports[0]["runs"][0]
    assert row["scored"] == 6 and row["below"] == len(below_by_hand(rankings, "A"))
    assert row["low"] <= row["expected"] <= row["high"] and row["rate"] == pytest.approx(row["expected"] / row["below"])

    users = members(project)
    client.force_login(users[Membership.Role.VIEWER])
    html = client.get(reverse("labeling:systems", args=[project.slug])).content.decode()
    assert "Beyond the pool" in html and 'data-beyond-run="A"' in html and "data-beyond-form" not in html
    client.force_login(users[Membership.Role.EXPERT])  # blind first: no judge's P for an expert
    assert "Beyond the pool" not in client.get(reverse("labeling:systems", args=[project.slug])).content.decode()

    client.force_login(users[Membership.Role.ADMIN])
    response = client.post(reverse("labeling:beyond_pool_start", args=[project.slug]),
                           {"judge": judge.name, "sample": 3, "seed": 1})
    started = AuditJob.objects.latest("id")
    assert response.status_code == 302 and started.parameters == {"sample": 3, "seed": 1, "runs": []}
    assert response["Location"] == reverse("labeling:audit_detail", args=[project.slug, started.id])
    audit_run(job_id=started.id)
    html = client.get(response["Location"]).content.decode()
    assert "data-beyond-pool-report" in html and 'data-beyond-run="B"' in html

    out = StringIO()
    call_command("beyond_pool", project=project.slug, judge=judge.name, sample=6, no_wait=True, stdout=out,
                 stderr=StringIO())
    queued = AuditJob.objects.get(id=int(out.getvalue()))
    audit_run(job_id=queued.id)
    queued.refresh_from_db()
    assert queued.report == reports[0]
    from labeling.management.commands.beyond_pool import report_text
    text = report_text(queued.report)
    assert "Beyond the pool with minilm" in text and text.splitlines()[2].startswith("A ")
    assert json.loads(json.dumps(queued.report))["runs"][1]["run"] == "B"


def test_what_cannot_be_looked_beyond_is_refused_with_the_reason(world, tmp_path, client):
    project, judge, _ = world
    start = {"project": project, "judge": judge, "kind": AuditJob.Kind.BEYOND_POOL}
    with pytest.raises(AuditError, match="no run 'C'"):
        audit_request(**start, parameters={"runs": ["C"]})
    with pytest.raises(AuditError, match="unknown parameter"):
        audit_request(**start, parameters={"depth": 3})
    with pytest.raises(AuditError, match="sample must be"):
        audit_request(**start, parameters={"sample": 0})
    imported = Judge.objects.create(project=project, name="imported", backend=Judge.Backend.IMPORT)
    with pytest.raises(AuditError, match="imported"):
        audit_request(project=project, judge=imported, kind=AuditJob.Kind.BEYOND_POOL, parameters={})
    pool_add(project=project, runs=list(project.runs.all()), depth=12)  # every entry pooled: nothing below
    with pytest.raises(AuditError, match="nothing lies beyond"):
        audit_request(**start, parameters={})
    other = small_scoring_project(tmp_path / "other", slug="norun", queries=1, passages=2)
    with pytest.raises(AuditError, match="has no runs"):
        audit_request(project=other, judge=minilm_judge(other), kind=AuditJob.Kind.BEYOND_POOL, parameters={})
    admin = members(project)[Membership.Role.ADMIN]
    client.force_login(admin)
    response = client.post(reverse("labeling:beyond_pool_start", args=[project.slug]), {"judge": judge.name,
                                                                                      "sample": 5, "seed": 0})
    assert response.status_code == 400 and "nothing lies beyond" in response.content.decode()
    assert not AuditJob.objects.filter(project=project).exists()

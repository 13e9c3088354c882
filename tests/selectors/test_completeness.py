"""How complete the qrels are, from the database (#33): the selector reads the pool, the gold grades, the random
order and the judge's calibrated P, and its numbers equal scipy's distributions computed here from the same
rows; the random validation sample is exactly the pairs before the first ungraded one in the random order; the
API and `manage.py completeness` give the same report to admins and viewers, refuse bad options naming them,
and experts get none of it (blind first)."""
from __future__ import annotations

import io
import json

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient
from scipy import stats

from labeling.models import JudgeCalibration, Membership, Pair
from tests.factories import (
    JudgeFactory,
    JudgmentFactory,
    LabelFactory,
    MembershipFactory,
    PairFactory,
    ProjectFactory,
    QueryFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db

PAIRS_PER_QUERY = 30


@pytest.fixture
def world():
    """Two queries x 30 pairs. The random order is set by hand: pair i of the pool has key (i + 0.5) / 60. The
    first 12 pairs in that order are graded (3 of them relevant), the 13th is not: the random sample is those
    12. Besides, 5 pairs far down the order are graded relevant (a targeted queue's work). The judge gave every
    pair a P."""
    project = ProjectFactory(slug="complete")
    judge = JudgeFactory(project=project, name="imported")
    project.queue_judge = judge
    project.save(update_fields=["queue_judge"])
    rng = np.random.default_rng(7)
    annotator = UserFactory(username="ann")
    pairs = []
    for q in range(2):
        query = QueryFactory(project=project, external_id=f"q{q}")
        for _ in range(PAIRS_PER_QUERY):
            pairs.append(PairFactory(project=project, query=query))
    order = rng.permutation(len(pairs))
    p = np.round(rng.beta(0.5, 2.0, len(pairs)), 4)
    for rank, index in enumerate(order):
        Pair.objects.filter(id=pairs[index].id).update(sample_key=(rank + 0.5) / len(pairs))
        JudgmentFactory(pair=pairs[index], judge=judge, p_relevant=float(p[index]))
    graded = {int(index): int(rank in (2, 5, 9)) for rank, index in enumerate(order[:12])}
    graded.update({int(index): 1 for index in order[40:45]})
    for index, grade in graded.items():
        LabelFactory(pair=pairs[index], annotator=annotator, grade=grade)
    return project, judge, pairs, order, p, graded


def reader_client(project) -> APIClient:
    viewer = UserFactory()
    MembershipFactory(project=project, user=viewer, role=Membership.Role.VIEWER)
    client = APIClient()
    client.force_authenticate(viewer)
    return client


def expected_pool(p, graded, size, level=0.9):
    """The pool's estimates computed here from the rows: V + Poisson-binomial quantiles of the ungraded pairs'
    P (scipy), and the Horvitz-Thompson total N k / n of the 12-pair sample with its hypergeometric mid-p bounds
    found by scanning every K (scipy)."""
    verified = sum(graded.values())
    open_p = np.array([p[i] for i in range(size) if i not in graded])
    cdf = stats.poisson_binom.cdf(np.arange(open_p.size + 1), open_p)
    tail = (1 - level) / 2
    model = (verified + open_p.sum(), verified + int(np.argmax(cdf >= tail)), verified + int(np.argmax(cdf >= 1 - tail)))
    k, n = 3, 12
    totals = np.arange(k, size - (n - k) + 1)
    up = stats.hypergeom.sf(k, size, totals, n) + 0.5 * stats.hypergeom.pmf(k, size, totals, n)
    down = stats.hypergeom.cdf(k - 1, size, totals, n) + 0.5 * stats.hypergeom.pmf(k, size, totals, n)
    design = (size * k / n, totals[up >= tail].min(), totals[down >= tail].max())
    return verified, model, design


def test_the_pool_estimates_equal_scipys_on_the_same_rows(world):
    project, _judge, pairs, order, p, graded = world
    body = reader_client(project).get("/api/projects/complete/completeness/").json()
    verified, model, design = expected_pool(p, graded, len(pairs))
    pool = body["pool"]
    assert body["judge"] == "imported" and "no calibrator" in body["basis"]
    assert (pool["pairs"], pool["graded"], pool["verified_relevant"]) == (60, 17, verified)
    assert pool["sample"] == {"size": 12, "relevant": 3}
    assert pool["model"]["total"] == pytest.approx(model[0])
    assert (pool["model"]["low"], pool["model"]["high"]) == (model[1], model[2])
    assert (pool["design"]["total"], pool["design"]["low"], pool["design"]["high"]) == design
    assert pool["recall_model"]["value"] == pytest.approx(verified / model[0])
    assert pool["drift"] == bool(model[1] > design[2] or design[1] > model[2])
    assert body["sample_next"] == "ungraded"
    # the judge's qrels (P >= 0.5) on the 12 sampled pairs, as scikit-learn scores them
    from sklearn.metrics import cohen_kappa_score, f1_score

    sample = [int(i) for i in order[:12]]
    truth, guess = [graded[i] == 1 for i in sample], [p[i] >= 0.5 for i in sample]
    accuracy = body["judge_accuracy"]["sample"]
    assert accuracy["n"] == 12
    assert accuracy["f1"]["value"] == pytest.approx(f1_score(truth, guess, zero_division=np.nan), nan_ok=True)
    assert accuracy["kappa"]["value"] == pytest.approx(cohen_kappa_score(truth, guess), nan_ok=True)
    assert body["judge_accuracy"]["gold"]["n"] == 17
    # per query: the same rules on each query's own pairs and its share of the sample
    first = body["queries"][0]
    assert first["query"] == "q0" and first["pairs"] == PAIRS_PER_QUERY
    in_first = [i for i in range(PAIRS_PER_QUERY)]
    sampled = [i for i in in_first if i in set(order[:12].tolist())]
    assert first["sample"]["size"] == len(sampled)
    assert first["verified_relevant"] == sum(graded.get(i, 0) for i in in_first)
    # the stopping rule: P(X <= floor(V (1 - 0.9) / 0.9)) for X the ungraded pairs' Poisson-binomial
    open_p = np.array([p[i] for i in range(len(pairs)) if i not in graded])
    assert body["stopping"]["probability"] == pytest.approx(stats.poisson_binom.cdf(int(verified / 9), open_p))
    assert body["stopping"]["met"] is False


def test_grading_the_next_pair_in_the_random_order_grows_the_sample(world):
    project, _judge, pairs, order, _p, _graded = world
    client = reader_client(project)
    LabelFactory(pair=pairs[int(order[12])], annotator=UserFactory(), grade=0)
    body = client.get("/api/projects/complete/completeness/").json()
    assert body["pool"]["sample"] == {"size": 13, "relevant": 3}
    # two experts who disagree on the next one hold the sample there until someone adjudicates
    LabelFactory(pair=pairs[int(order[13])], annotator=UserFactory(), grade=0)
    LabelFactory(pair=pairs[int(order[13])], annotator=UserFactory(), grade=1)
    body = client.get("/api/projects/complete/completeness/").json()
    assert body["pool"]["sample"]["size"] == 13 and body["sample_next"] == "unresolved"


def test_a_calibrated_judge_is_summed_calibrated_with_its_fits_uncertainty(world):
    project, judge, pairs, _order, p, graded = world
    client = reader_client(project)
    plain = client.get("/api/projects/complete/completeness/").json()["pool"]["model"]
    fit_p = np.linspace(0.02, 0.98, 40)
    relevant = (np.random.default_rng(1).random(40) < fit_p * 0.5).astype(int)
    JudgeCalibration.objects.create(judge=judge, method="platt", params={"a": 1.0, "b": np.log(0.5)}, cv={}, n=40,
                                    n_relevant=int(relevant.sum()),
                                    fitted_on={"pair_ids": [], "p": fit_p.tolist(), "relevant": relevant.tolist()})
    body = client.get("/api/projects/complete/completeness/").json()
    assert "calibrated (platt)" in body["basis"] and "drawn from its posterior" in body["basis"]
    halved = [q / (q + 2 * (1 - q)) for q in p]  # sigmoid(logit(P) + log 0.5): the odds halved
    verified = sum(graded.values())
    point = verified + sum(halved[i] for i in range(len(pairs)) if i not in graded)
    calibrated = body["pool"]["model"]
    # the point value is the mean over the calibrator's draws, near the stored calibrator's sum
    assert calibrated["total"] == pytest.approx(point, rel=0.25) and calibrated["total"] < plain["total"]


def test_the_command_prints_the_same_report_and_refuses_bad_options(world):
    project, *_ = world
    out = io.StringIO()
    call_command("completeness", "--project", "complete", "--json", stdout=out)
    api = reader_client(project).get("/api/projects/complete/completeness/").json()
    assert json.loads(out.getvalue()) == api
    table = io.StringIO()
    call_command("completeness", "--project", "complete", stdout=table)
    assert "pool" in table.getvalue() and "stopping: P(recall >= 0.9)" in table.getvalue()
    with pytest.raises(CommandError, match="level must be within"):
        call_command("completeness", "--project", "complete", "--level", "1.5")
    with pytest.raises(CommandError, match="no judge 'nope'"):
        call_command("completeness", "--project", "complete", "--judge", "nope")


def test_the_api_refuses_bad_options_and_experts(world):
    project, *_ = world
    client = reader_client(project)
    response = client.get("/api/projects/complete/completeness/", {"alpha": "x"})
    assert response.status_code == 422 and "alpha must be a number" in json.dumps(response.json())
    assert client.get("/api/projects/complete/completeness/", {"judge": "nope"}).status_code == 404
    expert = UserFactory()
    MembershipFactory(project=project, user=expert, role=Membership.Role.EXPERT)
    blind = APIClient()
    blind.force_authenticate(expert)
    assert blind.get("/api/projects/complete/completeness/").status_code == 403


def test_the_overview_card_shows_the_cached_estimates_to_readers_and_nothing_to_experts(world, client):
    from labeling.services.validation import validation_result_ensure

    project, *_ = world
    validation_result_ensure(project=project)
    api = reader_client(project).get("/api/projects/complete/completeness/").json()["pool"]
    viewer = UserFactory()
    MembershipFactory(project=project, user=viewer, role=Membership.Role.VIEWER)
    client.force_login(viewer)
    html = client.get(f"/projects/{project.slug}/").content.decode()
    assert 'data-testid="completeness"' in html
    assert f'data-completeness="verified">{api["verified_relevant"]}<' in html
    assert f'{round(api["design"]["total"])} <span class="small muted">[{round(api["design"]["low"])}, ' in html
    assert f'{api["recall_model"]["value"]:.3f}' in html
    expert = UserFactory()
    MembershipFactory(project=project, user=expert, role=Membership.Role.EXPERT)
    client.force_login(expert)
    html = client.get(f"/projects/{project.slug}/").content.decode()
    assert "completeness" not in html and "How complete" not in html


def test_an_admin_sets_the_stopping_target_and_bad_values_change_nothing(world, client):
    project, *_ = world
    admin = UserFactory()
    MembershipFactory(project=project, user=admin, role=Membership.Role.ADMIN)
    client.force_login(admin)
    url = f"/projects/{project.slug}/settings/stopping/"
    response = client.post(url, {"stopping-stop_recall": "1.5", "stopping-stop_alpha": "0.1", "stopping-stop_budget": ""})
    assert response.status_code == 400 and "Ensure this value is less than or equal to 1" in response.content.decode()
    project.refresh_from_db()
    assert project.stop_recall is None
    response = client.post(url, {"stopping-stop_recall": "0.8", "stopping-stop_alpha": "0.05",
                                 "stopping-stop_budget": "500"})
    assert response.status_code == 302
    project.refresh_from_db()
    assert (project.stop_recall, project.stop_alpha, project.stop_budget) == (0.8, 0.05, 500)
    # the report now judges the project's own target
    body = reader_client(project).get("/api/projects/complete/completeness/").json()
    assert (body["stopping"]["target"], body["stopping"]["alpha"], body["stopping"]["budget"]) == (0.8, 0.05, 500)


def test_once_the_target_is_met_experts_are_told_and_get_no_item_but_admins_go_on(world, client):
    from labeling.services.labels import queue_next_for_annotator
    from labeling.services.validation import validation_result_ensure

    project, *_ = world
    expert, admin = UserFactory(), UserFactory()
    MembershipFactory(project=project, user=expert, role=Membership.Role.EXPERT)
    MembershipFactory(project=project, user=admin, role=Membership.Role.ADMIN)
    assert queue_next_for_annotator(project=project, annotator=expert) is not None
    # a budget of 17 labels is spent already (the fixture holds 17)
    project.stop_budget = 17
    project.save(update_fields=["stop_budget"])
    other = UserFactory()
    MembershipFactory(project=project, user=other, role=Membership.Role.EXPERT)
    client.force_login(other)
    html = client.get(f"/projects/{project.slug}/annotate/").content.decode()
    assert 'data-testid="target-met"' in html
    from django.utils import timezone

    from labeling.selectors.queues import queue_progress
    assert queue_progress(project=project, annotator=other, now=timezone.now()).left == 0  # nothing left for them
    assert queue_progress(project=project, annotator=admin, now=timezone.now()).left > 0
    assert queue_next_for_annotator(project=project, annotator=admin) is not None
    # a recall target: met when the cached report says so under that same target
    project.stop_budget = None
    project.stop_recall = 0.05
    project.save(update_fields=["stop_budget", "stop_recall"])
    fresh = UserFactory()
    MembershipFactory(project=project, user=fresh, role=Membership.Role.EXPERT)
    assert queue_next_for_annotator(project=project, annotator=fresh) is not None  # no report under 0.05 yet
    validation_result_ensure(project=project)
    report = reader_client(project).get("/api/projects/complete/completeness/").json()["stopping"]
    assert report["target"] == 0.05 and report["met"] is True
    later = UserFactory()
    MembershipFactory(project=project, user=later, role=Membership.Role.EXPERT)
    assert queue_next_for_annotator(project=project, annotator=later) is None


def test_the_validation_page_shows_the_judges_accuracy_on_the_random_sample_beside_the_gold_set(world, client):
    from labeling.services.validation import validation_result_ensure

    project, *_ = world
    validation_result_ensure(project=project)
    api = reader_client(project).get("/api/projects/complete/completeness/").json()["judge_accuracy"]
    viewer = UserFactory()
    MembershipFactory(project=project, user=viewer, role=Membership.Role.VIEWER)
    client.force_login(viewer)
    html = client.get(f"/projects/{project.slug}/validation/").content.decode()
    assert 'data-testid="unbiased-accuracy"' in html and f"Random sample (n = {api['sample']['n']})" in html
    accuracy = api["sample"]["accuracy"]
    row = html[html.index('<tr data-metric="accuracy">'):]
    assert f'data-part="sample">{accuracy["value"]:.3f} <span class="small muted">[{accuracy["interval"][0]:.3f}' in row


def test_a_kappa_target_is_met_by_the_lower_bound_of_the_judges_kappa_on_the_random_sample(world, client):
    from labeling.selectors.completeness import project_target_met
    from labeling.services.projects import project_stopping_update
    from labeling.services.validation import validation_result_ensure

    project, *_ = world
    admin = UserFactory()
    MembershipFactory(project=project, user=admin, role=Membership.Role.ADMIN)
    project = project_stopping_update(project=project, by=admin, stop_recall=None, stop_alpha=0.1, stop_budget=None,
                                      stop_kappa=0.99)
    validation_result_ensure(project=project)
    kappa = reader_client(project).get("/api/projects/complete/completeness/").json()["judge_accuracy"]["sample"]["kappa"]
    assert not project_target_met(project=project)  # no judge's interval of kappa starts at 0.99 on 12 pairs
    low = kappa["interval"][0]
    project = project_stopping_update(project=project, by=admin, stop_recall=None, stop_alpha=0.1, stop_budget=None,
                                      stop_kappa=low)
    assert project_target_met(project=project)
    client.force_login(admin)
    html = client.get(f"/projects/{project.slug}/").content.decode()
    card = html[html.index('data-testid="completeness"'):html.index("</section>", html.index('data-testid="completeness"'))]
    assert 'data-completeness="kappa"' in card and "<strong>met</strong>" in card, card
    from labeling.services.projects import ProjectSettingsError

    with pytest.raises(ProjectSettingsError, match="kappa target"):
        project_stopping_update(project=project, by=admin, stop_recall=None, stop_alpha=0.1, stop_budget=None,
                                stop_kappa=-1.5)


def test_an_embedding_judge_without_a_calibrator_gets_no_model_based_estimate_until_one_is_fitted(world, client):
    """Its P is a rescaled cosine, not a probability (#48): summed, it counted relevant pairs that are not there.
    The API and the card withhold the model-based estimate and say why; the admin's button fits the calibrator,
    and then the estimate is the calibrated one."""
    from labeling.services.validation import validation_result_ensure

    project, _judge, pairs, _order, p, _graded = world
    minilm = JudgeFactory(project=project, name="minilm", backend="embedding", model="minilm")
    for pair, value in zip(pairs, p):
        JudgmentFactory(pair=pair, judge=minilm, p_relevant=float(value))
    project.queue_judge = minilm
    project.save(update_fields=["queue_judge"])
    api = reader_client(project)
    body = api.get("/api/projects/complete/completeness/").json()
    assert body["pool"]["model"] is None and all(query["model"] is None for query in body["queries"])
    assert body["pool"]["recall_model"]["value"] is None and body["stopping"]["probability"] is None
    assert body["pool"]["design"] is not None  # the design-based estimate assumes nothing of the judge
    # the gold: the 12 sampled pairs (3 relevant) and 5 relevant further down the random order
    assert "gives scores (embedding), not probabilities" in body["model_withheld"]
    assert "it has 8 and 9" in body["model_withheld"]
    assert "only the design-based estimate" in body["basis"]

    validation_result_ensure(project=project)
    admin = UserFactory()
    MembershipFactory(project=project, user=admin, role=Membership.Role.ADMIN)
    client.force_login(admin)
    html = client.get(f"/projects/{project.slug}/").content.decode()
    assert "withheld: the judge's scores are not probabilities" in html
    assert 'data-completeness="model-withheld"' in html and "gives scores (embedding), not probabilities" in html
    assert f'action="/projects/{project.slug}/judges/minilm/calibrate/"' in html
    viewer = UserFactory()
    MembershipFactory(project=project, user=viewer, role=Membership.Role.VIEWER)
    client.force_login(viewer)
    html = client.get(f"/projects/{project.slug}/").content.decode()
    assert 'data-completeness="model-withheld"' in html and "/judges/minilm/calibrate/" not in html

    client.force_login(admin)
    client.post(f"/projects/{project.slug}/judges/minilm/calibrate/")
    body = api.get("/api/projects/complete/completeness/").json()
    assert body["model_withheld"] is None and "calibrated" in body["basis"] and "posterior" in body["basis"]
    model = body["pool"]["model"]
    assert model["low"] < model["total"] < model["high"] and body["stopping"]["probability"] is not None

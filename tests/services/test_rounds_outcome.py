"""What a round asks of experts and what it says (#48): its items are pairs whose gold is unknown, its random share
holds within the round, an expert's label against a reference grade goes to adjudication, and a round on gold that
is all relevant says beforehand that a refit cannot run, then ends done with its numbers and the reason."""
from __future__ import annotations

import numpy as np
import pytest
from rest_framework.test import APIClient
from sklearn.linear_model import LogisticRegression

from labeling.models import Label, LabellingRound, Membership, Pair
from labeling.selectors.export import judge_calibrator
from labeling.selectors.streams import gold_pairs
from labeling.services.adjudication import adjudication_set
from labeling.services.labels import label_submit, queue_next_for_annotator
from labeling.services.rounds import round_run
from labeling.services.validation import judge_calibrate
from tests.factories import (
    JudgeFactory,
    JudgmentFactory,
    LabelFactory,
    LeaseFactory,
    MembershipFactory,
    PairFactory,
    ProjectFactory,
    QueryFactory,
    UserFactory,
)
from tests.selectors.test_completeness import world  # noqa: F401 - the fixture: 60 pairs, a judge, 17 gold pairs

pytestmark = pytest.mark.django_db


def member(project, role):
    user = UserFactory()
    MembershipFactory(project=project, user=user, role=role)
    return user


def api_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_a_rounds_items_are_pairs_without_gold_and_half_of_twenty_come_from_the_random_sample(world):  # noqa: F811
    project, judge, pairs, order, p, graded = world
    # Reference grades on the ten ungraded pairs the judge is least sure of: the old uncertain queue's first picks.
    ungraded = sorted((i for i in range(len(pairs)) if i not in graded), key=lambda i: abs(p[i] - 0.5))
    referenced = {pairs[i].id for i in ungraded[:10]}
    Pair.objects.filter(id__in=referenced).update(reference_grade=1)
    expert = member(project, Membership.Role.EXPERT)
    # The expert's history: ten earlier labels from the uncertain queue, which the round's quotas do not weigh.
    for i in ungraded[10:20]:
        LeaseFactory(pair=pairs[i], annotator=expert, queue="uncertain")
        label_submit(project=project, annotator=expert, pair_id=pairs[i].id, grade=0)
    gold_before = {pair.id for pair in pairs if pair.id in referenced} | {pairs[i].id for i in graded}
    gold_before |= set(Label.objects.filter(pair__project=project).values_list("pair_id", flat=True))
    admin = member(project, Membership.Role.ADMIN)
    response = api_for(admin).post("/api/projects/complete/rounds/", {"judge": "imported", "budget": 20,
                                                                      "random_share": 0.5}, format="json")
    assert response.status_code == 201, response.content
    project.refresh_from_db()  # the round set its queue mix
    served = []
    for _ in range(20):
        claim = queue_next_for_annotator(project=project, annotator=expert)
        served.append((claim.pair.id, claim.queue))
        label_submit(project=project, annotator=expert, pair_id=claim.pair.id, grade=0)
    assert not {pair_id for pair_id, _ in served} & gold_before
    queues = [queue for _, queue in served]
    assert queues.count("random") == 10 and queues.count("uncertain") == 10
    assert LabellingRound.objects.get(project=project).status == "running"  # its batch is in


def test_an_experts_0_on_a_pair_the_reference_grades_2_is_a_conflict_the_adjudication_settles(
        world, client):  # noqa: F811
    project, judge, pairs, order, p, graded = world
    pair = pairs[next(i for i in range(len(pairs)) if i not in graded)]
    Pair.objects.filter(id=pair.id).update(reference_grade=2)
    expert, admin = member(project, Membership.Role.EXPERT), member(project, Membership.Role.ADMIN)
    LeaseFactory(pair=pair, annotator=expert)
    label_submit(project=project, annotator=expert, pair_id=pair.id, grade=0)
    client.force_login(admin)
    html = client.get(f"/projects/{project.slug}/adjudication/").content.decode()
    item = html.partition(f'data-pair="{pair.id}"')
    assert item[1] and "adj-conflict" in item[0].rsplit("<article", 1)[1]
    assert 'data-testid="reference">reference qrels: 2<' in item[2]
    adjudication_set(project=project, adjudicator=admin, pair_id=pair.id, grade=0)
    # The adjudication is the pair's gold now (the expert was right), not the reference grade.
    assert {gold.pair_id: gold.gold for gold in gold_pairs(project)}[pair.id] == 0
    assert f'data-pair="{pair.id}"' not in client.get(f"/projects/{project.slug}/adjudication/").content.decode()


def test_a_round_on_gold_that_is_all_relevant_says_so_first_then_ends_done_with_its_numbers_and_the_reason(
        world, client):  # noqa: F811
    project, *_ = world
    Label.objects.filter(pair__project=project).update(grade=1)  # 17 relevant gold pairs, none non-relevant
    admin = member(project, Membership.Role.ADMIN)
    client.force_login(admin)
    html = client.get(f"/projects/{project.slug}/rounds/").content.decode()
    statement = ("Judge &#x27;imported&#x27; has scored 17 relevant and 0 non-relevant gold pairs; a refit of its "
                 "calibrator needs 5 of each: a round refits it only if its labels bring 5 more non-relevant")
    assert statement in html and 'data-outlook="imported" data-ready="no"' in html
    outlook = api_for(admin).get("/api/projects/complete/rounds/").json()["outlook"]
    assert outlook == [{"judge": "imported", "needs_each": 5, "relevant": 17, "non_relevant": 0, "left_out": None,
                        "missing_relevant": 0, "missing_non_relevant": 5, "ready": False,
                        "statement": outlook[0]["statement"]}]
    started = api_for(admin).post("/api/projects/complete/rounds/", {"judge": "imported", "budget": 1},
                                  format="json")
    LabellingRound.objects.filter(number=started.json()["number"]).update(status="running")
    done = round_run(round_id=LabellingRound.objects.get().id)
    assert done.status == "done" and not done.error
    row = api_for(admin).get("/api/projects/complete/rounds/").json()["rounds"][0]
    assert row["state"] == "done, not refitted" and row["before"]["sample_n"] == 12 and row["after_refit"] is None
    assert row["reason"].startswith("the calibrator was not refitted: judge 'imported': needs at least 5 relevant "
                                    "and 5 non-relevant gold pairs to fit with 5 folds; has 17 relevant and 0")
    html = client.get(f"/projects/{project.slug}/rounds/").content.decode()
    assert "<strong>Not refitted.</strong> the calibrator was not refitted" in html
    assert 'data-round="1" data-status="done"' in html and 'data-chart="rounds"' in html


def test_reference_qrels_that_list_only_relevant_pairs_are_left_out_of_the_refit_so_its_p_sums_to_the_truth(client):
    """Known truth: 400 pairs, the judge's score s uniform, each pair relevant with probability s**2 (a third of the
    pool). The reference qrels list 70 % of the relevant pairs (chosen by their grade, as ClimRetrieve's and most
    BEIR sets are); an expert labels a uniform sample of 80 pairs truthfully. Fitted on every gold pair, the
    calibrator would call most pairs relevant; left out, its mean P is the pool's relevant share."""
    rng = np.random.default_rng(11)
    project = ProjectFactory(slug="one-sided")
    judge = JudgeFactory(project=project, name="scored")
    query = QueryFactory(project=project)
    expert, admin = member(project, Membership.Role.EXPERT), member(project, Membership.Role.ADMIN)
    s = rng.uniform(0.0, 1.0, 400)
    truth = rng.uniform(0.0, 1.0, 400) < s ** 2
    listed = truth & (rng.uniform(0.0, 1.0, 400) < 0.7)
    sampled = set(rng.choice(400, 80, replace=False).tolist())
    pairs = []
    for i in range(400):
        pair = PairFactory(project=project, query=query, reference_grade=1 if listed[i] else None)
        JudgmentFactory(pair=pair, judge=judge, p_relevant=float(s[i]))
        if i in sampled:
            LabelFactory(pair=pair, annotator=expert, grade=int(truth[i]))
        pairs.append(pair)

    calibration = judge_calibrate(judge=judge)
    assert calibration.n == len(sampled)  # the expert's labels; the listed reference grades are left out
    calibrated = judge_calibrator(judge).apply(s)
    assert abs(calibrated.mean() - truth.mean()) < 0.05, (calibrated.mean(), truth.mean())
    # What a fit on every gold pair says (the listed pairs are gold too: their reference grade is the gold grade),
    # by scikit-learn's logistic regression on the same P: most of the pool relevant.
    gold = {i: int(truth[i]) for i in sampled} | {i: 1 for i in np.flatnonzero(listed)}
    every = LogisticRegression().fit(s[list(gold)].reshape(-1, 1), list(gold.values()))
    assert every.predict_proba(s.reshape(-1, 1))[:, 1].mean() > truth.mean() + 0.15

    client.force_login(admin)
    statement = client.get(f"/projects/{project.slug}/rounds/").content.decode()
    assert "reference grades are all relevant, so they were chosen by their grade" in statement
    relevant = int(truth[sorted(sampled)].sum())
    assert f"has scored {relevant} relevant and {80 - relevant} non-relevant gold pairs to fit on" in statement

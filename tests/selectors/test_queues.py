"""Each queue on a crafted project returns what its definition says; the random queue's sample is uniform."""
from __future__ import annotations

from collections import Counter
from datetime import timedelta

import numpy as np
import pytest
from django.db import connection
from django.utils import timezone
from scipy import stats

from labeling.models import Judgment, Label, Lease, Pair, Passage, Query
from labeling.selectors.queues import (
    LEFT_COUNT_CAP,
    OVERLAP_DIGITS,
    QueueError,
    eligible_pairs,
    queue_candidates,
    queue_progress,
    strategy_order,
)
from labeling.services.labels import label_submit, label_undo, queue_next_for_annotator
from tests.factories import JudgeFactory, LabelFactory, LeaseFactory, MembershipFactory, ProjectFactory, UserFactory

pytestmark = pytest.mark.django_db


def _pool(project, n: int, n_queries: int = 1, sample_keys=None) -> list[Pair]:
    """n pairs spread round-robin over n_queries queries, in id order; sample keys as given (else spaced)."""
    queries = Query.objects.bulk_create(
        Query(project=project, external_id=f"q{i}", text=f"question {i}") for i in range(n_queries)
    )
    passages = Passage.objects.bulk_create(
        Passage(project=project, external_id=f"d{i}", text=f"passage {i}") for i in range(n)
    )
    keys = sample_keys if sample_keys is not None else [(i + 0.5) / n for i in range(n)]
    Pair.objects.bulk_create(
        Pair(project=project, query=queries[i % n_queries], passage=passages[i], sample_key=float(keys[i]))
        for i in range(n)
    )
    return list(Pair.objects.filter(project=project).order_by("id"))


def _judge(project, pairs, ps, **kwargs):
    judge = JudgeFactory(project=project, **kwargs)
    now = timezone.now()
    Judgment.objects.bulk_create(
        Judgment(pair=pair, judge=judge, p_relevant=p, status="ok", created_at=now)
        for pair, p in zip(pairs, ps, strict=True) if p is not None
    )
    return judge


def _expert(project, name):
    user = UserFactory(username=name)
    MembershipFactory(project=project, user=user)
    return user


def _ids(pairs, *indexes):
    return [pairs[i].id for i in indexes]


def _candidates(project, user, strategy, limit=20, now=None):
    return queue_candidates(project=project, annotator=user, strategy=strategy, now=now or timezone.now(), limit=limit)


def test_uncertain_serves_the_queue_judges_p_closest_to_one_half_and_skips_unjudged_pairs():
    project = ProjectFactory()
    pairs = _pool(project, 6)
    judge = _judge(project, pairs, [0.9, 0.45, None, 0.58, 0.1, 0.5])
    _judge(project, pairs, [0.5, 0.5, 0.5, 0.5, 0.5, 0.5])  # another judge: not the queue's
    project.queue_judge = judge
    project.save()
    alice = _expert(project, "alice")
    assert _candidates(project, alice, "uncertain") == _ids(pairs, 5, 1, 3, 0, 4)
    project.queue_judge = None
    assert _candidates(project, alice, "uncertain") == []


def test_disagreement_serves_the_largest_spread_of_p_across_judges_first():
    project = ProjectFactory()
    pairs = _pool(project, 5)
    _judge(project, pairs, [0.1, 0.5, 0.2, 0.9, 0.3])
    _judge(project, pairs, [0.2, 0.5, 0.9, 0.1, None])
    _judge(project, pairs, [0.1, 0.5, 0.6, 0.5, None])
    alice = _expert(project, "alice")
    # Spreads: 0.1, 0 (agreement: left out), 0.7, 0.8, and a single judgment (no spread).
    assert _candidates(project, alice, "disagreement") == _ids(pairs, 3, 2, 0)


def test_conflict_serves_labels_that_contradict_the_judge_most_confident_first_to_other_experts():
    project = ProjectFactory()  # scale 0-2, relevant from 1
    pairs = _pool(project, 5)
    judge = _judge(project, pairs, [0.95, 0.7, 0.2, 0.05, 0.9])
    project.queue_judge = judge
    project.save()
    alice, bob, carol = (_expert(project, name) for name in ("alice", "bob", "carol"))
    for index, grade in [(0, 0), (1, 0), (2, 1), (3, 0), (4, 2)]:
        LabelFactory(pair=pairs[index], annotator=alice, grade=grade)
    # Alice said 0 where P = 0.95 and 0.7, and 1 where P = 0.2; agreement elsewhere.
    assert _candidates(project, bob, "conflict") == _ids(pairs, 0, 2, 1)
    assert _candidates(project, alice, "conflict") == []  # her own labels are reviewed by others
    LabelFactory(pair=pairs[0], annotator=carol, grade=2)
    # Still a conflict for Bob (Alice's label contradicts), but Carol has labelled it.
    assert _candidates(project, carol, "conflict") == _ids(pairs, 2, 1)


def test_random_serves_the_pool_in_sample_key_order_including_unjudged_pairs():
    project = ProjectFactory()
    pairs = _pool(project, 5, sample_keys=[0.7, 0.1, 0.9, 0.3, 0.5])
    _judge(project, pairs, [0.5, None, None, None, None])
    alice = _expert(project, "alice")
    assert _candidates(project, alice, "random") == _ids(pairs, 1, 3, 4, 0, 2)


def test_sequential_serves_query_by_query():
    project = ProjectFactory()
    pairs = _pool(project, 6, n_queries=2)  # queries alternate: pairs 0, 2, 4 have the first query
    alice = _expert(project, "alice")
    assert _candidates(project, alice, "sequential") == _ids(pairs, 0, 2, 4, 1, 3, 5)


def test_stratified_serves_equal_numbers_per_decile_of_p():
    project = ProjectFactory(queue_mix={"stratified": 100})
    rng = np.random.default_rng(3)
    # Skewed: most pairs have P below 0.2, as in a real pool; every decile has at least 3 pairs.
    ps = list(np.concatenate([rng.uniform(0, 0.2, 170), np.repeat(np.arange(10) / 10 + 0.05, 3)]))
    pairs = _pool(project, len(ps), sample_keys=rng.random(len(ps)))
    project.queue_judge = _judge(project, pairs, ps)
    project.save()
    alice = _expert(project, "alice")
    p_of = {pair.id: p for pair, p in zip(pairs, ps, strict=True)}
    served = []
    for _ in range(30):
        claim = queue_next_for_annotator(project=project, annotator=alice)
        served.append(min(int(p_of[claim.pair.id] * 10), 9))
        label_submit(project=project, annotator=alice, pair_id=claim.pair.id, grade=0)
    assert Counter(served) == {decile: 3 for decile in range(10)}


def test_eligibility_excludes_own_labels_skips_and_other_experts_leases_until_they_expire():
    project = ProjectFactory()
    pairs = _pool(project, 4)
    alice, bob = _expert(project, "alice"), _expert(project, "bob")
    now = timezone.now()
    LabelFactory(pair=pairs[0], annotator=alice)
    Lease.objects.create(pair=pairs[1], annotator=alice, queue="random", expires_at=now - timedelta(days=1),
                         skipped=True)
    Lease.objects.create(pair=pairs[2], annotator=bob, queue="random", expires_at=now + timedelta(minutes=1))

    def eligible(user, at=now):
        return sorted(eligible_pairs(project=project, annotator=user, now=at).values_list("id", flat=True))

    # k = 1: Alice's label also takes pair 0 away from Bob; Bob's own lease is not handed to him again as new
    # (he gets it back as the item he holds); Alice's skip is hers only.
    assert eligible(alice) == _ids(pairs, 3)
    assert eligible(bob) == _ids(pairs, 1, 3)
    assert eligible(alice, now + timedelta(minutes=2)) == _ids(pairs, 2, 3)


def test_overlap_items_go_to_k_experts_and_the_overlap_share_is_drawn_from_the_sample_key():
    project = ProjectFactory(labels_per_item=2, overlap_share=0.3)
    rng = np.random.default_rng(11)
    keys = rng.random(2000)
    pairs = _pool(project, len(keys), sample_keys=keys)
    alice, bob, carol = (_expert(project, name) for name in ("alice", "bob", "carol"))
    for pair in pairs:
        LabelFactory(pair=pair, annotator=alice)
    still_open = set(eligible_pairs(project=project, annotator=bob, now=timezone.now()).values_list("id", flat=True))
    expected = {pair.id for pair, key in zip(pairs, keys, strict=True) if (key * OVERLAP_DIGITS) % 1 < 0.3}
    assert still_open == expected
    assert abs(len(expected) / len(pairs) - 0.3) < 3 * np.sqrt(0.3 * 0.7 / len(pairs))
    overlap = next(iter(expected))
    LabelFactory(pair=Pair.objects.get(id=overlap), annotator=bob)
    assert not eligible_pairs(project=project, annotator=carol, now=timezone.now()).filter(id=overlap).exists()


def test_the_random_queue_sample_is_uniform_over_the_pool():
    """200 items the random queue serves first, out of 1,000 pairs whose P rises with their position: each
    tenth of the pool gets its fair share (chi-square), unlike the uncertain queue's picks."""
    project = ProjectFactory()
    rng = np.random.default_rng(2026)
    n = 1000
    pairs = _pool(project, n, sample_keys=rng.random(n))
    judge = _judge(project, pairs, list(np.linspace(0, 1, n)))
    project.queue_judge = judge
    project.save()
    alice = _expert(project, "alice")
    position = {pair.id: index for index, pair in enumerate(pairs)}

    def tenths(strategy):
        picks = _candidates(project, alice, strategy, limit=200)
        assert len(set(picks)) == 200
        return np.bincount([position[pid] * 10 // n for pid in picks], minlength=10)

    assert stats.chisquare(tenths("random")).pvalue > 0.01
    assert stats.chisquare(tenths("uncertain")).pvalue < 1e-6
    first = _candidates(project, alice, "random", limit=1)[0]
    project.queue_mix = {"random": 100}
    project.save()
    assert queue_next_for_annotator(project=project, annotator=alice).pair.id == first


@pytest.mark.skipif(connection.vendor != "postgresql", reason="only PostgreSQL's random() takes a seed")
def test_sample_keys_drawn_by_the_database_are_uniform():
    project = ProjectFactory()
    query = Query.objects.create(project=project, external_id="q", text="question")
    with connection.cursor() as cursor:
        cursor.execute("SELECT setseed(0.42)")
    passages = Passage.objects.bulk_create(
        Passage(project=project, external_id=f"d{i}", text="text") for i in range(3000)
    )
    Pair.objects.bulk_create(Pair(project=project, query=query, passage=p) for p in passages)
    keys = list(Pair.objects.filter(project=project).values_list("sample_key", flat=True))
    assert stats.kstest(keys, "uniform").pvalue > 0.01


def test_the_mix_serves_strategies_by_their_shares():
    project = ProjectFactory(queue_mix={"uncertain": 80, "random": 20})
    pairs = _pool(project, 40)
    project.queue_judge = _judge(project, pairs, list(np.linspace(0.01, 0.99, 40)))
    project.save()
    alice = _expert(project, "alice")
    assert strategy_order(project=project, annotator=alice) == ["uncertain", "random"]
    queues = []
    for _ in range(10):
        claim = queue_next_for_annotator(project=project, annotator=alice)
        queues.append(claim.queue)
        label_submit(project=project, annotator=alice, pair_id=claim.pair.id, grade=1)
    assert Counter(queues) == {"uncertain": 8, "random": 2}
    assert set(Label.objects.values_list("queue", flat=True)) == {"uncertain", "random"}


def test_a_mixed_queue_falls_back_to_the_next_strategy_when_one_runs_dry():
    project = ProjectFactory(queue_mix={"uncertain": 90, "sequential": 10})
    pairs = _pool(project, 3)  # no judgments: the uncertain queue is empty
    alice = _expert(project, "alice")
    assert queue_next_for_annotator(project=project, annotator=alice).pair.id == pairs[0].id


def test_progress_counts_todays_current_labels_and_the_items_left():
    project = ProjectFactory(queue_mix={"sequential": 100})
    pairs = _pool(project, 5)
    alice = _expert(project, "alice")
    now = timezone.now()
    LabelFactory(pair=pairs[0], annotator=alice, created_at=now - timedelta(days=2))
    for pair in pairs[1:4]:
        LeaseFactory(pair=pair, annotator=alice)
        label_submit(project=project, annotator=alice, pair_id=pair.id, grade=1)
    label_undo(project=project, annotator=alice)  # pair 3 comes back, leased to her
    # On her screen: pair 3; left after it: pair 4.
    progress = queue_progress(project=project, annotator=alice, now=timezone.now(), shown=pairs[3].id)
    assert (progress.done_today, progress.left, progress.left_capped) == (2, 1, False)
    # Waiting for her (the project header's count): the item she holds counts too.
    assert queue_progress(project=project, annotator=alice, now=timezone.now()).left == 2


def test_progress_stops_counting_at_the_cap():
    project = ProjectFactory()
    _pool(project, LEFT_COUNT_CAP + 5)
    progress = queue_progress(project=project, annotator=_expert(project, "alice"), now=timezone.now())
    assert (progress.left, progress.left_capped, progress.left_display) == (LEFT_COUNT_CAP, True, "10,000+")


def test_an_unknown_strategy_is_an_error_naming_the_valid_ones():
    project = ProjectFactory()
    with pytest.raises(QueueError, match="uncertain, disagreement, conflict, random, stratified, sequential"):
        _candidates(project, _expert(project, "alice"), "vibes")

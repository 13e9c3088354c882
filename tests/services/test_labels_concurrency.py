"""Claims and submissions from many threads at once, each on its own database connection (PostgreSQL: row
locks with SKIP LOCKED; SQLite serializes writers, which the same assertions hold for)."""
from __future__ import annotations

import threading
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from labeling.models import Label, Lease
from labeling.services.labels import label_submit, queue_next_for_annotator
from tests.factories import MembershipFactory, PairFactory, ProjectFactory, QueryFactory, UserFactory

pytestmark = pytest.mark.django_db(transaction=True)
THREADS = 20


def _run_at_once(target, count: int) -> list:
    """Run target(i) in `count` threads released together by a barrier; return results (or raise the first
    exception a thread raised)."""
    barrier = threading.Barrier(count)
    results: list = [None] * count
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[i] = target(i)
        except BaseException as exc:  # noqa: BLE001 - reported to the test below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    if errors:
        raise errors[0]
    return results


def _setup(n_pairs: int, mix: dict):
    project = ProjectFactory(queue_mix=mix)
    queries = [QueryFactory(project=project) for _ in range(3)]
    pairs = [PairFactory(project=project, query=queries[i % 3]) for i in range(n_pairs)]
    experts = []
    for i in range(THREADS):
        user = UserFactory(username=f"expert{i}")
        MembershipFactory(project=project, user=user)
        experts.append(user)
    return project, pairs, experts


@pytest.mark.parametrize("strategy", ["random", "sequential"])
def test_twenty_threads_asking_for_the_next_item_never_get_the_same_leased_item(strategy):
    project, pairs, experts = _setup(n_pairs=30, mix={strategy: 1})

    claims = _run_at_once(lambda i: queue_next_for_annotator(project=project, annotator=experts[i]), THREADS)

    claimed = [claim.pair.id for claim in claims if claim is not None]
    assert len(claimed) == THREADS, "every expert gets an item while 30 are free"
    assert max(Counter(claimed).values()) == 1
    assert Lease.objects.count() == THREADS
    assert set(Lease.objects.values_list("pair_id", flat=True)) == set(claimed)


def test_when_fewer_items_than_experts_the_rest_get_none_not_a_duplicate():
    project, pairs, experts = _setup(n_pairs=7, mix={"random": 1})

    claims = _run_at_once(lambda i: queue_next_for_annotator(project=project, annotator=experts[i]), THREADS)

    claimed = [claim.pair.id for claim in claims if claim is not None]
    assert sorted(claimed) == sorted(pair.id for pair in pairs)


def test_the_same_label_submitted_twice_at_once_is_stored_once():
    project, pairs, experts = _setup(n_pairs=3, mix={"sequential": 1})
    alice = experts[0]
    claim = queue_next_for_annotator(project=project, annotator=alice)

    results = _run_at_once(
        lambda i: label_submit(project=project, annotator=alice, pair_id=claim.pair.id, grade=2,
                               client_key="double-click-1"),
        8,
    )

    assert Label.objects.filter(annotator=alice).count() == 1
    assert sum(result.created for result in results) == 1
    assert {result.label.id for result in results} == {Label.objects.get().id}


def test_an_expired_lease_returns_the_item_to_the_queue():
    project, pairs, experts = _setup(n_pairs=1, mix={"random": 1})
    start = timezone.now()
    first = queue_next_for_annotator(project=project, annotator=experts[0], now=start)
    assert queue_next_for_annotator(project=project, annotator=experts[1], now=start) is None
    later = start + timedelta(minutes=project.lease_minutes, seconds=1)
    second = queue_next_for_annotator(project=project, annotator=experts[1], now=later)
    assert second is not None and second.pair.id == first.pair.id
    # The first expert's late label is still kept; the item now has its one label and leaves the queue.
    label_submit(project=project, annotator=experts[0], pair_id=first.pair.id, grade=1)
    assert queue_next_for_annotator(project=project, annotator=experts[2], now=later) is None


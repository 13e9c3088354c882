"""Claiming, submitting, undoing and skipping: what an expert notices (which item comes next, what is stored)."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from labeling.models import Label, Lease, ValidationResult
from labeling.services import validation
from labeling.services.labels import (
    LabelConflict,
    LabelError,
    QueueForbidden,
    item_skip,
    label_submit,
    label_undo,
    queue_next_for_annotator,
    queue_prefetch_for_annotator,
)
from tests.factories import (
    LeaseFactory,
    MembershipFactory,
    PairFactory,
    ProjectFactory,
    QueryFactory,
    RelevanceDefinitionFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db


def _project(n_pairs: int = 4, **settings):
    project = ProjectFactory(queue_mix={"sequential": 100}, **settings)
    query = QueryFactory(project=project)
    RelevanceDefinitionFactory(query=query, text="first version")
    current = RelevanceDefinitionFactory(query=query, text="what counts")
    pairs = [PairFactory(project=project, query=query) for _ in range(n_pairs)]
    return project, current, pairs


def _expert(project, name: str):
    user = UserFactory(username=name)
    MembershipFactory(project=project, user=user)
    return user


def test_next_leases_the_first_pair_in_pool_order_and_returns_it_again_until_labelled():
    project, definition, pairs = _project()
    alice = _expert(project, "alice")
    claim = queue_next_for_annotator(project=project, annotator=alice)
    assert claim.pair.id == pairs[0].id and claim.queue == "sequential" and claim.definition == definition
    lease = Lease.objects.get()
    assert lease.annotator == alice and lease.expires_at > timezone.now() + timedelta(minutes=9)
    assert queue_next_for_annotator(project=project, annotator=alice).pair.id == pairs[0].id  # a reload
    assert Lease.objects.count() == 1


def test_a_leased_item_goes_to_the_next_expert_only_after_it_expires():
    project, _, pairs = _project(n_pairs=2)
    alice, bob = _expert(project, "alice"), _expert(project, "bob")
    now = timezone.now()
    assert queue_next_for_annotator(project=project, annotator=alice, now=now).pair.id == pairs[0].id
    assert queue_next_for_annotator(project=project, annotator=bob, now=now).pair.id == pairs[1].id
    carol = _expert(project, "carol")
    assert queue_next_for_annotator(project=project, annotator=carol, now=now) is None
    later = now + timedelta(minutes=project.lease_minutes, seconds=1)
    assert queue_next_for_annotator(project=project, annotator=carol, now=later).pair.id == pairs[0].id


def test_submit_stores_the_label_with_the_definition_shown_and_releases_the_lease():
    project, definition, pairs = _project()
    alice = _expert(project, "alice")
    claim = queue_next_for_annotator(project=project, annotator=alice)
    result = label_submit(project=project, annotator=alice, pair_id=claim.pair.id, grade=2, note="clear answer",
                          unsure=True, time_spent_seconds=12.5, client_key="k1")
    label = result.label
    assert result.created
    assert (label.grade, label.note, label.unsure, label.time_spent_seconds, label.queue) == (
        2, "clear answer", True, 12.5, "sequential")
    assert label.definition == definition and label.superseded_at is None
    assert not Lease.objects.exists()
    assert queue_next_for_annotator(project=project, annotator=alice).pair.id == pairs[1].id


def test_the_same_client_key_twice_stores_one_label():
    project, _, pairs = _project()
    alice = _expert(project, "alice")
    for pair in pairs[:2]:
        LeaseFactory(pair=pair, annotator=alice)
    first = label_submit(project=project, annotator=alice, pair_id=pairs[0].id, grade=1, client_key="abc")
    again = label_submit(project=project, annotator=alice, pair_id=pairs[0].id, grade=1, client_key="abc")
    assert first.created and not again.created and again.label.id == first.label.id
    assert Label.objects.count() == 1
    with pytest.raises(LabelError, match="already used for another item"):
        label_submit(project=project, annotator=alice, pair_id=pairs[1].id, grade=1, client_key="abc")
    assert Label.objects.count() == 1


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"grade": 7}, "grade 7 is not on this project's scale; the grades are [0, 1, 2]"),
        ({"grade": True}, "is not on this project's scale"),
        ({"note": "x" * 10_001}, "the limit is 10,000"),
        ({"time_spent_seconds": -1.0}, "time spent must be between 0"),
        ({"pair_id": 10**9}, "is not in project"),
        ({"definition_id": 10**9}, "is not a version of this item's query"),
    ],
)
def test_bad_submissions_name_the_problem_and_store_nothing(changes, message):
    project, _, pairs = _project()
    alice = _expert(project, "alice")
    queue_next_for_annotator(project=project, annotator=alice)
    arguments = {"pair_id": pairs[0].id, "grade": 1, **changes}
    with pytest.raises(LabelError, match=message.replace("[", r"\[").replace("]", r"\]")):
        label_submit(project=project, annotator=alice, **arguments)
    assert not Label.objects.exists() and Lease.objects.count() == 1


def test_an_item_of_another_project_cannot_be_labelled():
    project, _, _ = _project()
    _, _, others = _project()
    alice = _expert(project, "alice")
    with pytest.raises(LabelError, match="is not in project"):
        label_submit(project=project, annotator=alice, pair_id=others[0].id, grade=1)


def test_undo_withdraws_the_last_label_keeps_it_in_history_and_brings_the_item_back_first():
    project, _, pairs = _project()
    alice = _expert(project, "alice")
    for pair in pairs[:2]:
        claim = queue_next_for_annotator(project=project, annotator=alice)
        label_submit(project=project, annotator=alice, pair_id=claim.pair.id, grade=1)
    held = queue_next_for_annotator(project=project, annotator=alice)
    assert held.pair.id == pairs[2].id
    undone = label_undo(project=project, annotator=alice)
    assert undone.pair_id == pairs[1].id and undone.undone and undone.superseded_at is not None
    assert queue_next_for_annotator(project=project, annotator=alice).pair.id == pairs[1].id
    assert not Lease.objects.filter(pair=pairs[2]).exists()  # the item they were holding went back
    label_submit(project=project, annotator=alice, pair_id=pairs[1].id, grade=0)
    current = Label.objects.filter(superseded_at__isnull=True).order_by("pair_id")
    assert [(label.pair_id, label.grade) for label in current] == [(pairs[0].id, 1), (pairs[1].id, 0)]
    assert Label.objects.filter(undone=True).count() == 1


def test_undo_with_nothing_to_undo_returns_none():
    project, _, _ = _project()
    assert label_undo(project=project, annotator=_expert(project, "alice")) is None


def test_a_skipped_item_is_not_given_again_but_goes_to_others():
    project, _, pairs = _project(n_pairs=2)
    alice, bob = _expert(project, "alice"), _expert(project, "bob")
    claim = queue_next_for_annotator(project=project, annotator=alice)
    item_skip(project=project, annotator=alice, pair_id=claim.pair.id)
    assert queue_next_for_annotator(project=project, annotator=alice).pair.id == pairs[1].id
    assert queue_next_for_annotator(project=project, annotator=bob).pair.id == pairs[0].id


def test_with_overlap_an_item_goes_to_k_different_experts_and_never_twice_to_one():
    project, _, pairs = _project(n_pairs=1, labels_per_item=2, overlap_share=1.0)
    alice, bob, carol = (_expert(project, name) for name in ("alice", "bob", "carol"))
    for expert in (alice, bob):
        claim = queue_next_for_annotator(project=project, annotator=expert)
        assert claim.pair.id == pairs[0].id
        label_submit(project=project, annotator=expert, pair_id=claim.pair.id, grade=1)
        assert queue_next_for_annotator(project=project, annotator=expert) is None
    assert queue_next_for_annotator(project=project, annotator=carol) is None


def test_unknown_strategy_is_an_error():
    project, _, _ = _project()
    with pytest.raises(LabelError, match="unknown strategy 'psychic'"):
        queue_next_for_annotator(project=project, annotator=_expert(project, "alice"), strategy="psychic")


def test_labels_mark_the_validation_report_stale_but_enqueue_one_recomputation_while_one_is_pending(
        monkeypatch, django_capture_on_commit_callbacks):
    sent: list[int] = []
    monkeypatch.setattr(validation.validation_refresh_task, "apply_async", lambda args, **_: sent.append(*args))
    project, _, pairs = _project()
    alice = _expert(project, "alice")
    for pair in pairs[:3]:
        LeaseFactory(pair=pair, annotator=alice)
        with django_capture_on_commit_callbacks(execute=True):
            label_submit(project=project, annotator=alice, pair_id=pair.id, grade=1)
    assert sent == [project.id]
    assert ValidationResult.objects.get(project=project).is_stale


def test_time_spent_from_the_lease_is_the_time_since_the_item_was_claimed():
    project, _, pairs = _project(n_pairs=2)
    alice = _expert(project, "alice")
    claimed = timezone.now()
    queue_next_for_annotator(project=project, annotator=alice, now=claimed)
    label = label_submit(project=project, annotator=alice, pair_id=pairs[0].id, grade=1, time_spent_from_lease=True,
                         now=claimed + timedelta(seconds=42)).label
    assert label.time_spent_seconds == 42.0
    # No lease on the item (an admin labels any item): nothing measured.
    admin = UserFactory(username="root")
    MembershipFactory(project=project, user=admin, role="admin")
    unleased = label_submit(project=project, annotator=admin, pair_id=pairs[1].id, grade=1,
                            time_spent_from_lease=True).label
    assert unleased.time_spent_seconds is None


def test_an_expert_labels_only_items_given_to_them_or_labelled_before_and_admins_any():
    project, _, pairs = _project()
    alice = _expert(project, "alice")
    with pytest.raises(LabelConflict, match=f"item {pairs[1].id} was not given to you"):
        label_submit(project=project, annotator=alice, pair_id=pairs[1].id, grade=2)
    item_skip(project=project, annotator=alice, pair_id=pairs[2].id)  # a skip is not a lease to label under
    with pytest.raises(LabelConflict, match="was not given to you"):
        label_submit(project=project, annotator=alice, pair_id=pairs[2].id, grade=2)
    assert not Label.objects.exists()
    # Given by the queue: labelled; then changed without a lease (it is hers); an expired lease still counts.
    claim = queue_next_for_annotator(project=project, annotator=alice)
    label_submit(project=project, annotator=alice, pair_id=claim.pair.id, grade=1)
    assert label_submit(project=project, annotator=alice, pair_id=claim.pair.id, grade=2).created
    LeaseFactory(pair=pairs[3], annotator=alice, expires_at=timezone.now() - timedelta(minutes=1))
    label_submit(project=project, annotator=alice, pair_id=pairs[3].id, grade=0)
    admin = UserFactory(username="root")
    MembershipFactory(project=project, user=admin, role="admin")
    label_submit(project=project, annotator=admin, pair_id=pairs[1].id, grade=2)
    assert sorted(Label.objects.filter(superseded_at__isnull=True).values_list("annotator__username", "grade")) == [
        ("alice", 0), ("alice", 2), ("root", 2)]


def test_an_expert_may_not_name_a_queue_and_an_admin_previews_one():
    project, _, pairs = _project()
    project.queue_mix = {"random": 100}
    project.save()
    alice = _expert(project, "alice")
    for strategy in ("conflict", "uncertain", "stratified", "random"):
        with pytest.raises(QueueForbidden, match=f"only a project admin may ask for the '{strategy}' queue"):
            queue_next_for_annotator(project=project, annotator=alice, strategy=strategy)
        with pytest.raises(QueueForbidden):
            queue_prefetch_for_annotator(project=project, annotator=alice, shown=pairs[0].id, strategy=strategy)
    assert not Lease.objects.exists()
    admin = UserFactory(username="root")
    MembershipFactory(project=project, user=admin, role="admin")
    assert queue_next_for_annotator(project=project, annotator=admin, strategy="sequential").pair == pairs[0]
    assert queue_next_for_annotator(project=project, annotator=alice).queue == "random"

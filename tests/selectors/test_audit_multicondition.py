"""A run's MultiConIR report from its ranks (labeling.selectors.audit_multicondition), against a hand computation on a
run written entry by entry, and the project's multi-condition items read from the metadata."""
from __future__ import annotations

import pytest

from labeling.models import Run, RunEntry
from labeling.selectors.audit_multicondition import project_multicondition_items, run_multicondition_report
from labeling.services.audit_errors import AuditError
from tests.factories import PassageFactory, ProjectFactory, QueryFactory

pytestmark = pytest.mark.django_db


def tiny_project():
    """x (books): K = 2, both styles; y (law): K = 2, instruction only; plus a plain query and passage."""
    project = ProjectFactory(slug="mc")
    queries = {}
    variants = [("xi1", "x", "books", 1, "instruction"), ("xi2", "x", "books", 2, "instruction"),
                ("xd1", "x", "books", 1, "descriptive"), ("xd2", "x", "books", 2, "descriptive"),
                ("yi1", "y", "law", 1, "instruction"), ("yi2", "y", "law", 2, "instruction")]
    for key, item, domain, k, style in variants:
        queries[key] = QueryFactory(project=project, external_id=key, metadata={"multicondition": {
            "item": item, "domain": domain, "k": k, "style": style}})
    QueryFactory(project=project, external_id="plain")
    passages = {f"{item}-d{s}": PassageFactory(project=project, external_id=f"{item}-d{s}", metadata={
        "multicondition": {"item": item, "satisfies": s}}) for item in "xy" for s in range(3)}
    passages["p"] = PassageFactory(project=project, external_id="p")
    return project, queries, passages


def hand_run(project, queries, passages):
    run = Run.objects.create(project=project, name="hand", kind=Run.Kind.IMPORTED)
    rankings = {"xi1": ["x-d2", "x-d0", "x-d1"], "xi2": ["x-d1", "x-d2"], "xd2": ["x-d0"], "yi1": ["y-d0", "y-d2"],
                "yi2": ["p", "y-d2", "y-d1", "y-d0"]}  # xd1: not ranked at all
    RunEntry.objects.bulk_create([
        RunEntry(run=run, query=queries[q], passage=passages[d], rank=rank, score=10 - rank)
        for q, ranking in rankings.items() for rank, d in enumerate(ranking, 1)])
    return run


def test_a_run_s_report_from_its_ranks_against_a_hand_computation():
    report = run_multicondition_report(hand_run(*tiny_project()))
    assert report["subject"] == "run:hand" and report["items"] == 2 and report["max_k"] == 2
    # Task 1 instruction: xi1 d2 rank 1 before d0 rank 2: win; xi2 d2 rank 2 after d1 rank 1: no;
    # yi1 d2 rank 2 after d0 rank 1: no; yi2 d2 rank 2 before d1 rank 3 (p ranks 1, not an item's): win.
    instruction = report["task1"]["styles"]["instruction"]
    assert instruction["by_domain"] == {"books": [1.0, 0.0], "law": [0.0, 1.0]}
    assert instruction["average"] == [0.5, 0.5] and instruction["mean"] == 0.5
    # Descriptive: xd1 not ranked: skipped; xd2 retrieved neither d2 nor d1: both below its ranking, a tie: no.
    descriptive = report["task1"]["styles"]["descriptive"]
    assert descriptive["by_domain"] == {"books": [None, 0.0], "law": [None, None]}
    assert descriptive["average"] == [None, 0.0] and descriptive["mean"] == 0.0
    assert report["task1"]["mean"] == 0.25 and report["task1"]["verdict"] == "sensitive"
    # Task 2 under xi2: d1 rank 1 before d0 (not retrieved): win; d2 rank 2 after d1: no. Under yi2: d1 before d0,
    # d2 before d1: two wins. Average [1, 0.5], mean 0.75: watch.
    task2 = report["task2"]
    assert task2["by_domain"] == {"books": [1.0, 0.0], "law": [1.0, 1.0]}
    assert task2["average"] == [1.0, 0.5] and task2["mean"] == 0.75 and task2["verdict"] == "watch"
    # Task 3 (x only), Task 2 under each full query: xi2 won k = 1 and lost k = 2; xd2 ranks only d0, so at k = 1 d1
    # (not retrieved) loses to d0 and at k = 2 d2 and d1 (neither retrieved) tie: a flip at k = 1, none at k = 2.
    assert report["task3"]["by_domain"] == {"books": [1.0, 0.0], "law": [None, None]}
    assert report["task3"]["mean"] == 0.5 and report["task3"]["verdict"] == "sensitive"
    assert report["task4"]["verdict"] == "no data" and "cannot be re-scored padded" in report["task4"]["unavailable"]
    assert report["skipped"] == 1  # Task 1 under xd1, which ranks nothing


def test_items_are_read_from_the_metadata_and_plain_rows_are_left_out():
    project, _, _ = tiny_project()
    items = project_multicondition_items(project)
    assert [(i.item, i.domain, i.max_k, i.styles) for i in items] == [
        ("x", "books", 2, ("instruction", "descriptive")), ("y", "law", 2, ("instruction",))]
    assert {d.key for d in items[0].documents.values()} == {"x-d0", "x-d1", "x-d2"}


def test_a_project_without_items_is_told_which_metadata_to_add():
    project = ProjectFactory(slug="plain")
    QueryFactory(project=project)
    with pytest.raises(AuditError, match=r"metadata.multicondition.*bundle-format.md#multi-condition-items-multiconir"):
        project_multicondition_items(project)


def test_a_metadata_problem_names_the_passage():
    project, _, passages = tiny_project()
    passages["x-d1"].metadata = {"multicondition": {"item": "x", "satisfies": "two"}}
    passages["x-d1"].save()
    with pytest.raises(AuditError, match="passage 'x-d1'"):
        run_multicondition_report(Run.objects.create(project=project, name="empty", kind=Run.Kind.IMPORTED))

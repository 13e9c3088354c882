"""The queue mix as whole percentages (checked by hand), and the summary the project page shows."""
from __future__ import annotations

import pytest

from labeling.selectors.queue_settings import queue_mix_percentages, queue_settings_summary
from tests.factories import JudgeFactory, ProjectFactory

ZERO = dict.fromkeys(("uncertain", "disagreement", "conflict", "random", "stratified", "sequential"), 0)


@pytest.mark.parametrize(
    ("mix", "expected"),
    [
        ({"uncertain": 80, "random": 20}, {"uncertain": 80, "random": 20}),
        # 3:1 is 75% and 25%; fractions of a unit are weights too.
        ({"uncertain": 3, "random": 1}, {"uncertain": 75, "random": 25}),
        ({"uncertain": 0.8, "random": 0.2}, {"uncertain": 80, "random": 20}),
        # 60 + 20 = 80: 60/80 = 75%, 20/80 = 25%.
        ({"uncertain": 60, "sequential": 20}, {"uncertain": 75, "sequential": 25}),
        # 2:1 is 66.67% and 33.33%: the larger remainder (.67) gets the missing point, 67 + 33 = 100.
        ({"uncertain": 2, "random": 1}, {"uncertain": 67, "random": 33}),
        # Thirds tie on the remainder (.33 each): the first in strategy order gets the point.
        ({"random": 1, "disagreement": 1, "uncertain": 1}, {"uncertain": 34, "disagreement": 33, "random": 33}),
        # 1:1:1:1:1:1 is 16.67% each: floors 16 * 6 = 96, the first four get a point.
        (dict.fromkeys(ZERO, 1), {"uncertain": 17, "disagreement": 17, "conflict": 17, "random": 17,
                                  "stratified": 16, "sequential": 16}),
        ({"random": 0}, {}),
    ],
)
def test_percentages_are_whole_and_add_up_to_100(mix, expected):
    percents = queue_mix_percentages(mix)
    assert percents == {**ZERO, **expected}
    assert list(percents) == list(ZERO)
    assert sum(percents.values()) in (0, 100)


@pytest.mark.django_db
def test_summary_lists_the_queues_in_use_and_flags_a_missing_judge():
    project = ProjectFactory(queue_mix={"random": 1, "uncertain": 3, "sequential": 0}, labels_per_item=2,
                             overlap_share=0.2)
    summary = queue_settings_summary(project=project)
    assert [(s.strategy, s.percent) for s in summary.shares] == [("uncertain", 75), ("random", 25)]
    assert (summary.labels_per_item, summary.overlap_percent) == (2, 20.0)
    assert summary.without_judge == ("uncertain",)
    project.queue_judge = JudgeFactory(project=project, name="gpt")
    assert queue_settings_summary(project=project).without_judge == ()

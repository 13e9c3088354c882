"""Reads about how a project fills its experts' queues: the mix as whole percentages, a summary for the
project page, and the judges the disagreement queue can compare."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from labeling.models import Judge, Project
from labeling.models.project import QUEUE_STRATEGIES

# These queues rank pairs by the queue judge's P; the disagreement queue compares all judges instead.
STRATEGIES_NEEDING_JUDGE = ("uncertain", "conflict", "stratified")


@dataclass(frozen=True)
class QueueShare:
    strategy: str
    percent: int


@dataclass(frozen=True)
class QueueSettingsSummary:
    shares: tuple[QueueShare, ...]
    judge: Judge | None
    labels_per_item: int
    overlap_percent: float
    lease_minutes: int
    reveal_llm_after_submit: bool
    # Strategies in the mix that rank by the queue judge's P while no queue judge is set.
    without_judge: tuple[str, ...]


def queue_mix_percentages(mix: Mapping[str, float]) -> dict[str, int]:
    """Every strategy's share of the mix as a whole percentage, in QUEUE_STRATEGIES order.

    Shares are relative weights ({'uncertain': 3, 'random': 1} is 75/25). Rounding uses the largest
    remainders, earlier strategies first on ties, so the percentages always add up to exactly 100."""
    total = sum(mix.get(name, 0) for name in QUEUE_STRATEGIES)
    if total <= 0:
        return dict.fromkeys(QUEUE_STRATEGIES, 0)
    exact = {name: 100 * mix.get(name, 0) / total for name in QUEUE_STRATEGIES}
    percents = {name: int(value) for name, value in exact.items()}
    by_remainder = sorted(QUEUE_STRATEGIES, key=lambda name: -(exact[name] - percents[name]))
    for name in by_remainder[: 100 - sum(percents.values())]:
        percents[name] += 1
    return percents


def queue_settings_summary(*, project: Project) -> QueueSettingsSummary:
    percents = queue_mix_percentages(project.queue_mix)
    judge = project.queue_judge
    without_judge = () if judge is not None else tuple(
        name for name in STRATEGIES_NEEDING_JUDGE if project.queue_mix.get(name, 0) > 0
    )
    return QueueSettingsSummary(
        shares=tuple(QueueShare(name, percent) for name, percent in percents.items() if percent > 0),
        judge=judge,
        labels_per_item=project.labels_per_item,
        overlap_percent=round(project.overlap_share * 100, 1),
        lease_minutes=project.lease_minutes,
        reveal_llm_after_submit=project.reveal_llm_after_submit,
        without_judge=without_judge,
    )



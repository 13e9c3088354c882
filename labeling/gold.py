"""The gold grade of a pair from its reference grade and current human labels (DIRAS App. C)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class LabelView:
    """A current human label, as gold-grade rules see it."""

    grade: int
    role: str
    label_id: int


def gold_grade(reference_grade: int | None, labels: Sequence[LabelView]) -> int | None:
    """The newest adjudicator label if there is one; else the reference qrels grade; else the annotators' grade
    when they all agree; else None (unresolved). An adjudication comes first: an expert's label that contradicts
    the reference grade is brought to adjudication (labeling.selectors.adjudication), and its verdict is the
    gold."""
    adjudications = [label for label in labels if label.role == "adjudicator"]
    if adjudications:
        return max(adjudications, key=lambda label: label.label_id).grade
    if reference_grade is not None:
        return reference_grade
    grades = {label.grade for label in labels if label.role == "annotator"}
    if len(grades) == 1:
        return grades.pop()
    return None

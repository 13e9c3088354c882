"""Which gold pairs a calibrator is fitted on. A calibrator estimates P(relevant | the judge's score) from gold pairs;
that estimate is sound when the pairs were chosen by the score or by chance (the queues, the random sample), whatever
their grade. Reference qrels that list only relevant pairs (ClimRetrieve's, and most BEIR sets') were chosen by
their grade: fitted on them, a calibrator learns that every pair is relevant (in one run on the sample, a round's
refit called 7,127 of minilm's 7,136 pairs relevant and its ECE on the random validation sample went from 0.61 to
0.88). So when every reference grade of a project lies on one side of the relevance threshold, the reference-graded
pairs no expert has labelled are left out of the fit; a pair an expert labelled was chosen by a queue, and stays with
its gold. Reference qrels with both kinds (a judged pool) are used whole."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from labeling.models import Label, Pair, Project


@dataclass(frozen=True)
class CalibrationBasis:
    """`left_out`: the gold pairs a calibrator is not fitted on; `note`: why, in words (None when none is)."""

    left_out: frozenset[int]
    note: str | None

    def kept(self, pair_ids: np.ndarray) -> np.ndarray:
        """Which of `pair_ids` a calibrator is fitted on (a boolean mask): the refit and its outlook both count so."""
        return ~np.isin(pair_ids, np.fromiter(self.left_out, np.int64, len(self.left_out)))


def calibration_basis(project: Project) -> CalibrationBasis:
    """The project's gold pairs left out of a calibrator's fit, and why (module docstring)."""
    relevant_from = project.label_scale.relevant_from
    graded = Pair.objects.filter(project=project, reference_grade__isnull=False)
    relevant = graded.filter(reference_grade__gte=relevant_from).exists()
    non_relevant = graded.filter(reference_grade__lt=relevant_from).exists()
    if relevant == non_relevant:  # both kinds, or no reference grade at all
        return CalibrationBasis(frozenset(), None)
    labelled = Label.objects.filter(pair__project=project, superseded_at__isnull=True).values("pair_id")
    left_out = frozenset(graded.exclude(id__in=labelled).values_list("id", flat=True))
    side = "relevant" if relevant else "non-relevant"
    note = (f"the project's {len(left_out):,} reference grades are all {side}, so they were chosen by their grade "
            f"(qrels that list only {side} pairs): a calibrator fitted on them would call every pair {side}, and "
            "they are left out of the fit, which uses the experts' labels")
    return CalibrationBasis(left_out, note)

"""A judge's coverage: only an ok judgment under the query's current definition covers a pair (a stale one, a failed
one or none does not; any ok one where the query has no definition), counted the same over chosen pairs and over
the whole pool."""
from __future__ import annotations

import numpy as np
import pytest

from labeling.models import Judgment
from labeling.selectors.coverage import Coverage, coverage_of, is_ranked, pool_coverage
from tests.factories import (
    JudgeFactory,
    JudgmentFactory,
    PairFactory,
    ProjectFactory,
    QueryFactory,
    RelevanceDefinitionFactory,
)

pytestmark = pytest.mark.django_db


def test_only_ok_judgments_under_the_current_definition_cover_a_pair():
    project = ProjectFactory()
    judge, other = JudgeFactory(project=project), JudgeFactory(project=project)
    defined, undefined = QueryFactory(project=project), QueryFactory(project=project)
    old = RelevanceDefinitionFactory(query=defined)
    current = RelevanceDefinitionFactory(query=defined)
    # An LLM draft newer than the current version is not current until an admin saves it.
    RelevanceDefinitionFactory(query=defined, is_draft=True, origin="llm_draft")
    pairs = [PairFactory(project=project, query=defined) for _ in range(5)]
    no_definition = PairFactory(project=project, query=undefined)
    JudgmentFactory(pair=pairs[0], judge=judge, definition=current)  # covered
    JudgmentFactory(pair=pairs[1], judge=judge, definition=old)  # stale: judged under the old text
    JudgmentFactory(pair=pairs[2], judge=judge, definition=current, status=Judgment.Status.FAILED, p_relevant=None)
    JudgmentFactory(pair=pairs[3], judge=other, definition=current)  # another judge's
    JudgmentFactory(pair=pairs[4], judge=judge, definition=old)  # judged twice: the current one counts, once
    JudgmentFactory(pair=pairs[4], judge=judge, definition=current)
    JudgmentFactory(pair=no_definition, judge=judge, definition=None)  # nothing to be stale against

    everything = np.array([pair.id for pair in [*pairs, no_definition]])
    assert coverage_of(judge=judge, needed=everything) == Coverage(needed=6, covered=3)
    assert coverage_of(judge=judge, needed=everything[[1, 2, 3]]) == Coverage(needed=3, covered=0)
    assert coverage_of(judge=judge, needed=np.zeros(0, np.int64)) == Coverage(needed=0, covered=0)
    assert pool_coverage(project=project, judges=[judge, other]) == [(judge, Coverage(needed=6, covered=3)),
                                                                     (other, Coverage(needed=6, covered=1))]


def test_share_partial_and_ranking():
    partial, complete, empty = Coverage(needed=100, covered=60), Coverage(needed=4, covered=4), Coverage(0, 0)
    assert (partial.share, partial.missing, partial.partial) == (0.6, 40, True)
    assert (complete.share, complete.partial) == (1.0, False)
    assert (empty.share, empty.partial) == (None, False)
    assert not is_ranked(partial, include_partial=False) and is_ranked(partial, include_partial=True)
    assert is_ranked(complete, include_partial=False) and is_ranked(None, include_partial=False)
    assert Coverage.from_json(partial.as_json()) == partial
    # Rounded down: one pair missing of a thousand is not 100 %, one pair of a thousand is not 0 %.
    assert [c.percent for c in (partial, complete, Coverage(1000, 999), Coverage(1000, 1), Coverage(5, 0), empty)] == [
        "60", "100", "99", "< 1", "0", ""]

"""The train / held-out split of a training set by group (a query, or a question of an imported file): every
example of a group lands on one side, so the held-out score measures questions the student never saw."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def held_out_count(groups: int, held_out: float) -> int:
    """How many of `groups` groups are held out for a share `held_out`: round(held_out * groups) (Python's round,
    half to even), at least one when the share is positive and there are two groups or more, never all of them
    (a student needs something to learn from)."""
    if not 0.0 <= held_out < 1.0:
        raise ValueError(f"the held-out share must be in [0, 1), got {held_out!r}")
    if groups < 2 or held_out == 0.0:
        return 0
    return min(max(round(held_out * groups), 1), groups - 1)


def split_groups(groups: Sequence[str], held_out: float, seed: int) -> set[str]:
    """The held-out groups: the sorted unique groups, permuted by numpy's default_rng(seed), the first
    held_out_count(n, held_out) of them. The same groups, share and seed give the same split on any machine."""
    unique = sorted(set(groups))
    count = held_out_count(len(unique), held_out)
    if count == 0:
        return set()
    order = np.random.default_rng(seed).permutation(len(unique))
    return {unique[index] for index in order[:count].tolist()}

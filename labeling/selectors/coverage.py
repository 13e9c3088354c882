"""How much of what a report needs a judge has scored: the share of the report's pairs (the validation's gold
pairs, the pool pairs the runs retrieve to the depth the systems report reads, the pool an export writes) that
the judge has an ok judgment for under their query's current definition. A judge below 100 % is partial: the
reports mark it and leave it out of their rankings unless the reader includes it (INCLUDE_PARTIAL)."""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from labeling.models import Judge, Pair, Project
from labeling.selectors.definitions import pairs_judged_under_current_definition
from labeling.selectors.streams import CHUNK
from labeling.selectors.validation import TRUE_FLAGS

# The query parameter (pages and API) that ranks partial judges too.
INCLUDE_PARTIAL = "include_partial"


@dataclass(frozen=True)
class Coverage:
    """`covered` of the `needed` pairs have an ok judgment of the judge under their current definition; `queued` of
    the missing ones a running job of the judge has still to score (None: not asked, as in the Systems report)."""

    needed: int
    covered: int
    queued: int | None = None

    @property
    def share(self) -> float | None:
        """covered / needed; None when the report needs no pair (nothing to be partial about)."""
        return self.covered / self.needed if self.needed else None

    @property
    def missing(self) -> int:
        return self.needed - self.covered

    @property
    def partial(self) -> bool:
        return self.covered < self.needed

    @property
    def percent(self) -> str:
        """The share as a whole percent rounded down, so that a judge missing one pair of thousands never reads
        as 100; "< 1" for a share that rounds down to 0 but is not ("" when nothing is needed)."""
        if self.share is None:
            return ""
        percent = math.floor(self.share * 100)
        return "< 1" if percent == 0 and self.covered else str(percent)

    @property
    def all_queued(self) -> bool:
        """Whether every missing pair is queued for scoring."""
        return self.queued is not None and self.partial and self.queued >= self.missing

    def as_json(self) -> dict:
        # `queued` only where it says something: a complete judge has nothing to queue.
        queued = {"queued": self.queued} if self.queued is not None and self.partial else {}
        return {"needed": self.needed, "covered": self.covered, "share": self.share, "partial": self.partial,
                **queued}

    @classmethod
    def from_json(cls, data: Mapping) -> Coverage:
        queued = data.get("queued")
        return cls(needed=int(data["needed"]), covered=int(data["covered"]),
                   queued=None if queued is None else int(queued))


def judged_pair_ids(judge: Judge) -> np.ndarray:
    """The sorted ids of the pairs the judge has an ok judgment of under their current definition."""
    rows = pairs_judged_under_current_definition(judge=judge).iterator(chunk_size=CHUNK)
    return np.unique(np.fromiter(rows, dtype=np.int64))


def coverage_of(*, judge: Judge, needed: np.ndarray) -> Coverage:
    """The judge's coverage of the pairs whose ids are `needed` (each once)."""
    return coverages_of(judge=judge, needed_at={None: needed})[None]


def coverage_queued(*, judge: Judge, needed: np.ndarray, queued: Iterable[int]) -> Coverage:
    """coverage_of, with how many of the missing pairs are among `queued` (the judge's queued pair ids,
    labeling.selectors.scoring.queued_pairs): what a partial mark says is on its way."""
    needed = np.asarray(needed, dtype=np.int64)
    missing = needed[~np.isin(needed, judged_pair_ids(judge))] if needed.size else needed
    waiting = np.fromiter(queued, dtype=np.int64)
    return Coverage(needed=int(needed.size), covered=int(needed.size - missing.size),
                    queued=int(np.isin(missing, waiting).sum()))


def pool_pairs_retrieved(*, project: Project, tops: Sequence[np.ndarray]) -> np.ndarray:
    """The ids of the pool pairs that any of `tops` retrieves: the runs' (query id, passage id) rows cut to the
    depth a systems report reads (labeling.selectors.runs.run_top_ids), what its judges need to have scored."""
    return pool_pairs_retrieved_at(project=project, tops_at={None: tops})[None]


def pool_pairs_retrieved_at(*, project: Project, tops_at: Mapping[object, Sequence[np.ndarray]]
                            ) -> dict[object, np.ndarray]:
    """pool_pairs_retrieved for several cuts of the runs at once (a key per cut, such as the depth a measure
    reads), the pool read once."""
    if not any(len(top) for tops in tops_at.values() for top in tops):
        return {key: np.zeros(0, np.int64) for key in tops_at}
    rows = Pair.objects.filter(project=project).order_by("id").values_list("id", "query_id", "passage_id")
    pool = np.array(list(rows.iterator(chunk_size=CHUNK)), dtype=np.int64).reshape(-1, 3)
    if not len(pool):
        return {key: pool[:, 0] for key in tops_at}
    # A pair as one integer: query id x (largest passage id + 1) + passage id.
    base = int(max([pool[:, 2].max(), *(top[:, 1].max() for tops in tops_at.values() for top in tops
                                        if len(top))])) + 1
    keys = pool[:, 1] * base + pool[:, 2]
    found = {}
    for key, tops in tops_at.items():
        hit = np.zeros(len(pool), bool)
        for top in tops:
            hit |= np.isin(keys, top[:, 0] * base + top[:, 1])
        found[key] = pool[hit, 0]
    return found


def coverages_of(*, judge: Judge, needed_at: Mapping[object, np.ndarray]) -> dict[object, Coverage]:
    """coverage_of for several sets of needed pair ids (a key per set), the judge's judgments read once."""
    judged = judged_pair_ids(judge) if any(np.asarray(ids).size for ids in needed_at.values()) else None
    out = {}
    for key, ids in needed_at.items():
        ids = np.asarray(ids, dtype=np.int64)
        out[key] = (Coverage(needed=int(ids.size), covered=int(np.isin(ids, judged).sum())) if ids.size
                    else Coverage(needed=0, covered=0))
    return out


def pool_coverage(*, project: Project, judges: Iterable[Judge]) -> list[tuple[Judge, Coverage]]:
    """Each of `judges` with its coverage of the whole pool, what an export from the judge writes: a count per
    judge in the database, nothing read into memory."""
    pool = project.pairs.count()
    return [(judge, Coverage(needed=pool, covered=pairs_judged_under_current_definition(judge=judge).count()))
            for judge in judges]


def is_ranked(coverage: Coverage | None, *, include_partial: bool) -> bool:
    """Whether a report ranks a source of this coverage (None: not a judge's, always ranked)."""
    return coverage is None or include_partial or not coverage.partial


def include_partial_from(params: Mapping[str, str]) -> bool:
    """Whether a page's query string asks to rank partial judges too (`include_partial=true`)."""
    return params.get(INCLUDE_PARTIAL, "").lower() in TRUE_FLAGS

"""A judge's agreement with the gold labels per relevance-definition version and per definition origin
(DIRAS Tables 4, 11 and 12: generic vs expert-informed definitions; calibration and nDCG/MAP), on each
group's gold pairs and on the pairs that every group judged."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import reduce

import numpy as np

from labeling.models import Judge, Judgment, Project, RelevanceDefinition
from labeling.selectors.streams import CHUNK
from labeling.selectors.validation import (
    DEFAULT_OPTIONS,
    GoldSet,
    ReportOptions,
    gold_set,
    judge_data,
    scale_spec,
)
from models_llm.metrics import DEFAULT_CUTOFFS, JudgedPairs, ScaleSpec, metric_values

NO_DEFINITION = "none"
NO_DEFINITION_LABEL = "no definition"
BY_VERSION, BY_ORIGIN = "version", "origin"
ORIGIN_ORDER = (*RelevanceDefinition.Origin.values, NO_DEFINITION)
# The registered metric behind each metric field of GroupMetrics.
GROUP_METRICS = {"kappa": "kappa_vs_gold", "auroc": "auroc", "brier": "brier", "ece": "ece", "f1": "f1",
                 "ndcg": "ndcg", "map": "map"}


def cut_keys(cutoffs: tuple[int, ...] | list[int]) -> list[str]:
    """The keys of GroupMetrics.at_cutoffs, in the order they are shown: nDCG@k for each k, then MAP@k."""
    return [f"ndcg@{k}" for k in cutoffs] + [f"map@{k}" for k in cutoffs]


@dataclass(frozen=True)
class GroupMetrics:
    """A judge against gold on some gold pairs, computed by the registered metrics of the validation report
    (GROUP_METRICS, and nDCG@k and MAP@k in `at_cutoffs`): the binary call is the judge's guess where it gave
    one, else P >= 0.5; the ranking is by P within each ranking unit. An undefined metric is None and
    `null_reasons[metric]` says why."""

    n: int
    n_relevant: int
    kappa: float | None
    auroc: float | None
    brier: float | None
    ece: float | None
    f1: float | None
    ndcg: float | None
    map: float | None
    at_cutoffs: dict[str, float | None] = field(default_factory=dict)
    null_reasons: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DefinitionGroupMetrics:
    """The judge's ok judgments made under one definition version number (across queries: "v1", "v2", ...)
    or one definition origin ("manual", "llm_draft", "llm_refined"); "none": made when the query had none."""

    key: str
    label: str
    n_judgments: int  # ok judgments in the group, on gold pairs or not (one per pair)
    gold: GroupMetrics  # on every gold pair the group judged
    common: GroupMetrics  # on the gold pairs that every group of the grouping judged


@dataclass(frozen=True)
class DefinitionGrouping:
    """The groups of one grouping (by version or by origin) and how many gold pairs all of them judged."""

    by: str
    groups: list[DefinitionGroupMetrics]
    n_common: int

    @property
    def comparable(self) -> bool:
        return len(self.groups) > 1

    @classmethod
    def from_dict(cls, data: dict) -> DefinitionGrouping:
        groups = [DefinitionGroupMetrics(key=group["key"], label=group["label"], n_judgments=group["n_judgments"],
                                         gold=GroupMetrics(**group["gold"]), common=GroupMetrics(**group["common"]))
                  for group in data["groups"]]
        return cls(by=data["by"], groups=groups, n_common=data["n_common"])


@dataclass(frozen=True)
class DefinitionComparison:
    judge: str
    n_gold: int  # the project's pairs with a gold grade (with all_pairs, the ungraded pool pairs too)
    by_version: DefinitionGrouping
    by_origin: DefinitionGrouping
    cutoffs: list[int] = field(default_factory=lambda: list(DEFAULT_CUTOFFS))

    @property
    def comparable(self) -> bool:
        """Whether the judge judged under more than one definition version or origin."""
        return self.by_version.comparable or self.by_origin.comparable

    @classmethod
    def from_dict(cls, data: dict) -> DefinitionComparison:
        """One stored as `asdict` writes it (the validation cache's by_definition entries)."""
        return cls(judge=data["judge"], n_gold=data["n_gold"],
                   by_version=DefinitionGrouping.from_dict(data["by_version"]),
                   by_origin=DefinitionGrouping.from_dict(data["by_origin"]), cutoffs=data["cutoffs"])


@dataclass(frozen=True)
class _Judged:
    """The judge's ok judgments, one row each, ordered by pair: what groups and metrics are cut from."""

    pair: np.ndarray
    version: np.ndarray  # 0: made without a definition
    origin: np.ndarray
    p: np.ndarray
    guess: np.ndarray  # 1.0 yes, 0.0 no, nan none


def _judged(judge: Judge) -> _Judged:
    definitions = {
        pk: (version, origin)
        for pk, version, origin in RelevanceDefinition.objects.filter(query__project_id=judge.project_id)
        .values_list("id", "version", "origin")
        .iterator(chunk_size=CHUNK)
    }
    rows = list(
        Judgment.objects.filter(judge=judge, status=Judgment.Status.OK)
        .order_by("pair_id")
        .values_list("pair_id", "definition_id", "p_relevant", "guess")
        .iterator(chunk_size=CHUNK)
    )
    none = (0, NO_DEFINITION)
    nan = float("nan")
    return _Judged(
        pair=np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows)),
        version=np.fromiter((definitions.get(row[1], none)[0] for row in rows), dtype=np.int64, count=len(rows)),
        origin=np.array([definitions.get(row[1], none)[1] for row in rows], dtype=object),
        p=np.fromiter((row[2] for row in rows), dtype=float, count=len(rows)),
        guess=np.fromiter((nan if row[3] is None else float(row[3]) for row in rows), dtype=float, count=len(rows)),
    )


def _newest_per_pair(rows: np.ndarray, judged: _Judged) -> np.ndarray:
    """`rows` (indices into `judged`) cut to one per pair, the one under the newest version, in pair order: a
    pair judged under v1 and v3, both written by a person, counts once in "manual", as the report counts it."""
    rows = rows[np.lexsort((judged.version[rows], judged.pair[rows]))]
    last = np.append(judged.pair[rows][1:] != judged.pair[rows][:-1], True)
    return rows[last]


@dataclass(frozen=True)
class _Group:
    key: str
    label: str
    n_judgments: int
    at: np.ndarray  # positions in the gold arrays of the group's gold pairs, ascending
    p: np.ndarray
    guess: np.ndarray


def _group(key: str, label: str, rows: np.ndarray, judged: _Judged, gold: GoldSet) -> _Group:
    rows = _newest_per_pair(rows, judged)
    pairs = judged.pair[rows]
    size = gold.pair_ids.size
    at = np.minimum(np.searchsorted(gold.pair_ids, pairs), max(size - 1, 0))
    hit = gold.pair_ids[at] == pairs if size else np.zeros(pairs.size, dtype=bool)
    return _Group(key, label, int(rows.size), at[hit], judged.p[rows][hit], judged.guess[rows][hit])


def _metrics(gold: GoldSet, scale: ScaleSpec, cutoffs: tuple[int, ...], group: _Group,
             keep: np.ndarray | None = None) -> GroupMetrics:
    """The group's metrics on the gold pairs it judged (with all_pairs, the rankings also hold the gold pairs it
    did not judge, last), or on the `keep` ones only (all of them judged by the group)."""
    size = gold.pair_ids.size
    p, guess = np.full(size, np.nan), np.full(size, np.nan)
    p[group.at], guess[group.at] = group.p, group.guess
    data, _ = judge_data(gold, p, guess, np.full(size, np.nan), keep=keep)
    keys = cut_keys(cutoffs)
    if not data.judged.any():
        reasons = dict.fromkeys([*GROUP_METRICS, *keys], "no gold pairs judged")
        return GroupMetrics(n=0, n_relevant=0, kappa=None, auroc=None, brier=None, ece=None, f1=None, ndcg=None,
                            map=None, at_cutoffs=dict.fromkeys(keys), null_reasons=reasons)
    pairs = JudgedPairs(data, scale, cutoffs=cutoffs)
    results = metric_values(pairs, [*GROUP_METRICS.values(), *keys])
    values = {name: results[key] for name, key in GROUP_METRICS.items()} | {key: results[key] for key in keys}
    reasons = {name: result.reason for name, result in values.items() if result.value is None}
    return GroupMetrics(n=pairs.n, n_relevant=pairs.n_relevant, null_reasons=reasons,
                        at_cutoffs={key: values[key].value for key in keys},
                        **{name: values[name].value for name in GROUP_METRICS})


def _grouping(by: str, groups: list[_Group], gold: GoldSet, scale: ScaleSpec,
              cutoffs: tuple[int, ...]) -> DefinitionGrouping:
    common = reduce(np.intersect1d, [group.at for group in groups]) if groups else np.zeros(0, np.int64)
    shared = np.zeros(gold.pair_ids.size, bool)
    shared[common] = True
    out = [
        DefinitionGroupMetrics(
            key=group.key,
            label=group.label,
            n_judgments=group.n_judgments,
            gold=_metrics(gold, scale, cutoffs, group),
            common=_metrics(gold, scale, cutoffs, group, keep=shared),
        )
        for group in groups
    ]
    return DefinitionGrouping(by=by, groups=out, n_common=int(common.size))


def _origin_rank(origin: str) -> tuple[int, str]:
    # An origin added to the model later sorts after the known ones rather than vanishing.
    return (ORIGIN_ORDER.index(origin) if origin in ORIGIN_ORDER else len(ORIGIN_ORDER), origin)


def judge_metrics_by_definition(*, judge: Judge, gold: GoldSet | None = None,
                                options: ReportOptions = DEFAULT_OPTIONS) -> DefinitionComparison:
    """The judge's kappa, AUROC, Brier, ECE, F1, nDCG, MAP and nDCG@k/MAP@k (k: `options.cutoffs`) against gold
    per definition version number (v1, v2, ... across queries; "none" for judgments made without a definition)
    and per definition origin, each on every gold pair its group judged and on the gold pairs judged under
    every group of the grouping (a fair comparison uses the same pairs). Gold is as in the validation report
    with `options` (all pairs, ranking units); a pair judged twice within one group (under two versions both
    written by a person) counts once, under the newer version.

    Reads every ok judgment of the judge in one query (pair, definition, P, guess) and cuts the groups with
    numpy (under a second for 100k gold pairs on SQLite, half of it reading gold; pass `gold` when it is read
    already). The worker computes it with the validation report; pages and the API read it from there
    (ValidationReport.metrics_by_definition)."""
    project = judge.project
    gold = gold_set(project, options) if gold is None else gold
    scale = scale_spec(project)
    judged = _judged(judge)
    versions = sorted(set(judged.version.tolist()) - {0}) + ([0] if (judged.version == 0).any() else [])
    by_version = [
        _group(f"v{v}" if v else NO_DEFINITION, f"v{v}" if v else NO_DEFINITION_LABEL,
               np.flatnonzero(judged.version == v), judged, gold)
        for v in versions
    ]
    labels = dict(RelevanceDefinition.Origin.choices) | {NO_DEFINITION: NO_DEFINITION_LABEL}
    origins = sorted(set(judged.origin.tolist()), key=_origin_rank)
    by_origin = [
        _group(origin, labels.get(origin, origin), np.flatnonzero(judged.origin == origin), judged, gold)
        for origin in origins
    ]
    return DefinitionComparison(
        judge=judge.name,
        n_gold=int(gold.pair_ids.size),
        by_version=_grouping(BY_VERSION, by_version, gold, scale, options.cutoffs),
        by_origin=_grouping(BY_ORIGIN, by_origin, gold, scale, options.cutoffs),
        cutoffs=list(options.cutoffs),
    )


def default_comparison_judge(*, project: Project, judges: list[Judge]) -> Judge | None:
    """The judge whose P the project's queues use when it has judgments, else the first of `judges`."""
    for judge in judges:
        if judge.id == project.queue_judge_id:
            return judge
    return judges[0] if judges else None

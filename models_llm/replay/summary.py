"""What a replay reports (#50): per mix and judge, each measure's mean and band over seeds against labels spent, and
the summary table: labels needed to reach a target, where the stopping rule stopped (with the true recall there),
and the work saved over random order.

WSS@R, the TAR convention (Cohen et al. 2006, "Reducing workload in systematic review preparation using automated
citation classification"): WSS = (TN + FN) / N - (1 - R), the share of the N items a reviewer need not read to reach
recall R, less the share random order saves at that recall. With the labels spent L when the verified qrels first
reach recall R, TN + FN = N - L, so WSS@95 = (N - L) / N - 0.05, averaged over the seeds. It is None unless every seed
reached 95 % within the replay's labels (a replay shorter than the review cannot say what it saves)."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from models_llm.replay.engine import ReplayRun, RoundState

BAND = (10.0, 90.0)  # the band over seeds: the 10th and 90th percentiles
TARGETS = {"verified_recall": 0.9, "exported_recall": 0.9, "kappa": 0.6, "kendall_tau": 0.9}
WSS_RECALL = 0.95

# The measures drawn against labels spent: name -> how a state gives it (None: undefined there).
MEASURES: dict[str, Callable[[RoundState], float | None]] = {
    "auroc": lambda s: s.auroc,
    "ece": lambda s: s.ece,
    "kappa": lambda s: s.kappa,
    "verified_recall": lambda s: s.true_recall,
    "exported_recall": lambda s: s.exported_recall,
    "exported_precision": lambda s: s.exported_precision,
    "model_total": lambda s: None if s.model is None else s.model[0],
    "model_low": lambda s: None if s.model is None else s.model[1],
    "model_high": lambda s: None if s.model is None else s.model[2],
    "design_total": lambda s: None if s.design is None else s.design[0],
    "design_low": lambda s: None if s.design is None else s.design[1],
    "design_high": lambda s: None if s.design is None else s.design[2],
    "model_covered": lambda s: None if s.covered("model") is None else float(s.covered("model")),
    "design_covered": lambda s: None if s.covered("design") is None else float(s.covered("design")),
    "stop_probability": lambda s: s.stop_probability,
    "kendall_tau": lambda s: s.kendall_tau,
    "tau_ap": lambda s: s.tau_ap,
}


@dataclass(frozen=True)
class Band:
    """A measure over seeds at one point: mean and band (None where no seed had it), and how many seeds had it."""

    mean: float | None
    low: float | None
    high: float | None
    seeds: int


@dataclass(frozen=True)
class Reached:
    """Labels spent when a measure first reached its target, per seed (None: not within the replay), and the mean
    over the seeds that reached it."""

    target: float
    per_seed: list[int | None]

    @property
    def mean(self) -> float | None:
        reached = [labels for labels in self.per_seed if labels is not None]
        return float(np.mean(reached)) if reached else None

    @property
    def reached(self) -> int:
        return sum(labels is not None for labels in self.per_seed)


@dataclass(frozen=True)
class Stop:
    """Where the stopping rule first stopped, per seed: labels spent and the verified qrels' true recall there (None:
    it did not stop within the replay)."""

    labels: list[int | None]
    true_recall: list[float | None]


@dataclass(frozen=True)
class ArmSummary:
    """One mix and judge over its seeds: the curves (labels spent, then each measure's band at each point), the
    targets reached, the stop, the share of measured points whose interval covered the true R, and WSS@95."""

    mix: dict[str, float]
    judge: str
    seeds: list[int]
    labels: list[int]
    curves: dict[str, list[Band]]
    reached: dict[str, Reached]
    stop: Stop
    coverage: dict[str, float | None]
    wss95: float | None
    pool: int


def _band(values: Sequence[float | None]) -> Band:
    known = np.asarray([v for v in values if v is not None], dtype=float)
    if not known.size:
        return Band(None, None, None, 0)
    low, high = np.percentile(known, BAND)
    return Band(float(known.mean()), float(low), float(high), int(known.size))


def _first(states: Sequence[RoundState], test: Callable[[RoundState], bool]) -> RoundState | None:
    return next((state for state in states if test(state)), None)


def _at_least(measure: Callable[[RoundState], float | None], target: float) -> Callable[[RoundState], bool]:
    def test(state: RoundState) -> bool:
        value = measure(state)
        return value is not None and value >= target - 1e-12
    return test


def summarise_arm(runs: Sequence[ReplayRun], pool_size: int) -> ArmSummary:
    """The summary of one mix and judge's runs (one per seed). Points are matched by round: a run that ended early
    (its queues empty) stops contributing after its last round."""
    depth = max(len(run.states) for run in runs)
    labels = [int(np.mean([run.states[i].labels for run in runs if i < len(run.states)])) for i in range(depth)]
    curves = {name: [_band([measure(run.states[i]) for run in runs if i < len(run.states)]) for i in range(depth)]
              for name, measure in MEASURES.items()}
    reached = {}
    for name, target in TARGETS.items():
        per_seed = []
        for run in runs:
            state = _first(run.states, _at_least(MEASURES[name], target))
            per_seed.append(None if state is None else state.labels)
        reached[name] = Reached(target, per_seed)
    stops = [_first(run.states, lambda state: state.stopped) for run in runs]
    coverage = {}
    for which in ("model", "design"):
        flags = [state.covered(which) for run in runs for state in run.states[1:]]
        known = [flag for flag in flags if flag is not None]
        coverage[which] = float(np.mean(known)) if known else None
    wss = [_first(run.states, _at_least(MEASURES["verified_recall"], WSS_RECALL)) for run in runs]
    reached_wss = [(pool_size - state.labels) / pool_size - (1 - WSS_RECALL) for state in wss if state is not None]
    return ArmSummary(
        mix=dict(runs[0].mix), judge=runs[0].judge, seeds=[run.seed for run in runs], labels=labels, curves=curves,
        reached=reached,
        stop=Stop(labels=[None if s is None else s.labels for s in stops],
                  true_recall=[None if s is None else s.true_recall for s in stops]),
        coverage=coverage, wss95=float(np.mean(reached_wss)) if len(reached_wss) == len(runs) else None,
        pool=pool_size)


def summarise(runs: Sequence[ReplayRun], pool_size: int) -> list[ArmSummary]:
    """One ArmSummary per (mix, judge), in the order the runs came."""
    arms: dict[tuple, list[ReplayRun]] = {}
    for run in runs:
        arms.setdefault((tuple(sorted(run.mix.items())), run.judge), []).append(run)
    return [summarise_arm(group, pool_size) for group in arms.values()]


def arm_to_dict(arm: ArmSummary) -> dict:
    """JSON-ready, read back by arm_from_dict."""
    return asdict(arm)


def arm_from_dict(data: dict) -> ArmSummary:
    return ArmSummary(
        mix=dict(data["mix"]), judge=data["judge"], seeds=list(data["seeds"]), labels=list(data["labels"]),
        curves={name: [Band(**band) for band in bands] for name, bands in data["curves"].items()},
        reached={name: Reached(**reached) for name, reached in data["reached"].items()},
        stop=Stop(**data["stop"]), coverage=dict(data["coverage"]), wss95=data["wss95"], pool=int(data["pool"]))

"""Replay: the labelling loop run again on a pool whose truth is known, to see what it would have cost (#50).

Each simulated round is what a real round does (labeling.services.rounds): its batch is drawn label by label by
the queue's rules (models_llm.replay.selection: the mix's deficit rule, then the strategy's order, over the pairs
nobody labelled yet), the simulated expert answers with the truth, the judge's calibrator is refitted on every
graded pair it scored (models_llm.calibration.calibrator_fit, as judge_calibrate does; a fit that cannot be made
keeps the calibrator as it was, as a round does), and the completeness estimates are the live report's
(models_llm.metrics.completeness.pool_totals, with the calibrator's posterior draws). Beside them the replay
measures what a real project cannot: the true number of relevant pairs, the true recall of the verified qrels and
the judge's quality on the pairs not labelled yet.

Plain numpy, no Django: labeling.selectors.replay loads a project's arrays, and nothing of the project is written.
Seeds: seed 0 keeps the project's own random order keys (a replay of seed 0 serves what the project's queues would
serve); any other seed draws new keys, as if the pairs had been made again.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields

import numpy as np
from sklearn.metrics import roc_auc_score

from models_llm.calibration import CalibrationError, Calibrator, calibrator_fit, calibrator_posterior
from models_llm.metrics.calibration_error import ece
from models_llm.metrics.classification import cohen_kappa
from models_llm.metrics.completeness import (
    MODEL_DRAWS,
    UNGRADED,
    CompletenessError,
    count_draws,
    pool_totals,
    recall_reached_probability,
    sample_frontier,
)
from models_llm.relevance_rule import POINTWISE, RelevanceRule
from models_llm.replay.selection import (
    DECILES,
    SELECTION_STRATEGIES,
    decile_of,
    decile_orders,
    disagreement,
    disagreement_order,
    mix_order,
    random_order,
    stratified_deciles,
    uncertain_order,
)
from models_llm.replay.systems import ReplayRuns, RunScorer, systems_agreement

CALIBRATION_FOLDS = 5  # as labeling.selectors.validation.CALIBRATION_FOLDS: a round's refit
# A replay's size is seeds x mixes x judges x rounds measurements over the pool: bounded so that one request
# cannot occupy a worker for days.
REPLAY_MAX_PAIR_ROUNDS = 500_000_000
KEY_SALT = 50  # mixed into a seed's random order keys (_keys)


class ReplayError(ValueError):
    """A replay that cannot be run as asked (the message names the setting or the data)."""


@dataclass(frozen=True)
class ReplayJudge:
    """A judge as the replay reads it: its raw P on every pool pair (nan: not scored), the rule that makes its P
    relevant, and whether its P is a score (no model-based estimate until a calibrator maps it to P)."""

    name: str
    raw_p: np.ndarray
    rule: RelevanceRule = POINTWISE
    gives_scores: bool = False


@dataclass(frozen=True)
class ReplayPool:
    """The pool in pair order: pair ids, the random order keys, the true grade of each pair (>= 0) and the grade
    from which a pair is relevant. `query`: each pair's query as an index (0..queries - 1, the queries in id order, as
    the live report numbers them: the calibrator's draws are made query by query); None: one query. `within`: an
    ensemble judge's own spread per pair (the disagreement queue's second source), if any."""

    pair_ids: np.ndarray
    key: np.ndarray
    truth: np.ndarray
    relevant_from: int
    query: np.ndarray | None = None
    within: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = self.pair_ids.size
        if self.key.shape != (n,) or self.truth.shape != (n,):
            raise ReplayError("the pool's pair ids, keys and truth must have one entry per pair")
        if self.query is not None and (self.query.shape != (n,) or (n and int(self.query.min()) < 0)):
            raise ReplayError("the pool's query indexes must be one per pair, from 0")
        if n and int(self.truth.min()) < 0:
            raise ReplayError("every pair of a replay's pool needs a true grade (>= 0)")


@dataclass(frozen=True)
class ReplaySettings:
    """What to replay. `mixes`: each a queue mix as a round sets it ({strategy: share}); `batch` labels per round,
    `rounds` rounds; `refit`: refit the calibrator after each round (as a round does) or keep the judge's raw P;
    `target`, `alpha`: the stopping rule (recall target met with probability >= 1 - alpha); `level`: the
    intervals'; `seeds`; `model_draws`: draws of the calibrator behind a model-based interval."""

    mixes: Sequence[Mapping[str, float]]
    batch: int
    rounds: int
    refit: bool = True
    target: float = 0.9
    alpha: float = 0.1
    level: float = 0.9
    seeds: Sequence[int] = (0,)
    model_draws: int = MODEL_DRAWS

    def __post_init__(self) -> None:
        if not self.mixes:
            raise ReplayError("mixes: give at least one queue mix, e.g. {'uncertain': 80, 'random': 20}")
        for mix in self.mixes:
            unknown = sorted(set(mix) - set(SELECTION_STRATEGIES))
            if unknown or not mix or any(not share >= 0 for share in mix.values()) or sum(mix.values()) <= 0:
                raise ReplayError(f"mix {dict(mix)!r}: shares >= 0, not all 0, of {', '.join(SELECTION_STRATEGIES)}")
        if self.batch < 1 or self.rounds < 1:
            raise ReplayError("batch and rounds must be at least 1")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ReplayError("seeds: give at least one, each once")
        if not (0 < self.target <= 1 and 0 < self.alpha < 1 and 0 < self.level < 1 and self.model_draws >= 1):
            raise ReplayError("target in (0, 1], alpha and level in (0, 1), model_draws >= 1")


@dataclass(frozen=True)
class RoundState:
    """One point of a replay's curve: after `labels` labels (round `round`; 0: before any). `batch`: the pair ids the
    round labelled, in order; `served`: labels per strategy in the round. The estimates of R (model: None when
    withheld or impossible; design: None before the random sample has a pair) with their intervals, the true R, the
    verified relevant count, what the exported qrels (verified + the judge's labels) call relevant and how many of
    those truly are, the stopping probability (None: the rule cannot be read, e.g. open pairs the judge did
    not score) and the judge's quality on the pairs not labelled yet (None: undefined there); with runs to compare,
    Kendall's tau and tau-AP of their ranking under the exported qrels against the truth's (models_llm.replay.
    systems)."""

    round: int
    labels: int
    batch: tuple[int, ...]
    served: dict[str, int]
    calibrator: dict | None
    refit_note: str | None
    true_relevant: int
    verified_relevant: int
    exported_relevant: int
    exported_found: int
    model: tuple[float, float, float] | None
    design: tuple[float, float, float] | None
    stop_probability: float | None
    stopped: bool
    auroc: float | None
    ece: float | None
    kappa: float | None
    unlabelled_scored: int
    kendall_tau: float | None = None
    tau_ap: float | None = None

    @property
    def true_recall(self) -> float | None:
        """The verified qrels' true recall: verified relevant / true R."""
        return self.verified_relevant / self.true_relevant if self.true_relevant else None

    @property
    def exported_recall(self) -> float | None:
        """The true recall of the qrels the loop would export now: the verified grades, and the judge's calibrated
        labels (its relevance rule) on the pairs nobody graded."""
        return self.exported_found / self.true_relevant if self.true_relevant else None

    @property
    def exported_precision(self) -> float | None:
        return self.exported_found / self.exported_relevant if self.exported_relevant else None

    def covered(self, which: str) -> bool | None:
        estimate = self.model if which == "model" else self.design
        return None if estimate is None else bool(estimate[1] <= self.true_relevant <= estimate[2])


@dataclass
class _Queues:
    """The replay's queue state for one judge and seed: each strategy's order and how far it has been read."""

    orders: dict[str, np.ndarray]
    deciles: list[np.ndarray]
    decile: np.ndarray
    labelled: np.ndarray
    pointer: dict[str, int] = field(default_factory=dict)
    decile_pointer: list[int] = field(default_factory=lambda: [0] * DECILES)
    stratified_counts: np.ndarray = field(default_factory=lambda: np.zeros(DECILES, dtype=np.int64))

    def _next_in(self, order: np.ndarray, at: int) -> tuple[int | None, int]:
        while at < order.size and self.labelled[order[at]]:
            at += 1
        return (int(order[at]) if at < order.size else None), at

    def next(self, strategy: str) -> int | None:
        """The position the strategy serves next (None: it has nothing left), not yet taken."""
        if strategy != "stratified":
            found, self.pointer[strategy] = self._next_in(self.orders[strategy], self.pointer.get(strategy, 0))
            return found
        for decile in stratified_deciles(self.stratified_counts):
            found, self.decile_pointer[decile] = self._next_in(self.deciles[decile], self.decile_pointer[decile])
            if found is not None:
                return found
        return None

    def take(self, strategy: str, position: int) -> None:
        self.labelled[position] = True
        if strategy == "stratified" and self.decile[position] >= 0:
            self.stratified_counts[self.decile[position]] += 1


def replay_size(pool: ReplayPool, judges: Sequence[ReplayJudge], settings: ReplaySettings) -> int:
    """Pair-rounds the replay measures: pool size x (rounds + 1) x seeds x mixes x judges."""
    return (pool.pair_ids.size * (settings.rounds + 1) * len(settings.seeds) * len(settings.mixes)
            * max(1, len(judges)))


def _keys(pool: ReplayPool, seed: int) -> np.ndarray:
    # Salted: a seed a caller also used for its own data (a simulation's truth) must not give the same draws.
    return pool.key if seed == 0 else np.random.default_rng((seed, KEY_SALT)).random(pool.key.size)


def _queues(pool: ReplayPool, judge: ReplayJudge, spread: np.ndarray, key: np.ndarray) -> _Queues:
    ids = pool.pair_ids
    return _Queues(
        orders={"uncertain": uncertain_order(judge.raw_p, ids), "disagreement": disagreement_order(spread, ids),
                "random": random_order(key, ids)},
        deciles=decile_orders(judge.raw_p, key, ids), decile=decile_of(judge.raw_p),
        labelled=np.zeros(ids.size, dtype=bool))


def _refit(raw_p: np.ndarray, gold: np.ndarray, relevant_from: int) -> tuple[Calibrator | None, object, str | None]:
    """The calibrator fitted on the graded pairs the judge scored, its posterior, and why there is none."""
    fit_on = (gold >= 0) & ~np.isnan(raw_p)
    relevant = gold[fit_on] >= relevant_from
    try:
        fit = calibrator_fit(raw_p[fit_on], relevant, folds=CALIBRATION_FOLDS, seed=0)
    except CalibrationError as exc:
        return None, None, str(exc)
    return fit.calibrator, calibrator_posterior(fit.calibrator.method, raw_p[fit_on], relevant.astype(int)), None


def _quality(p: np.ndarray, called: np.ndarray, relevant: np.ndarray) -> tuple[float | None, float | None,
                                                                                 float | None]:
    """AUROC, ECE and Cohen's kappa of the judge on pairs (None where undefined: one class only, no pairs)."""
    if not p.size:
        return None, None, None
    auroc = float(roc_auc_score(relevant, p)) if relevant.any() and not relevant.all() else None
    return auroc, float(ece(p, relevant.astype(int))), cohen_kappa(called.astype(int), relevant.astype(int), [0, 1])


@dataclass(frozen=True)
class _Systems:
    """The runs' scorer and their scores under the truth (computed once per replay)."""

    scorer: RunScorer
    truth_scores: np.ndarray


def _measure(pool: ReplayPool, judge: ReplayJudge, gold: np.ndarray, key: np.ndarray, calibrator: Calibrator | None,
             posterior, settings: ReplaySettings, systems: _Systems | None) -> dict:
    raw = judge.raw_p
    judged = ~np.isnan(raw)
    p = raw.copy()
    if calibrator is not None:
        p[judged] = calibrator.apply(raw[judged])
    open_judged = (gold < 0) & judged
    drawn = None
    if posterior is not None:  # as the live report draws them (labeling.selectors.completeness._model_draws)
        query = pool.query if pool.query is not None else np.zeros(raw.size, dtype=np.int64)
        drawn = count_draws(posterior, raw[open_judged], query[open_judged], int(query.max()) + 1 if query.size else 1,
                            draws=settings.model_draws, seed=0).whole()
    withheld = calibrator is None and judge.gives_scores
    totals = pool_totals(gold, key, p, relevant_from=pool.relevant_from, frontier=sample_frontier(gold, key),
                         level=settings.level, drawn=drawn, withheld=withheld)
    probability = None
    if totals.model is not None and totals.unjudged_open == 0:
        probability = recall_reached_probability(totals.verified_relevant, totals.open_p, settings.target,
                                                 drawn=drawn)
    relevant = pool.truth >= pool.relevant_from
    rest = open_judged
    called = judge.rule.relevant(p if judge.rule.calibrated else raw)
    auroc, error, kappa = _quality(p[rest], called[rest], relevant[rest])
    graded = gold >= 0
    exported = np.where(graded, gold >= pool.relevant_from, called)  # verified + the judge's labels on the rest
    found = int((exported & relevant).sum())
    agreement = None
    if systems is not None:
        agreement = systems_agreement(systems.truth_scores, systems.scorer.scores(exported))
    return {
        "kendall_tau": None if agreement is None else agreement.kendall_tau,
        "tau_ap": None if agreement is None else agreement.tau_ap,
        "exported_relevant": int(exported.sum()), "exported_found": found,
        "verified_relevant": totals.verified_relevant,
        "model": None if totals.model is None else (totals.model.total, totals.model.low, totals.model.high),
        "design": None if totals.design is None else (totals.design.total, totals.design.low, totals.design.high),
        "stop_probability": probability,
        "stopped": probability is not None and probability >= 1.0 - settings.alpha,
        "auroc": auroc, "ece": error, "kappa": kappa, "unlabelled_scored": int(rest.sum()),
    }


def replay_one(pool: ReplayPool, judge: ReplayJudge, mix: Mapping[str, float], settings: ReplaySettings, seed: int,
               spread: np.ndarray | None = None, systems: _Systems | None = None) -> list[RoundState]:
    """One replay: `settings.rounds` rounds of `settings.batch` labels under `mix`, queue judge `judge`, seed
    `seed`; the states before the first round and after each. `spread`: the disagreement queue's per-pair
    disagreement (selection.disagreement over the judges compared), none by default. Ends early when every queue of
    the mix is empty."""
    key = _keys(pool, seed)
    queues = _queues(pool, judge, spread if spread is not None else np.zeros(pool.pair_ids.size), key)
    shares = {name: float(share) for name, share in mix.items() if share > 0}
    gold = np.full(pool.pair_ids.size, UNGRADED, dtype=np.int64)
    calibrator, posterior, note = None, None, None
    true_relevant = int((pool.truth >= pool.relevant_from).sum())
    labels = 0

    def state(number: int, batch: list[int], served: dict[str, int]) -> RoundState:
        try:
            measured = _measure(pool, judge, gold, key, calibrator, posterior, settings, systems)
        except CompletenessError as exc:
            raise ReplayError(f"judge {judge.name!r}: {exc}") from None
        return RoundState(round=number, labels=labels, batch=tuple(int(pool.pair_ids[i]) for i in batch),
                          served=served, calibrator=calibrator.to_json() if calibrator else None, refit_note=note,
                          true_relevant=true_relevant, **measured)

    states = [state(0, [], {})]
    for number in range(1, settings.rounds + 1):
        served: dict[str, int] = {}
        batch: list[int] = []
        for _ in range(settings.batch):
            for name in mix_order(shares, served):
                position = queues.next(name)
                if position is not None:
                    break
            else:
                break  # every queue of the mix is empty
            queues.take(name, position)
            gold[position] = pool.truth[position]
            served[name] = served.get(name, 0) + 1
            batch.append(position)
        if not batch:
            break
        labels += len(batch)
        if settings.refit:
            fitted, fitted_posterior, note = _refit(judge.raw_p, gold, pool.relevant_from)
            if fitted is not None:
                calibrator, posterior = fitted, fitted_posterior
        states.append(state(number, batch, served))
    return states


@dataclass(frozen=True)
class ReplayRun:
    """The states of one (mix, judge, seed)."""

    mix: dict[str, float]
    judge: str
    seed: int
    states: list[RoundState]

    def to_dict(self) -> dict:
        """JSON-ready, read back by from_dict (a replay job stores its runs as they finish)."""
        return {"mix": self.mix, "judge": self.judge, "seed": self.seed,
                "states": [asdict(state) for state in self.states]}

    @classmethod
    def from_dict(cls, data: dict) -> ReplayRun:
        names = {f.name for f in fields(RoundState)}
        states = []
        for row in data["states"]:
            values = {key: value for key, value in row.items() if key in names}
            for key in ("batch", "model", "design"):
                if values.get(key) is not None:
                    values[key] = tuple(values[key])
            states.append(RoundState(**values))
        return cls(mix=dict(data["mix"]), judge=data["judge"], seed=int(data["seed"]), states=states)


@dataclass(frozen=True)
class Prepared:
    """What every run of a replay shares: the disagreement queue's spread and the runs' scorer with the truth's
    scores (None without runs)."""

    spread: np.ndarray
    systems: _Systems | None


def replay_prepared(pool: ReplayPool, judges: Sequence[ReplayJudge], settings: ReplaySettings, *,
                    compare: Sequence[np.ndarray] | None = None, runs: ReplayRuns | None = None) -> Prepared:
    """Check a replay's inputs (ReplayError names what is wrong) and compute what its runs share: the disagreement
    queue compares the raw P of `compare` (default: the `judges`; the live queue compares every judge of the
    project) with the pool's `within`; `runs`, the retrieval runs whose ranking the exported qrels should keep."""
    if not judges:
        raise ReplayError("choose at least one judge that has scored the pool")
    size = replay_size(pool, judges, settings)
    if size > REPLAY_MAX_PAIR_ROUNDS:
        raise ReplayError(f"this replay measures {size:,} pair-rounds (pool x (rounds + 1) x seeds x mixes x judges); "
                          f"the limit is {REPLAY_MAX_PAIR_ROUNDS:,}: fewer seeds, rounds or mixes")
    for judge in judges:
        if judge.raw_p.shape != pool.pair_ids.shape:
            raise ReplayError(f"judge {judge.name!r}: one P (or nan) per pool pair")
    arrays = list(compare) if compare else [judge.raw_p for judge in judges]
    if any(raw.shape != pool.pair_ids.shape for raw in arrays):
        raise ReplayError("each judge compared needs one P (or nan) per pool pair")
    systems = None
    if runs is not None:
        if runs.rank.shape[1] != pool.pair_ids.size:
            raise ReplayError("the runs compared need one rank per pool pair")
        scorer = RunScorer(runs)
        systems = _Systems(scorer, scorer.scores(pool.truth >= pool.relevant_from))
    return Prepared(disagreement(np.vstack(arrays), pool.within), systems)


def replay(pool: ReplayPool, judges: Sequence[ReplayJudge], settings: ReplaySettings, *,
           compare: Sequence[np.ndarray] | None = None, runs: ReplayRuns | None = None,
           on_run=None) -> list[ReplayRun]:
    """Every (mix, judge, seed) of `settings` replayed (replay_one), in that order, with what replay_prepared
    computes. `on_run(done, total)` hears each run finish (returning False stops the replay early)."""
    prepared = replay_prepared(pool, judges, settings, compare=compare, runs=runs)
    done, total = [], len(settings.mixes) * len(judges) * len(settings.seeds)
    for mix in settings.mixes:
        for judge in judges:
            for seed in settings.seeds:
                states = replay_one(pool, judge, mix, settings, seed, prepared.spread, prepared.systems)
                done.append(ReplayRun(dict(mix), judge.name, seed, states))
                if on_run is not None and on_run(len(done), total) is False:
                    return done
    return done

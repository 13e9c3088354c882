"""The completeness report (#33) and a round's numbers (#33, #48) as types: what completeness_compute returns, what
the validation cache and a round store (JSON, written by `to_dict` and read back by `from_dict` here only, so rows
stored before these types read as they were), and what the pages, the API and the command read as attributes.
Whether a project's stopping target is met is decided here once (stopping_target_met)."""
from __future__ import annotations

from dataclasses import asdict, dataclass

# The intervals as models_llm.metrics.completeness writes them (total or value, low, high, level...): stored and
# shown as they are, never taken apart here.
Interval = dict


@dataclass(frozen=True)
class SampleCount:
    """The random validation sample's pairs among those estimated, and how many of them are relevant."""

    size: int
    relevant: int


@dataclass(frozen=True)
class Estimates:
    """The estimates over the pool or one query's pairs: how many are graded, unresolved and verified relevant, the
    relevant count model-based (`model`, None: withheld or no P) and design-based (`design`, None: no random sample
    yet), the verified qrels' recall under each, and whether the two disagree beyond their intervals (`drift`)."""

    pairs: int
    graded: int
    unresolved: int
    verified_relevant: int
    unjudged_open: int
    sample: SampleCount
    model: Interval | None
    design: Interval | None
    recall_model: Interval
    recall_design: Interval
    drift: bool

    @classmethod
    def from_dict(cls, data: dict) -> Estimates:
        return cls(pairs=data["pairs"], graded=data["graded"], unresolved=data.get("unresolved", 0),
                   verified_relevant=data["verified_relevant"], unjudged_open=data.get("unjudged_open", 0),
                   sample=SampleCount(**data["sample"]), model=data.get("model"), design=data.get("design"),
                   recall_model=data["recall_model"], recall_design=data["recall_design"],
                   drift=bool(data.get("drift")))

    def to_dict(self) -> dict:
        return {"pairs": self.pairs, "graded": self.graded, "unresolved": self.unresolved,
                "verified_relevant": self.verified_relevant, "unjudged_open": self.unjudged_open,
                "sample": {"size": self.sample.size, "relevant": self.sample.relevant}, "model": self.model,
                "design": self.design, "recall_model": self.recall_model, "recall_design": self.recall_design,
                "drift": self.drift}


@dataclass(frozen=True)
class QueryEstimates:
    query: str  # its external id
    estimates: Estimates

    def to_dict(self) -> dict:
        return {"query": self.query, **self.estimates.to_dict()}


@dataclass(frozen=True)
class Stopping:
    """The stopping state the report was computed under: P(recall of the verified qrels >= target) and whether it
    reaches 1 - alpha (`met`), the knee rule, the labels spent against the label budget, and the kappa target."""

    target: float
    alpha: float
    confidence: float
    probability: float | None
    met: bool
    knee: bool
    labels: int | None
    budget: int | None
    budget_met: bool
    kappa_target: float | None

    @classmethod
    def from_dict(cls, data: dict) -> Stopping:
        return cls(target=data["target"], alpha=data["alpha"], confidence=data.get("confidence", 1.0 - data["alpha"]),
                   probability=data.get("probability"), met=bool(data.get("met")), knee=bool(data.get("knee")),
                   labels=data.get("labels"), budget=data.get("budget"), budget_met=bool(data.get("budget_met")),
                   kappa_target=data.get("kappa_target"))

    def to_dict(self) -> dict:
        return {"target": self.target, "alpha": self.alpha, "confidence": self.confidence,
                "probability": self.probability, "met": self.met, "knee": self.knee, "labels": self.labels,
                "budget": self.budget, "budget_met": self.budget_met, "kappa_target": self.kappa_target}


@dataclass(frozen=True)
class JudgeAccuracy:
    """The judge's qrels against the gold grades, on the random validation sample and on every graded pair: each
    a metric name -> {value, interval} table (models_llm.metrics.completeness.sample_accuracy), with `n`."""

    threshold: float
    rule: str
    sample: dict
    gold: dict

    @classmethod
    def from_dict(cls, data: dict) -> JudgeAccuracy:
        # A report stored before the rule was named was computed on the calibrated P at the threshold.
        return cls(threshold=data["threshold"], rule=data.get("rule") or f"calibrated P >= {data['threshold']}",
                   sample=data["sample"], gold=data["gold"])

    def to_dict(self) -> dict:
        return {"threshold": self.threshold, "rule": self.rule, "sample": self.sample, "gold": self.gold}

    @property
    def sample_kappa_low(self) -> float | None:
        """The lower bound of the judge's kappa on the random validation sample (None: no interval yet)."""
        interval = (self.sample.get("kappa") or {}).get("interval")
        return None if not interval else interval[0]


def _accuracy(data: dict | None) -> JudgeAccuracy | None:
    return None if not data else JudgeAccuracy.from_dict(data)


@dataclass(frozen=True)
class CompletenessReport:
    """How complete a project's qrels are under one judge: the pool's and each query's estimates, the judge's
    accuracy, what the model-based estimate rests on (`basis`) or why it is withheld, what holds the random sample
    at its size (`sample_next`) and the stopping state."""

    project: str
    judge: str | None
    judge_accuracy: JudgeAccuracy | None
    basis: str
    model_withheld: str | None
    level: float
    relevant_from: int
    pool: Estimates
    queries: list[QueryEstimates]
    sample_next: str | None
    stopping: Stopping
    error = None  # the card tells a report from CompletenessUnavailable by it

    @classmethod
    def from_dict(cls, data: dict) -> CompletenessReport:
        return cls(project=data["project"], judge=data.get("judge"),
                   judge_accuracy=_accuracy(data.get("judge_accuracy")), basis=data["basis"],
                   model_withheld=data.get("model_withheld"), level=data["level"],
                   relevant_from=data["relevant_from"], pool=Estimates.from_dict(data["pool"]),
                   queries=[QueryEstimates(row["query"], Estimates.from_dict(row)) for row in data.get("queries", [])],
                   sample_next=data.get("sample_next"), stopping=Stopping.from_dict(data["stopping"]))

    def to_dict(self) -> dict:
        return {"project": self.project, "judge": self.judge,
                "judge_accuracy": self.judge_accuracy.to_dict() if self.judge_accuracy else None,
                "basis": self.basis, "model_withheld": self.model_withheld, "level": self.level,
                "relevant_from": self.relevant_from, "pool": self.pool.to_dict(),
                "queries": [row.to_dict() for row in self.queries], "sample_next": self.sample_next,
                "stopping": self.stopping.to_dict()}


@dataclass(frozen=True)
class CompletenessUnavailable:
    """The validation cache's worker could not compute the report (options out of range for the data): why."""

    error: str

    def to_dict(self) -> dict:
        return {"error": self.error}


def completeness_from_dict(data: dict) -> CompletenessReport | CompletenessUnavailable:
    """A stored completeness report, or the reason the worker stored instead of one."""
    return CompletenessUnavailable(data["error"]) if "error" in data else CompletenessReport.from_dict(data)


def kappa_target_met(*, stop_kappa: float | None, accuracy: JudgeAccuracy | None) -> bool:
    """Whether the lower bound of the queue judge's kappa on the random validation sample reaches `stop_kappa`."""
    low = accuracy.sample_kappa_low if accuracy is not None else None
    return stop_kappa is not None and low is not None and low >= stop_kappa


def stopping_target_met(*, stop_recall: float | None, stop_alpha: float, stop_kappa: float | None,
                        stop_budget: int | None, labels: int, report: CompletenessReport | None) -> bool:
    """Whether a project's stopping target is met: its label budget spent (`labels`: its current labels), its recall
    target met in `report` computed under that same target and alpha (one computed before the target was set or
    changed does not count), or the lower bound of the judge's kappa in `report` at or above its kappa target."""
    if stop_budget is not None and labels >= stop_budget:
        return True
    if report is None:
        return False
    stopping = report.stopping
    if stop_recall is not None and stopping.met and stopping.target == stop_recall and stopping.alpha == stop_alpha:
        return True
    return kappa_target_met(stop_kappa=stop_kappa, accuracy=report.judge_accuracy)


@dataclass(frozen=True)
class RoundMeasure:
    """A round's numbers at one moment, under one judge: its completeness report's pool estimates, its accuracy on
    the random validation sample and the stopping state."""

    judge: str | None
    basis: str | None
    pool: Estimates
    judge_accuracy: JudgeAccuracy | None
    stopping: Stopping | None

    @classmethod
    def of(cls, report: CompletenessReport) -> RoundMeasure:
        return cls(judge=report.judge, basis=report.basis, pool=report.pool, judge_accuracy=report.judge_accuracy,
                   stopping=report.stopping)

    @classmethod
    def from_dict(cls, data: dict) -> RoundMeasure:
        return cls(judge=data.get("judge"), basis=data.get("basis"), pool=Estimates.from_dict(data["pool"]),
                   judge_accuracy=_accuracy(data.get("judge_accuracy")),
                   stopping=Stopping.from_dict(data["stopping"]) if data.get("stopping") else None)

    def to_dict(self) -> dict:
        return {"judge": self.judge, "basis": self.basis, "pool": self.pool.to_dict(),
                "judge_accuracy": self.judge_accuracy.to_dict() if self.judge_accuracy else None,
                "stopping": self.stopping.to_dict() if self.stopping else None}


@dataclass(frozen=True)
class RoundCalibration:
    """The calibrator a round's refit stored: its method, the pairs it was fitted on and how many are relevant."""

    method: str
    n: int
    n_relevant: int


@dataclass(frozen=True)
class RoundRetrain:
    """After 'student': the fine-tuning job the round started, its student and its training set."""

    job: int
    name: str
    training_set: str
    examples: int


@dataclass(frozen=True)
class RoundNumbers:
    """What a round measured: the labels its batch spent, the numbers before its refit or retrain and after it, the
    calibrator refitted or the retrain started, and why no refit could be made (`reason`)."""

    labels: int | None = None
    before: RoundMeasure | None = None
    after: RoundMeasure | None = None
    calibration: RoundCalibration | None = None
    student: RoundRetrain | None = None
    reason: str | None = None

    @classmethod
    def from_dict(cls, data: dict | None) -> RoundNumbers:
        data = data or {}
        # A round of #33 measured once, before, and stored that measure at the top.
        before = data.get("before") or (data if "pool" in data else None)
        return cls(labels=data.get("labels"), before=RoundMeasure.from_dict(before) if before else None,
                   after=RoundMeasure.from_dict(data["after"]) if data.get("after") else None,
                   calibration=RoundCalibration(**data["calibration"]) if data.get("calibration") else None,
                   student=RoundRetrain(**data["student"]) if data.get("student") else None,
                   reason=data.get("reason"))

    def to_dict(self) -> dict:
        """The stored form: the keys measured so far only."""
        parts = {"labels": self.labels, "before": self.before.to_dict() if self.before else None,
                 "student": asdict(self.student) if self.student else None, "reason": self.reason,
                 "calibration": asdict(self.calibration) if self.calibration else None,
                 "after": self.after.to_dict() if self.after else None}
        return {key: value for key, value in parts.items() if value is not None or key == "labels"}

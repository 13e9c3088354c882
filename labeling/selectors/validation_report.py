"""The validation report (#49) as a type: what validation_compute returns, what the validation cache stores (JSON,
written by `to_dict` and read back by `from_dict` here only, so rows stored before a part existed read as they were)
and what the Validation page, the overview, the API and the command read as attributes."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from labeling.models import ValidationResult
from labeling.selectors.completeness_report import (
    CompletenessReport,
    CompletenessUnavailable,
    completeness_from_dict,
)
from labeling.selectors.coverage import Coverage
from labeling.selectors.definition_metrics import BY_ORIGIN, BY_VERSION, DefinitionComparison, DefinitionGrouping
from labeling.selectors.validation import DEFAULT_OPTIONS, MIN_NON_RELEVANT_SHARE, ReportOptions
from models_llm.metrics import Degeneracy

# The keys of the cached report under which the worker stores every judge's metrics by definition version and
# the completeness report.
BY_DEFINITION = "by_definition"
COMPLETENESS = "completeness"


@dataclass(frozen=True)
class ReportCounts:
    """`gold`: the pairs the metrics are computed on (with all_pairs, the `added` ungraded ones among them), of which
    `non_relevant` are below the scale's relevant grade (None: a report stored before it was counted); `ungraded`:
    pool pairs with no reference grade and no label, what all_pairs would add."""

    pairs: int
    labelled: int
    gold: int
    non_relevant: int | None
    unresolved: int
    uncertain: int
    ungraded: int
    added: int

    @classmethod
    def from_dict(cls, data: dict) -> ReportCounts:
        return cls(pairs=data["pairs"], labelled=data["labelled"], gold=data["gold"],
                   non_relevant=data.get("non_relevant"), unresolved=data["unresolved"], uncertain=data["uncertain"],
                   ungraded=data.get("ungraded", 0), added=data.get("added", 0))

    def to_dict(self) -> dict:
        return {"pairs": self.pairs, "labelled": self.labelled, "gold": self.gold, "non_relevant": self.non_relevant,
                "unresolved": self.unresolved, "uncertain": self.uncertain, "ungraded": self.ungraded,
                "added": self.added}

    @property
    def few_non_relevant(self) -> bool:
        """Whether the gold set has pairs but fewer than MIN_NON_RELEVANT_SHARE non-relevant."""
        return (bool(self.gold) and self.non_relevant is not None
                and self.non_relevant < MIN_NON_RELEVANT_SHARE * self.gold)


@dataclass(frozen=True)
class ReportedOptions:
    """The options the report was computed with and the ranking units they made."""

    all_pairs: bool
    unit_key: str | None
    cutoffs: tuple[int, ...]
    n_units: int

    @classmethod
    def of(cls, options: ReportOptions, n_units: int) -> ReportedOptions:
        return cls(all_pairs=options.all_pairs, unit_key=options.unit_key, cutoffs=options.cutoffs, n_units=n_units)

    @classmethod
    def from_dict(cls, data: dict) -> ReportedOptions:
        return cls(all_pairs=data["all_pairs"], unit_key=data["unit_key"], cutoffs=tuple(data["cutoffs"]),
                   n_units=data["n_units"])

    def to_dict(self) -> dict:
        return {"all_pairs": self.all_pairs, "unit_key": self.unit_key, "cutoffs": list(self.cutoffs),
                "n_units": self.n_units}


@dataclass(frozen=True)
class SectionCalibration:
    """The judge's latest calibrator when the report was computed: its method, the gold pairs it was fitted on, when,
    and its cross-validated ECE and Brier raw and calibrated (`cv`, as models_llm.calibration writes it)."""

    method: str
    n: int
    fitted_at: str
    cv: dict


@dataclass(frozen=True)
class JudgeSection:
    """One judge against gold: its metrics (`metrics`: models_llm.metrics.judge_report's table as it writes it), the
    unresolved and unjudged gold pairs, its coverage of the gold pairs, whether it is degenerate and its calibrator.
    Coverage and degeneracy are None in a report stored before they were. models_llm.metrics.metric_table reads the
    stored form (`to_dict`): its rows hold the counts beside the metrics."""

    name: str
    metrics: dict
    n_unresolved: int | None
    n_unjudged: int | None
    coverage: Coverage | None
    degenerate: Degeneracy | None
    calibration: SectionCalibration | None

    # The keys judge_report writes that the page reads on their own (an older report may lack the newer ones).
    @property
    def reliability(self) -> list | None:
        return self.metrics.get("reliability")

    @property
    def f1_curve(self) -> dict | None:
        return self.metrics.get("f1_curve")

    @property
    def tie_warning(self) -> bool:
        return bool(self.metrics.get("tie_warning"))

    @property
    def group_kappa(self) -> dict:
        return self.metrics.get("group_kappa") or {}

    @property
    def null_reasons(self) -> dict:
        return self.metrics.get("null_reasons") or {}

    @property
    def is_degenerate(self) -> bool:
        return self.degenerate is not None and self.degenerate.degenerate

    _OWN = ("name", "n_unresolved", "n_unjudged", "coverage", "degenerate", "calibration")

    @classmethod
    def from_dict(cls, data: dict) -> JudgeSection:
        calibration = data.get("calibration")
        return cls(name=data["name"], metrics={key: value for key, value in data.items() if key not in cls._OWN},
                   n_unresolved=data.get("n_unresolved"), n_unjudged=data.get("n_unjudged"),
                   coverage=Coverage.from_json(data["coverage"]) if data.get("coverage") else None,
                   degenerate=Degeneracy.from_json(data["degenerate"]) if data.get("degenerate") else None,
                   calibration=SectionCalibration(**calibration) if calibration else None)

    def to_dict(self) -> dict:
        return {"name": self.name, **self.metrics, "n_unresolved": self.n_unresolved, "n_unjudged": self.n_unjudged,
                "coverage": self.coverage.as_json() if self.coverage else None,
                "degenerate": self.degenerate.as_json() if self.degenerate else None,
                "calibration": asdict(self.calibration) if self.calibration else None}


@dataclass(frozen=True)
class ValidationReport:
    """A project's judges against its gold labels: the options it was computed with (None: stored before they
    existed, computed with the defaults), the gold set's counts, the annotators' agreement (`human`, as
    models_llm.metrics.human_agreement writes it) and a section per judge. The cached report also holds every
    judge's metrics by definition version (`by_definition`) and how complete the qrels are (`completeness`);
    None in a report computed for other options, or stored before they were."""

    project: str
    computed_at: str
    options: ReportedOptions | None
    counts: ReportCounts
    human: dict
    judges: list[JudgeSection]
    by_definition: dict[str, DefinitionComparison] | None = None
    completeness: CompletenessReport | CompletenessUnavailable | None = None

    @classmethod
    def from_dict(cls, data: dict) -> ValidationReport:
        by_definition = data.get(BY_DEFINITION)
        completeness = data.get(COMPLETENESS)
        return cls(project=data["project"], computed_at=data["computed_at"],
                   options=ReportedOptions.from_dict(data["options"]) if "options" in data else None,
                   counts=ReportCounts.from_dict(data["counts"]), human=data["human"],
                   judges=[JudgeSection.from_dict(section) for section in data["judges"]],
                   by_definition=None if by_definition is None else {
                       name: DefinitionComparison.from_dict(comparison) for name, comparison in by_definition.items()},
                   completeness=None if completeness is None else completeness_from_dict(completeness))

    def to_dict(self) -> dict:
        """The stored form (and the API's and the command's JSON): the parts the report holds only."""
        out = {"project": self.project, "computed_at": self.computed_at}
        if self.options is not None:
            out["options"] = self.options.to_dict()
        out |= {"counts": self.counts.to_dict(), "human": self.human,
                "judges": [section.to_dict() for section in self.judges]}
        if self.by_definition is not None:
            out[BY_DEFINITION] = {name: asdict(comparison) for name, comparison in self.by_definition.items()}
        if self.completeness is not None:
            out[COMPLETENESS] = self.completeness.to_dict()
        return out

    @property
    def cutoffs(self) -> tuple[int, ...]:
        """The k of nDCG@k and MAP@k: a report stored before the options existed used the default ones."""
        return self.options.cutoffs if self.options is not None else DEFAULT_OPTIONS.cutoffs

    @property
    def complete(self) -> bool:
        """Whether it holds every part the pages and the API read (one stored before the metrics by definition
        version, the options, the count of non-relevant gold pairs or the judges' coverage and degeneracy lacks
        them)."""
        return (self.by_definition is not None and self.options is not None and self.counts.non_relevant is not None
                and all(section.coverage is not None and section.degenerate is not None for section in self.judges))

    def degenerate_judges(self) -> dict[str, Degeneracy]:
        """Judge name -> why it is degenerate under its own relevance rule, for the judges that are."""
        return {section.name: section.degenerate for section in self.judges if section.is_degenerate}

    def metrics_by_definition(self, judge: str) -> DefinitionComparison:
        """The judge's metrics by definition version as the report holds them. A judge it does not hold yet
        (created since it was computed) has no groups."""
        found = (self.by_definition or {}).get(judge)
        if found is None:
            return DefinitionComparison(judge=judge, n_gold=self.counts.gold,
                                        by_version=DefinitionGrouping(BY_VERSION, [], 0),
                                        by_origin=DefinitionGrouping(BY_ORIGIN, [], 0))
        return found

    def for_judges(self, names: list[str] | None) -> dict:
        """The report narrowed to the judges named (all when None), shaped as `validation_report --json`: one
        judge under `judge`, several under `judges`. Raises KeyError naming a judge that is not in it."""
        judges = {section.name: section for section in self.judges}
        chosen = list(judges.values()) if names is None else [judges[name] for name in names]
        out = {"project": self.project, "computed_at": self.computed_at,
               "options": self.options.to_dict() if self.options else None, "counts": self.counts.to_dict(),
               "human": self.human}
        if names is not None and len(chosen) == 1:
            out["judge"] = chosen[0].to_dict()
        else:
            out["judges"] = [section.to_dict() for section in chosen]
        return out


def validation_cached(result: ValidationResult | None) -> ValidationReport | None:
    """The report the validation cache `result` holds (None: none computed yet)."""
    return None if result is None or result.data is None else ValidationReport.from_dict(result.data)


def holds_report(result: ValidationResult | None) -> bool:
    """Whether the cache holds a report with every part the pages and the API read (ValidationReport.complete)."""
    report = validation_cached(result)
    return report is not None and report.complete

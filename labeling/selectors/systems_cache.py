"""The Systems page's evaluation, cached (#34): what the page (or the API) shows for one choice of sources and
options (the report, the significance tests, leave one run out) is computed once by a worker and read back on every
visit, so the page loads in well under a second whatever the size of the runs. A project whose runs hold at most
SYSTEMS_INLINE_ENTRIES entries is evaluated within each request instead (well under a second), so its page always
shows the data as they are. Reads here; labeling.services.systems_cache asks for and stores results.

Fresh or stale: a stored result carries `inputs`, what its data were when it was computed (systems_inputs: the runs,
the validation report's latest request, which every change of labels, judgments, calibrations and the pool makes,
the judges, the definitions and the releases). A visit that finds them changed shows the stored result marked stale
while a new one is computed."""
from __future__ import annotations

import hashlib
import json
import logging
import pickle
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields

from django.conf import settings
from django.core.files.storage import default_storage
from django.db.models import Max, Sum
from django.utils.crypto import constant_time_compare, salted_hmac

from labeling.exceptions import DomainError
from labeling.models import (
    Judge,
    Project,
    QrelsRelease,
    RelevanceDefinition,
    Run,
    SystemsResult,
    ValidationResult,
)
from labeling.selectors.qrels_sources import SAMPLE, SystemsError
from labeling.selectors.query_sets import query_sets
from labeling.selectors.systems import JUDGED, SystemsReport, systems_report
from labeling.selectors.systems_lvhq import DEFAULT_MEASURE as LVHQ_MEASURE
from labeling.selectors.systems_lvhq import LvhqReport, lvhq_from_report, lvhq_sets
from labeling.selectors.systems_reusability import Reusability, pool_reusability
from labeling.selectors.systems_significance import (
    DEFAULT_ALPHA,
    DEFAULT_CORRECTION,
    DEFAULT_TEST,
    SignificanceOptions,
    systems_significance,
)
from models_llm.systems.evaluation import INCOMPLETE_MEASURES, MEASURES, SAMPLE_MEASURES
from models_llm.systems.significance import DEFAULT_DRAWS, Comparison

logger = logging.getLogger(__name__)

# The HMAC's salt: a stored result is read back only when its digest is this site's under its secret key.
_SALT = "labeling.systems_cache"
# The most draws of the randomization test a request may ask for: the page's own (a choice's default). More is for
# the command line (`evaluate_runs --permutations`), which holds no web process or shared worker.
MAX_REQUEST_DRAWS = DEFAULT_DRAWS


@dataclass(frozen=True)
class SystemsChoice:
    """What the page or the API was asked to show: the sources (keys, in the order asked; none: every source but
    `sample`, the API's default), partial judges compared or not, the measures for incomplete judgments or not (or
    the measures named, the API's `measure`), the threshold every judge and combined source that names none grades
    at (None: each judge's own rule), the breakdown by a query metadata key, the paired test and its options (with
    `compare`), and leave one run out and LVHQ (`extras`: the page shows them; the API has endpoints of its own)."""

    sources: tuple[str, ...]
    include_partial: bool = False
    incomplete: bool = False
    test: str = DEFAULT_TEST
    correction: str = DEFAULT_CORRECTION
    threshold: float | None = None
    named_measures: tuple[str, ...] = ()
    group_by: str = ""
    alpha: float = DEFAULT_ALPHA
    draws: int = DEFAULT_DRAWS
    compare: bool = True
    extras: bool = True

    def as_json(self) -> dict:
        return {**asdict(self), "sources": list(self.sources), "named_measures": list(self.named_measures)}

    @classmethod
    def from_json(cls, options: dict) -> SystemsChoice:
        """The choice a result row stored (as_json); what a row stored before a field was known lacks is its
        default."""
        known = {each.name: options[each.name] for each in fields(cls) if each.name in options}
        return cls(**{**known, "sources": tuple(known.get("sources", ())),
                      "named_measures": tuple(known.get("named_measures", ()))})

    @property
    def key(self) -> str:
        return hashlib.sha256(json.dumps(self.as_json(), sort_keys=True).encode()).hexdigest()

    @property
    def significance(self) -> SignificanceOptions:
        return SignificanceOptions(test=self.test, correction=self.correction, draws=self.draws, alpha=self.alpha)

    @property
    def measures(self) -> tuple[str, ...] | None:
        if self.named_measures:
            return self.named_measures
        if not self.incomplete:
            return None
        return MEASURES + INCOMPLETE_MEASURES + (SAMPLE_MEASURES if SAMPLE in self.sources else ())


@dataclass
class SystemsBundle:
    """What the page shows for a choice: the report (None with `evaluation_error`), every two runs compared per
    source and measure, leave one run out on the first graded source (or why not), and LVHQ on the first source
    when the project's queries form two query sets (or why not; nothing when they form none)."""

    report: SystemsReport | None
    significance: dict[str, dict[str, Comparison]] = field(default_factory=dict)
    reusability: Reusability | None = None
    reusability_error: str | None = None
    evaluation_error: str | None = None
    lvhq: LvhqReport | None = None
    lvhq_error: str | None = None


@dataclass(frozen=True)
class CachedSystems:
    """The stored result of a choice (None: none yet), its bundle (None: none stored, or unreadable), and whether
    its inputs are still the project's."""

    result: SystemsResult | None
    bundle: SystemsBundle | None
    fresh: bool


def systems_inputs(project: Project) -> dict:
    """What a result depends on, read in a few small queries, as a JSON field gives it back: a change of any of
    these makes it stale."""
    requested = ValidationResult.objects.filter(project=project).values_list("requested_at", flat=True).first()
    return json.loads(json.dumps({
        "runs": list(Run.objects.filter(project=project).order_by("id").values_list("id", "entries")),
        "validation": requested.isoformat() if requested else None,
        "judges": list(Judge.objects.filter(project=project).order_by("id").values_list("id", "calibration")),
        "definitions": RelevanceDefinition.objects.filter(query__project=project).aggregate(
            newest=Max("id"))["newest"],
        "releases": list(QrelsRelease.objects.filter(project=project).order_by("id").values_list("id", flat=True)),
    }))


def run_entries(project: Project) -> int:
    """The entries of all of the project's runs (counted when each run was stored)."""
    return Run.objects.filter(project=project).aggregate(total=Sum("entries"))["total"] or 0


def computes_inline(project: Project) -> bool:
    """Whether the page computes its evaluation within the request (runs of at most SYSTEMS_INLINE_ENTRIES entries
    in all: well under a second) rather than reading a worker's cached result."""
    return run_entries(project) <= settings.SYSTEMS_INLINE_ENTRIES


def systems_steps(project: Project) -> int:
    """The steps of a computation, for its progress: each run evaluated, the tests, leave one run out."""
    return Run.objects.filter(project=project).count() + 2


def systems_bundle_compute(*, project: Project, choice: SystemsChoice,
                           progress: Callable[[int], None] | None = None) -> SystemsBundle:
    """Compute what the page shows for `choice`; `progress(steps done)` after each step (systems_steps)."""
    step = progress or (lambda done: None)
    try:
        report = systems_report(project=project, sources=list(choice.sources) or None,
                                include_partial=choice.include_partial, measures=choice.measures,
                                group_by=choice.group_by or None, threshold=choice.threshold, progress=step)
    except SystemsError as exc:
        return SystemsBundle(report=None, evaluation_error=str(exc))
    runs = len(report.runs)
    bundle = SystemsBundle(report=report,
                           significance=systems_significance(report, choice.significance) if choice.compare else {})
    step(runs + 1)
    graded = [source for source in report.sources if not source.expected and not source.sampled]
    if choice.extras and graded and report.lead_measure != JUDGED and report.runs:
        try:
            bundle.reusability = pool_reusability(project=project, source=graded[0].key, measure=report.lead_measure)
        except SystemsError as exc:
            bundle.reusability_error = str(exc)
    if choice.extras:
        _lvhq(project, report, bundle)
    step(runs + 2)
    return bundle


def _lvhq(project: Project, report: SystemsReport, bundle: SystemsBundle) -> None:
    """LVHQ on the report's first source that has nDCG@10 (the paper's measure), between the project's default two
    query sets (lvhq_sets); the other sets and sources are the CLI's and the API's to ask for."""
    usable = [source.key for source in report.sources if not source.sampled]
    if not report.runs or not usable or LVHQ_MEASURE not in report.measures:
        return
    try:
        sets = query_sets(project)
        if len(sets.sets) < 2:
            return
        set_a, set_b = lvhq_sets(sets)
        bundle.lvhq = lvhq_from_report(report, sets, source=usable[0], set_a=set_a, set_b=set_b)
    except DomainError as exc:
        bundle.lvhq_error = str(exc)


def bundle_digest(blob: bytes) -> str:
    return salted_hmac(_SALT, blob, algorithm="sha256").hexdigest()


def systems_bundle_load(result: SystemsResult) -> SystemsBundle | None:
    """The bundle `result` stored; None when there is none, its file is gone, or its digest is not this site's
    (then nothing of it is unpickled, and the page asks for a new one)."""
    if not result.file or not result.digest:
        return None
    try:
        with default_storage.open(result.file, "rb") as handle:
            blob = handle.read()
    except OSError:
        logger.warning("systems result %s: its file %s cannot be read", result.id, result.file)
        return None
    if not constant_time_compare(bundle_digest(blob), result.digest):
        logger.warning("systems result %s: its file %s does not match its digest; ignored", result.id, result.file)
        return None
    # Written by this site's workers and signed with its secret key: nothing else is unpickled.
    return pickle.loads(blob)


def _stored_for_current_inputs(project: Project, result: SystemsResult) -> bool:
    """Whether `result` holds a file computed from the project's current inputs: the one rule of freshness."""
    return bool(result.file) and result.inputs == systems_inputs(project)


def systems_cached(*, project: Project, choice: SystemsChoice) -> CachedSystems:
    """The stored result of `choice` and whether it is fresh (computed from the current inputs, and readable)."""
    result = SystemsResult.objects.filter(project=project, key=choice.key).first()
    if result is None:
        return CachedSystems(result=None, bundle=None, fresh=False)
    bundle = systems_bundle_load(result)
    return CachedSystems(result=result, bundle=bundle,
                         fresh=bundle is not None and _stored_for_current_inputs(project, result))


def systems_status(*, project: Project, choice: SystemsChoice) -> tuple[SystemsResult | None, bool]:
    """The row of `choice` and whether a result is stored for the project's current inputs (its file is not read:
    what the page's poll asks every two seconds)."""
    result = SystemsResult.objects.filter(project=project, key=choice.key).first()
    return result, result is not None and _stored_for_current_inputs(project, result)

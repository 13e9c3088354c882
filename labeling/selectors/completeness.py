"""How complete are a project's qrels (#33): the number of relevant pairs in the pool and in each query,
estimated from the judge's calibrated P (model-based) and from the random validation sample alone (design-based,
Horvitz-Thompson), the recall of the expert-verified qrels, and whether the stopping target is met. The formulas
and their assumptions are in models_llm.metrics.completeness and docs/validation.md ("How complete are the
qrels?")."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from labeling.exceptions import DomainError, NotFound
from labeling.llm_adapter import judge_gives_scores, judge_relevance_rule
from labeling.models import Judge, JudgeCalibration, Label, Pair, Project, Query, ValidationResult
from labeling.selectors.completeness_report import (
    CompletenessReport,
    CompletenessUnavailable,
    Estimates,
    JudgeAccuracy,
    QueryEstimates,
    SampleCount,
    Stopping,
    stopping_target_met,
)
from labeling.selectors.export import judge_calibrator
from labeling.selectors.streams import definition_version_numbers, gold_pairs, judge_rows
from labeling.selectors.validation import GoldSet, gold_set, validation_result_for
from labeling.selectors.validation_report import validation_cached
from models_llm.calibration import FOLDS, CalibratorPosterior, calibrator_posterior
from models_llm.metrics.completeness import (
    MODEL_DRAWS,
    UNGRADED,
    UNRESOLVED,
    CompletenessError,
    CountDraws,
    count_draws,
    knee_stops,
    pool_totals,
    recall_reached_probability,
    sample_accuracy,
    sample_frontier,
    verified_recall,
)
from models_llm.relevance_rule import RelevanceRule


class CompletenessOptionsError(DomainError):
    """A level, target or alpha outside its range."""


class CompletenessJudgeNotFound(CompletenessOptionsError, NotFound):
    """The judge named is not one of the project's."""


@dataclass(frozen=True)
class CompletenessOptions:
    judge: str | None = None
    level: float = 0.9
    target: float = 0.9
    alpha: float = 0.1
    model_draws: int = MODEL_DRAWS
    seed: int = 0


def completeness_options(*, project: Project, judge: str | None = None, level: object = None, target: object = None,
                         alpha: object = None) -> CompletenessOptions:
    """Options from a request's or a command's text (None: the default, the project's own target and alpha);
    CompletenessOptionsError names the one out of range."""
    default = project_options(project)
    values = {}
    for name, value, low, high in (("level", level, 0.5, 0.999), ("target", target, 0.01, 1.0),
                                   ("alpha", alpha, 0.001, 0.5)):
        if value is None:
            values[name] = getattr(default, name)
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise CompletenessOptionsError(f"{name} must be a number, got {value!r}") from None
        if not low <= number <= high:
            raise CompletenessOptionsError(f"{name} must be within [{low}, {high}], got {number:g}")
        values[name] = number
    return CompletenessOptions(judge=judge or None, **values)


def project_options(project: Project) -> CompletenessOptions:
    """The default options: the project's own recall target and alpha (0.9 and 0.1 when it has none)."""
    return CompletenessOptions(target=project.stop_recall if project.stop_recall is not None else 0.9,
                               alpha=project.stop_alpha)


@dataclass(frozen=True)
class _Pool:
    """The pool in pair order: query index, random order key, gold grade (UNGRADED, UNRESOLVED or the grade) and
    the judge's raw P (nan: not judged)."""

    query: np.ndarray
    key: np.ndarray
    gold: np.ndarray
    raw_p: np.ndarray
    query_ids: list[int]


def _pool(project: Project, judge: Judge | None, graded: GoldSet) -> _Pool:
    rows = list(Pair.objects.filter(project=project).order_by("id").values_list("id", "query_id", "sample_key"))
    position = {pair_id: index for index, (pair_id, _, _) in enumerate(rows)}
    query_ids = sorted({query_id for _, query_id, _ in rows})
    query_index = {query_id: index for index, query_id in enumerate(query_ids)}
    gold = np.full(len(rows), UNGRADED, dtype=np.int64)
    gold[[position[pair_id] for pair_id in graded.pair_ids.tolist()]] = graded.gold
    gold[[position[pair_id] for pair_id in graded.unresolved_ids.tolist()]] = UNRESOLVED
    raw_p = np.full(len(rows), np.nan)
    if judge is not None:
        for row in judge_rows(judge, versions=definition_version_numbers(project)):
            index = position.get(row.pair_id)
            if index is not None:
                raw_p[index] = row.p
    return _Pool(query=np.asarray([query_index[q] for _, q, _ in rows], dtype=np.int64),
                 key=np.asarray([key for _, _, key in rows], dtype=float), gold=gold, raw_p=raw_p,
                 query_ids=query_ids)


@dataclass(frozen=True)
class _Model:
    """What the model-based estimate sums: `p`, every pair's P (calibrated where the judge has a calibrator; nan where
    unjudged), taken as known unless `posterior` gives draws of the calibrator; `withheld`, why there is no
    model-based estimate (None: there is one); `basis`, a line saying which."""

    p: np.ndarray
    posterior: CalibratorPosterior | None
    basis: str
    withheld: str | None = None


def _model(judge: Judge | None, pool: _Pool, relevant_from: int) -> _Model:
    if judge is None:
        return _Model(pool.raw_p, None, "no judge: only the design-based estimate")
    judged = ~np.isnan(pool.raw_p)
    calibrator = judge_calibrator(judge)
    if calibrator is None:
        if not judge_gives_scores(judge):
            return _Model(pool.raw_p, None, f"judge {judge.name!r} has no calibrator: its P is taken as calibrated")
        scored = judged & (pool.gold >= 0)
        relevant = int((scored & (pool.gold >= relevant_from)).sum())
        return _Model(pool.raw_p, None, f"judge {judge.name!r} has no calibrator: only the design-based estimate",
                      withheld=(f"Judge {judge.name!r} gives scores ({judge.backend}), not probabilities: summing them "
                                f"would count relevant pairs that are not there. It gets a model-based estimate once "
                                f"a calibrator maps its scores to P. A fit needs {FOLDS} relevant and {FOLDS} "
                                f"non-relevant gold pairs it scored; it has {relevant:,} and "
                                f"{int(scored.sum()) - relevant:,}."))
    p = pool.raw_p.copy()
    p[judged] = calibrator.apply(pool.raw_p[judged])
    fitted = (JudgeCalibration.objects.filter(judge=judge).order_by("-created_at", "-id")
              .values_list("fitted_on", flat=True).first()) or {}
    posterior = calibrator_posterior(calibrator.method, np.asarray(fitted.get("p", []), float),
                                     np.asarray(fitted.get("relevant", []), int))
    if posterior is None:
        return _Model(p, None, f"judge {judge.name!r} calibrated ({calibrator.method}); the pairs it was fitted on "
                               f"give no posterior, so the calibrator's own uncertainty is left out")
    return _Model(p, posterior, f"judge {judge.name!r} calibrated ({calibrator.method}), the calibrator's own "
                                f"uncertainty drawn from its posterior")


def _model_draws(pool: _Pool, model: _Model, options: CompletenessOptions) -> CountDraws | None:
    """Draws of the relevant count among each query's open pairs the judge scored, under draws of its calibrator."""
    if model.posterior is None:
        return None
    open_judged = (pool.gold < 0) & ~np.isnan(pool.raw_p)
    return count_draws(model.posterior, pool.raw_p[open_judged], pool.query[open_judged], len(pool.query_ids),
                       draws=options.model_draws, seed=options.seed)


def _estimates(rows: np.ndarray, pool: _Pool, model: _Model, drawn: CountDraws | None, relevant_from: int,
               frontier: float, options: CompletenessOptions) -> tuple[Estimates, np.ndarray]:
    """The estimates over `rows` (the positions of the pairs estimated: the pool, or one query's), and the P of their
    open pairs the judge scored."""
    totals = pool_totals(pool.gold[rows], pool.key[rows], model.p[rows], relevant_from=relevant_from,
                         frontier=frontier, level=options.level, drawn=drawn, withheld=model.withheld is not None)
    estimate, design = totals.model, totals.design
    return Estimates(
        pairs=totals.pairs,
        graded=totals.graded,
        unresolved=totals.unresolved,
        verified_relevant=totals.verified_relevant,
        unjudged_open=totals.unjudged_open,
        sample=SampleCount(size=totals.sample_size, relevant=totals.sample_relevant),
        model=estimate.as_dict() if estimate else None,
        design=design.as_dict() if design else None,
        recall_model=verified_recall(totals.verified_relevant, estimate).as_dict(),
        recall_design=verified_recall(totals.verified_relevant, design).as_dict(),
        drift=bool(estimate and design and not estimate.overlaps(design)),
    ), totals.open_p


def completeness_compute(*, project: Project, options: CompletenessOptions | None = None,
                         gold: GoldSet | None = None) -> CompletenessReport:
    """The completeness report of `project`: the pool's and each query's estimates, the random
    sample's frontier, the stopping target (the project's, unless `options` says) and the knee rule. `gold`: the
    project's gold set (with the default options: ungraded pairs are open, not irrelevant) when the caller has
    built it already."""
    options = options or project_options(project)
    judges = {judge.name: judge for judge in project.judges.order_by("name")}
    if options.judge is not None and options.judge not in judges:
        raise CompletenessJudgeNotFound(f"project {project.slug!r} has no judge {options.judge!r} (its judges: "
                                        f"{', '.join(judges) or 'none'})")
    judge = judges[options.judge] if options.judge else project.queue_judge
    curve = _gain_curve(project, project.label_scale.relevant_from)
    labels = current_label_count(project)  # as the label budget counts them (an item labelled twice counts twice)
    pool = _pool(project, judge, gold if gold is not None else gold_set(project))
    relevant_from = project.label_scale.relevant_from
    model = _model(judge, pool, relevant_from)
    # the random validation sample: every pair whose random order key is below the first one without a grade
    frontier = sample_frontier(pool.gold, pool.key)
    try:
        drawn = _model_draws(pool, model, options)
        drawn_whole = drawn.whole() if drawn is not None else None
        whole, open_p = _estimates(np.arange(pool.gold.size), pool, model, drawn_whole, relevant_from, frontier,
                                   options)
        texts = dict(Query.objects.filter(id__in=pool.query_ids).values_list("id", "external_id"))
        queries = []
        by_query = np.argsort(pool.query, kind="stable")  # one sort: each query's pairs are then one slice
        bounds = np.searchsorted(pool.query[by_query], np.arange(len(pool.query_ids) + 1))
        for index, query_id in enumerate(pool.query_ids):
            rows = by_query[bounds[index]:bounds[index + 1]]
            row, _ = _estimates(rows, pool, model, drawn.group(index) if drawn is not None else None,
                                relevant_from, frontier, options)
            queries.append(QueryEstimates(query=texts[query_id], estimates=row))
        reached = (recall_reached_probability(whole.verified_relevant, open_p, options.target, drawn=drawn_whole)
                   if whole.model is not None and whole.unjudged_open == 0 else None)
    except CompletenessError as exc:
        raise CompletenessOptionsError(str(exc)) from None
    return CompletenessReport(
        project=project.slug,
        judge=judge.name if judge else None,
        judge_accuracy=_judge_accuracy(pool, model.p, relevant_from, frontier, judge_relevance_rule(judge))
        if judge else None,
        basis=model.basis,
        model_withheld=model.withheld,
        level=options.level,
        relevant_from=relevant_from,
        pool=whole,
        queries=queries,
        sample_next=_sample_next(pool, frontier),
        stopping=Stopping(
            target=options.target, alpha=options.alpha, confidence=1.0 - options.alpha,
            probability=reached,
            met=reached is not None and reached >= 1.0 - options.alpha,
            knee=knee_stops(curve),
            labels=labels,
            budget=project.stop_budget,
            budget_met=project.stop_budget is not None and labels >= project.stop_budget,
            kappa_target=project.stop_kappa,
        ),
    )


def _judge_accuracy(pool: _Pool, p: np.ndarray, relevant_from: int, frontier: float,
                    rule: RelevanceRule) -> JudgeAccuracy:
    """The judge's qrels (its relevance rule, as `judge:NAME` exports them: on the calibrated P, or on its own P
    for a rule that says so) against the gold grades: on the random validation sample (design-based: estimates
    for the whole pool) and, beside it, on every graded pair (the gold set, which leans toward the pairs the
    queues preferred)."""
    judged, graded = ~np.isnan(p), pool.gold >= 0
    relevant = pool.gold >= relevant_from
    in_sample = judged & graded & (pool.key < frontier)
    on_gold = judged & graded
    called = rule.relevant(p if rule.calibrated else pool.raw_p)
    return JudgeAccuracy(
        threshold=rule.threshold,
        rule=rule.text,
        sample=sample_accuracy(called[in_sample], relevant[in_sample], p=p[in_sample]),
        gold=sample_accuracy(called[on_gold], relevant[on_gold], p=p[on_gold]),
    )


def _sample_next(pool: _Pool, frontier: float) -> str | None:
    """What holds the random sample at its size: the next pair in the random order is "ungraded" (the random
    queue serves it next) or "unresolved" (its labels disagree: adjudication frees it); None when all is graded."""
    at = np.flatnonzero(pool.key == frontier)
    if not at.size:
        return None
    return "unresolved" if pool.gold[at[0]] == UNRESOLVED else "ungraded"


def current_label_count(project: Project) -> int:
    """The project's current labels (superseded ones not counted; an item labelled by two experts counts twice)."""
    return Label.objects.filter(pair__project=project, superseded_at__isnull=True).count()


def random_sample_grades(project: Project) -> dict[int, int]:
    """The random validation sample (as the completeness report reads it), pair id -> gold grade: every pair whose
    random order key lies below the first key of a pair without a gold grade (ungraded, or labels not agreed). Its
    pairs of one query are a simple random sample of that query's pool (given how many it holds)."""
    graded = {pair.pair_id: pair.gold for pair in gold_pairs(project, graded_only=True) if pair.gold is not None}
    rows = list(Pair.objects.filter(project=project).values_list("id", "sample_key"))
    frontier = min((key for pair_id, key in rows if pair_id not in graded), default=np.inf)
    return {pair_id: graded[pair_id] for pair_id, key in rows if key < frontier}


def random_sample_pair_ids(project: Project) -> set[int]:
    """The pairs of the random validation sample. Whatever learns from the experts' labels leaves these out, or
    the design-based figures would be measured on its own training targets."""
    return set(random_sample_grades(project))


def _gain_curve(project: Project, relevant_from: int) -> list[bool]:
    """Whether each pair experts graded was relevant, in the order of its first current label: the gain curve
    of relevant found per label spent."""
    first: dict[int, int] = {}
    for pair_id, grade in (Label.objects.filter(pair__project=project, superseded_at__isnull=True)
                           .order_by("created_at", "id").values_list("pair_id", "grade")):
        first.setdefault(pair_id, grade)
    return [grade >= relevant_from for grade in first.values()]


def completeness_cached(*, result: ValidationResult | None) -> CompletenessReport | CompletenessUnavailable | None:
    """The completeness report the worker stored with the cached validation report `result`, or why it could not
    make one (None: not computed yet)."""
    report = validation_cached(result)
    return None if report is None else report.completeness


def has_stopping_target(project: Project) -> bool:
    """Whether the project's admin set any stopping target (no query: the project's own fields)."""
    return project.stop_recall is not None or project.stop_budget is not None or project.stop_kappa is not None


def project_target_met(*, project: Project) -> bool:
    """Whether the project's stopping target is met (completeness_report.stopping_target_met): its label budget
    counted now, its recall and kappa targets in the cached report."""
    if not has_stopping_target(project):
        return False
    labels = current_label_count(project) if project.stop_budget is not None else 0
    cached = None
    if project.stop_recall is not None or project.stop_kappa is not None:
        cached = completeness_cached(result=validation_result_for(project))
    return stopping_target_met(stop_recall=project.stop_recall, stop_alpha=project.stop_alpha,
                               stop_kappa=project.stop_kappa, stop_budget=project.stop_budget, labels=labels,
                               report=cached if isinstance(cached, CompletenessReport) else None)

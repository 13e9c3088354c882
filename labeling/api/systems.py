"""API views of system evaluation: the project's runs under its qrels sources, as `evaluate_runs --json` prints it,
whether the pool is reusable by a run that did not feed it, as `pool_reusability --json` prints it, and LVHQ (do two
query sets rank the runs alike?), as `lvhq --json` prints it."""
from __future__ import annotations

import re

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from labeling.api.exceptions import api_error
from labeling.api.fields import StrictIntegerField, query_flag
from labeling.api.schema import NO_NUL
from labeling.selectors.coverage import INCLUDE_PARTIAL
from labeling.selectors.projects import READ_REPORTS, project_for_user
from labeling.selectors.qrels_sources import HUMAN, SystemsError, qrels_source_parse
from labeling.selectors.systems import systems_report_json
from labeling.selectors.systems_cache import MAX_REQUEST_DRAWS, SystemsChoice
from labeling.selectors.systems_lvhq import DEFAULT_MEASURE as LVHQ_MEASURE
from labeling.selectors.systems_lvhq import LVHQ_MEASURES, lvhq_json, lvhq_report
from labeling.selectors.systems_pair_tau import default_pair_tau_judge, pair_tau_json, pair_tau_report
from labeling.selectors.systems_reusability import (
    DEFAULT_MEASURE,
    LEFT_OUT_MEASURES,
    RANK_THRESHOLD,
    pool_reusability,
    reusability_json,
)
from labeling.selectors.systems_significance import (
    SignificanceOptionError,
    SignificanceOptions,
    comparison_json,
    significance_options,
)
from labeling.services.systems_cache import SystemsBusy, systems_evaluation
from models_llm.relevance_rule import is_probability
from models_llm.systems.evaluation import ALL_MEASURES
from models_llm.systems.significance import CORRECTIONS, DEFAULT_DRAWS, TESTS

QRELS_PATTERN = r"(human|sample|(judge|combined|expected|release):[^\x00]+)"
# When a busy project's evaluation is worth asking for again: about what one computation takes (a minute at 10 runs
# x 1M entries, bench/README.md "systems_compare.py").
BUSY_RETRY_SECONDS = 60


class SystemsComputingSerializer(serializers.Serializer):
    """The evaluation asked for is being computed by a worker (the project's runs hold more than
    SYSTEMS_INLINE_ENTRIES entries): the same request asked again answers 200 with it once it is stored."""

    status = serializers.ChoiceField(choices=["pending", "running"],
                                     help_text="pending: queued for a worker; running: a worker computes it")
    done = StrictIntegerField(min_value=0, help_text="steps done: each run evaluated, then the tests")
    total = StrictIntegerField(min_value=0, help_text="steps in all")
    computed_at = serializers.DateTimeField(allow_null=True, help_text="when the stored result for these parameters "
                                            "was computed, before the data changed; null: none yet")


class SystemsEvaluationView(APIView):
    """Every run of the project under each qrels source (`human`, `sample`, `judge:NAME`, `combined:NAME`,
    `expected:NAME`, `release:NAME`; `sample` only when asked, with statAP and infNDCG@10): mean and bootstrap
    interval of each measure, the share of each run the source judged, and the qrels agreement: how alike
    the sources rank the runs (Kendall's tau, tau_AP, Spearman; partial sources only
    with `include_partial`, and no agreement with fewer than three runs). Admins and viewers
    only: every source is made of gold grades or judges' P of items experts have not labelled (blind first).
    Computed within the request when the project's runs are small, else as on the Systems page: a worker computes
    each set of parameters once and the stored result is read back (202 while it is computed, with its progress:
    ask again; 429 when the project has SYSTEMS_MAX_PENDING computations under way already)."""

    @extend_schema(
        parameters=[
            OpenApiParameter("qrels", {"type": "array", "items": {
                "type": "string", "pattern": f"^{QRELS_PATTERN}$"}},
                description="qrels source (repeat; default: all but `sample`, the random validation sample's gold "
                            "weighted by inclusion probability, which defines statAP and infNDCG@10 only)"),
            OpenApiParameter("measure", str, many=True, enum=list(ALL_MEASURES),
                             description="measure (repeat; default: all; judged@10 is always given)"),
            OpenApiParameter("group_by", str, description="query metadata key to break the results down by"),
            OpenApiParameter("threshold", {"type": "number", "minimum": 0, "maximum": 1},
                             description="grade every judge and combined source that names no threshold at "
                             "calibrated P >= this (`judge:NAME@T` names one); default: each judge's relevance "
                             "rule (`relevance_rule` of the judges list)"),
            OpenApiParameter(INCLUDE_PARTIAL, bool, description="true: compare partial sources too (a judge without "
                             "an ok judgment of every pool pair the runs retrieve to the depth a measure reads, "
                             "see `coverage_by_measure`); by default each is left out of the agreement on the "
                             "measures it is partial on (`left_out_by_measure`; `left_out` for `agreement`)"),
            OpenApiParameter("compare", bool, description="true: add `significance`, every pair of runs tested per "
                             "source and measure over the same queries (docs/retrieval.md, \"Is a difference real?\")"),
            OpenApiParameter("test", str, enum=list(TESTS), description="with compare: the paired test "
                             "(default randomization)"),
            OpenApiParameter("correction", str, enum=list(CORRECTIONS), description="with compare: for the many "
                             "pairs (default holm; tukey: Tukey's HSD)"),
            OpenApiParameter("alpha", {"type": "number", "minimum": 0, "maximum": 1, "exclusiveMinimum": True,
                                       "exclusiveMaximum": True},
                             description="with compare: the significance level (default 0.05)"),
            OpenApiParameter("permutations", {"type": "integer", "minimum": 1, "maximum": MAX_REQUEST_DRAWS},
                             description=f"with compare: draws of the randomization test (default {DEFAULT_DRAWS}, "
                                         f"the Systems page's; `evaluate_runs --permutations` takes more)"),
        ],
        responses={200: OpenApiTypes.OBJECT, 202: SystemsComputingSerializer,
                   429: OpenApiResponse(description="The project has SYSTEMS_MAX_PENDING evaluations being computed "
                                                    "already: ask again later (Retry-After says when).")},
    )
    def get(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=READ_REPORTS)
        params = request.query_params
        # What the schema states is checked here (400); a judge the project lacks is a 404 (SystemsSourceNotFound).
        refused = {}
        qrels = params.getlist("qrels")
        bad = [key for key in qrels if not re.fullmatch(QRELS_PATTERN, key)]
        if bad:
            refused["qrels"] = [(f"'human', 'sample', 'judge:NAME', 'combined:NAME', 'expected:NAME' or "
                                 f"'release:NAME', got {bad[0]!r}")]
        threshold = params.get("threshold", "").strip() or None
        if threshold is not None and not is_probability(threshold):
            refused["threshold"] = [f"a number from 0 to 1, got {threshold!r}"]
        measures = params.getlist("measure")
        unknown = [name for name in measures if name not in ALL_MEASURES]
        if unknown:
            refused["measure"] = [f"unknown measure {unknown[0]!r}: one of {', '.join(ALL_MEASURES)}"]
        permutations = params.get("permutations")
        if permutations and re.fullmatch(r"[0-9]+", permutations) and int(permutations) > MAX_REQUEST_DRAWS:
            refused["permutations"] = [(f"at most {MAX_REQUEST_DRAWS:,} draws, the Systems page's (got "
                                        f"{int(permutations):,}); `manage.py evaluate_runs --compare --permutations` "
                                        f"takes more")]
            permutations = None
        compare = query_flag(params, "compare")
        options = SignificanceOptions()
        # The options are checked whenever given, compare or not: a request the schema refuses is refused.
        try:
            chosen = significance_options(test=params.get("test"), correction=params.get("correction"),
                                          alpha=params.get("alpha"), draws=permutations)
        except SignificanceOptionError as exc:
            refused["compare"] = [str(exc)]
        else:
            options = chosen if compare else options
        if refused:
            raise ValidationError(refused)
        for key in qrels:
            qrels_source_parse(project=project, key=key)  # a source the project lacks is refused before any work
        choice = SystemsChoice(
            sources=tuple(dict.fromkeys(qrels)), include_partial=query_flag(params, INCLUDE_PARTIAL),
            threshold=None if threshold is None else float(threshold), named_measures=tuple(dict.fromkeys(measures)),
            group_by=params.get("group_by") or "", test=options.test, correction=options.correction,
            alpha=options.alpha, draws=options.draws, compare=compare, extras=False)
        try:
            found = systems_evaluation(project=project, choice=choice, user=request.user)
        except SystemsBusy as exc:
            raise api_error(429, "throttled", str(exc), wait=BUSY_RETRY_SECONDS) from None
        if not found.fresh:
            return Response(SystemsComputingSerializer(found.result).data, status=202)
        if found.bundle.report is None:
            raise SystemsError(found.bundle.evaluation_error)
        out = systems_report_json(found.bundle.report)
        if compare:
            out["significance"] = {key: {measure: comparison_json(comparison) for measure, comparison in
                                         by_measure.items()} for key, by_measure in found.bundle.significance.items()}
        return Response(out)


class SystemsReusabilityView(APIView):
    """Leave one run out (Zobel 1998): each run that fed the pool scored again on the `source` qrels without the
    relevant passages only it found, its drop and its rank among the other runs (on their full scores) both ways;
    `flagged` when a run left out moves by more than `threshold` places. `drop`, `score_left_out`,
    `rank_left_out` and `rank_change` are null for a run that fed nothing. Admins and viewers only: the qrels are
    gold grades or judges' P of items experts have not labelled (blind first). 400 says what is wrong with a
    parameter; 422 refuses a source that grades nothing to leave out (`expected:NAME`, `sample`), empty qrels or a
    project without runs; 404 a judge or release the project lacks."""

    @extend_schema(
        parameters=[
            OpenApiParameter("source", {"type": "string", "pattern": f"^{QRELS_PATTERN}$"},
                             description="graded qrels: `human` (default), `judge:NAME`, `combined:NAME` or "
                                         "`release:NAME`; `expected:NAME` and `sample` are refused (422)"),
            OpenApiParameter("measure", str, enum=list(LEFT_OUT_MEASURES),
                             description=f"the measure the runs are scored on (default {DEFAULT_MEASURE})"),
            OpenApiParameter("threshold", {"type": "integer", "minimum": 0},
                             description="`flagged` when a run left out moves by more than this many places "
                                         f"(default {RANK_THRESHOLD})"),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=READ_REPORTS)
        params = request.query_params
        source = params.get("source", HUMAN)
        measure = params.get("measure", DEFAULT_MEASURE)
        threshold = params.get("threshold", str(RANK_THRESHOLD))
        # What the schema states is checked here (400); the rest is the selector's refusal (SystemsError: 422, a
        # judge or release the project lacks 404).
        refused = {}
        if not re.fullmatch(QRELS_PATTERN, source):
            refused["source"] = [f"'human', 'judge:NAME', 'combined:NAME' or 'release:NAME', got {source!r}"]
        if measure not in LEFT_OUT_MEASURES:
            refused["measure"] = [f"one of {', '.join(LEFT_OUT_MEASURES)}, got {measure!r}"]
        if not re.fullmatch(r"[0-9]+", threshold):
            refused["threshold"] = [f"a whole number of places, 0 or more, got {threshold!r}"]
        if refused:
            raise ValidationError(refused)
        found = pool_reusability(project=project, source=source, measure=measure, threshold=int(threshold))
        return Response(reusability_json(found))


class SystemsLvhqView(APIView):
    """LVHQ as DisastIR defines it (4.3): every run evaluated under one qrels source on two query sets (the queries'
    metadata `query_set`: human-written and LLM-generated), and Kendall's tau and tau-AP between the runs' ranking on
    each, with bootstrap intervals (twin pairs resampled together when every query names its twin, else each set's
    queries on their own), overall and per intent (metadata `intent`). Admins and viewers only (blind first). 400
    says what is wrong with a parameter; 422 a set the project lacks, fewer than two sets, a query's bad set or twin
    (named), a source that grades nothing; 404 a judge or release the project lacks."""

    @extend_schema(
        parameters=[
            OpenApiParameter("qrels", {"type": "string", "pattern": f"^{QRELS_PATTERN}$"},
                             description="the qrels source both sets are evaluated under (default `human` when the "
                                         "project has human grades, else its first source; not `sample`)"),
            OpenApiParameter("set_a", str, description="the reference query set (default `human` when there is "
                                                       "one, else the first of two in name order)"),
            OpenApiParameter("set_b", str, description="the other query set (default: the project's other set)"),
            OpenApiParameter("measure", str, enum=list(LVHQ_MEASURES),
                             description=f"the measure the runs are ranked by (default {LVHQ_MEASURE}, the paper's)"),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=READ_REPORTS)
        params = request.query_params
        source = params.get("qrels")
        measure = params.get("measure", LVHQ_MEASURE)
        refused = {}
        if source is not None and not re.fullmatch(QRELS_PATTERN, source):
            refused["qrels"] = [("'human', 'judge:NAME', 'combined:NAME', 'expected:NAME' or 'release:NAME', "
                                 f"got {source!r}")]
        if measure not in LVHQ_MEASURES:
            refused["measure"] = [f"one of {', '.join(LVHQ_MEASURES)}, got {measure!r}"]
        if refused:
            raise ValidationError(refused)
        found = lvhq_report(project=project, source=source, set_a=params.get("set_a") or None,
                            set_b=params.get("set_b") or None, measure=measure)
        return Response(lvhq_json(found))


class SystemsPairTauView(APIView):
    """DIRAS Table 5: for each run, per query, Kendall's tau-b between the run's retrieval scores and judge
    `judge`'s P over the pairs the run retrieved and the judge scored, and the mean over the queries that have a
    tau (`mean_tau`); `tau` is null for a query with fewer than two such pairs or all tied. Without `judge`, the
    project's first judge with judgments. Admins and viewers only (judges' P of items experts have not labelled).
    404 names a judge or run the project lacks; 422 a project without runs or judges."""

    @extend_schema(
        parameters=[
            OpenApiParameter("judge", str, description="the judge whose P the runs are compared with"),
            OpenApiParameter("run", {"type": "array", "items": {"type": "string", "pattern": NO_NUL}}, style="form",
                             explode=True, description="only these runs (repeat; default: all)"),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, slug: str) -> Response:
        project = project_for_user(user=request.user, slug=slug, need=READ_REPORTS)
        judge = request.query_params.get("judge") or default_pair_tau_judge(project=project)
        found = pair_tau_report(project=project, judge=judge, runs=request.query_params.getlist("run") or None)
        return Response(pair_tau_json(found))

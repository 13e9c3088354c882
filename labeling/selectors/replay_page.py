"""The Replay page's reads (#50): the judges a replay can be asked for (with the pool pairs each scored), the
project's replays as the list shows them, and a done replay's report as the page draws it: the summary table's rows
first, then a chart per measure and judge with a line and band per queue mix. The report is read from
ReplayJob.result through models_llm.replay (arm_from_dict, ReplayRun.from_dict), never parsed in a template."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from django.db.models import Count

from labeling.charts import BandChart, BandPoint, band_chart
from labeling.models import Judge, Judgment, Pair, Project, ReplayJob
from labeling.selectors.disclosure import job_error_shown
from labeling.selectors.job_states import job_state
from labeling.selectors.lookups import replays_of_project
from labeling.selectors.releases import releases_of
from labeling.selectors.replay import ReplayInputError, replay_truth_text
from models_llm.replay.engine import ReplayRun
from models_llm.replay.summary import BAND, TARGETS, WSS_RECALL, ArmSummary, Band, Reached, arm_from_dict

# A count's band may reach far above the truth (a design-based estimate from a handful of random labels): the
# chart's top stays within this many times the largest mean or the true count, and a band above it is cut there.
COUNT_CAP = 2.0


@dataclass(frozen=True)
class JudgeChoice:
    """A judge of the project as the form offers it: the pool pairs it scored (none: it cannot be replayed)."""

    name: str
    scored: int
    pool: int

    @property
    def usable(self) -> bool:
        return self.scored > 0


@dataclass(frozen=True)
class ReplayFormFacts:
    judges: list[JudgeChoice]
    pool: int
    ungraded: int  # pairs without a reference grade: truth 'reference' refuses them, 'trec' counts them irrelevant
    releases: list[str]  # the project's frozen releases, newest first: each a truth two ways


def replay_form_facts(*, project: Project) -> ReplayFormFacts:
    """What the form says about the project: its judges with the pairs each scored (an ok judgment, the one a replay
    reads per pair), the pool's size and its pairs without a reference grade."""
    scored = dict(Judgment.objects.filter(judge__project=project, status=Judgment.Status.OK).order_by()
                  .values("judge_id").annotate(n=Count("pair_id", distinct=True)).values_list("judge_id", "n"))
    pairs = Pair.objects.filter(project=project)
    pool = pairs.count()
    judges = [JudgeChoice(name=judge.name, scored=scored.get(judge.id, 0), pool=pool)
              for judge in Judge.objects.filter(project=project).order_by("name")]
    return ReplayFormFacts(judges=judges, pool=pool, ungraded=pairs.filter(reference_grade__isnull=True).count(),
                           releases=[release.name for release in releases_of(project)])


def mix_label(mix: Mapping[str, float]) -> str:
    """A queue mix in words, the largest share first: 'uncertain 80 / random 20' (a stored mix's keys come back in
    the database's order: PostgreSQL's jsonb sorts them)."""
    ordered = sorted(mix.items(), key=lambda item: (-item[1], item[0]))
    return " / ".join(f"{name} {share:g}" for name, share in ordered)


@dataclass(frozen=True)
class ReplayRow:
    """A replay as the list and its page show it: where it stands, its settings in words, its error as shown."""

    job: ReplayJob
    state: str
    settings: str
    error: str

    @property
    def unfinished(self) -> bool:
        return self.job.finished_at is None


def _settings_text(parameters: Mapping) -> str:
    if not parameters:
        return ""
    mixes = "; ".join(mix_label(mix) for mix in parameters.get("mixes", []))
    refit = "refit each round" if parameters.get("refit") else "raw P, no refit"
    return (f"{', '.join(parameters.get('judges', []))} · {mixes} · {parameters.get('batch')} labels x "
            f"{parameters.get('rounds')} rounds x {parameters.get('seeds')} seeds · truth {parameters.get('truth')} · "
            f"{refit} · stop at recall {parameters.get('target'):g}, alpha {parameters.get('alpha'):g}")


def replay_row(job: ReplayJob) -> ReplayRow:
    # Replays are for admins only, who see a job's error as it is.
    return ReplayRow(job=job, state=job_state(job).text, settings=_settings_text(job.parameters),
                     error=job_error_shown(job, show=True))


def replay_rows(*, project: Project) -> list[ReplayRow]:
    """The project's replays, newest first."""
    return [replay_row(job) for job in replays_of_project(project)]


def replay_notes(job: ReplayJob) -> list[str]:
    """What the replay's truth is and what it leaves out: the worker's notes once it has read the project, else the
    truth asked for."""
    notes = job.result.get("notes") if job.result else None
    if notes:
        return list(notes)
    try:
        return [f"truth: {replay_truth_text(job.parameters.get('truth', ''))}"]
    except ReplayInputError:
        return []


@dataclass(frozen=True)
class ReachedCell:
    """Labels spent to reach a target: the mean over the seeds that reached it, and how many did."""

    mean: float | None
    reached: int
    seeds: int


@dataclass(frozen=True)
class StopCell:
    """Where the stopping rule stopped: mean labels and mean true recall there over the seeds that stopped;
    `readable`: whether the rule could be read at any point (it is withheld while pairs the judge did not score
    are open)."""

    labels: float | None
    true_recall: float | None
    stopped: int
    seeds: int
    readable: bool


@dataclass(frozen=True)
class SummaryRow:
    mix: str
    judge: str
    reached: dict[str, ReachedCell]  # keyed as summary.TARGETS
    stop: StopCell
    model_coverage: float | None
    design_coverage: float | None
    wss95: float | None


@dataclass(frozen=True)
class Measure:
    """A curve the page draws: its `curve` in ArmSummary.curves, and the y axis's fixed ends (None: fitted)."""

    key: str
    title: str
    caption: str
    empty: str  # why no seed had a value at any point
    low: float | None = None
    high: float | None = None
    count: bool = False  # a count of relevant pairs, drawn beside the true count


MEASURES = (
    Measure("exported_recall", "Recall of the exported qrels",
            "the verified grades plus the judge's calibrated labels on the pairs nobody graded, against the truth",
            "no pair is relevant under the truth", 0.0, 1.0),
    Measure("verified_recall", "Recall of the verified qrels", "the labels spent so far, against the truth",
            "no pair is relevant under the truth", 0.0, 1.0),
    Measure("auroc", "Judge AUROC on the pairs not labelled", "the judge's P against the truth of the rest",
            "among the pairs not labelled that the judge scored, the truth has one class only (or none is left)",
            0.0, 1.0),
    Measure("ece", "Judge ECE on the pairs not labelled", "expected calibration error of its P; lower is better",
            "no pair the judge scored is left unlabelled", 0.0),
    Measure("kappa", "Judge kappa on the pairs not labelled", "Cohen's kappa of its relevance calls with the truth",
            "no pair the judge scored is left unlabelled", high=1.0),
    Measure("model_total", "Model-based estimate of relevant pairs",
            "the judge's calibrated P summed over the open pairs, plus the verified relevant",
            "the estimate was withheld at every point (a judge that gives scores has no calibrator yet)", count=True),
    Measure("design_total", "Design-based estimate of relevant pairs",
            "from the labelled random sample, scaled up to the pool",
            "the random sample had no labelled pair at any point (a mix with no random share)", count=True),
    Measure("kendall_tau", "Kendall's tau of the runs' ranking",
            "the runs ranked under the exported qrels against their ranking under the truth",
            "the runs could not be ranked at any point", high=1.0),
)
NO_RUNS = "Not measured: the project has fewer than two runs to rank (see the notes)"


@dataclass(frozen=True)
class JudgeChart:
    judge: str
    chart: BandChart | None
    empty: str  # why there is no chart ("" when there is one)


@dataclass(frozen=True)
class ChartRow:
    measure: Measure
    charts: list[JudgeChart]
    reference: str  # what the dashed line across each chart is ("" without one)

    @property
    def drawn(self) -> bool:
        return any(item.chart is not None for item in self.charts)


@dataclass(frozen=True)
class ReplayReport:
    rows: list[SummaryRow]
    charts: list[ChartRow]
    mixes: list[str]  # the series of every chart, in colour order
    judges: list[str]
    true_relevant: int | None
    pool: int
    runs_compared: list[str]
    targets: dict[str, float]
    band: tuple[float, float]
    wss_recall: float


def _reached(reached: Reached) -> ReachedCell:
    return ReachedCell(mean=reached.mean, reached=reached.reached, seeds=len(reached.per_seed))


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _row(arm: ArmSummary) -> SummaryRow:
    stopped = [(labels, recall) for labels, recall in zip(arm.stop.labels, arm.stop.true_recall, strict=True)
               if labels is not None]
    readable = any(band.mean is not None for band in arm.curves["stop_probability"])
    stop = StopCell(labels=_mean([labels for labels, _ in stopped]),
                    true_recall=_mean([recall for _, recall in stopped if recall is not None]),
                    stopped=len(stopped), seeds=len(arm.stop.labels), readable=readable)
    return SummaryRow(mix=mix_label(arm.mix), judge=arm.judge,
                      reached={name: _reached(arm.reached[name]) for name in TARGETS}, stop=stop,
                      model_coverage=arm.coverage["model"], design_coverage=arm.coverage["design"], wss95=arm.wss95)


def _points(arm: ArmSummary, curve: str) -> list[BandPoint]:
    bands: list[Band] = arm.curves[curve]
    return [BandPoint(x=labels, mean=band.mean, low=band.low, high=band.high, seeds=band.seeds)
            for labels, band in zip(arm.labels, bands, strict=True)]


def _chart(measure: Measure, arms: list[ArmSummary], mixes: list[str], true_relevant: int | None) -> BandChart | None:
    series = {mix: [] for mix in mixes}
    for arm in arms:
        series[mix_label(arm.mix)] = _points(arm, measure.key)
    if not any(point.mean is not None for points in series.values() for point in points):
        return None
    if not measure.count:
        return band_chart(series, low=measure.low, high=measure.high, reference=TARGETS.get(measure.key))
    means = [point.mean for points in series.values() for point in points if point.mean is not None]
    cap = COUNT_CAP * max(means + ([true_relevant] if true_relevant else []))
    return band_chart(series, low=0.0, reference=true_relevant, cap=cap)


def _reference(measure: Measure, true_relevant: int | None) -> str:
    if measure.count:
        return "" if true_relevant is None else f"the true count, {true_relevant:,} relevant pairs"
    target = TARGETS.get(measure.key)
    return "" if target is None else f"the target, {target:g}"


def _true_relevant(job: ReplayJob) -> int | None:
    runs = job.result.get("runs") or []
    if not runs:
        return None
    states = ReplayRun.from_dict(runs[0]).states
    return states[0].true_relevant if states else None


def replay_report(job: ReplayJob) -> ReplayReport | None:
    """A done replay's report as the page shows it; None before the summary is stored."""
    if not job.result or "arms" not in job.result:
        return None
    arms = [arm_from_dict(data) for data in job.result["arms"]]
    mixes = list(dict.fromkeys(mix_label(arm.mix) for arm in arms))
    judges = list(dict.fromkeys(arm.judge for arm in arms))
    compared = list(job.result.get("runs_compared") or [])
    true_relevant = _true_relevant(job)
    rows = []
    for measure in MEASURES:
        charts = []
        for judge in judges:
            chart = _chart(measure, [arm for arm in arms if arm.judge == judge], mixes, true_relevant)
            empty = "" if chart is not None else (NO_RUNS if measure.key == "kendall_tau" and not compared
                                                  else f"No value at any point: {measure.empty}.")
            charts.append(JudgeChart(judge=judge, chart=chart, empty=empty))
        rows.append(ChartRow(measure=measure, charts=charts, reference=_reference(measure, true_relevant)))
    return ReplayReport(rows=[_row(arm) for arm in arms], charts=rows, mixes=mixes, judges=judges,
                        true_relevant=true_relevant, pool=int(job.result.get("pool") or 0), runs_compared=compared,
                        targets=dict(TARGETS), band=BAND, wss_recall=WSS_RECALL)

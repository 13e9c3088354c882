"""`manage.py evaluate_runs --project SLUG [--qrels SOURCE ...] [--measure M ...] [--group-by KEY] [--include-partial]
[--compare [--test randomization|t|wilcoxon] [--correction holm|tukey|none] [--alpha 0.05] [--permutations N]]
[--json]`: every run of a project under each qrels source, how far the sources agree on the ranking of the runs
(partial sources only with --include-partial), and with --compare whether each difference between two runs is
beyond chance."""
import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.management.lookup import command_project
from labeling.management.systems_tables import number, table_lines
from labeling.selectors.qrels_sources import SystemsError
from labeling.selectors.systems import (
    DRAWS,
    Estimate,
    SystemsReport,
    Table,
    pair_key,
    systems_report,
    systems_report_json,
)
from labeling.selectors.systems_significance import (
    SignificanceOptionError,
    comparison_json,
    significance_options,
    systems_significance,
)
from models_llm.systems.agreement import MIN_SYSTEMS
from models_llm.systems.evaluation import ALL_MEASURES
from models_llm.systems.significance import CORRECTIONS, DEFAULT_DRAWS, TESTS, Comparison

# The coefficients of a row of the agreement table, in the order they are printed.
COEFFICIENTS = ("kendall_tau", "tau_ap", "spearman")


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _cell(estimate: Estimate) -> str:
    if estimate.mean is None:
        return "-"
    if estimate.low is None:
        return number(estimate.mean)
    return f"{estimate.mean:.3f} [{estimate.low:.3f}, {estimate.high:.3f}]"


def _interval_cell(value: float | None, interval) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if interval is None else f"{value:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"


class Command(BaseCommand):
    help = "Evaluate a project's runs under its qrels sources (human, judge:NAME, combined:NAME, expected:NAME)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--qrels", action="append", metavar="SOURCE",
                            help="human, sample, judge:NAME, combined:NAME, expected:NAME or release:NAME (repeat; "
                                 "default: all but sample)")
        parser.add_argument("--measure", action="append", choices=ALL_MEASURES,
                            help="measure to report (repeat; default: all; judged@10 is always shown)")
        parser.add_argument("--group-by", dest="group_by", metavar="KEY",
                            help="query metadata key to break the results down by (KEY1,KEY2 crosses two)")
        parser.add_argument("--threshold", type=float, default=None,
                            help="grade every judge and combined source at calibrated P >= this (as export_qrels "
                                 "--threshold; default: each judge's own relevance rule)")
        parser.add_argument("--draws", type=int, default=DRAWS, help="bootstrap draws for the intervals")
        parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap draws")
        parser.add_argument("--include-partial", dest="include_partial", action="store_true",
                            help="compare the sources of a judge that lacks some of the pool pairs the runs retrieve "
                                 "too (left out of the agreement by default)")
        parser.add_argument("--compare", action="store_true",
                            help="test every pair of runs per source and measure (paired, over the same queries)")
        parser.add_argument("--test", choices=TESTS, default=None, help="the paired test (default randomization)")
        parser.add_argument("--correction", choices=CORRECTIONS, default=None,
                            help="for the many pairs (default holm; tukey: Tukey's HSD)")
        parser.add_argument("--alpha", type=float, default=None, help="significance level (default 0.05)")
        parser.add_argument("--permutations", type=int, default=None,
                            help=f"draws of the randomization test (default {DEFAULT_DRAWS:,}; seeded by --seed)")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print JSON instead of tables")

    def handle(self, *args, project: str, qrels: list[str] | None, measure: list[str] | None, group_by: str | None,
               draws: int, seed: int, include_partial: bool, threshold: float | None, as_json: bool, compare: bool, test: str | None,
               correction: str | None, alpha: float | None, permutations: int | None, **options) -> None:
        found = command_project(project)
        if draws < 0:
            raise CommandError("--draws must be 0 or more")
        if not compare and any(value is not None for value in (test, correction, alpha, permutations)):
            raise CommandError("--test, --correction, --alpha and --permutations go with --compare")
        try:
            chosen = significance_options(test=test, correction=correction, alpha=alpha, draws=permutations,
                                          seed=seed) if compare else None
            report = systems_report(project=found, sources=qrels, measures=measure, group_by=group_by, draws=draws,
                                    seed=seed, include_partial=include_partial, threshold=threshold)
        except (SystemsError, SignificanceOptionError) as exc:
            raise CommandError(str(exc)) from None
        if not report.runs:
            raise CommandError(f"project {project!r} has no runs: import one (import_run) or retrieve one (retrieve)")
        if not report.sources:
            raise CommandError(f"project {project!r} has no qrels: no gold grade and no judge with a P")
        significance = systems_significance(report, chosen) if chosen else None
        # On standard error, so that --json's output stays one JSON document (which names them under "degenerate").
        for key, degenerate in report.degenerate.items():
            self.stderr.write(f"Warning: {key} is graded by a degenerate judge: {degenerate.reason}. Its ranking of "
                              f"the runs says nothing.")
        if as_json:
            out = systems_report_json(report)
            if significance is not None:
                out["significance"] = {key: {measure: comparison_json(found) for measure, found in by_measure.items()}
                                       for key, by_measure in significance.items()}
            self.stdout.write(json.dumps(out, indent=2, ensure_ascii=False))
            return
        self._report(report)
        if significance is not None:
            self._significance(significance)

    def _significance(self, significance: dict[str, dict[str, Comparison]]) -> None:
        for key, by_measure in significance.items():
            for measure, found in by_measure.items():
                how = found.test + (f", {found.draws:,} draws" if found.draws else "")
                self.stdout.write("")
                self.stdout.write(f"== {key}, {measure}: paired {how}, {found.correction} correction, "
                                  f"{found.queries} queries")
                tied = [run for run in found.tied_with_best if run != found.best]
                self.stdout.write(f"Best: {found.best}; indistinguishable from it (corrected p >= {found.alpha:g}): "
                                  f"{', '.join(tied) or 'none'}")
                self._write_table(
                    ["run a", "run b", "a - b [95% CI]", "d_z", "p", "p corrected"],
                    [[pair.a, pair.b, _interval_cell(pair.mean_difference, None if pair.low is None
                                                     else (pair.low, pair.high)),
                      number(pair.effect_size), _p(pair.p), _p(pair.p_corrected)] for pair in found.pairs])

    def _write_table(self, header: list[str], rows: list[list[str]]) -> None:
        for line in table_lines(header, rows):
            self.stdout.write(line)

    def _report(self, report: SystemsReport) -> None:
        level = f"{report.level:.0%}"
        self.stdout.write(
            f"Project {report.project}: {len(report.runs)} runs under {len(report.sources)} qrels sources; "
            f"means over queries with [{level} bootstrap interval, {report.draws} draws]."
        )
        depth = "rankings" if report.depth is None else f"top {report.depth}"
        for source in report.sources:
            coverage = report.coverage.get(source.key)
            scored = "" if coverage is None or not coverage.needed else (
                f" (its judge scored {coverage.covered:,} of the {coverage.needed:,} pool pairs the runs retrieve in "
                f"their {depth}{': partial' if coverage.partial else ''})")
            self.stdout.write(f"  {source.key}: {source.label}{scored}")
        if report.left_out:
            self.stdout.write(f"Left out of the agreement as partial: {', '.join(report.left_out)} "
                              "(--include-partial compares them all the same).")
        for measure, keys in list(report.left_out_by_measure.items())[1:]:
            deeper = [key for key in keys if key not in report.left_out]
            if deeper:
                self.stdout.write(f"Not compared on {measure} yet, partial within the depth it reads: "
                                  f"{', '.join(deeper)}.")
        if len(report.runs) < MIN_SYSTEMS:
            self.stdout.write(f"No agreement: it needs {MIN_SYSTEMS} runs or more (a rank correlation of two runs is "
                              "+1 or -1 whatever the sources say).")
        self._table(report, report.overall)
        self.stdout.write("")
        self.stdout.write("Share of each run's entries graded by the source")
        keys = [source.key for source in report.sources]
        self._write_table(["run", *keys], [[run, *(number(report.judged_entries[run][key]) for key in keys)]
                                           for run in report.runs])
        for value, table in report.groups.items():
            self.stdout.write("")
            self.stdout.write(f"== {report.group_by} = {value}")
            self._table(report, table)

    def _table(self, report: SystemsReport, table: Table) -> None:
        keys = [source.key for source in report.sources]
        self.stdout.write("Queries evaluated: " + ", ".join(f"{key} {table.queries[key]:,}" for key in keys))
        for measure in report.measures:
            self.stdout.write("")
            self.stdout.write(measure)
            self._write_table(["run", *keys], [[run, *(_cell(table.scores[run][key][measure]) for key in keys)]
                                               for run in report.runs])
        for measure in report.agreement_measures:
            self.stdout.write("")
            self.stdout.write(f"Qrels agreement: the rankings of the runs under two sources ({measure})")
            rows = []
            for pair, by_measure in table.agreement.items():
                found = by_measure.get(measure)
                if found is None:
                    rows.append([pair_key(pair), *("-" for _ in COEFFICIENTS), "-", "-"])
                    continue
                moved = found.largest_change
                rows.append([pair_key(pair), *(_interval_cell(getattr(found, name), found.intervals.get(name))
                                               for name in COEFFICIENTS), f"{found.n_queries:,}",
                             "-" if moved is None else f"{moved[0]} {moved[1]} -> {moved[2]}"])
            self._write_table(["sources", *COEFFICIENTS, "queries", "largest rank change"], rows)

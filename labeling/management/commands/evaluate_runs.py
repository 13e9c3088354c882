"""`manage.py evaluate_runs --project SLUG [--qrels SOURCE ...] [--measure M ...] [--group-by KEY] [--include-partial]
[--json]`: every run of a project under each qrels source, and how far the sources agree on the ranking of the
runs (partial sources only with --include-partial)."""
import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.management.lookup import command_project
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
from models_llm.retrieval.agreement import MIN_SYSTEMS
from models_llm.retrieval.evaluation import MEASURES

# The coefficients of a row of the agreement table, in the order they are printed.
COEFFICIENTS = ("kendall_tau", "tau_ap", "spearman")


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _cell(estimate: Estimate) -> str:
    if estimate.mean is None:
        return "-"
    if estimate.low is None:
        return _number(estimate.mean)
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
                            help="human, judge:NAME, combined:NAME or expected:NAME (repeat; default: all)")
        parser.add_argument("--measure", action="append", choices=MEASURES,
                            help="measure to report (repeat; default: all; judged@10 is always shown)")
        parser.add_argument("--group-by", dest="group_by", metavar="KEY",
                            help="query metadata key to break the results down by (KEY1,KEY2 crosses two)")
        parser.add_argument("--draws", type=int, default=DRAWS, help="bootstrap draws for the intervals")
        parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap draws")
        parser.add_argument("--include-partial", dest="include_partial", action="store_true",
                            help="compare the sources of a judge that lacks some of the pool pairs the runs retrieve "
                                 "too (left out of the agreement by default)")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print JSON instead of tables")

    def handle(self, *args, project: str, qrels: list[str] | None, measure: list[str] | None, group_by: str | None,
               draws: int, seed: int, include_partial: bool, as_json: bool, **options) -> None:
        found = command_project(project)
        if draws < 0:
            raise CommandError("--draws must be 0 or more")
        try:
            report = systems_report(project=found, sources=qrels, measures=measure, group_by=group_by, draws=draws,
                                    seed=seed, include_partial=include_partial)
        except SystemsError as exc:
            raise CommandError(str(exc)) from None
        if not report.runs:
            raise CommandError(f"project {project!r} has no runs: import one (import_run) or retrieve one (retrieve)")
        if not report.sources:
            raise CommandError(f"project {project!r} has no qrels: no gold grade and no judge with a P")
        if as_json:
            self.stdout.write(json.dumps(systems_report_json(report), indent=2, ensure_ascii=False))
            return
        self._report(report)

    def _write_table(self, header: list[str], rows: list[list[str]]) -> None:
        widths = [max(len(row[i]) for row in [header, *rows]) + 2 for i in range(len(header))]
        for row in [header, *rows]:
            self.stdout.write("".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())

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
        self._write_table(["run", *keys], [[run, *(_number(report.judged_entries[run][key]) for key in keys)]
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
            self.stdout.write(f"Agreement of the rankings of the runs ({measure})")
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

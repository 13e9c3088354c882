"""`manage.py validation_report --project SLUG --judge NAME [--judge NAME2] [--json] [--all-pairs] [--unit-key KEY]
[--cutoffs 5,10,15]`: LLM vs human metrics."""
import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.management.lookup import command_judge, command_project
from labeling.selectors.validation import ReportOptionsError, report_options
from labeling.selectors.validation_report import ValidationReport
from labeling.services.validation import BOOTSTRAP_DRAWS, validation_compute
from models_llm.metrics import MetricRow, human_rows, metric_table


def _cell(row: MetricRow) -> str:
    if row.value is None:
        return "-"
    text = f"{row.value:,.{row.decimals}f}" if row.decimals else f"{row.value:,}"
    return f"{text} [{row.ci[0]:.{row.decimals}f}, {row.ci[1]:.{row.decimals}f}]" if row.ci else text


class Command(BaseCommand):
    help = "LLM-vs-human validation metrics of one or more judges of a project (DIRAS App. C)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--judge", action="append", required=True, help="judge name (repeat to compare)")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print JSON instead of a table")
        parser.add_argument("--bootstrap", type=int, default=BOOTSTRAP_DRAWS, help="bootstrap draws for the CIs")
        parser.add_argument("--all-pairs", action="store_true",
                            help="count pool pairs nobody graded as irrelevant (TREC; DIRAS's all-pairs setting)")
        parser.add_argument("--unit-key", default=None,
                            help="rank within (query, this passage metadata value) units, e.g. report")
        parser.add_argument("--cutoffs", default=None, help="k of nDCG@k and MAP@k, e.g. 5,10,15 (default 10)")

    def handle(self, *args, project: str, judge: list[str], as_json: bool, bootstrap: int, all_pairs: bool,
               unit_key: str | None, cutoffs: str | None, **options) -> None:
        found = command_project(project)
        judges = []
        for name in judge:
            item = command_judge(found, name)
            judges.append(item)
        if bootstrap < 0:
            raise CommandError("--bootstrap must be 0 or more")
        try:
            chosen = report_options(project=found, all_pairs=all_pairs, unit_key=unit_key, cutoffs=cutoffs)
        except ReportOptionsError as exc:
            raise CommandError(str(exc)) from None
        report = validation_compute(project=found, judges=judges, bootstrap_draws=bootstrap, options=chosen)
        if as_json:
            self.stdout.write(self._json(report, judge))
        else:
            self._table(report)

    def _json(self, report: ValidationReport, names: list[str]) -> str:
        return json.dumps(report.for_judges(names), indent=2, ensure_ascii=False)

    def _table(self, report: ValidationReport) -> None:
        judges, options, counts = report.judges, report.options, report.counts
        table = [(line.label, [_cell(row) for row in line.cells])
                 for line in metric_table([section.to_dict() for section in judges], options.cutoffs)]
        width = max(len(label) for label, _ in table) + 2
        col_width = [max(len(s.name), *(len(cells[j]) for _, cells in table)) + 2 for j, s in enumerate(judges)]
        self.stdout.write(
            f"Project {report.project}: {counts.pairs:,} pairs, {counts.gold:,} with a gold grade, "
            f"{counts.unresolved:,} unresolved, {counts.uncertain:,} uncertain."
        )
        if options.all_pairs:
            self.stdout.write(f"All pairs: +{counts.added:,} unjudged pool pairs counted as irrelevant "
                              f"({counts.gold:,} pairs in all); a judge is scored on the pairs it judged, and in "
                              "nDCG/MAP the pairs it did not judge rank below them.")
        if options.unit_key:
            self.stdout.write(f"Ranking units: query x {options.unit_key} ({options.n_units:,} units).")
        for section in judges:
            coverage = section.coverage
            if coverage.partial:
                self.stdout.write(f"{section.name}: partial ({coverage.percent} %): judged under the current "
                                  f"definition {coverage.covered:,} of the {coverage.needed:,} gold pairs.")
        self.stdout.write("".ljust(width) + "".join(s.name.ljust(w) for s, w in zip(judges, col_width)))
        for label, cells in table:
            self.stdout.write(label.ljust(width) + "".join(c.ljust(w) for c, w in zip(cells, col_width)))
        for section in judges:
            for key, reason in section.null_reasons.items():
                self.stdout.write(f"{section.name}: {key} is empty: {reason}")
        self.stdout.write("Human agreement (annotators):")
        rows = human_rows(report.human)
        # Its own column: its labels ("pairs labelled twice or more") are longer than the judges' table's.
        human_width = max([width, *(len(row.label) + 2 for row in rows)])
        for row in rows:
            self.stdout.write(f"  {row.label.ljust(human_width)}{_cell(row)}"
                              + (f"  ({row.reason})" if row.reason else ""))

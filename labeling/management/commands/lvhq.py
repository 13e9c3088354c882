"""`manage.py lvhq --project SLUG [--qrels SOURCE] [--sets A B] [--measure M] [--json]`: LVHQ as DisastIR defines
it (4.3): do two query sets (human-written and LLM-generated) rank the runs alike under the same qrels? As the
Systems page and GET /api/projects/SLUG/systems/lvhq/ show it."""
import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.exceptions import DomainError
from labeling.management.lookup import command_project
from labeling.management.systems_tables import number, table_lines
from labeling.selectors.systems_lvhq import (
    DEFAULT_MEASURE,
    LVHQ_MEASURES,
    LvhqGroup,
    LvhqReport,
    lvhq_json,
    lvhq_report,
)


def _interval(found: tuple[float, float] | None) -> str:
    return "" if found is None else f" [{found[0]:.3f}, {found[1]:.3f}]"


def _group_line(label: str, group: LvhqGroup) -> str:
    sizes = f"{group.queries_a} vs {group.queries_b} queries, {group.resampled} resampled"
    found = group.agreement
    if found is None:
        return f"{label}: no agreement ({sizes}): it needs three runs or more and a query in each set"
    return (f"{label}: Kendall's tau {number(found.kendall_tau)}{_interval(found.intervals['kendall_tau'])}, "
            f"tau-AP {number(found.tau_ap)}{_interval(found.intervals['tau_ap'])} ({sizes})")


class Command(BaseCommand):
    help = ("LVHQ (DisastIR 4.3): every run evaluated under one qrels source on two query sets (metadata query_set), "
            "and Kendall's tau and tau-AP between the runs' rankings on each, overall and per intent.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--qrels", default=None, metavar="SOURCE",
                            help="the qrels both sets are evaluated under: human (the default when the project has "
                                 "human grades), judge:NAME, combined:NAME, expected:NAME or release:NAME")
        parser.add_argument("--sets", nargs=2, default=None, metavar=("A", "B"),
                            help="the reference query set and the other (default: human and the project's other "
                                 "set, or its two sets in name order)")
        parser.add_argument("--measure", default=DEFAULT_MEASURE,
                            help=f"one of {', '.join(LVHQ_MEASURES)} (default {DEFAULT_MEASURE}, the paper's)")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print JSON instead of a table")

    def handle(self, *args, project: str, qrels: str | None, sets: list[str] | None, measure: str, as_json: bool,
               **options) -> None:
        found = command_project(project)
        set_a, set_b = sets or (None, None)
        try:
            report = lvhq_report(project=found, source=qrels, set_a=set_a, set_b=set_b, measure=measure)
        except DomainError as exc:
            raise CommandError(str(exc)) from None
        if as_json:
            self.stdout.write(json.dumps(lvhq_json(report), indent=2, ensure_ascii=False))
            return
        self._report(found.slug, report)

    def _report(self, slug: str, report: LvhqReport) -> None:
        self.stdout.write(f"Project {slug}: the runs' {report.measure} under the {report.source} qrels on query set "
                          f"{report.set_a!r} and on {report.set_b!r} (LVHQ, DisastIR 4.3).")
        if report.partial:
            self.stdout.write(f"Partial: {report.source}'s judge lacks the P of some pool pairs the runs retrieve; "
                              "what it skipped counts as not relevant in both rankings.")
        header = ["run", f"{report.set_a}", "rank", f"{report.set_b}", "rank"]
        rows = [[row.run, number(row.mean_a), "-" if row.rank_a is None else str(row.rank_a), number(row.mean_b),
                 "-" if row.rank_b is None else str(row.rank_b)] for row in report.runs]
        for line in table_lines(header, rows):
            self.stdout.write(line)
        self.stdout.write(_group_line("All queries", report.overall))
        for group in report.intents:
            self.stdout.write(_group_line(f"Intent {group.intent}", group))

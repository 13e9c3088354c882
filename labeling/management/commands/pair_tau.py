"""`manage.py pair_tau --project SLUG [--judge NAME] [--run NAME ...] [--json]`: DIRAS Table 5, each run's Kendall
tau-b against a judge's P, per query over the pairs both scored, and the mean over the queries, as
GET /api/projects/SLUG/systems/pair-tau/ and the Systems page show it."""
import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.exceptions import DomainError
from labeling.management.lookup import command_project
from labeling.management.systems_tables import number, table_lines
from labeling.selectors.systems_pair_tau import default_pair_tau_judge, pair_tau_json, pair_tau_report


class Command(BaseCommand):
    help = ("DIRAS Table 5: per query, Kendall's tau-b between each run's retrieval scores and a judge's P over the "
            "pairs both scored, and the mean over the queries.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--judge", help="the judge (default: the project's first judge with judgments)")
        parser.add_argument("--run", action="append", dest="runs", metavar="NAME", help="only this run (repeat)")
        parser.add_argument("--per-query", action="store_true", help="print each query's tau too")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print JSON instead of a table")

    def handle(self, *args, project: str, judge: str | None, runs: list[str] | None, per_query: bool,
               as_json: bool, **options) -> None:
        found = command_project(project)
        try:
            report = pair_tau_report(project=found, judge=judge or default_pair_tau_judge(project=found), runs=runs)
        except DomainError as exc:
            raise CommandError(str(exc)) from None
        if as_json:
            self.stdout.write(json.dumps(pair_tau_json(report), indent=2, ensure_ascii=False))
            return
        self.stdout.write(f"Project {found.slug}: Kendall's tau-b between each run's scores and judge "
                          f"{report.judge}'s P, per query over the pairs both scored; mean over the queries.")
        rows = [[name, number(tau.mean), str(len(tau.queries)), str(tau.undefined), f"{tau.pairs:,}"]
                for name, tau in report.runs.items()]
        for line in table_lines(["run", "mean tau", "queries", "without tau", "pairs"], rows):
            self.stdout.write(line)
        if per_query:
            rows = [[name, row.query, str(row.pairs), number(row.tau)]
                    for name, tau in report.runs.items() for row in tau.queries]
            for line in table_lines(["run", "query", "pairs", "tau"], rows):
                self.stdout.write(line)

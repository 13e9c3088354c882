"""`manage.py beyond_pool --project SLUG --judge NAME [--sample N] [--seed S] [--runs A,B] [--json] [--dry-run]
[--no-wait]`: a judge scores a seeded sample of each run's entries that never entered the pool, on the workers;
prints, per run, the expected relevant entries below the pool with an interval (docs/validation.md, "Beyond the
pool")."""
import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.management.audit import audit_wait, estimate_text
from labeling.management.lookup import command_judge, command_project
from labeling.models import AuditJob
from labeling.services.audit import AuditError, audit_estimate, audit_request

KIND = AuditJob.Kind.BEYOND_POOL


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def report_text(report: dict) -> str:
    """One line per run: entries, below the pool, scored, expected relevant below [interval], mean P below."""
    calibrated = f"its {report['calibrator']} calibrator" if report["calibrator"] else "its raw P (no calibrator)"
    lines = [(f"Beyond the pool with {report['judge']} under {calibrated}: up to {report['sample']} entries below "
              f"the pool per run (seed {report['seed']}), {report['level']:.0%} intervals.")]
    columns = [("run", 24), ("entries", 10), ("below", 10), ("scored", 8), ("failed", 8),
               ("expected relevant below [interval]", 38), ("mean P below", 12)]
    lines.append("".join(name.ljust(width) for name, width in columns).rstrip())
    for row in report["runs"]:
        interval = f" [{_number(row['low'])}, {_number(row['high'])}]" if row["low"] is not None else ""
        cells = [row["run"], f"{row['entries']:,}", f"{row['below']:,}", str(row["scored"]), str(row["failed"]),
                 _number(row["expected"]) + interval, "-" if row["rate"] is None else f"{row['rate']:.3f}"]
        lines.append("".join(cell.ljust(width) for cell, (_, width) in zip(cells, columns)).rstrip())
    return "\n".join(lines)


class Command(BaseCommand):
    help = ("Would a deeper pool find more? A judge scores a seeded random sample of each run's entries that never "
            "entered the pool (on the workers; nothing enters the pool, the qrels or the queues) and the report "
            "estimates, per run, the relevant entries still below the pool with an interval.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True)
        parser.add_argument("--judge", required=True)
        parser.add_argument("--sample", type=int, help="entries below the pool drawn per run (default 200)")
        parser.add_argument("--seed", type=int, help="the draw's seed (default 0)")
        parser.add_argument("--runs", help="comma-separated run names (default every run)")
        parser.add_argument("--json", action="store_true", dest="as_json", help="print the report as JSON")
        parser.add_argument("--dry-run", action="store_true", help="say what it would score and cost; start nothing")
        parser.add_argument("--no-wait", action="store_true", help="queue the audit and print its id")

    def handle(self, *args, project: str, judge: str, sample: int | None, seed: int | None, runs: str | None,
               as_json: bool, dry_run: bool, no_wait: bool, **options) -> None:
        found = command_project(project)
        item = command_judge(found, judge)
        raw = {key: value for key, value in (("sample", sample), ("seed", seed), ("runs", runs)) if value is not None}
        try:
            if dry_run:
                estimate = audit_estimate(project=found, judge=item, kind=KIND, parameters=raw, probe=True)
                self.stdout.write(f"Dry run of a look beyond the pool with {item.name!r}: {estimate_text(estimate)}")
                return
            job = audit_request(project=found, judge=item, kind=KIND, parameters=raw)
        except AuditError as exc:
            raise CommandError(str(exc)) from None
        self.stderr.write(f"Audit {job.id}: {job.total:,} entries below the pool for {item.name!r} to score, "
                          "queued for the workers.")
        if no_wait:
            self.stdout.write(str(job.id))
            return
        report = audit_wait(self, job)
        self.stdout.write(json.dumps(report, indent=2, ensure_ascii=False) if as_json else report_text(report))

"""`manage.py audit_judge --project SLUG --judge NAME [--sample N] [--seed S] [--tests length,stuffing,...] [--json]
[--dry-run] [--no-wait]`: the perturbation audit of a judge on a sample of the project's gold pairs, run by the
workers; prints its report."""
import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.management.audit import audit_wait, estimate_text
from labeling.management.lookup import command_judge, command_project
from labeling.models import AuditJob, Judge, Project
from labeling.services.audit import AuditError, audit_estimate, audit_request
from models_llm.audit.types import PERTURBATION_TESTS

KIND = AuditJob.Kind.PERTURBATION


def _share(value: float | None, interval: list[float] | None, *, signed: bool = False) -> str:
    if value is None:
        return "-"
    text = f"{value:+.3f}" if signed else f"{value:.1%}"
    if interval is None:
        return text
    low, high = interval
    return f"{text} [{low:+.3f}, {high:+.3f}]" if signed else f"{text} [{low:.1%}, {high:.1%}]"


def report_text(report: dict) -> str:
    """The report as a table (one line per test), then each test's verdict, why, note and worst item."""
    lines = [(f"Perturbation audit of {report['judge']}: {report['items']} gold pair(s) (sample {report['sample']}, "
              f"seed {report['seed']}), decisions at P >= {report['threshold']:g}. Verdict: {report['verdict']}.")]
    columns = [("test", 12), ("n", 6), ("failed", 7), ("mean change [95% CI]", 27), ("decision flips", 24),
               ("ordering flips", 24), ("of pairs", 9), ("verdict", 9)]
    lines.append("".join(name.ljust(width) for name, width in columns).rstrip())
    for row in report["rows"]:
        cells = [row["test"], str(row["n"]), str(row["failed"]),
                 _share(row["mean_delta"], row["mean_delta_ci"], signed=True),
                 _share(row["decision_flips"], row["decision_flips_ci"]),
                 _share(row["ordering_flips"], row["ordering_flips_ci"]), str(row["orderings"]), row["verdict"]]
        lines.append("".join(cell.ljust(width) for cell, (_, width) in zip(cells, columns)).rstrip())
    for row in report["rows"]:
        lines += ["", f"{row['test']}: {row['title']}", f"  {row['why']}"]
        if row["note"]:
            lines.append(f"  Note: {row['note']}")
        if row["worst"]:
            worst = row["worst"][0]
            lines.append(f"  Largest change: pair {worst['pair_id']} ({worst['query_key']} / {worst['doc_key']}) "
                         f"P {worst['p_before']:.3f} -> {worst['p_after']:.3f} (--json for raw outputs and excerpts)")
    return "\n".join(lines)


class Command(BaseCommand):
    help = ("Audit a judge before trusting it: on a seeded sample of the project's gold pairs, how its P changes "
            "when the passage is padded with unrelated text to 512/1024 words (length), the query's words are "
            "stuffed into an irrelevant passage (stuffing), a sentence asks the judge to answer Yes (injection), the "
            "definition is left out (definition), or the same pair is asked twice with sampling (consistency). The "
            "variants are scored on the workers and never become pairs or judgments.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True)
        parser.add_argument("--judge", required=True)
        parser.add_argument("--sample", type=int, help="gold pairs to audit (default 200)")
        parser.add_argument("--seed", type=int, help="seed of the sample and of the variants (default 0)")
        parser.add_argument("--tests", help=f"comma-separated, default all: {','.join(PERTURBATION_TESTS)}")
        parser.add_argument("--json", action="store_true", dest="as_json", help="print the report as JSON")
        parser.add_argument("--dry-run", action="store_true",
                            help="print the audit's probes, calls, tokens and cost estimate; ask nothing")
        parser.add_argument("--no-wait", action="store_true", help="queue the audit and print its id")

    def handle(self, *args, project: str, judge: str, sample: int | None, seed: int | None, tests: str | None,
               as_json: bool, dry_run: bool, no_wait: bool, **options) -> None:
        found = command_project(project)
        item = command_judge(found, judge)
        raw = {key: value for key, value in (("sample", sample), ("seed", seed), ("tests", tests))
               if value is not None}
        try:
            if dry_run:
                self._estimate(found, item, raw)
                return
            job = audit_request(project=found, judge=item, kind=KIND, parameters=raw)
        except AuditError as exc:
            raise CommandError(str(exc)) from None
        self.stderr.write(f"Audit {job.id}: {job.total:,} probe(s) of {item.name!r} queued for the workers.")
        if no_wait:
            self.stdout.write(str(job.id))
            return
        report = audit_wait(self, job)
        self.stdout.write(json.dumps(report, indent=2, ensure_ascii=False) if as_json else report_text(report))

    def _estimate(self, project: Project, judge: Judge, raw: dict) -> None:
        estimate = audit_estimate(project=project, judge=judge, kind=KIND, parameters=raw, probe=True)
        chosen = estimate.parameters
        self.stdout.write(f"Dry run of the perturbation audit of {judge.name!r} (sample {chosen['sample']}, seed "
                          f"{chosen['seed']}, tests {','.join(chosen['tests'])}): {estimate_text(estimate)}")

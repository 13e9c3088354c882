"""`manage.py audit_multicondition --project SLUG (--judge NAME | --run NAME) [--json] [--dry-run] [--no-wait]`:
MultiConIR's four tests on the project's multi-condition items, of a judge (an audit on the workers) or of a run
(computed here from its ranks)."""
import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.exceptions import DomainError
from labeling.management.audit import audit_wait, estimate_text
from labeling.management.lookup import command_judge, command_project
from labeling.models import AuditJob, Judge, Project
from labeling.selectors.audit_multicondition import run_multicondition_report
from labeling.selectors.runs import run_by_name
from labeling.services.audit import audit_estimate, audit_request
from models_llm.audit.ordering import multicondition_in_order

KIND = AuditJob.Kind.MULTICONDITION


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _curve_lines(curve: dict, indent: str) -> list[str]:
    rows = [(domain, values) for domain, values in curve["by_domain"].items()] + [("average", curve["average"])]
    head = f"{indent}{'':<12}" + "".join(f"{f'k={k}':>7}" for k in curve["k"]) + f"{'mean':>7}"
    lines = [head]
    for name, values in rows:
        mean = _figure(curve["mean"]) if name == "average" else ""
        lines.append(f"{indent}{name[:12]:<12}" + "".join(f"{_figure(v):>7}" for v in values) + f"{mean:>7}")
    return lines


def report_text(report: dict) -> str:
    """The report as tables: per task its curves by domain and averaged, the verdict and why."""
    report = multicondition_in_order(report)
    lines = [(f"Multi-condition tests of {report['subject']}: {report['items']} items in {len(report['domains'])} "
             f"domain(s) ({', '.join(report['domains'])}), k = 1..{report['max_k']}, {report['skipped']} "
             f"comparison(s) skipped (a score missing).")]
    for example in report.get("examples", []):
        lines.append(f"Conditions of item {example['item']} ({example['domain']}): "
                     + "; ".join(f"{k}) {text}" for k, text in enumerate(example["conditions"], 1)))
    for number, name in enumerate(("task1", "task2", "task3", "task4"), 1):
        task = report[name]
        lines += ["", f"Task {number}. {task['title']}", f"  Verdict: {task['verdict']}. {task['why']}"]
        if name == "task1":
            for style, curve in task["styles"].items():
                lines += [f"  {style} queries"] + _curve_lines(curve, "    ")
        elif name == "task4" and "pads" in task:
            for pad, curve in task["pads"].items():
                lines += [f"  padded to {pad} words" if pad != "0" else "  not padded"] + _curve_lines(curve, "    ")
        elif name != "task4":
            lines += _curve_lines(task, "  ")
    return "\n".join(lines)


class Command(BaseCommand):
    help = ("MultiConIR's tests on the project's multi-condition items "
            "(docs/bundle-format.md#multi-condition-items-multiconir): Win Rate per k (complexity robustness), "
            "Win Rate of d_k over d_(k-1) (monotonicity), Flip Rate between query styles (format invariance) and "
            "Win Rate with documents padded to 512 and 1024 words. --judge queues an audit for the workers and waits "
            "for its report; --run computes the run's report here from its ranks (no padding: a run cannot "
            "re-rank).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True)
        who = parser.add_mutually_exclusive_group(required=True)
        who.add_argument("--judge", help="the judge to audit (its model is asked on the workers)")
        who.add_argument("--run", help="the run whose ranks are the scores")
        parser.add_argument("--pads", help="judge: comma-separated word counts for Task 4 (default 512,1024; "
                                           "'none' leaves Task 4 out)")
        parser.add_argument("--filler", help="judge: the text whose sentences Task 4 inserts between a document's "
                                             "sentences (default MultiConIR's: 'The grass is green. ...')")
        parser.add_argument("--json", action="store_true", dest="as_json", help="print the report as JSON")
        parser.add_argument("--dry-run", action="store_true",
                            help="judge: print the audit's prompts and cost estimate, ask nothing")
        parser.add_argument("--no-wait", action="store_true", help="judge: queue the audit and return")

    def handle(self, *args, project: str, judge: str | None, run: str | None, as_json: bool, dry_run: bool,
               no_wait: bool, pads: str | None, filler: str | None, **options) -> None:
        found = command_project(project)
        try:
            if run is not None:
                if dry_run or no_wait or pads is not None or filler is not None:
                    raise CommandError("--dry-run, --no-wait, --pads and --filler are for --judge: a run's report "
                                       "is computed at once")
                report = run_multicondition_report(run_by_name(project=found, name=run))
            else:
                report = self._judge(found, command_judge(found, judge), _parameters(pads, filler),
                                     dry_run=dry_run, no_wait=no_wait)
        except DomainError as exc:
            raise CommandError(str(exc)) from None
        if report is not None:
            self.stdout.write(json.dumps(report, indent=2) if as_json else report_text(report))

    def _judge(self, project: Project, judge: Judge, parameters: dict, *, dry_run: bool, no_wait: bool) -> dict | None:
        if dry_run:
            estimate = audit_estimate(project=project, judge=judge, kind=KIND, parameters=parameters, probe=True)
            self.stdout.write(f"Dry run of the multi-condition audit of {judge.name!r} (pads "
                              f"{estimate.parameters['pads']}): {estimate_text(estimate)}")
            return None
        job = audit_request(project=project, judge=judge, kind=KIND, parameters=parameters)
        self.stderr.write(f"Audit {job.id}: {job.total:,} probe(s) queued for the workers.")
        if no_wait:
            return None
        return audit_wait(self, job)

def _parameters(pads: str | None, filler: str | None) -> dict:
    parameters: dict = {}
    if pads is not None:
        try:
            parameters["pads"] = [] if pads.strip() == "none" else [int(p) for p in pads.split(",") if p.strip()]
        except ValueError:
            raise CommandError(f"--pads must be word counts separated by commas, got {pads!r}") from None
    if filler is not None:
        parameters["filler"] = filler
    return parameters

"""`manage.py completeness --project SLUG [--judge NAME] [--level 0.9] [--target 0.9] [--alpha 0.1] [--json]`: how
complete the qrels are (#33): the relevant pairs in the pool and per query, model-based and design-based, the
verified qrels' recall, and whether the stopping target is met."""
import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.management.lookup import command_project
from labeling.selectors.completeness import CompletenessOptionsError, completeness_compute, completeness_options


def _estimate(estimate: dict | None) -> str:
    if estimate is None:
        return "-"
    return f"{estimate['total']:,.1f} [{estimate['low']:,.0f}, {estimate['high']:,.0f}]"


def _recall(recall: dict) -> str:
    if recall["value"] is None:
        return "-"
    return f"{recall['value']:.3f} [{recall['low']:.3f}, {recall['high']:.3f}]"


class Command(BaseCommand):
    help = "How complete the qrels are: estimated relevant pairs (model-based and design-based), recall, stopping."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--judge", default=None, help="the judge whose calibrated P the model-based estimate "
                            "sums (default: the project's queue judge)")
        parser.add_argument("--level", default=None, help="the intervals' level (default 0.9)")
        parser.add_argument("--target", default=None, help="the stopping rule's recall target (default: the "
                            "project's, else 0.9)")
        parser.add_argument("--alpha", default=None, help="the stopping rule's alpha (default: the project's, 0.1 "
                            "unless set)")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print JSON instead of a table")

    def handle(self, *args, project: str, judge: str | None, level: str | None, target: str | None,
               alpha: str | None, as_json: bool,
               **options) -> None:
        found = command_project(project)
        try:
            report = completeness_compute(project=found, options=completeness_options(
                project=found, judge=judge, level=level, target=target, alpha=alpha))
        except CompletenessOptionsError as exc:
            raise CommandError(str(exc)) from None
        if as_json:
            self.stdout.write(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
            return
        self.stdout.write(f"{report.basis}; intervals at {report.level:.0%}")
        header = ("", "pairs", "graded", "verified relevant", "model-based R", "design-based R (sample)",
                  "recall (model)", "recall (design)", "")
        rows = [header]
        for name, row in [("pool", report.pool), *[(q.query, q.estimates) for q in report.queries]]:
            sample = f"{_estimate(row.design)} ({row.sample.size:,})"
            rows.append((name, f"{row.pairs:,}", f"{row.graded:,}", f"{row.verified_relevant:,}",
                         _estimate(row.model), sample, _recall(row.recall_model), _recall(row.recall_design),
                         "DRIFT" if row.drift else ""))
        widths = [max(len(str(row[i])) for row in rows) for i in range(len(header))]
        for row in rows:
            self.stdout.write("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip())
        stopping = report.stopping
        probability = "-" if stopping.probability is None else f"{stopping.probability:.3f}"
        self.stdout.write(f"stopping: P(recall >= {stopping.target:g}) = {probability}, target "
                          f"{'met' if stopping.met else 'not met'} (needs >= {1 - stopping.alpha:g}); knee rule: "
                          f"{'stop' if stopping.knee else 'go on'}")

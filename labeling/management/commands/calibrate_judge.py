"""`manage.py calibrate_judge --project SLUG --judge NAME`: fit a judge's calibrator on the gold pairs."""
from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.management.lookup import command_judge, command_project
from labeling.services.validation import ValidationReportError, judge_calibrate


class Command(BaseCommand):
    help = "Fit isotonic or Platt calibration of a judge's P on the gold pairs (chosen by cross-validated Brier)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--judge", required=True, help="judge name")

    def handle(self, *args, project: str, judge: str, **options) -> None:
        found = command_project(project)
        item = command_judge(found, judge)
        try:
            calibration = judge_calibrate(judge=item)
        except ValidationReportError as exc:
            raise CommandError(str(exc)) from None
        cv = calibration.cv
        self.stdout.write(
            f"Calibrated {judge!r} with {calibration.method} on {calibration.n:,} gold pairs "
            f"({calibration.n_relevant:,} relevant). Out-of-fold (5-fold) ECE {cv['raw']['ece']:.4f} -> "
            f"{cv['calibrated']['ece']:.4f}, Brier {cv['raw']['brier']:.4f} -> {cv['calibrated']['brier']:.4f}."
        )

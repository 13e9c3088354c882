"""`manage.py reannotation_sample --project SLUG --judge NAME [--per-band N] [--seed S] [--threshold T]
[--cell CELL ...] [--all-pairs] [--json]`: DIRAS App. M, the pairs to hand-check again, drawn within each cell of
the judge-vs-human confusion matrix by query and confidence band, and the agreement-vs-confidence-threshold
curves, as GET /api/projects/SLUG/validation/reannotation/ and the Validation page give them."""
import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.exceptions import DomainError
from labeling.management.lookup import command_project
from labeling.management.systems_tables import number, table_lines
from labeling.selectors.reannotation import DEFAULT_PER_BAND, reannotation_json, reannotation_report
from models_llm.metrics.reannotation import CELLS, PAPER_NAMES


class Command(BaseCommand):
    help = ("DIRAS App. M: a seeded re-annotation sample within each judge-vs-human confusion cell, per query and "
            "confidence band (> 0.9, 0.7-0.9, < 0.7), and the agreement as the confidence threshold rises.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--judge", required=True, help="the judge whose P is checked")
        parser.add_argument("--per-band", type=int, default=DEFAULT_PER_BAND,
                            help=f"pairs per cell, query and band (default {DEFAULT_PER_BAND}, the paper's)")
        parser.add_argument("--seed", type=int, default=0, help="the draw's seed (default 0)")
        parser.add_argument("--threshold", type=float, default=0.5, help="the judge says Yes from this P (0.5)")
        parser.add_argument("--cell", action="append", dest="cells", choices=list(CELLS.values()),
                            help="only this cell (repeat; default: all four)")
        parser.add_argument("--all-pairs", action="store_true",
                            help="pool pairs nobody graded count as human No (ClimRetrieve's setting)")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print JSON instead of tables")

    def handle(self, *args, project: str, judge: str, per_band: int, seed: int, threshold: float,
               cells: list[str] | None, all_pairs: bool, as_json: bool, **options) -> None:
        found = command_project(project)
        try:
            report = reannotation_report(project=found, judge=judge, threshold=threshold, per_band=per_band,
                                         seed=seed, cells=tuple(cells) if cells else None, all_pairs=all_pairs)
        except DomainError as exc:
            raise CommandError(str(exc)) from None
        if as_json:
            self.stdout.write(json.dumps(reannotation_json(report), indent=2, ensure_ascii=False))
            return
        self.stdout.write(f"Project {found.slug}, judge {judge} (Yes from P >= {threshold}): {per_band} pair(s) per "
                          f"cell, query and confidence band, seed {seed}.")
        rows = [[cell, PAPER_NAMES[cell], f"{size:,}"] for cell, size in report.cells.items()]
        for line in table_lines(["cell", "paper", "gold pairs"], rows):
            self.stdout.write(line)
        rows = [[row.query, row.doc, row.cell, row.band, f"{row.p:.3f}", f"{row.confidence:.3f}", str(row.gold)]
                for row in report.sample]
        for line in table_lines(["query", "doc", "cell", "band", "P", "confidence", "gold"], rows):
            self.stdout.write(line)
        for side, points in report.curves.items():
            self.stdout.write(f"Agreement as the confidence threshold rises ({side}):")
            rows = [[f"{point.threshold:g}", str(point.kept), number(point.remaining), number(point.agreement),
                     number(point.kappa)] for point in points]
            for line in table_lines(["confidence >=", "pairs", "remaining", "agreement", "kappa"], rows):
                self.stdout.write(line)

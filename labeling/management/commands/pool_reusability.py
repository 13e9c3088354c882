"""`manage.py pool_reusability --project SLUG [--qrels SOURCE] [--measure M] [--threshold N] [--json]`: is the pool
reusable by a system that did not feed it? Each run that fed it is left out in turn (Zobel 1998), as the Systems
page and GET /api/projects/SLUG/systems/reusability/ show it."""
import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.management.lookup import command_project
from labeling.management.systems_tables import number, table_lines
from labeling.selectors.qrels_sources import HUMAN, SystemsError
from labeling.selectors.systems_reusability import (
    DEFAULT_MEASURE,
    LEFT_OUT_MEASURES,
    RANK_THRESHOLD,
    LeftOut,
    Reusability,
    pool_reusability,
    reusability_json,
)


def _places(count: int) -> str:
    return f"{count} place{'' if count == 1 else 's'}"


def _change(row: LeftOut) -> str:
    change = row.rank_change
    return "-" if change is None else f"{change:+d}" if change else "0"


def _row(row: LeftOut) -> list[str]:
    return [row.run, f"{row.contributed:,}", f"{row.unique_relevant:,}", number(row.score),
            number(row.score_left_out), number(row.drop), str(row.rank),
            "-" if row.rank_left_out is None else str(row.rank_left_out), _change(row)]


class Command(BaseCommand):
    help = ("Leave each run that fed the pool out in turn: its score and rank without the relevant passages only it "
            "found, and whether the pool is reusable by a new system.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--qrels", default=HUMAN, metavar="SOURCE",
                            help="graded qrels: human (default), judge:NAME, combined:NAME or release:NAME")
        parser.add_argument("--measure", default=DEFAULT_MEASURE,
                            help=f"one of {', '.join(LEFT_OUT_MEASURES)} (default {DEFAULT_MEASURE})")
        parser.add_argument("--threshold", type=int, default=RANK_THRESHOLD,
                            help="flag the pool when a run left out moves by more than this many places "
                                 f"(default {RANK_THRESHOLD})")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print JSON instead of a table")

    def handle(self, *args, project: str, qrels: str, measure: str, threshold: int, as_json: bool,
               **options) -> None:
        found = command_project(project)
        try:
            reusability = pool_reusability(project=found, source=qrels, measure=measure, threshold=threshold)
        except SystemsError as exc:
            raise CommandError(str(exc)) from None
        if as_json:
            self.stdout.write(json.dumps(reusability_json(reusability), indent=2, ensure_ascii=False))
            return
        self._report(found.slug, reusability)

    def _report(self, slug: str, reusability: Reusability) -> None:
        self.stdout.write(f"Project {slug}: each run that fed the pool left out in turn, scored on the "
                          f"{reusability.source} qrels without the relevant passages only it found "
                          f"({reusability.measure}; ranks among the other runs' full scores).")
        header = ["run", "contributed pairs", "relevant found only by it", "score", "score left out", "drop", "rank",
                  "rank left out", "change"]
        for line in table_lines(header, [_row(row) for row in reusability.runs]):
            self.stdout.write(line)
        idle = [row.run for row in reusability.runs if row.score_left_out is None]
        if idle:
            self.stdout.write(f"Fed nothing to the pool (nothing to leave out): {', '.join(idle)}.")
        moved, threshold = reusability.largest_move, _places(reusability.threshold)
        if reusability.flagged:
            self.stdout.write(f"Flagged: a run left out moves by {_places(moved)} (more than {threshold}): the pool "
                              "is not reusable as it is for a new system; pool deeper, or judge more of what single "
                              "runs found.")
        else:
            self.stdout.write(f"Not flagged: no run left out moves by more than {threshold} (the largest move is "
                              f"{_places(moved)}).")

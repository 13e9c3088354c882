"""`manage.py round start --project SLUG --by USER --judge NAME --budget N [--mix uncertain=1,disagreement=1]
[--random-share 0.2]` starts a labelling round; `manage.py round list --project SLUG [--json]` lists the project's
rounds with what each bought (#33)."""
import json

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.exceptions import DomainError
from labeling.management.arguments import parse_mix
from labeling.management.lookup import command_project
from labeling.models import LabellingRound
from labeling.selectors.rounds import round_row, round_rows
from labeling.services.rounds import ROUND_RANDOM_FLOOR, round_request


class Command(BaseCommand):
    help = "Start a labelling round, or list a project's rounds."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        start = sub.add_parser("start", help="start the project's next round")
        start.add_argument("--project", required=True)
        start.add_argument("--by", required=True, help="the project admin starting it (a username)")
        start.add_argument("--judge", required=True)
        start.add_argument("--budget", type=int, required=True, help="expert labels the round waits for")
        start.add_argument("--mix", default=None, help="targeted shares, e.g. uncertain=1,disagreement=1")
        start.add_argument("--random-share", type=float, default=ROUND_RANDOM_FLOOR,
                           help=f"random validation share (at least {ROUND_RANDOM_FLOOR:g})")
        start.add_argument("--after", choices=LabellingRound.After.values, default=LabellingRound.After.CALIBRATE,
                           help="calibrate: refit the judge's calibrator (default); student: retrain its cross-encoder "
                                "student with the experts' labels, then score the pool")
        listing = sub.add_parser("list", help="the project's rounds")
        listing.add_argument("--project", required=True)
        listing.add_argument("--json", dest="as_json", action="store_true")

    def handle(self, *args, action: str, project: str, **options) -> None:
        found = command_project(project)
        if action == "start":
            user = get_user_model().objects.filter(username=options["by"]).first()
            if user is None:
                raise CommandError(f"no user {options['by']!r}")
            try:
                mix = parse_mix(options["mix"]) if options["mix"] else None
                started = round_request(project=found, by=user, judge=options["judge"], budget=options["budget"],
                                        mix=mix, random_share=options["random_share"], after=options["after"])
            except DomainError as exc:
                raise CommandError(str(exc)) from None
            row = round_row(started)
            self.stdout.write(f"Round {row['number']} started: {row['budget']:,} labels, queue mix "
                              f"{row['queue_mix']}, judge {row['judge']}")
            return
        rows = round_rows(project=found)
        if options["as_json"]:
            self.stdout.write(json.dumps(rows, indent=2, ensure_ascii=False))
            return
        for row in rows:
            recall = "-" if row["recall_model"] is None else f"{row['recall_model']:.3f}"
            self.stdout.write(f"round {row['number']}: {row['state']}; labels {row['labels'] or 0:,} of "
                              f"{row['budget']:,}; verified relevant {row['verified_relevant'] or 0:,}; recall (model) "
                              f"{recall}{'; ' + row['error'] if row['error'] else ''}")

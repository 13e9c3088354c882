"""`manage.py replay --project SLUG --judge NAME [--judge NAME ...] [--mix uncertain=80,random=20 ...] [--batch 25]
[--rounds 20] [--seeds 10] [--truth reference|trec] [--no-refit] [--target 0.9] [--alpha 0.1] [--json]`: the labelling
loop replayed on a project whose truth is known (#50): per mix and judge, the labels needed to reach a target, where
the stopping rule stops and the true recall there, the estimates' coverage of the true count, WSS@95. Writes nothing
to the project."""
import json
from dataclasses import asdict

from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.management.arguments import parse_mix
from labeling.management.lookup import command_project
from labeling.selectors.replay import ReplayInputError, replay_inputs
from labeling.services.replay import (
    REPLAY_DEFAULT_BATCH,
    REPLAY_DEFAULT_MIXES,
    REPLAY_DEFAULT_ROUNDS,
    REPLAY_DEFAULT_SEEDS,
    ReplayRequestError,
    replay_parameters,
    replay_settings,
)
from models_llm.replay.engine import ReplayError, replay
from models_llm.replay.summary import ArmSummary, summarise


def _labels(reached) -> str:
    if reached.mean is None:
        return f"not reached (0/{len(reached.per_seed)})"
    return f"{reached.mean:,.0f} ({reached.reached}/{len(reached.per_seed)})"


def _stop(arm: ArmSummary) -> str:
    stopped = [(labels, recall) for labels, recall in zip(arm.stop.labels, arm.stop.true_recall) if labels is not None]
    if not stopped:
        return "did not stop"
    labels = sum(s[0] for s in stopped) / len(stopped)
    recall = sum(s[1] or 0.0 for s in stopped) / len(stopped)
    return f"{labels:,.0f} labels, true recall {recall:.2f} ({len(stopped)}/{len(arm.stop.labels)})"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


class Command(BaseCommand):
    help = "Replay the labelling loop on a project whose truth is known: labels needed, stopping, coverage."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--judge", action="append", required=True, help="a queue judge to replay (repeat)")
        parser.add_argument("--mix", action="append", default=None,
                            help="a queue mix, STRATEGY=SHARE,... of uncertain, disagreement, random, stratified "
                                 "(repeat; default uncertain=80,random=20 and random=100)")
        parser.add_argument("--batch", type=int, default=REPLAY_DEFAULT_BATCH,
                            help="labels per round (default %(default)s)")
        parser.add_argument("--rounds", type=int, default=REPLAY_DEFAULT_ROUNDS, help="rounds (default %(default)s)")
        parser.add_argument("--seeds", type=int, default=REPLAY_DEFAULT_SEEDS,
                            help="seeds 0..N-1; seed 0 keeps the project's own random order (default %(default)s)")
        parser.add_argument("--truth", default="reference",
                            help="reference: every pair needs a reference grade; trec: pairs without one count "
                                 "irrelevant; release:NAME / release-trec:NAME: a frozen release's grades")
        parser.add_argument("--no-refit", dest="refit", action="store_false",
                            help="keep the judge's raw P (default: refit its calibrator after each round)")
        parser.add_argument("--target", type=float, default=0.9, help="the stopping rule's recall target")
        parser.add_argument("--alpha", type=float, default=0.1, help="the stopping rule's alpha")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print JSON instead of a table")

    def handle(self, *args, project: str, judge: list[str], mix: list[str] | None, batch: int, rounds: int,
               seeds: int, truth: str, refit: bool, target: float, alpha: float, as_json: bool, **options) -> None:
        found = command_project(project)
        mixes = [parse_mix(text) for text in mix] if mix else [dict(m) for m in REPLAY_DEFAULT_MIXES]
        try:
            parameters = replay_parameters(judges=judge, mixes=mixes, batch=batch, rounds=rounds, seeds=seeds,
                                           truth=truth, refit=refit, target=target, alpha=alpha)
            inputs = replay_inputs(project=found, judges=parameters["judges"], truth=truth)
            settings = replay_settings(parameters)
            runs = replay(inputs.pool, inputs.judges, settings, compare=inputs.compare, runs=inputs.runs)
        except (ReplayRequestError, ReplayInputError, ReplayError) as exc:
            raise CommandError(str(exc)) from None
        arms = summarise(runs, int(inputs.pool.pair_ids.size))
        if as_json:
            self.stdout.write(json.dumps({"project": found.slug, "truth": truth, "notes": inputs.notes,
                                          "settings": {**asdict(settings), "seeds": list(settings.seeds)},
                                          "arms": [asdict(arm) for arm in arms]}, indent=1))
            return
        for note in inputs.notes:
            self.stdout.write(note)
        header = ("mix", "judge", "to verified recall 0.9", "to exported recall 0.9", "to kappa 0.6", "to tau 0.9",
                  "stopped at", "model covers R", "design covers R", "WSS@95")
        rows = [header]
        for arm in arms:
            rows.append((",".join(f"{k}={v:g}" for k, v in arm.mix.items()), arm.judge,
                         _labels(arm.reached["verified_recall"]), _labels(arm.reached["exported_recall"]),
                         _labels(arm.reached["kappa"]),
                         _labels(arm.reached["kendall_tau"]) if inputs.runs is not None else "-", _stop(arm),
                         _share(arm.coverage["model"]), _share(arm.coverage["design"]),
                         "-" if arm.wss95 is None else f"{arm.wss95:.3f}"))
        widths = [max(len(str(row[i])) for row in rows) for i in range(len(header))]
        for row in rows:
            self.stdout.write("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip())

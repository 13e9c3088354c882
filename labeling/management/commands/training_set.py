"""`manage.py training_set --project SLUG --name NAME [--run RUN] [--top T] [--inside N] [--outside M] [--seed S]
[--held-out F]`: DIRAS's sample of a run as a training set; `--from-file CSV [--skip-bad]`: a DIRAS-layout file as one;
`--export PATH --student MODEL_FOLDER --teacher JUDGE`: a set's instruction-tuning JSONL in the student's template;
`--score-with JUDGE`: the teacher judges an existing set's pairs (a scoring job over those it has not answered)."""
import os
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.exceptions import DomainError
from labeling.llm_adapter import model_folder
from labeling.management.lookup import command_judge, command_project
from labeling.models import Project, TrainingSet
from labeling.selectors.finetune_training_sets import (
    sample_summary,
    training_set_by_name,
    training_set_jsonl,
    training_sets_of_project,
)
from labeling.selectors.runs import run_by_name
from labeling.services.finetune_training_sets import training_set_create, training_set_import, training_set_score
from models_llm.tokenizers import load_tokenizer

SAMPLING = ("run", "top", "inside", "outside")


class Command(BaseCommand):
    help = (
        "Make a training set for distillation (DIRAS section 3). By default: for each query of the run (--run, else "
        "the project's newest dense run) N passages drawn at random from within its top T and M drawn at random from "
        "the corpus outside that top (seeded; DIRAS: T 5, N 30, M 30); a query with fewer than asked on a side gives "
        "all it has and is counted. When the passages name their report (metadata 'report'), the top is each "
        "report's top T (DIRAS's code), and the held-out share defaults to DIRAS's 11 of 31 questions. The pairs "
        "enter the pool for the teacher to judge. With "
        "--from-file: a DIRAS-layout CSV with the teacher's answers (input/output, or question/document/guess/"
        "confidence). Either way the examples are split into train and held-out by query. With --export: write an "
        "existing set's JSONL (input, output, split, query, passage) in the student's chat template, the pairs "
        "answered by the teacher judge."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--name", required=True, help="the training set's name in the project")
        parser.add_argument("--run", help="the run to sample (default: the newest dense run)")
        parser.add_argument("--top", type=int,
                            help="T: the top per query (each report's top T when passages name reports; default 5)")
        parser.add_argument("--inside", type=int, help="N passages per query drawn from within the top (default 30)")
        parser.add_argument("--outside", type=int, help="M passages per query drawn from outside the top (default 30)")
        parser.add_argument("--seed", type=int, default=0, help="the draw's and the split's seed (default 0)")
        parser.add_argument("--held-out", type=float,
                            help="share of queries held out (default: 11/31, DIRAS's, for report data; else 0.2)")
        parser.add_argument("--from-file", type=Path, help="a DIRAS-layout CSV to import instead of sampling")
        parser.add_argument("--skip-bad", action="store_true", help="with --from-file: leave bad rows out")
        parser.add_argument("--export", type=Path, help="write the set's JSONL to this file")
        parser.add_argument("--student", help="with --export: the student model's folder (its chat template)")
        parser.add_argument("--teacher", help="with --export: the judge whose answers the pairs learn")
        parser.add_argument("--split", default="train", choices=["train", "held_out", "all"],
                            help="with --export: which examples (default train)")
        parser.add_argument("--score-with", metavar="JUDGE",
                            help="queue a scoring job: JUDGE (the teacher) judges the set's pairs it has not answered")

    def handle(self, *args, **options) -> None:
        project = command_project(options["project"])
        name = options["name"]
        try:
            if options["score_with"]:
                self._score(project, name, options)
                return
            if options["export"] is not None:
                self._export(project, name, options)
                return
            if options["student"] or options["teacher"]:
                raise CommandError("--student and --teacher go with --export")
            if options["from_file"] is not None:
                training_set = self._import(project, name, options)
            else:
                if options["skip_bad"]:
                    raise CommandError("--skip-bad goes with --from-file")
                run = run_by_name(project=project, name=options["run"]) if options["run"] else None
                sizes = {size: options[size] for size in ("top", "inside", "outside") if options[size] is not None}
                training_set = training_set_create(project=project, name=name, run=run, seed=options["seed"],
                                                   held_out=options["held_out"], **sizes)
        except DomainError as exc:
            raise CommandError(str(exc)) from None
        self._print(project, training_set)

    def _score(self, project: Project, name: str, options: dict) -> None:
        if any(options[option] is not None for option in (*SAMPLING, "from_file", "export")):
            raise CommandError("--score-with judges an existing set: it takes no sampling, import or export options")
        judge = command_judge(project, options["score_with"])
        job, created = training_set_score(training_set=training_set_by_name(project, name), judge=judge)
        state = "queued for the workers" if created else "resumed (the judge's running job)"
        self.stdout.write(f"Scoring job {job.id}: {judge.name!r} judges {job.total:,} pairs of training set "
                          f"{name!r}, {state}; the Judges page shows its progress.")

    def _import(self, project: Project, name: str, options: dict) -> TrainingSet:
        path = options["from_file"]
        given = [f"--{option}" for option in SAMPLING if options[option] is not None]
        if given:
            raise CommandError(f"{', '.join(given)} go with sampling a run, not with --from-file")
        try:
            handle = path.open("rb")
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror}") from None
        with handle:
            held_out = {"held_out": options["held_out"]} if options["held_out"] is not None else {}
            return training_set_import(project=project, name=name, file=handle, filename=path.name,
                                       seed=options["seed"], **held_out,
                                       skip_bad=options["skip_bad"])

    def _print(self, project: Project, training_set: TrainingSet) -> None:
        counted = training_sets_of_project(project).get(id=training_set.id)
        origins = ", ".join(f"{getattr(counted, f'{origin}_count'):,} {origin}" for origin in ("top", "random", "file")
                            if getattr(counted, f"{origin}_count"))
        self.stdout.write(self.style.SUCCESS(
            f"Stored training set {training_set.name!r} ({training_set.source}): {counted.train_count:,} train and "
            f"{counted.held_out_count:,} held-out example(s) ({origins})."
        ))
        parameters = training_set.parameters
        if "inside" in parameters:
            self.stdout.write(sample_summary(parameters))
            for short in parameters.get("short", []):
                self.stdout.write(f"  {short['query']}: {short['inside']:,} inside its top, {short['outside']:,} "
                                  "outside it: all taken")
            more = parameters.get("short_queries", 0) - len(parameters.get("short", []))
            if more > 0:
                self.stdout.write(f"  ... and {more:,} more such queries")
        for problem in training_set.parameters.get("skipped_rows", []):
            self.stdout.write(f"  skipped {problem}")
        more = training_set.parameters.get("skipped", 0) - len(training_set.parameters.get("skipped_rows", []))
        if more > 0:
            self.stdout.write(f"  ... and {more:,} more rows skipped")

    def _export(self, project: Project, name: str, options: dict) -> None:
        path = options["export"]
        if any(options[option] is not None for option in (*SAMPLING, "from_file")) or options["skip_bad"]:
            raise CommandError("--export writes an existing set: it takes no sampling or import options")
        if not options["student"]:
            raise CommandError("--export needs --student MODEL_FOLDER (the student's chat template)")
        training_set = training_set_by_name(project, name)
        teacher = command_judge(project, options["teacher"]) if options["teacher"] else None
        split = None if options["split"] == "all" else options["split"]
        folder = model_folder(options["student"], label="student model")
        try:
            tokenizer = load_tokenizer(folder)
        except OSError as exc:
            raise CommandError(f"cannot load the student's tokenizer from {folder}: {exc}") from None
        lines = training_set_jsonl(training_set, tokenizer=tokenizer, teacher=teacher, split=split)
        partial = path.with_name(path.name + ".part")
        try:
            with partial.open("w", encoding="utf-8") as out:
                for line in lines:
                    out.write(line + "\n")
            os.replace(partial, path)
        except OSError as exc:
            raise CommandError(f"cannot write {path}: {exc.strerror}") from None
        finally:
            partial.unlink(missing_ok=True)
        self.stdout.write(self.style.SUCCESS(
            f"Wrote {lines.written:,} example(s) of {training_set.name!r} ({options['split']}) to {path}"
            + (f"; left out {lines.left_out:,} pair(s) that {teacher.name!r} has not judged ok." if lines.left_out
               else ".")
        ))

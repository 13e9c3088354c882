"""`manage.py finetune_judge --project SLUG --training-set NAME --teacher JUDGE [--student lora|crossencoder]
--base MODEL_FOLDER --name STUDENT [--from-file CSV] [--epochs E] [--lora-r R] [--max-steps K] [--expert-weight W]
[--wait | --inline]`: fine-tune a student on the teacher's answers (a LoRA adapter as in DIRAS, or a cross-encoder,
whose --base may be left out for the bundled all-MiniLM-L6-v2), on the workers or here; `--resume JOB` queues a job
whose worker died again."""
import sys
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from labeling.exceptions import DomainError
from labeling.management.lookup import command_judge, command_project
from labeling.models import FineTuneJob
from labeling.selectors.finetune_training_sets import training_set_by_name
from labeling.services.finetune import (
    finetune_create,
    finetune_fail,
    finetune_request,
    finetune_resume,
    finetune_run,
)
from labeling.services.finetune_training_sets import training_set_import

# Command-line options that are settings fields of each student kind (LoraSettings, CrossEncoderSettings); the
# rest keep the kind's defaults. An option of the other kind only is refused.
SHARED_OPTIONS = {"epochs": "epochs", "max_steps": "max_steps", "learning_rate": "learning_rate",
                  "batch_size": "batch_size", "save_steps": "save_steps"}
SETTINGS_OPTIONS = {
    FineTuneJob.StudentKind.LORA: SHARED_OPTIONS | {"lora_r": "r", "micro_batch": "micro_batch",
                                                    "max_length": "source_max_length",
                                                    "target_max_length": "target_max_length"},
    FineTuneJob.StudentKind.CROSSENCODER: SHARED_OPTIONS | {"expert_weight": "expert_weight",
                                                            "max_length": "max_length"},
}


class Command(BaseCommand):
    help = ("Fine-tune a small open model on a teacher's answers: with LoRA (DIRAS App. F's settings by default: r 64, "
            "alpha 16, dropout 0.1, lr 2e-4 constant after 3% warm-up, batch 32, 2 epochs), or --student crossencoder: "
            "an encoder with a one-logit head (lr 3e-5, batch 16, 2 epochs, 256 tokens; the experts' labels replace "
            "the teacher's answer where they gave one). The teacher's answers are "
            "its judgments of the training set's train pairs (score the set with it first), or those of a DIRAS-layout "
            "file (--from-file imports it as the training set). On success the student and its bare base model become "
            "judges and score the held-out and gold pairs.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True)
        parser.add_argument("--training-set", help="the training set's name (with --from-file: the name it gets)")
        parser.add_argument("--teacher", help="the judge whose judgments are the answers (not with --from-file)")
        parser.add_argument("--student", choices=FineTuneJob.StudentKind.values, default=FineTuneJob.StudentKind.LORA,
                            help="lora (default): a LoRA adapter of a causal LM; crossencoder: an encoder with a "
                                 "one-logit head")
        parser.add_argument("--base", help="the base model's folder, under a model root (crossencoder: default the "
                                           "bundled all-MiniLM-L6-v2)")
        parser.add_argument("--name", help="the student judge's name")
        parser.add_argument("--from-file", type=Path, help="a DIRAS instruction-tuning CSV to import as the set")
        parser.add_argument("--held-out", type=float, default=0.2, help="with --from-file: share of questions held out")
        parser.add_argument("--epochs", type=float)
        parser.add_argument("--lora-r", type=int, help="lora only")
        parser.add_argument("--max-steps", type=int, help="stop after this many optimizer steps")
        parser.add_argument("--learning-rate", type=float, help="default 2e-4 (lora), 3e-5 (crossencoder)")
        parser.add_argument("--batch-size", type=int, help="effective batch (default 32 for lora, 16 for crossencoder)")
        parser.add_argument("--micro-batch", type=int, help="lora only: examples per forward pass (default 4)")
        parser.add_argument("--save-steps", type=int, help="a checkpoint every this many steps (default 20 for lora, "
                                                           "50 for crossencoder)")
        parser.add_argument("--max-length", type=int,
                            help="lora: the source (prompt) max length in tokens, a longer prompt's passage cut to fit "
                                 "(default 2048, DIRAS App. F); crossencoder: the longest pair (default 256)")
        parser.add_argument("--target-max-length", type=int,
                            help="lora only: the answer's max length in tokens, never cut (default 512, DIRAS App. F)")
        parser.add_argument("--expert-weight", type=float,
                            help="crossencoder only: the weight of a pair the experts labelled, whose target is their "
                                 "answer (default 1; 0 learns the teacher's answers only)")
        parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1...")
        how = parser.add_mutually_exclusive_group()
        how.add_argument("--wait", action="store_true", help="show progress until the job is finished")
        how.add_argument("--inline", action="store_true", help="run the job in this process, not on a worker")
        parser.add_argument("--resume", type=int, metavar="JOB", help="queue job JOB again (its worker died)")

    def handle(self, *args, project: str, wait: bool, inline: bool, resume: int | None, **options) -> None:
        found = command_project(project)
        if resume is not None:
            job = FineTuneJob.objects.filter(project=found, id=resume).first()
            if job is None:
                raise CommandError(f"project {found.slug!r} has no fine-tuning job {resume}")
            try:
                finetune_resume(job=job)
            except DomainError as exc:
                raise CommandError(str(exc)) from None
            self.stdout.write(f"Job {job.id} queued again; it goes on from step {job.checkpoint_step}.")
            if wait:
                self._wait(job)
            return
        needed = ("training_set", "name") if options["student"] == FineTuneJob.StudentKind.CROSSENCODER else (
            "training_set", "base", "name")
        missing = [f"--{key.replace('_', '-')}" for key in needed if not options[key]]
        if missing:
            raise CommandError(f"the arguments {', '.join(missing)} are required")
        job = self._create(found, inline=inline, **options)
        if inline:
            self.stdout.write(f"Job {job.id}: fine-tuning {job.student_name!r} here ({job.total_steps} steps).")
            try:
                done = finetune_run(job_id=job.id)
            except BaseException as exc:
                # No worker will take the job up again: left running, it would hold the student's name.
                finetune_fail(job_id=job.id, error=f"{type(exc).__name__}: {exc}")
                raise
            self._report(done)
            return
        self.stdout.write(f"Job {job.id}: fine-tuning {job.student_name!r} queued for the workers "
                          f"({job.total_steps} steps).")
        if wait:
            self._wait(job)

    def _create(self, project, *, inline: bool, training_set: str, teacher: str | None, base: str | None, name: str,
                from_file: Path | None, held_out: float, device: str, student: str, **options) -> FineTuneJob:
        settings = self._settings(student, options)
        if from_file is not None and teacher:
            raise CommandError("--from-file carries the teacher's answers: give no --teacher with it")
        judge = command_judge(project, teacher) if teacher else None
        try:
            if from_file is not None:
                if not from_file.is_file():
                    raise CommandError(f"{from_file}: no such file")
                with from_file.open("rb") as handle:
                    chosen = training_set_import(project=project, name=training_set, file=handle,
                                                 filename=from_file.name, held_out=held_out)
                self.stdout.write(f"Training set {chosen.name!r} imported from {from_file.name}.")
            else:
                chosen = training_set_by_name(project, training_set)
            create = finetune_create if inline else finetune_request
            return create(project=project, training_set=chosen, teacher=judge, base_model=base or "",
                          student_name=name, hyperparameters=settings, device=device, student=student)
        except DomainError as exc:
            raise CommandError(str(exc)) from None

    @staticmethod
    def _settings(student: str, options: dict) -> dict:
        """The options given, as the student kind's settings; an option the kind has no setting for is refused."""
        known = SETTINGS_OPTIONS[student]
        foreign = sorted({option for kind in SETTINGS_OPTIONS.values() for option in kind} - set(known))
        given = [f"--{option.replace('_', '-')}" for option in foreign if options[option] is not None]
        if given:
            raise CommandError(f"{', '.join(given)}: not a setting of a {student} student")
        return {field: options[option] for option, field in known.items() if options[option] is not None}

    def _wait(self, job: FineTuneJob) -> None:
        while True:
            job.refresh_from_db()
            loss = f" loss {job.loss_history[-1][1]:.4f}" if job.loss_history else ""
            eta = f" ETA {job.eta_s:.0f} s" if job.eta_s else ""
            sys.stdout.write(f"\rstep {job.step}/{job.total_steps}{loss}{eta} ({job.status})      ")
            sys.stdout.flush()
            if job.finished_at is not None:
                sys.stdout.write("\n")
                self._report(job)
                return
            time.sleep(2)

    def _report(self, job: FineTuneJob | None) -> None:
        if job is None or job.status != FineTuneJob.Status.DONE or job.student is None:
            state = "gone" if job is None else job.status + (f": {job.error}" if job.error else "")
            raise CommandError(f"Fine-tuning {state}.")
        seconds = (job.finished_at - job.started_at).total_seconds()
        last = f", last loss {job.loss_history[-1][1]:.4f}" if job.loss_history else ""
        resumed = f", resumed from step {job.resumed_from_step}" if job.resumed_from_step else ""
        stored = "model" if job.student_kind == FineTuneJob.StudentKind.CROSSENCODER else "adapter"
        self.stdout.write(f"Job {job.id} done: {job.step} steps in {seconds:.0f} s{last}{resumed}. Judge "
                          f"{job.student.name!r} made ({stored} {job.adapter}); it scores the held-out and gold pairs.")

"""Reads of training sets: a project's sets with their counts, one by name, its examples, and the instruction-tuning
JSONL of a split in a student's chat template with the teacher's answers."""
from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import islice

from django.db.models import Count, Q, QuerySet

from labeling.exceptions import DomainError, NotFound
from labeling.models import Judge, Project, RelevanceDefinition, TrainingExample, TrainingSet
from labeling.selectors.definitions import current_definitions
from labeling.selectors.finetune import chat_example, teacher_answers
from models_llm.finetune.chat import DistillFormatError, render

SPLITS = (None, *TrainingExample.Split.values)
_BATCH = 500


class TrainingExportError(DomainError):
    """A JSONL export that cannot be made as asked: no teacher for a set of pairs, a teacher of another project,
    an unknown split, a chat template that does not put the answer after the prompt."""


def training_sets_of_project(project: Project) -> QuerySet[TrainingSet]:
    """The project's sets, newest first, each annotated with its examples per split (`train_count`,
    `held_out_count`) and per origin (`top_count`, `random_count`, `file_count`)."""
    split, origin = TrainingExample.Split, TrainingExample.Origin
    return TrainingSet.objects.filter(project=project).select_related("created_by").annotate(
        train_count=Count("examples", filter=Q(examples__split=split.TRAIN)),
        held_out_count=Count("examples", filter=Q(examples__split=split.HELD_OUT)),
        top_count=Count("examples", filter=Q(examples__origin=origin.TOP)),
        random_count=Count("examples", filter=Q(examples__origin=origin.RANDOM)),
        file_count=Count("examples", filter=Q(examples__origin=origin.FILE)),
    ).order_by("-created_at", "-id")


def training_set_by_name(project: Project, name: str) -> TrainingSet:
    """The project's training set `name`, or NotFound naming the sets it has."""
    found = TrainingSet.objects.filter(project=project, name=name).first()
    if found is None:
        known = ", ".join(TrainingSet.objects.filter(project=project).order_by("name")
                          .values_list("name", flat=True)) or "none"
        raise NotFound(f"project {project.slug!r} has no training set {name!r} (its training sets: {known})")
    return found


def teacher_refusal(training_set: TrainingSet, teacher: Judge | None) -> str | None:
    """Why `teacher` may not be named for the set, or None. A set imported from a file holds its examples with the
    teacher's answers and no pair for a judge to answer: a judge named as its teacher would teach nothing, and yet
    be recorded (and compared with the student) as the teacher."""
    if teacher is None or TrainingExample.objects.filter(training_set=training_set, pair__isnull=False).exists():
        return None
    return (f"training set {training_set.name!r} was imported with its teacher's answers and holds no pair for "
            f"judge {teacher.name!r} to answer: leave the teacher out")


def _checked_split(split: str | None) -> str | None:
    if split not in SPLITS:
        raise TrainingExportError(f"the split must be one of {', '.join(TrainingExample.Split.values)}, got {split!r}")
    return split


def training_examples(training_set: TrainingSet, split: str | None = None) -> Iterator[TrainingExample]:
    """The set's examples in the order they were made (`split`: one side only), each pair example with its
    query and passage loaded."""
    rows = TrainingExample.objects.filter(training_set=training_set)
    if _checked_split(split) is not None:
        rows = rows.filter(split=split)
    return rows.select_related("pair__query", "pair__passage").order_by("id").iterator(chunk_size=2_000)


class TrainingSetJsonl(Iterator[str]):
    """training_set_jsonl's lines; as they are read, `written` counts the lines and `left_out` the pair examples
    without an answer (the teacher has no ok judgment of the pair under its query's current definition)."""

    def __init__(self, training_set: TrainingSet, *, tokenizer, teacher: Judge | None, split: str | None) -> None:
        self.written = 0
        self.left_out = 0
        self._lines = self._generate(training_set, tokenizer, teacher, split)

    def __next__(self) -> str:
        return next(self._lines)

    def _generate(self, training_set: TrainingSet, tokenizer, teacher: Judge | None,
                  split: str | None) -> Iterator[str]:
        definitions: dict[int, RelevanceDefinition] = {}
        examples = training_examples(training_set, split)
        while batch := list(islice(examples, _BATCH)):
            query_of = {example.pair_id: example.pair.query_id for example in batch if example.pair_id is not None}
            answers: dict[int, float] = {}
            if query_of:
                definitions.update(current_definitions(set(query_of.values()) - set(definitions)))
                answers = teacher_answers(teacher, query_of, definitions)
            for example in batch:
                chat = chat_example(example, answers, definitions)
                if chat is None:
                    self.left_out += 1
                    continue
                if example.pair_id is None:
                    query, passage = example.group, None
                else:
                    query, passage = example.pair.query.external_id, example.pair.passage.external_id
                try:
                    prompt, answer = render(tokenizer, chat)
                except DistillFormatError as exc:
                    raise TrainingExportError(str(exc)) from None
                self.written += 1
                yield json.dumps({"input": prompt, "output": answer, "split": example.split, "query": query,
                                  "passage": passage}, ensure_ascii=False)


def training_set_jsonl(training_set: TrainingSet, *, tokenizer, teacher: Judge | None = None,
                       split: str | None = "train") -> TrainingSetJsonl:
    """The instruction-tuning JSONL of the set's `split` (None: both) in the student's chat template (`tokenizer`):
    one line per example {"input": prompt, "output": answer, "split", "query", "passage"} with (prompt, answer) =
    chat.render. A pair example's prompt is the product's judging prompt under the query's current definition
    and its answer chat.teacher_answer of the `teacher`'s P; pairs the teacher has not judged ok are left out and
    counted (`left_out`). An imported example keeps its prompt and answer, its question as `query`."""
    _checked_split(split)
    if teacher is not None and teacher.project_id != training_set.project_id:
        raise TrainingExportError(f"judge {teacher.name!r} is not a judge of the training set's project")
    if (refusal := teacher_refusal(training_set, teacher)) is not None:
        raise TrainingExportError(refusal)
    if teacher is None:
        pairs = TrainingExample.objects.filter(training_set=training_set, pair__isnull=False)
        if split is not None:
            pairs = pairs.filter(split=split)
        if pairs.exists():
            raise TrainingExportError(
                f"training set {training_set.name!r} holds pairs: name the teacher judge whose answers they learn"
            )
    return TrainingSetJsonl(training_set, tokenizer=tokenizer, teacher=teacher, split=split)


def sample_summary(parameters: dict) -> str:
    """What a sampled set's draw gave (its parameters, as training_set_create stores them), for the command and the
    page: the passages drawn inside and outside the top, the queries that had fewer than asked, and the split."""
    top, queries = parameters["top"], parameters["queries"]
    where = f"each report's top {top}" if parameters.get("report_rule") else f"the top {top}"
    short = parameters.get("short_queries", 0)
    held = {"diras": "DIRAS's 11 of 31 questions", "default": "the default"}.get(parameters.get("held_out_rule"),
                                                                                 "as given")
    return (
        f"Drew {parameters['inside_drawn']:,} passage(s) inside {where} (asked {parameters['inside']} per query) and "
        f"{parameters['outside_drawn']:,} outside it (asked {parameters['outside']}) over {queries:,} "
        f"quer{'y' if queries == 1 else 'ies'}, seed {parameters['seed']}"
        + (f"; {short:,} quer{'y' if short == 1 else 'ies'} had fewer than asked on a side and gave all they had"
           if short else "")
        + f"; held-out share {parameters['held_out']:.3g} ({held})."
    )

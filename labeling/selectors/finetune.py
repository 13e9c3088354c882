"""Reads for distillation: a training set's examples as the chat examples a student learns (the teacher's
current answer on each pair), and the side-by-side of base model, student and teacher on the same pairs."""
from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet

from labeling.llm_adapter import pair_inputs
from labeling.models import (
    FineTuneJob,
    Judge,
    Judgment,
    Pair,
    Project,
    RelevanceDefinition,
    TrainingExample,
    TrainingSet,
)
from labeling.selectors.definitions import current_definitions
from labeling.selectors.validation import gold_set
from models_llm.backends.crossencoder import passage_side
from models_llm.finetune.chat import ChatExample, DistillFormatError, answer_p, pair_example, teacher_answer
from models_llm.finetune.crossencoder_student import CrossEncoderSettings, SoftPair, diras_fields, soft_pair_query
from models_llm.finetune.evaluation import Agreement, agreement
from models_llm.finetune.files import prompt_paragraph
from models_llm.finetune.lora import FinetuneError

BATCH = 2000


@dataclass(frozen=True)
class TeacherExamples:
    """The examples of one split with a teacher's answer, and how many pair examples had none (the teacher has not
    judged them OK under the query's current definition: they are left out, never given an invented answer)."""

    examples: list[ChatExample]
    missing: int


def teacher_answers(teacher: Judge, query_of: dict[int, int],
                    definitions: dict[int, RelevanceDefinition]) -> dict[int, float]:
    """pair id -> the judge's P of the pair (`query_of`: pair id -> query id): its newest judgment under the
    query's current definition (an imported judge's newest whatever the definition, as an ensemble takes its
    members'), when that judgment is ok. A pair without one is absent: never an invented answer."""
    usable: dict[int, tuple[str, float | None]] = {}
    pair_ids = list(query_of)
    for start in range(0, len(pair_ids), BATCH):
        rows = (Judgment.objects.filter(judge=teacher, pair_id__in=pair_ids[start:start + BATCH])
                .exclude(status=Judgment.Status.FAILED).order_by("created_at", "id")
                .values_list("pair_id", "definition_id", "status", "p_relevant"))
        for pair_id, definition_id, status, p in rows:
            current = definitions.get(query_of[pair_id])
            if teacher.is_imported or definition_id == (current.id if current is not None else None):
                usable[pair_id] = (status, p)
    return {pair_id: p for pair_id, (status, p) in usable.items() if status == Judgment.Status.OK}


def chat_example(example: TrainingExample, answers: dict[int, float],
                 definitions: dict[int, RelevanceDefinition]) -> ChatExample | None:
    """The example as the student learns it (its pair, query and passage loaded): an imported one as imported, a
    pair with the teacher's answer in the product's judging prompt under the current definition; None for a pair
    the teacher has no answer on."""
    if example.pair_id is None:
        return ChatExample(system=example.system, user=example.user, answer=example.answer,
                           passage=prompt_paragraph(example.user))
    if example.pair_id not in answers:
        return None
    current = definitions.get(example.pair.query_id)
    texts = {example.pair.query_id: current.text if current is not None else None}
    return pair_example(pair_inputs([example.pair], texts)[0], teacher_answer(answers[example.pair_id]))


def examples_of(training_set: TrainingSet, split: str | None = None) -> QuerySet[TrainingExample]:
    rows = TrainingExample.objects.filter(training_set=training_set)
    return rows.filter(split=split) if split else rows


def teacher_examples(training_set: TrainingSet, *, teacher: Judge | None, split: str = "train") -> TeacherExamples:
    """The split's examples as ChatExamples, in id order (chat_example), and the count of pairs left out."""
    rows = list(examples_of(training_set, split).select_related("pair__query", "pair__passage").order_by("id"))
    query_of = {row.pair_id: row.pair.query_id for row in rows if row.pair_id is not None}
    definitions = current_definitions(set(query_of.values())) if query_of else {}
    answers = teacher_answers(teacher, query_of, definitions) if teacher is not None and query_of else {}
    examples = [chat_example(row, answers, definitions) for row in rows]
    return TeacherExamples(examples=[e for e in examples if e is not None],
                           missing=sum(e is None for e in examples))


@dataclass(frozen=True)
class StudentPairs:
    """A split's examples as a cross-encoder student learns them (in id order): `experts` of them carry an expert's
    binary answer instead of the teacher's P; `missing` pairs had neither (left out, never given an invented
    target)."""

    pairs: list[SoftPair]
    experts: int
    missing: int


def expert_answers(project: Project) -> dict[int, float]:
    """pair id -> the experts' answer binarised at the scale's `relevant_from` (1.0 relevant, 0.0 not): the pairs
    with a gold grade (labels agreed or adjudicated, or a reference grade)."""
    gold = gold_set(project)
    relevant_from = project.label_scale.relevant_from
    return {int(pair_id): float(grade >= relevant_from) for pair_id, grade in zip(gold.pair_ids, gold.gold)}


def student_pairs(training_set: TrainingSet, *, teacher: Judge | None, settings: CrossEncoderSettings,
                  split: str = "train") -> StudentPairs:
    """The split's examples as SoftPairs: a pair of the project with the experts' answer (weight
    settings.expert_weight) where they have one, else the teacher's P under the query's current definition (weight
    1); an imported DIRAS prompt with its teacher's P, its definition, question and paragraph read from the prompt.
    FinetuneError names an imported example that is not in DIRAS's layout."""
    rows = list(examples_of(training_set, split).select_related("pair__query", "pair__passage").order_by("id"))
    query_of = {row.pair_id: row.pair.query_id for row in rows if row.pair_id is not None}
    definitions = current_definitions(set(query_of.values())) if query_of else {}
    answers = teacher_answers(teacher, query_of, definitions) if teacher is not None and query_of else {}
    experts = expert_answers(training_set.project) if query_of and settings.expert_weight > 0 else {}
    pairs, n_experts, missing = [], 0, 0
    for row in rows:
        if row.pair_id is None:
            try:
                definition, question, paragraph = diras_fields(row.user)
                target = row.teacher_p if row.teacher_p is not None else answer_p(row.answer)
            except (FinetuneError, DistillFormatError) as exc:
                raise FinetuneError(f"training example {row.id} ({row.group[:80]!r}): {exc}") from None
            pairs.append(SoftPair(query=soft_pair_query(question, definition, settings), passage=paragraph,
                                  target=float(target)))
            continue
        if row.pair_id in experts:
            target, weight = experts[row.pair_id], settings.expert_weight
            n_experts += 1
        elif row.pair_id in answers:
            target, weight = answers[row.pair_id], 1.0
        else:
            missing += 1
            continue
        current = definitions.get(row.pair.query_id)
        pair = pair_inputs([row.pair], {row.pair.query_id: current.text if current is not None else None})[0]
        pairs.append(SoftPair(query=soft_pair_query(pair.query, pair.definition, settings),
                              passage=passage_side(pair), target=float(target), weight=weight))
    return StudentPairs(pairs=pairs, experts=n_experts, missing=missing)


@dataclass(frozen=True)
class JudgeColumn:
    """One judge on the compared pairs: against the teacher's guess (held-out pairs), against the experts' gold."""

    role: str
    judge: Judge | None
    versus_teacher: Agreement | None
    versus_gold: Agreement


@dataclass(frozen=True)
class Comparison:
    """Base model, student and teacher on the same pairs: the training set's held-out pairs that all three
    judged, and the project's gold pairs that all three judged."""

    pairs: int
    gold_pairs: int
    columns: list[JudgeColumn]


def distill_comparison(job: FineTuneJob) -> Comparison | None:
    """The side-by-side for a job whose student exists (None otherwise); a judge that is gone (the teacher
    deleted) leaves its column empty and does not narrow the others' pairs."""
    student = job.student
    if student is None:
        return None
    base = Judge.objects.filter(project=job.project, name=base_judge_name(student.name)).first()
    judges = [("base model", base), ("student", student), ("teacher", job.teacher)]
    project = job.project
    held_out = list(examples_of(job.training_set, TrainingExample.Split.HELD_OUT)
                    .filter(pair__isnull=False).values_list("pair_id", flat=True))
    gold = gold_set(project)
    relevant_from = project.label_scale.relevant_from
    gold_label = {int(pair_id): int(grade >= relevant_from) for pair_id, grade in zip(gold.pair_ids, gold.gold)}
    present = [(role, judge) for role, judge in judges if judge is not None]
    query_of = dict(Pair.objects.filter(id__in=held_out + list(gold_label)).values_list("id", "query_id"))
    definitions = current_definitions(set(query_of.values()))
    probs = {role: teacher_answers(judge, query_of, definitions) for role, judge in present}
    common = [pair_id for pair_id in held_out if all(pair_id in p for p in probs.values())]
    learnt = _learnt_gold(job)
    common_gold = [pair_id for pair_id in gold_label
                   if pair_id not in learnt and all(pair_id in p for p in probs.values())]
    teacher = probs.get("teacher")
    reference = [int(teacher[pair_id] >= 0.5) for pair_id in common] if teacher is not None else None
    columns = []
    for role, judge in judges:
        if judge is None:
            columns.append(JudgeColumn(role=role, judge=None, versus_teacher=None, versus_gold=agreement([], [])))
            continue
        p = probs[role]
        columns.append(JudgeColumn(
            role=role, judge=judge,
            versus_teacher=(agreement([p[i] for i in common], reference)
                            if reference is not None and role != "teacher" else None),
            versus_gold=agreement([p[i] for i in common_gold], [gold_label[i] for i in common_gold]),
        ))
    return Comparison(pairs=len(common), gold_pairs=len(common_gold), columns=columns)


def _learnt_gold(job: FineTuneJob) -> set[int]:
    """The train-split pairs a cross-encoder student learnt the experts' answer on: compared on them against the
    gold, it would be marked on its own training targets."""
    if job.student_kind != FineTuneJob.StudentKind.CROSSENCODER or not (job.hyperparameters or {}).get(
            "expert_weight", 1.0):
        return set()
    return set(examples_of(job.training_set, TrainingExample.Split.TRAIN).filter(pair__isnull=False)
               .values_list("pair_id", flat=True))


def base_judge_name(student_name: str) -> str:
    """The judge that runs the student's base model without the adapter (for the side-by-side)."""
    return f"{student_name} (base)"


# A student's name leaves room in a judge's name for the suffix of its base model's judge.
STUDENT_NAME_MAX_LENGTH = Judge._meta.get_field("name").max_length - len(base_judge_name(""))


# The side-by-sides a page computes on each visit (each reads the judgments of three judges).
COMPARED_JOBS = 5


def student_comparisons(project: Project, limit: int = COMPARED_JOBS) -> list[tuple[FineTuneJob, Comparison]]:
    """The newest done fine-tuning jobs whose student exists, with their side-by-side."""
    jobs = (FineTuneJob.objects.filter(project=project, status=FineTuneJob.Status.DONE, student__isnull=False)
            .select_related("project", "training_set", "teacher", "student").order_by("-id")[:limit])
    return [(job, comparison) for job in jobs if (comparison := distill_comparison(job)) is not None]

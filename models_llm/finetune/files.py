"""DIRAS's instruction-tuning files (section 3.2: a GPT-4 teacher's answers on ASQA, QAMPARI and RAG-Bench) read
as examples of one prompt shape: the system and user turns DIRAS's prompts have, and the teacher's answer.

Two layouts: `input`, `output` (ASQA: whole prompts in Llama-3's chat template), and `question`, `document`
with the teacher's `guess` and `confidence` (or its whole `answers`) (QAMPARI, RAG-Bench), whose prompts are
built here with the wording and the generic background text of the ASQA prompts."""
from __future__ import annotations

import csv
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from models_llm.finetune.chat import DistillFormatError, answer_p, clean_answer, parse_llama3_prompt
from models_llm.parsing import AnswerParseError, AskAnswer, parse_ask_answer

MAX_ROWS = 1_000_000
# csv's own limit (128 KiB a field) is below some prompts; a field past this is a broken quote, not a paragraph.
MAX_FIELD_CHARS = 8 * 1024 * 1024
SHOWN_PROBLEMS = 20

PROMPTS = "prompts"  # layout A: input, output
ANSWERS = "answers"  # layout B: question, document, guess and confidence (or answers)

# DIRAS's wording, copied from the ASQA prompts (the two spaces after the first sentence included).
SYSTEM = "You are a helpful assistant in identifying useful information for question answering."
BACKGROUND = (
    "The <paragraph> is useful only if some of its content directly answer the <question> or at least a part of "
    "the <question>. Content with relevant topic but without direct answers are not useful."
)
_INTRO = (
    "You will be provided with a <question> and a <paragraph>.  Your job is to assess whether the <paragraph> is "
    "useful in answering the <question>, given the <background_information> defining what is useful.\n\n"
)
_ASK = (
    "\n\n\nIs <paragraph> useful for answering <question>? Provide your best guess and your confidence that the "
    "guess is correct. Reply in the following format:\n"
    '[Guess]: <Your most likely guess, should be one of "Yes" or "No".>\n'
    "[Confidence]: <Give your honest confidence score between 0.0 and 1.0 about the correctness of your guess. 0 "
    "means your previous guess is very likely to be wrong, and 1 means you are very confident about the guess.>"
)
_QUESTION_LINE = re.compile(r'^<question>: "(.*)"$', re.MULTILINE)
# The paragraph of a DIRAS prompt: from `<paragraph>: "` to the closing quote before the question that asks about it
# (the released code's TRAIN_PROMPT and the ASQA prompts: `"\n\n\nIs <paragraph> ...`).
_PARAGRAPH = re.compile(r'<paragraph>: "(.*)"\s*\n\s*Is <paragraph>', re.DOTALL)
_NUMBER = re.compile(r"[0-9]*\.?[0-9]+")


@dataclass(frozen=True)
class FileExample:
    """One imported example: the prompt's turns, the teacher's answer and its P(relevant), and the group the
    split keeps on one side (the question)."""

    system: str
    user: str
    answer: str
    p: float
    group: str


@dataclass(frozen=True)
class SkippedRow:
    line: int
    reason: str


@dataclass(frozen=True)
class FileRead:
    """The examples of a file in file order; `skipped`: the rows left out when bad rows were to be skipped."""

    layout: str
    examples: tuple[FileExample, ...]
    skipped: tuple[SkippedRow, ...] = ()


def diras_user(question: str, paragraph: str, background: str = BACKGROUND) -> str:
    """DIRAS's user turn for a question and a paragraph (the ASQA prompts' wording and format)."""
    return (f'{_INTRO}<background_information>: "{background}"\n<question>: "{question}"\n'
            f'<paragraph>: "{paragraph}"{_ASK}')


def prompt_paragraph(user: str) -> str:
    """The paragraph of a user turn in DIRAS's layout (the part of the prompt the fine-tuning may cut to fit its
    source length), or "" when the turn holds none."""
    found = _PARAGRAPH.search(user)
    return found.group(1) if found else ""


def prompt_question(user: str) -> str:
    """The question of a DIRAS user turn (its `<question>: "..."` line), or the whole turn when it has none."""
    found = _QUESTION_LINE.search(user)
    return found.group(1) if found else user


def _layout(header: list[str], name: str) -> str:
    columns = set(header)
    if {"input", "output"} <= columns:
        return PROMPTS
    if {"question", "document"} <= columns and ({"guess", "confidence"} <= columns or "answers" in columns):
        return ANSWERS
    raise DistillFormatError(
        f"{name}:1: unknown layout, columns {header}: expected input and output (prompts in Llama-3's chat "
        "template), or question and document with guess and confidence (or answers)"
    )


def _prompt_row(fields: dict[str, str]) -> FileExample:
    system, user = parse_llama3_prompt(fields["input"])
    if not user.strip():
        raise DistillFormatError("the user turn of the input is empty")
    answer = clean_answer(fields["output"])
    if not answer:
        raise DistillFormatError("the output (the teacher's answer) is empty")
    return FileExample(system=system, user=user, answer=answer, p=answer_p(answer), group=prompt_question(user))


def _guess(text: str) -> bool:
    word = text.strip().removesuffix(".").strip().lower()
    if word not in ("yes", "no"):
        raise DistillFormatError(f"the guess {text[:40]!r} is neither Yes nor No")
    return word == "yes"


def _confidence(text: str) -> float:
    number = text.strip().removesuffix(".").strip()
    if not _NUMBER.fullmatch(number):
        raise DistillFormatError(f"the confidence {text[:40]!r} is not a number")
    value = float(number)
    if not 0.0 <= value <= 1.0 or math.isnan(value):
        raise DistillFormatError(f"the confidence {number} is outside [0, 1]")
    return value


def _answers_row(fields: dict[str, str]) -> FileExample:
    # As the file has them: DIRAS put the texts into its prompts unchanged.
    question, document = fields["question"], fields["document"]
    if not question.strip():
        raise DistillFormatError("the question is empty")
    if not document.strip():
        raise DistillFormatError("the document is empty")
    if "guess" in fields and "confidence" in fields:
        read = AskAnswer(guess=_guess(fields["guess"]), confidence=_confidence(fields["confidence"]))
    else:
        try:
            read = parse_ask_answer(fields["answers"])
        except AnswerParseError as exc:
            raise DistillFormatError(f"the answers {fields['answers'][:80]!r} cannot be read: {exc}") from None
    # One answer shape for every file: "Yes"/"No" without the teachers' stray full stops, the confidence as a
    # plain number ("0.95." -> "0.95").
    answer = f"[Guess]: {'Yes' if read.guess else 'No'}\n\n[Confidence]: {read.confidence}"
    return FileExample(system=SYSTEM, user=diras_user(question, document), answer=answer, p=read.p_relevant,
                       group=question)


def _summary(name: str, problems: list[SkippedRow]) -> str:
    lines = [f"{name}:{row.line}: {row.reason}" for row in problems[:SHOWN_PROBLEMS]]
    if len(problems) > SHOWN_PROBLEMS:
        lines.append(f"... and {len(problems) - SHOWN_PROBLEMS} more problems")
    return "\n".join(lines)


def read_file_examples(lines: Iterable[str], *, name: str, skip_bad: bool = False,
                       max_rows: int = MAX_ROWS) -> FileRead:
    """The examples of a DIRAS-layout CSV given as text lines (a file opened with newline=""); `name` names it in
    the problems. Every bad row is a problem `name:line: what is wrong` (the line its record starts on), raised
    together as one DistillFormatError; with `skip_bad` the bad rows are left out and returned in `skipped`
    instead. No label is ever guessed: a row without a readable answer is bad. An unknown layout, a broken CSV
    record, a field over MAX_FIELD_CHARS or more than `max_rows` rows stop the reading whatever `skip_bad` says."""
    if csv.field_size_limit() < MAX_FIELD_CHARS:
        csv.field_size_limit(MAX_FIELD_CHARS)
    reader = csv.reader(lines)
    try:
        header = next(reader, None)
    except csv.Error as exc:
        raise DistillFormatError(f"{name}:1: {exc}") from None
    if header is None:
        raise DistillFormatError(f"{name}: the file is empty")
    layout = _layout(header, name)
    parse = _prompt_row if layout == PROMPTS else _answers_row
    examples: list[FileExample] = []
    problems: list[SkippedRow] = []
    line = reader.line_num + 1
    rows = 0
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise DistillFormatError(f"{name}:{line}: {exc}") from None
        start, line = line, reader.line_num + 1
        if not row:
            continue  # a blank line
        rows += 1
        if rows > max_rows:
            raise DistillFormatError(f"{name}:{start}: more than {max_rows:,} rows; split the file")
        try:
            if len(row) != len(header):
                raise DistillFormatError(f"{len(row)} fields, the header has {len(header)}")
            examples.append(parse(dict(zip(header, row))))
        except DistillFormatError as exc:
            problems.append(SkippedRow(line=start, reason=str(exc)))
    if problems and not skip_bad:
        raise DistillFormatError(_summary(name, problems))
    return FileRead(layout=layout, examples=tuple(examples), skipped=tuple(problems))

"""DIRAS's instruction-tuning files (excerpts in data/diras-distill/) read as one prompt shape, checked against the
CSV read with the csv module and string operations; the problems a bad file reports; the split by group; and
an ASQA example re-templated for SmolLM2, token by token."""
import csv
import io
from pathlib import Path

import pytest
from django.conf import settings
from transformers import AutoTokenizer

from models_llm.bundled import smollm2_folder
from models_llm.finetune.chat import IGNORE, ChatExample, DistillFormatError, encode
from models_llm.finetune.files import ANSWERS, PROMPTS, prompt_paragraph, read_file_examples
from models_llm.finetune.split import held_out_count, split_groups

DATA = Path(__file__).resolve().parents[3] / "data" / "diras-distill"
LLAMA_USER = "<|start_header_id|>user<|end_header_id|>\n\n"
LLAMA_SYSTEM = "<|start_header_id|>system<|end_header_id|>\n\n"


def rows(name: str) -> list[dict[str, str]]:
    with (DATA / name).open(newline="") as handle:
        return list(csv.DictReader(handle))


def read(name: str, **options):
    with (DATA / name).open(newline="") as handle:
        return read_file_examples(handle, name=name, **options)


def asqa_turns(text: str) -> tuple[str, str]:
    """The system and user turns of an ASQA input, cut out by hand."""
    system = text.split(LLAMA_SYSTEM, 1)[1].split("<|eot_id|>", 1)[0]
    user = text.split(LLAMA_USER, 1)[1].split("<|eot_id|>", 1)[0]
    return system, user


def question_and_paragraph(user: str) -> tuple[str, str]:
    question = user.split('\n<question>: "', 1)[1].split('"\n<paragraph>: "', 1)[0]
    paragraph = user.split('"\n<paragraph>: "', 1)[1].rsplit('"\n\n\nIs <paragraph>', 1)[0]
    return question, paragraph


def hand_p(guess: str, confidence: str) -> float:
    value = float(confidence)
    return value if guess == "Yes" else 1.0 - value


def test_asqa_prompts_are_read_back_into_their_turns():
    found = read("asqa_train_data.csv")
    expected = rows("asqa_train_data.csv")
    assert found.layout == PROMPTS and len(found.examples) == len(expected) == 20
    for example, row in zip(found.examples, expected):
        system, user = asqa_turns(row["input"])
        answer = row["output"].removesuffix("<|eot_id|>").strip()
        guess = answer.split("[Guess]: ", 1)[1].split("\n", 1)[0].rstrip(".")
        confidence = answer.split("[Confidence]: ", 1)[1].rstrip(".")
        assert (example.system, example.user, example.answer) == (system, user, answer)
        assert example.p == pytest.approx(hand_p(guess, confidence))
        assert example.group == question_and_paragraph(user)[0]
    first = found.examples[0]
    assert first.answer == "[Guess]: Yes\n\n[Confidence]: 0.9" and first.p == pytest.approx(0.9)
    assert len({example.group for example in found.examples}) == 4


@pytest.mark.parametrize("name", ["qampari_train_data.csv", "rag_bench_train_data.csv"])
def test_question_document_files_get_the_asqa_prompt_shape(name):
    """The prompt is ASQA's, its question and paragraph put in; the answer is the guess and the confidence without
    the teacher's full stops."""
    asqa_system, asqa_user = asqa_turns(rows("asqa_train_data.csv")[0]["input"])
    asqa_question, asqa_paragraph = question_and_paragraph(asqa_user)
    found = read(name)
    expected = rows(name)
    assert found.layout == ANSWERS and len(found.examples) == len(expected) == 20
    for example, row in zip(found.examples, expected):
        guess, confidence = row["guess"].rstrip("."), row["confidence"].rstrip(".")
        user = asqa_user.replace(f'"{asqa_question}"', f'"{row["question"]}"', 1).replace(
            f'"{asqa_paragraph}"', f'"{row["document"]}"', 1)
        assert (example.system, example.user) == (asqa_system, user)
        assert example.answer == f"[Guess]: {guess}\n\n[Confidence]: {confidence}"
        assert example.p == pytest.approx(hand_p(guess, confidence))
        assert example.group == row["question"]


def test_a_no_with_095_is_p_005():
    first = read("qampari_train_data.csv").examples[0]
    assert rows("qampari_train_data.csv")[0]["guess"] == "No." and rows("qampari_train_data.csv")[0]["confidence"] == "0.95."
    assert first.answer == "[Guess]: No\n\n[Confidence]: 0.95" and first.p == pytest.approx(0.05)


def test_the_whole_answers_column_gives_the_same_examples():
    """A file with the teacher's whole answer and no guess and confidence columns is read from the answer text."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["question", "document", "answers"])
    writer.writerows([row["question"], row["document"], row["answers"]] for row in rows("qampari_train_data.csv"))
    from_answers = read_file_examples(io.StringIO(out.getvalue(), newline=""), name="answers.csv")
    assert from_answers.examples == read("qampari_train_data.csv").examples


def csv_text(header: list[str], records: list[list[str]]) -> tuple[str, list[int]]:
    """The CSV text and the line each record starts on, counted by hand."""
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    starts = []
    for record in records:
        starts.append(out.getvalue().count("\n") + 1)
        writer.writerow(record)
    return out.getvalue(), starts


def test_every_bad_row_is_reported_with_its_file_and_line():
    text, starts = csv_text(["question", "document", "guess", "confidence"], [
        ["q1", "a paragraph\nover\nthree lines", "Yes.", "0.9."],
        ["q1", "fine", "Maybe", "0.9"],
        ["q2", "fine", "No", "1.5"],
        ["q2", "", "No", "0.8"],
        ["", "fine", "No", "0.8"],
        ["q3", "fine", "Yes", "high"],
        ["q3", "fine", "Yes", "1.0"],
    ])
    with pytest.raises(DistillFormatError) as caught:
        read_file_examples(io.StringIO(text, newline=""), name="bad.csv")
    assert str(caught.value).splitlines() == [
        f"bad.csv:{starts[1]}: the guess 'Maybe' is neither Yes nor No",
        f"bad.csv:{starts[2]}: the confidence 1.5 is outside [0, 1]",
        f"bad.csv:{starts[3]}: the document is empty",
        f"bad.csv:{starts[4]}: the question is empty",
        f"bad.csv:{starts[5]}: the confidence 'high' is not a number",
    ]
    assert starts[1] == 5  # the first record spans lines 2 to 4
    skipped = read_file_examples(io.StringIO(text, newline=""), name="bad.csv", skip_bad=True)
    assert [example.group for example in skipped.examples] == ["q1", "q3"]
    assert [row.line for row in skipped.skipped] == starts[1:6]


def test_an_unreadable_asqa_answer_is_an_error_not_a_label():
    asqa = rows("asqa_train_data.csv")[:3]
    broken = [[asqa[0]["input"], asqa[0]["output"]], [asqa[1]["input"], "I think so.<|eot_id|>"],
              [asqa[2]["input"], "[Guess]: Yes\n\n[Confidence]: 1.2<|eot_id|>"], ["no chat template here", "[Guess]: Yes"]]
    text, starts = csv_text(["input", "output"], broken)
    with pytest.raises(DistillFormatError) as caught:
        read_file_examples(io.StringIO(text, newline=""), name="asqa.csv")
    lines = str(caught.value).splitlines()
    assert [line.split(": ", 1)[0] for line in lines] == [f"asqa.csv:{line}" for line in starts[1:]]
    assert "cannot be read" in lines[0] and "outside [0, 1]" in lines[1] and "one user turn" in lines[2]


def test_an_unknown_layout_names_the_columns_it_found():
    with pytest.raises(DistillFormatError, match=r"^x\.csv:1: unknown layout, columns \['query', 'text'\]"):
        read_file_examples(io.StringIO("query,text\nq,t\n", newline=""), name="x.csv")
    with pytest.raises(DistillFormatError, match="empty"):
        read_file_examples(io.StringIO("", newline=""), name="x.csv")


def test_the_row_guard_stops_a_file_too_long():
    text, starts = csv_text(["question", "document", "guess", "confidence"], [["q", "d", "Yes", "1"]] * 3)
    with pytest.raises(DistillFormatError, match=rf"^x\.csv:{starts[2]}: more than 2 rows"):
        read_file_examples(io.StringIO(text, newline=""), name="x.csv", max_rows=2)


@pytest.mark.parametrize(("groups", "share", "held"), [
    (10, 0.2, 2), (10, 0.25, 2), (5, 0.3, 2), (2, 0.1, 1), (3, 0.9, 2), (1, 0.5, 0), (7, 0.0, 0), (0, 0.2, 0),
])
def test_the_held_out_count(groups, share, held):
    # By hand: round(share * n) (half to even: 0.25 * 10 = 2.5 -> 2), at least 1 of 2 or more, never all.
    assert held_out_count(groups, share) == held
    names = [f"g{i}" for i in range(groups)]
    assert len(split_groups(names, share, seed=3)) == held


def test_split_groups_is_a_seeded_draw_of_whole_groups():
    names = [f"query-{i}" for i in range(20)]
    examples = [name for name in names for _ in range(3)]
    held = split_groups(examples, 0.25, seed=7)
    assert held <= set(names) and len(held) == 5
    assert split_groups(list(reversed(examples)), 0.25, seed=7) == held  # the input's order does not matter
    assert len({frozenset(split_groups(names, 0.25, seed=seed)) for seed in range(10)}) > 1


@pytest.fixture(scope="module")
def smollm2():
    return AutoTokenizer.from_pretrained(smollm2_folder(settings.VAR_DIR), local_files_only=True)


def test_an_asqa_example_in_smollm2s_template_token_by_token(smollm2):
    example = read("asqa_train_data.csv").examples[0]
    prompt = (f"<|im_start|>system\n{example.system}<|im_end|>\n<|im_start|>user\n{example.user}<|im_end|>\n"
              "<|im_start|>assistant\n")
    whole = prompt + example.answer + "<|im_end|>\n"
    expected = smollm2(whole, add_special_tokens=False)["input_ids"]
    prompt_tokens = len(smollm2(prompt, add_special_tokens=False)["input_ids"])
    encoded = encode(smollm2, ChatExample(example.system, example.user, example.answer), source_max=4096)
    assert list(encoded.input_ids) == expected
    assert list(encoded.labels) == [IGNORE] * prompt_tokens + expected[prompt_tokens:]
    assert smollm2.decode(expected[prompt_tokens:]) == example.answer + "<|im_end|>\n"


@pytest.mark.parametrize("name", ["asqa_train_data.csv", "qampari_train_data.csv"])
def test_a_files_prompt_over_the_source_length_has_its_paragraph_cut(smollm2, name):
    """DIRAS App. F's source max length on an imported prompt: the paragraph between `<paragraph>: "` and its
    closing quote is the part cut; the background, the question, the instruction and the answer stay whole."""
    example = read(name).examples[0]
    paragraph = prompt_paragraph(example.user)
    assert paragraph and f'<paragraph>: "{paragraph}"\n\n\nIs <paragraph>' in example.user
    chat = ChatExample(example.system, example.user, example.answer, passage=paragraph)
    whole = encode(smollm2, chat, source_max=10**6)
    prompt_tokens = sum(label == IGNORE for label in whole.labels)
    limit = prompt_tokens - 40  # by hand: 40 tokens too many, all taken from the paragraph
    cut = encode(smollm2, chat, source_max=limit)
    assert cut.truncated and limit - 8 <= sum(label == IGNORE for label in cut.labels) <= limit
    learnt = [token for token, label in zip(cut.input_ids, cut.labels) if label != IGNORE]
    assert smollm2.decode(learnt) == example.answer + "<|im_end|>\n"
    before, after = example.user.split(f'"{paragraph}"')
    shown = smollm2.decode(cut.input_ids)
    assert before in shown and after in shown
    kept = shown[shown.index(before) + len(before) + 1:shown.index(after) - 1]
    assert paragraph.startswith(kept) and len(kept) < len(paragraph)

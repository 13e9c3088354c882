"""DIRAS's published prompts as presets. The general-QA preset is checked word for word against the prompts the
DIRAS authors trained on (data/diras-distill/asqa_train_data.csv, in Llama-3's chat template); the teacher's
answers there parse to the guess and confidence of their own columns; the probability variant's
`[Probability Helpful]` is read, and a missing or out-of-range one is a parse error, never a label."""
from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from models_llm.backends.openai import OpenAIScorer
from models_llm.parsing import AnswerParseError, parse_answer, parse_ask_answer, parse_probability_answer
from models_llm.prompts import PRESETS, TemplateError, build_prompt, preset_get, template_validate
from models_llm.types import JudgeConfig, PairInput
from tests.models_llm.fake_openai import FakeOpenAI, Reply, completion

DISTILL = Path(__file__).resolve().parents[2] / "data" / "diras-distill"
LLAMA3 = re.compile(
    r"^<\|begin_of_text\|><\|start_header_id\|>system<\|end_header_id\|>\n\n(?P<system>.*?)<\|eot_id\|>"
    r"<\|start_header_id\|>user<\|end_header_id\|>\n\n(?P<user>.*?)<\|eot_id\|>"
    r"<\|start_header_id\|>assistant<\|end_header_id\|>\n\n$", re.DOTALL)
FIELDS = re.compile(r'<background_information>: "(?P<definition>.*?)"\n<question>: "(?P<question>.*?)"\n'
                    r'<paragraph>: "(?P<paragraph>.*?)"\n\n\n', re.DOTALL)


def _rows(name: str) -> list[dict[str, str]]:
    with (DISTILL / name).open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _config(preset: str, **overrides) -> JudgeConfig:
    values = {"backend": "hf", "model": "m", "method": "ask", "template": PRESETS[preset].template,
              "use_definition": PRESETS[preset].use_definition}
    values.update(overrides)
    return JudgeConfig(**values)


PAIR = PairInput(7, "What is the transition plan's 2030 target?", 'Our 2030 target is {net zero} "in scope 1".',
                 "Targets for emissions reductions, with a year.")


# ----- the published wording -----

@pytest.mark.parametrize("row", _rows("asqa_train_data.csv"), ids=lambda row: row["input"][300:330])
def test_the_general_qa_preset_is_the_prompt_diras_trained_on(row):
    chat = LLAMA3.match(row["input"])
    fields = FIELDS.search(chat["user"])
    pair = PairInput(1, fields["question"], fields["paragraph"], fields["definition"])
    prompt = build_prompt(pair, _config("diras-general-qa"))
    assert prompt.system == chat["system"]
    assert prompt.user == chat["user"]


def test_the_teachers_answers_parse_to_their_own_guess_and_confidence_columns():
    for row in _rows("asqa_train_data.csv"):
        answer = parse_ask_answer(row["output"].removesuffix("<|eot_id|>"))
        assert answer.confidence == float(re.search(r"\[Confidence\]: ([0-9.]+)", row["output"])[1].rstrip("."))
    for name in ("qampari_train_data.csv", "rag_bench_train_data.csv"):
        for row in _rows(name):
            answer = parse_ask_answer(row["answers"])
            assert answer.guess is (row["guess"].strip(". ").lower() == "yes")
            assert answer.confidence == float(row["confidence"].strip().rstrip("."))


def test_the_definition_preset_is_figure_9_in_diras_order():
    user = build_prompt(PAIR, _config("diras-definition")).user
    parts = ["<background_information> that explains the <question>", f'<background_information>: "{PAIR.definition}"',
             f'<question>: "{PAIR.query}"', f'<paragraph>: "{PAIR.passage}"', "Is <paragraph> helpful for answering",
             "[Guess]:", "[Confidence]:"]
    assert [user.index(part) for part in parts] == sorted(user.index(part) for part in parts)
    assert "[Reason]" not in user
    cot = build_prompt(PAIR, _config("diras-definition", cot=True)).user
    assert cot.index("[Reason]: <Reason why and how the paragraph is helpful") < cot.index("[Guess]:")


def test_the_no_definition_preset_is_figure_11_without_background_information():
    preset = preset_get("diras-no-definition")
    assert preset.use_definition is False
    user = build_prompt(PAIR, _config("diras-no-definition")).user
    assert "background_information" not in user and PAIR.definition not in user
    assert f'<question>: "{PAIR.query}"' in user and "[Guess]:" in user
    # Fig. 11 as printed, then Fig. 9's output requirements ("{Same output requirements}")
    assert user.startswith("You will be provided with a <question> the analyst seeks to answer, and a <paragraph> "
                           "extracted from a lengthy report. Your job is to assess whether the <paragraph> is useful "
                           "in answering the <question>.\n\n")
    assert user.endswith(FIG9_ASK + FIG9_GUESS + FIG9_CONFIDENCE)


# The paper's sentences, copied from /work/shared/papers/diras.txt (Fig. 9, Fig. 10) and joined where the
# two-column print wraps them.
FIG9_ASK = ("Is <paragraph> helpful for answering <question>?\nNote that the <paragraph> can be helpful even if it "
            "only addresses part of the <question> without fully answering it. Provide your best guess for this "
            "question and your confidence that the guess is correct. Reply in the following format:\n")
FIG9_REASON = ("[Reason]: <Reason why and how the paragraph is helpful or not helpful for answering the question. "
               "Clearly indicate your stance.>\n")
FIG9_GUESS = '[Guess]: <Your most likely guess, should be one of "Yes" or "No".>\n'
FIG9_CONFIDENCE = ("[Confidence]: <Give your honest confidence score between 0.0 and 1.0 about the correctness of "
                   "your guess. 0 means your previous guess is very likely to be wrong, and 1 means you are very "
                   "confident about the guess.>")
FIG10_ASK = ("Is <paragraph> helpful for answering <question>?\nNote that the <paragraph> can be helpful even it "
             "only addresses part of the <question> without fully answering it. Provide your best guess for this "
             "question and the probability that the <paragraph> is helpful. Reply in the following format:\n")
FIG10_PROBABILITY = ("[Probability Helpful]: <The probability between 0.0 and 1.0 that the <paragraph> is helpful to "
                     "the <question>. 0.0 is completely unhelpful and 1.0 is completely helpful.>")


def test_the_paper_preset_is_figure_9_as_printed_with_and_without_cot():
    cot = build_prompt(PAIR, _config("diras-definition-paper", cot=True)).user
    assert cot.endswith(f'<paragraph>: "{PAIR.passage}"\n\n' + FIG9_ASK + FIG9_REASON + FIG9_GUESS + FIG9_CONFIDENCE)
    # App. G: "The non-CoT setup just excludes the [Reason] part of the prompt."
    plain = build_prompt(PAIR, _config("diras-definition-paper")).user
    assert plain == cot.replace(FIG9_REASON, "")
    # The released code's wording differs: "even it only", and its non-CoT guess line is longer.
    code = build_prompt(PAIR, _config("diras-definition")).user
    assert "can be helpful even it only" in code and FIG9_GUESS not in code
    assert "[Guess]: <Your most likely guess whether the paragraph is helpful or not helpful" in code


def test_the_probability_preset_is_figure_10_as_printed_guess_kept():
    prompt = build_prompt(PAIR, _config("diras-probability", cot=True))
    assert prompt.answer == "probability"
    assert prompt.user.endswith(FIG10_ASK + FIG9_REASON + FIG9_GUESS + FIG10_PROBABILITY)
    plain = build_prompt(PAIR, _config("diras-probability")).user
    assert plain.endswith(FIG10_ASK + FIG9_GUESS + FIG10_PROBABILITY)
    assert "[Confidence]" not in plain and "[Reason]" not in plain
    # Table 1 runs P_prob with Ask only ("Point-Ask-Prob-D"): Tok is refused.
    with pytest.raises(ValueError, match="probability answer format .* is read by the ask method"):
        _config("diras-probability", method="tok")


def test_the_parsers_read_the_answers_the_paper_prompts_ask_for():
    # Fig. 9: [Reason], [Guess], [Confidence] (Ask); Tok reads P(Yes) where the prompt puts "[Guess]:".
    fig9 = parse_answer("[Reason]: It names the 2030 target.\n[Guess]: No\n[Confidence]: 0.8")
    assert fig9.guess is False and fig9.p_relevant == pytest.approx(1 - 0.8)
    tok = build_prompt(PAIR, _config("diras-definition-paper", method="tok"))
    assert tok.answer_prefix == "[Guess]:" and tok.answer_prefix in tok.user and not tok.reason_first
    tok_cot = build_prompt(PAIR, _config("diras-definition-paper", method="tok", cot=True))
    assert tok_cot.reason_first and tok_cot.user.index("[Reason]:") < tok_cot.user.index(tok_cot.answer_prefix)
    # Fig. 10: the guess and [Probability Helpful]; the probability is P, whatever the guess says.
    fig10 = parse_answer("[Reason]: Partly.\n[Guess]: No\n[Probability Helpful]: 0.35", "probability")
    assert fig10.p_relevant == pytest.approx(0.35) and fig10.guess is False
    fig10 = parse_answer("[Guess]: Yes\n[Probability Helpful]: 0.9", "probability")
    assert fig10.p_relevant == pytest.approx(0.9) and fig10.guess is True
    # A model that echoes the format back has given no probability.
    with pytest.raises(AnswerParseError):
        parse_answer(FIG9_GUESS + FIG10_PROBABILITY, "probability")


@pytest.mark.parametrize("preset", list(PRESETS))
def test_every_preset_is_a_valid_template_whose_shared_part_is_a_prefix(preset):
    template_validate(PRESETS[preset].template)
    prompt = build_prompt(PAIR, _config(preset))
    assert prompt.user.startswith(prompt.user_shared) and PAIR.passage not in prompt.user_shared
    assert PAIR.query in prompt.user_shared


def test_unknown_presets_and_settings_are_refused_by_name():
    with pytest.raises(TemplateError, match="unknown prompt preset 'fig9'; the presets are"):
        preset_get("fig9")
    with pytest.raises(TemplateError, match="'layout' must be one of"):
        template_validate({"layout": "middle"})
    with pytest.raises(TemplateError, match="'answer' must be one of"):
        template_validate({"answer": "stars"})


# ----- [Probability Helpful] -----

@pytest.mark.parametrize(("text", "p"), [
    ("[Probability Helpful]: 0.73", 0.73),
    ("[Reason]: It names the 2030 target.\n[Probability Helpful]: 0.9", 0.9),
    ("[probability helpful]: **0.25**", 0.25),
    ("[Probability Helpful]: 85%", 0.85),
    ("[Probability Helpful]: 0", 0.0),
    ("[Probability Helpful]: 1.0.", 1.0),
])
def test_a_well_formed_probability_is_p_relevant(text, p):
    answer = parse_probability_answer(text)
    assert answer.p_relevant == pytest.approx(p, abs=1e-12) and answer.guess is (p >= 0.5)
    assert parse_answer(text, "probability").p_relevant == pytest.approx(p, abs=1e-12)


@pytest.mark.parametrize(("text", "message"), [
    ("The paragraph is helpful.", r"no '\[Probability Helpful\]: <number>'"),
    ("[Guess]: Yes\n[Confidence]: 0.8", r"no '\[Probability Helpful\]: <number>'"),
    ("[Probability Helpful]: <The probability between 0.0 and 1.0 ...>", r"no '\[Probability Helpful\]: <number>'"),
    ("[Probability Helpful]: 1.4", r"1.4 is outside \[0, 1\]"),
    ("[Probability Helpful]: -0.2", r"-0.2 is outside \[0, 1\]"),
    ("[Probability Helpful]: 140%", r"140% is outside \[0, 1\]"),
])
def test_a_missing_or_out_of_range_probability_is_a_parse_error(text, message):
    with pytest.raises(AnswerParseError, match=message):
        parse_probability_answer(text)


def test_an_ask_judge_with_the_probability_preset_stores_p_or_a_parse_error_without_a_label():
    answers = ["[Reason]: Names the target.\n[Probability Helpful]: 0.8", "[Probability Helpful]: 1.7"]
    script = [Reply(body=completion(text)) for text in answers]
    with FakeOpenAI(script=script) as server:
        config = JudgeConfig(backend="openai", model="judge", method="ask", base_url=server.base_url,
                             allow_local=True, concurrency=1, template=PRESETS["diras-probability"].template)
        scorer = OpenAIScorer(config, backoff_s=0.01)
        try:
            good, bad = scorer.score([PAIR, PairInput(8, PAIR.query, "Another paragraph.", PAIR.definition)])
        finally:
            scorer.close()
    assert good.status == "ok" and good.p == pytest.approx(0.8) and good.guess is True
    assert good.raw_output == answers[0]
    assert bad.status == "parse_error" and bad.p is None and bad.guess is None and bad.confidence is None
    assert "1.7 is outside [0, 1]" in bad.error and bad.raw_output == answers[1]
    assert "[Probability Helpful]" in server.bodies[0]["messages"][1]["content"]

"""The DisastIR ensemble: prompts per intent and strategy, JSON answer parsing, the cot phase rule, the driver's
mean / P / spread on scripted answers (hand-computed), and one run on the real SmolLM2 through the hf backend
and one through the openai backend's wire format."""
from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest
import torch

from models_llm import EnsembleConfigError
from models_llm import ensemble_score as _ensemble_score
from models_llm.backends.hf import HFScorer
from models_llm.backends.openai import OpenAIScorer
from models_llm.bundled import smollm2_folder
from models_llm.ensembles import (
    INTENTS,
    STEPS,
    Attributes,
    Criteria,
    allowed_final_scores,
    intent_get,
    json_object,
    score_read,
    yes_no_read,
)
from models_llm.parsing import AnswerParseError
from models_llm.types import Generation, JudgeConfig, PairInput
from tests.models_llm.fake_openai import FakeOpenAI, Reply, completion

VAR_DIR = Path(__file__).resolve().parents[2] / "var"

PAIR = PairInput(
    pair_id=42,
    query="Which towns in the Ahr valley lost their bridges in the July 2021 flood?",
    passage="In Altenahr and Dernau the July 2021 flood swept away most bridges {sic}; Bad Neuenahr kept two.",
    definition="Named places and the infrastructure damage the flood did there.",
)
BARE_PAIR = PairInput(pair_id=43, query="Wildfire evacuation routes in Maui", passage="Lahaina's Front Street jammed.")

# Plausible parsed answers of the earlier steps, by step name, to build any step's prompt.
EARLIER = {"holds": True, "criteria": Criteria(exactness=2, coverage=3), "attributes": Attributes(1, 2, 3, 0)}

# These tests pin the legacy prompt preset (the product's first prompts); tests/models_llm/test_disastir_paper.py
# checks the paper preset.
ensemble_score = partial(_ensemble_score, prompts="legacy")


def _all_steps():
    for intent in INTENTS.values():
        for strategy in intent.strategies:
            for index in range(len(STEPS[strategy])):
                yield intent.name, strategy, index


def _build(intent_name: str, strategy: str, index: int, pair: PairInput) -> list[dict[str, str]]:
    steps = STEPS[strategy]
    earlier = tuple(EARLIER[step.name] for step in steps[:index])
    return steps[index].build(intent_get(intent_name), pair, earlier)


class Script:
    """A fake `generate`: hands out the scripted answers in order and records the messages it was given."""

    def __init__(self, *answers: str | Generation) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []

    def __call__(self, messages: list[dict[str, str]]) -> str | Generation:
        self.prompts.append(messages[-1]["content"])
        return self.answers.pop(0)


# ----- intents and prompts -----

@pytest.mark.parametrize(("intent", "strategy", "index"), list(_all_steps()))
def test_every_prompt_holds_definition_query_and_passage_last(intent, strategy, index):
    system, user = _build(intent, strategy, index, PAIR)
    assert system["role"] == "system" and user["role"] == "user"
    text = user["content"]
    assert PAIR.definition in text and PAIR.query in text
    assert text.index(PAIR.definition) < text.index(PAIR.query)
    # The passage, with its braces untouched, ends the message: everything before it is shared by the query.
    assert text.endswith(f"{intent_get(intent).passage_label}:\n{PAIR.passage}")
    assert text.count(PAIR.passage) == 1
    assert "JSON" in text


@pytest.mark.parametrize(("intent", "strategy", "index"), list(_all_steps()))
def test_without_a_definition_the_prompt_has_no_definition_block(intent, strategy, index):
    text = _build(intent, strategy, index, BARE_PAIR)[1]["content"]
    assert "What counts as relevant" not in text
    assert text.startswith(f"{intent_get(intent).query_label}: {BARE_PAIR.query}")


def test_a_title_goes_with_the_passage_at_the_end():
    titled = PairInput(1, "q", "the passage", title="Flood report 2021")
    assert _build("QA", "direct", 0, titled)[1]["content"].endswith("Passage:\nFlood report 2021\nthe passage")


def test_each_intent_words_the_prompt_its_own_way():
    holds = {name: _build(name, "cot", 0, PAIR)[1]["content"] for name in ("QA", "QAdoc", "Twitter", "FC", "NLI")}
    assert "contain the answer to the question" in holds["QA"]
    assert "Document:\n" in holds["QAdoc"] and "Does the document answer the question" in holds["QAdoc"]
    assert "Query:" in holds["Twitter"] and "Post:\n" in holds["Twitter"]
    assert "supports or refutes the claim" in holds["FC"] and "Claim:" in holds["FC"]
    assert "Is the hypothesis entailed by the premise" in holds["NLI"] and "Hypothesis:\n" in holds["NLI"]
    assert len(set(holds.values())) == 5


def test_direct_lists_the_intents_grades_0_to_3_and_sts_0_to_5():
    qa = _build("QA", "direct", 0, PAIR)[1]["content"]
    for score, meaning in enumerate(intent_get("QA").grades):
        assert f"{score}: {meaning}\n" in qa
    assert "\n4: " not in qa
    sts = _build("STS", "direct", 0, PAIR)[1]["content"]
    assert "\n5: the two sentences are semantically equivalent\n" in sts and '{"score": 0 or 1 or 2 or 3 or 4 or 5}' in sts


def test_sts_uses_direct_only():
    assert intent_get("STS").strategies == ("direct",)
    assert all(INTENTS[name].strategies == ("direct", "cot", "multi") for name in INTENTS if name != "STS")
    for strategy in ("cot", "multi"):
        with pytest.raises(EnsembleConfigError, match="STS uses only"):
            ensemble_score(PAIR, generate=Script(), intent="STS", strategies=[strategy])


def test_the_default_intent_is_qa_and_an_unknown_intent_or_strategy_is_refused():
    generate = Script('{"score": 3}', '{"holds": "yes"}', '{"exactness": 3, "coverage": 3}', '{"score": 3}',
                      '{"exactness": 3, "coverage": 3, "topicality": 3, "contextual_fit": 3}', '{"score": 3}')
    assert ensemble_score(PAIR, generate=generate).intent == "QA"
    assert "Question: " in generate.prompts[0]
    with pytest.raises(EnsembleConfigError, match=r"unknown intent 'qa'.*'QAdoc'"):
        ensemble_score(PAIR, generate=Script(), intent="qa")
    with pytest.raises(EnsembleConfigError, match="unknown strategy 'fewshot'"):
        ensemble_score(PAIR, generate=Script(), strategies=["direct", "fewshot"])
    with pytest.raises(EnsembleConfigError, match="at least one"):
        ensemble_score(PAIR, generate=Script(), strategies=[])


# ----- JSON answers -----

@pytest.mark.parametrize("text", [
    '{"score": 2}',
    '```json\n{"score": 2}\n```',
    'Here is my rating:\n{"score": 2}\nThe passage names the towns.',
    '{"score": 2} because the passage names {two} towns',
    'Sure! {"reason": "it names towns {Altenahr}", "score": 2}',
    '{"score": 2, "detail": {"towns": ["Altenahr"]}}',
])
def test_a_score_is_read_from_bare_fenced_or_surrounded_json(text):
    assert score_read(json_object(text), "score", range(4)) == 2


@pytest.mark.parametrize(("text", "message"), [
    ("I would say 2.", "no JSON object"),
    ('{"score": 2,}', "malformed JSON"),
    ("{'score': 2}", "malformed JSON"),
    ('{"score": 2', "malformed JSON"),
    ('{"rating": 2}', "no 'score' key"),
    ('{"score": 4}', "'score' is 4, outside the allowed [0, 1, 2, 3]"),
    ('{"score": -1}', "outside the allowed"),
    ('{"score": 2.5}', "'score' must be an integer, got 2.5"),
    ('{"score": 2.0}', "must be an integer, got 2.0"),
    ('{"score": "2"}', 'must be an integer, got "2"'),
    ('{"score": true}', "must be an integer, got true"),
    ('{"score": null}', "must be an integer, got null"),
])
def test_a_bad_score_answer_is_a_parse_error_naming_the_problem(text, message):
    with pytest.raises(AnswerParseError, match=message.replace("[", r"\[").replace("]", r"\]")):
        score_read(json_object(text), "score", range(4))


def test_a_list_or_a_number_is_not_the_json_object_asked_for():
    with pytest.raises(AnswerParseError):
        json_object('[{"score": 2]')
    with pytest.raises(AnswerParseError, match="no JSON object"):
        json_object("2")


@pytest.mark.parametrize(("text", "expected"), [
    ('{"holds": "yes"}', True), ('{"holds": "No"}', False), ('{"holds": " YES "}', True),
    ('{"holds": true}', True), ('{"holds": false}', False),
])
def test_yes_no_answers(text, expected):
    assert yes_no_read(json_object(text), "holds") is expected


@pytest.mark.parametrize("text", ['{"holds": "maybe"}', '{"holds": 1}', '{"answer": "yes"}'])
def test_a_yes_no_answer_that_is_neither_is_a_parse_error(text):
    with pytest.raises(AnswerParseError, match="'holds'"):
        yes_no_read(json_object(text), "holds")


# ----- cot phases and multi aggregation -----

@pytest.mark.parametrize(("holds", "accepted", "refused"), [(True, (2, 3), (0, 1)), (False, (0, 1), (2, 3))])
def test_cot_phase_3_accepts_only_the_scores_phase_1_allows(holds, accepted, refused):
    intent, final = intent_get("QA"), STEPS["cot"][2]
    earlier = (holds, Criteria(1, 1))
    assert allowed_final_scores(holds) == accepted
    for score in accepted:
        assert final.parse(intent, f'{{"score": {score}}}', earlier) == score
    for score in refused:
        with pytest.raises(AnswerParseError, match=f"'score' is {score}, outside the allowed"):
            final.parse(intent, f'{{"score": {score}}}', earlier)
    prompt = final.build(intent, PAIR, earlier)[1]["content"]
    assert f'{{"score": {accepted[0]} or {accepted[1]}}}' in prompt
    for score in accepted:
        assert f"{score}: {intent.grades[score]}" in prompt
    for score in refused:
        assert intent.grades[score] not in prompt


def test_cot_carries_phase_1_and_2_answers_into_the_later_prompts():
    generate = Script('{"reason": "names the towns", "holds": "no"}', '{"topicality": 1, "contextual_fit": 0}',
                      '{"score": 1}')
    outcome = ensemble_score(PAIR, generate=generate, strategies=["cot"]).outcome("cot")
    assert [step.value for step in outcome.steps] == [False, Criteria(topicality=1, contextual_fit=0), 1]
    assert "you answered no" in generate.prompts[1]
    assert "topicality 1, contextual_fit 0" in generate.prompts[2]
    assert "the final score is 0 or 1" in generate.prompts[2]


def test_cot_final_score_against_phase_1_is_a_parse_error_keeping_every_raw_text():
    answers = ('{"holds": "yes"}', '{"exactness": 0, "coverage": 0}', '{"score": 1}')
    result = ensemble_score(PAIR, generate=Script(*answers), strategies=["cot"])
    outcome = result.outcome("cot")
    assert result.status == "parse_error" and outcome.score is None and result.p is None
    assert outcome.raw_texts == answers
    assert outcome.parse_error == "cot, step score: 'score' is 1, outside the allowed [2, 3]"
    assert outcome.steps[-1].value is None


def test_multi_aggregates_the_four_attributes_in_a_second_call():
    generate = Script('```json\n{"exactness": 3, "coverage": 1, "topicality": 2, "contextual_fit": 0}\n```',
                      'Final: {"score": 2}')
    outcome = ensemble_score(PAIR, generate=generate, strategies=["multi"]).outcome("multi")
    assert outcome.steps[0].value == Attributes(exactness=3, coverage=1, topicality=2, contextual_fit=0)
    assert outcome.score == 2 and outcome.p == pytest.approx(2 / 3)
    assert "exactness 3, coverage 1, topicality 2, contextual_fit 0" in generate.prompts[1]


def test_multi_with_a_missing_attribute_stops_before_the_aggregation():
    generate = Script('{"exactness": 3, "coverage": 1, "topicality": 2}')
    outcome = ensemble_score(PAIR, generate=generate, strategies=["multi"]).outcome("multi")
    assert len(generate.prompts) == 1 and outcome.raw_texts == ('{"exactness": 3, "coverage": 1, "topicality": 2}',)
    assert "no 'contextual_fit' key" in outcome.parse_error


# ----- the driver -----

ATTRIBUTES_JSON = '{"exactness": 1, "coverage": 1, "topicality": 2, "contextual_fit": 1}'


def test_all_three_strategies_parse():
    generate = Script('{"score": 3}', '{"holds": "yes"}', '{"exactness": 2, "coverage": 2}', '{"score": 2}',
                      ATTRIBUTES_JSON, '{"score": 1}')
    result = ensemble_score(PAIR, generate=generate)
    assert [outcome.score for outcome in result.outcomes] == [3, 2, 1]
    # By hand: mean (3 + 2 + 1) / 3 = 2, P = 2 / 3, P per strategy 1, 2/3, 1/3 -> spread 2/3.
    assert result.status == "ok" and result.max_score == 3
    assert result.mean == pytest.approx(2.0) and result.p == pytest.approx(2 / 3)
    assert result.relevant is True and result.spread == pytest.approx(2 / 3)
    assert result.pair_id == PAIR.pair_id and result.parse_error == ""
    assert not generate.answers


def test_partial_failure_counts_only_the_strategies_that_parsed():
    generate = Script("The passage is relevant.", '{"holds": "yes"}', '{"exactness": 3, "coverage": 3}',
                      '{"score": 3}', ATTRIBUTES_JSON, '{"score": 2}')
    result = ensemble_score(PAIR, generate=generate)
    direct = result.outcome("direct")
    assert direct.score is None and direct.raw_texts == ("The passage is relevant.",)
    assert direct.parse_error == "direct, step score: no JSON object in the answer"
    # By hand: mean (3 + 2) / 2 = 2.5, P = 2.5 / 3, spread 1 - 2/3.
    assert result.status == "ok"
    assert result.mean == pytest.approx(2.5) and result.p == pytest.approx(2.5 / 3)
    assert result.spread == pytest.approx(1 / 3) and result.relevant is True


def test_every_strategy_saying_zero_is_not_relevant():
    generate = Script('{"score": 0}', '{"holds": "no"}', '{"topicality": 0, "contextual_fit": 0}', '{"score": 0}',
                      '{"exactness": 0, "coverage": 0, "topicality": 0, "contextual_fit": 0}', '{"score": 0}')
    result = ensemble_score(PAIR, generate=generate)
    assert (result.mean, result.p, result.relevant, result.spread) == (0.0, 0.0, False, 0.0)


def test_total_failure_is_a_parse_error_with_every_raw_text_and_no_label():
    generate = Script("3", '{"holds": "perhaps"}', "{score: 2}")
    result = ensemble_score(PAIR, generate=generate)
    assert result.status == "parse_error"
    assert (result.mean, result.p, result.relevant, result.spread) == (None, None, None, None)
    assert [outcome.raw_texts for outcome in result.outcomes] == [("3",), ('{"holds": "perhaps"}',), ("{score: 2}",)]
    for strategy in ("direct", "cot", "multi"):
        assert f"{strategy}, step " in result.parse_error


def test_sts_scores_on_0_to_5_and_token_counts_are_kept():
    generate = Script(Generation('{"score": 4}', prompt_tokens=120, completion_tokens=6))
    result = ensemble_score(PAIR, generate=generate, intent="STS")
    assert [outcome.strategy for outcome in result.outcomes] == ["direct"]
    assert result.max_score == 5 and result.mean == 4 and result.p == pytest.approx(0.8) and result.spread == 0
    step = result.outcome("direct").steps[0]
    assert (step.prompt_tokens, step.completion_tokens) == (120, 6)
    with pytest.raises(AnswerParseError, match="outside the allowed"):
        STEPS["direct"][0].parse(intent_get("STS"), '{"score": 6}', ())


def test_strategies_can_be_chosen_and_run_in_the_given_order():
    generate = Script(ATTRIBUTES_JSON, '{"score": 3}', '{"score": 1}')
    result = ensemble_score(PAIR, generate=generate, intent="FC", strategies=("multi", "direct"))
    assert [(outcome.strategy, outcome.score) for outcome in result.outcomes] == [("multi", 3), ("direct", 1)]
    assert "Claim: " in generate.prompts[0] and result.mean == 2


# ----- real backends -----

def _assert_stored(result) -> None:
    """Every strategy's output is kept: a parsed score, or a parse error with the raw text of each step run."""
    for outcome in result.outcomes:
        assert outcome.steps and all(isinstance(step.raw, str) for step in outcome.steps)
        if outcome.score is not None:
            assert outcome.parse_error == "" and all(step.value is not None for step in outcome.steps)
            assert len(outcome.steps) == len(STEPS[outcome.strategy])
        else:
            assert outcome.parse_error.startswith(f"{outcome.strategy}, step {outcome.steps[-1].step}: ")
            assert outcome.steps[-1].value is None
            assert all(step.value is not None for step in outcome.steps[:-1])
    parsed = [outcome.score for outcome in result.outcomes if outcome.score is not None]
    if parsed:
        assert result.status == "ok" and result.mean == pytest.approx(sum(parsed) / len(parsed))
    else:
        assert result.status == "parse_error" and result.p is None and result.relevant is None


@pytest.fixture(scope="module")
def smollm2() -> HFScorer:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    scorer = HFScorer(JudgeConfig(backend="hf", method="ask", model=str(smollm2_folder(VAR_DIR)), max_new_tokens=48))
    yield scorer
    scorer.close()
    torch.set_num_threads(threads)


def test_the_three_strategies_on_smollm2_store_a_score_or_a_parse_error(smollm2):
    result = ensemble_score(PAIR, generate=smollm2.generate_chat, strategies=("direct", "cot", "multi"))
    _assert_stored(result)
    assert [outcome.strategy for outcome in result.outcomes] == ["direct", "cot", "multi"]
    first = result.outcomes[0].steps[0]
    # Greedy decoding: the stored raw text is what the model says to that prompt again.
    again = smollm2.generate_chat(_build("QA", "direct", 0, PAIR))
    assert first.raw == again.text and first.completion_tokens == again.completion_tokens
    prompt = smollm2.tokenizer.apply_chat_template(_build("QA", "direct", 0, PAIR), add_generation_prompt=True,
                                                   tokenize=False)
    assert first.prompt_tokens == len(smollm2.tokenizer(prompt, add_special_tokens=False)["input_ids"])
    assert 0 < first.completion_tokens <= 48


def test_the_ensemble_over_the_openai_backend_sends_each_prompt_and_keeps_usage():
    answers = ['{"score": 3}', '{"holds": "yes"}', '{"exactness": 3, "coverage": 2}', '{"score": 2}',
               ATTRIBUTES_JSON, "not json"]
    script = [Reply(body=completion(text, prompt_tokens=100 + n)) for n, text in enumerate(answers)]
    with FakeOpenAI(script=script) as server:
        config = JudgeConfig(backend="openai", model="judge", method="ask", base_url=server.base_url, allow_local=True, max_new_tokens=80)
        scorer = OpenAIScorer(config, backoff_s=0.01)
        try:
            result = ensemble_score(PAIR, generate=scorer.generate_chat)
        finally:
            scorer.close()
    assert [body["max_tokens"] for body in server.bodies] == [80] * 6
    assert all(body["temperature"] == 0 and body["model"] == "judge" for body in server.bodies)
    assert json.dumps(server.bodies[0]["messages"]) == json.dumps(_build("QA", "direct", 0, PAIR))
    assert [outcome.score for outcome in result.outcomes] == [3, 2, None]
    assert result.outcome("multi").raw_texts == (ATTRIBUTES_JSON, "not json")
    assert [step.prompt_tokens for step in result.outcome("cot").steps] == [101, 102, 103]
    assert result.mean == pytest.approx(2.5) and result.spread == pytest.approx(1 / 3)

"""DisastIR's query generation (3.4, App. B) without a server: the paper's prompts as printed, the two stages'
messages, the need drawn at random among those listed and the placeholders from the captions' values, and answers
that are not the JSON asked for refused with the stage named."""
import random

import pytest

from models_llm.query_generation import (
    INTENTS,
    GenerationParseError,
    generate_query,
    parse_needs,
    parse_query,
    preset,
    prompts_for,
)
from models_llm.types import Generation

PASSAGE = "Evacuation centres open when the river gauge passes 4 m; buses leave from the town hall."


def test_the_six_intents_and_the_papers_words():
    assert INTENTS == ("QA", "QAdoc", "Twitter", "FC", "NLI", "STS")
    fc = preset("FC")
    assert fc.need_prompt.startswith("Brainstorm a list of fact-checking retrieval tasks where the goal is: Given a "
                                     "claim, retrieve documents that either support or refute the claim")
    assert "- claim: a short, factual or semi-factual statement (assertion) related to the task." in fc.query_prompt
    assert (fc.query_key, fc.positive_key) == ("claim", "positive_document")
    assert preset("QAdoc").positive_key is None  # the document itself is the positive
    assert fc.values["num_words"] == ("at most 15 words", "at most 50 words", "50 to 150 words", "at most 100 words",
                                      "at least 100 words")
    with pytest.raises(ValueError, match="unknown search intent 'web'"):
        preset("web")


def test_two_calls_the_need_drawn_at_random_and_the_placeholders_filled():
    sent = []
    answers = iter([Generation('["need one", "need two", "need three"]', 20, 9),
                    Generation('Sure:\n```json\n{"claim": "Buses leave at 4 m.", "positive_document": "At 4 m the '
                               'buses leave."}\n```', 30, 12)])

    def generate(messages, max_new_tokens):
        sent.append(messages)
        return next(answers)

    found = generate_query(preset("FC"), PASSAGE, generate, random.Random(3))
    expected_rng = random.Random(3)
    need = expected_rng.choice(["need one", "need two", "need three"])
    choices = {name: expected_rng.choice(options) for name, options in preset("FC").values.items()}
    assert (found.query, found.positive, found.need, found.choices) == (
        "Buses leave at 4 m.", "At 4 m the buses leave.", need, choices)
    assert (found.prompt_tokens, found.completion_tokens) == (50, 21)
    assert sent[0][1] == {"role": "user", "content": "Paragraph: " + PASSAGE}
    system = sent[1][0]["content"]
    assert system.startswith(f"You have been assigned a fact-checking retrieval task: {need}. ")
    assert f"The claim should be {choices['query_length']}, {choices['clarity']}." in system
    assert "{" not in system


def test_answers_that_are_not_the_json_asked_for_are_refused_with_the_stage():
    with pytest.raises(GenerationParseError, match="no JSON list") as caught:
        parse_needs("Here are some ideas: evacuation, shelters.")
    assert caught.value.stage == "need" and caught.value.raw.startswith("Here are")
    with pytest.raises(GenerationParseError, match="no non-empty string"):
        parse_needs('["", 3]')
    with pytest.raises(GenerationParseError, match="no non-empty text under 'positive_tweet'") as caught:
        parse_query(preset("Twitter"), '{"query": "UNICEF in Manila"}')
    assert caught.value.stage == "query"
    assert parse_query(preset("QAdoc"), '{"user_query": "Who funds recovery?"}') == ("Who funds recovery?", None)


def test_edited_prompts_replace_the_presets_and_bad_edits_are_refused():
    edited = prompts_for(["QA", "STS"], {"QA": {"need": "List needs as a JSON list."}})
    assert edited[0].need_prompt == "List needs as a JSON list." and edited[0].query_prompt == preset("QA").query_prompt
    assert edited[1] == preset("STS")
    with pytest.raises(ValueError, match=r"must hold \{task\}"):
        prompts_for(["QA"], {"QA": {"query": "Write a query."}})
    with pytest.raises(ValueError, match="unknown search intent 'Web'"):
        prompts_for(["QA"], {"Web": {"need": "x"}})

"""The DisastIR prompts as published: in every intent, strategy and step the query fills the slot the paper
gives it and the passage the other (App. C; for NLI "Premise: {Query}, Hypothesis: {Passage}"), and the
score scales are the paper's.

The expected slots and scales below are written from the authors' released prompts (KaiYin97/Disaster_IR,
src/scoring/raters/prompts.py: every template reads `{input1}` = the query into the first slot and
`{input2}` = the passage into the second; configs/gen_config.py: NLI's query is "the premise", its passage
"the most relevant entailed hypothesis"), not read off the code under test."""
from __future__ import annotations

import re

import pytest

from models_llm.ensembles import INTENTS, STEPS, Attributes, Criteria, intent_get
from models_llm.types import PairInput

QUERY = "QUERY-7f3a the levee at Kinston held during the flood"
PASSAGE = "PASSAGE-91bc Kinston's levee was overtopped on the second night."
PAIR = PairInput(pair_id=1, query=QUERY, passage=PASSAGE)

# (query slot, passage slot) per intent, from the authors' templates.
SLOTS = {
    "QA": ("Question", "Passage"),
    "QAdoc": ("Question", "Document"),
    "Twitter": ("Query", "Post"),
    "FC": ("Claim", "Passage"),
    "NLI": ("Premise", "Hypothesis"),
    "STS": ("Sentence A", "Sentence B"),
}
# STS is scored by the zero-shot rater alone (scorer.py: "only zero-shot for STS").
STRATEGIES = {name: ("direct",) if name == "STS" else ("direct", "cot", "multi") for name in SLOTS}
EARLIER = {
    "holds": True,
    "criteria": Criteria(exactness=2, coverage=3),
    "attributes": Attributes(exactness=1, coverage=2, topicality=3, contextual_fit=0),
}


def _steps():
    for intent, strategies in STRATEGIES.items():
        for strategy in strategies:
            for index, step in enumerate(STEPS[strategy]):
                yield intent, strategy, index, step.name


def _user(intent: str, strategy: str, index: int, holds: bool = True) -> str:
    steps = STEPS[strategy]
    earlier = tuple({**EARLIER, "holds": holds}[step.name] for step in steps[:index])
    return steps[index].build(intent_get(intent), PAIR, earlier)[1]["content"]


def _slot_of(text: str, marker: str) -> str:
    """The label written just before `marker` ("Premise: QUERY..." -> "Premise")."""
    match = re.search(r"(?:^|\n)([A-Za-z ]+):\s*" + re.escape(marker), text)
    assert match, f"{marker!r} is not in a labelled slot"
    return match.group(1)


def test_the_intents_and_their_strategies_are_the_papers():
    assert set(INTENTS) == set(SLOTS)
    assert {name: intent.strategies for name, intent in INTENTS.items()} == STRATEGIES


@pytest.mark.parametrize(("intent", "strategy", "index", "step"), list(_steps()))
def test_the_query_and_the_passage_land_in_the_papers_slots(intent, strategy, index, step):
    text = _user(intent, strategy, index)
    query_slot, passage_slot = SLOTS[intent]
    assert _slot_of(text, QUERY) == query_slot
    assert _slot_of(text, PASSAGE) == passage_slot
    assert text.count(QUERY) == 1 and text.count(PASSAGE) == 1


@pytest.mark.parametrize(("strategy", "index"), [("direct", 0), ("cot", 0), ("cot", 1), ("cot", 2),
                                                 ("multi", 0), ("multi", 1)])
def test_nli_reads_the_query_as_the_premise_and_asks_whether_the_passage_follows_from_it(strategy, index):
    text = _user("NLI", strategy, index)
    assert f"Premise: {QUERY}" in text and f"Hypothesis:\n{PASSAGE}" in text
    # The direction of entailment: the hypothesis (passage) is entailed by the premise (query).
    assert "entailed by the premise" in text
    assert "premise is entailed" not in text and "hypothesis entails" not in text


def test_nli_cot_phase_1_asks_whether_the_hypothesis_is_entailed_by_the_premise():
    assert "Is the hypothesis entailed by the premise?" in _user("NLI", "cot", 0)


@pytest.mark.parametrize("intent", [name for name in SLOTS if name != "STS"])
def test_direct_and_the_final_scores_are_0_to_3(intent):
    for strategy, index in (("direct", 0), ("multi", 1)):
        assert '{"score": 0 or 1 or 2 or 3}' in _user(intent, strategy, index)
    assert '{"score": 2 or 3}' in _user(intent, "cot", 2, holds=True)
    assert '{"score": 0 or 1}' in _user(intent, "cot", 2, holds=False)


def test_sts_direct_is_0_to_5():
    assert '{"score": 0 or 1 or 2 or 3 or 4 or 5}' in _user("STS", "direct", 0)


@pytest.mark.parametrize("intent", [name for name in SLOTS if name != "STS"])
def test_criteria_are_0_to_3_and_cot_rates_exactness_and_coverage_after_yes_topicality_and_fit_after_no(intent):
    # rate_cot: phase2_criteria ["Exactness", "Coverage"], phase2_criteria_alt ["Contextual Fit", "Topicality"].
    after_yes, after_no = _user(intent, "cot", 1, holds=True), _user(intent, "cot", 1, holds=False)
    assert '{"exactness": 0-3, "coverage": 0-3}' in after_yes
    assert '{"topicality": 0-3, "contextual_fit": 0-3}' in after_no
    assert '{"exactness": 0-3, "coverage": 0-3, "topicality": 0-3, "contextual_fit": 0-3}' in _user(
        intent, "multi", 0)

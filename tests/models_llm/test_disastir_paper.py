"""The `paper` prompt preset of the DisastIR ensemble against the paper's own text (Yin et al., EMNLP 2025
Findings, App. C, Tables 10-13). The sentences below are copied from the paper (its en dashes and curly quotes
kept; the PDF's bold markers dropped), not from the code: a prompt that drifts from the paper fails here."""
from __future__ import annotations

import json

import pytest

from models_llm import ensemble_score
from models_llm.ensembles import PAPER_STEPS, ensemble_combine, intent_get, strategy_run
from models_llm.ensembles.cost import ensemble_token_estimate
from models_llm.types import PairInput

DEFINITION = "Relevant: the passage names a town whose bridge the flood destroyed."
PAIR = PairInput(pair_id=7, query="Which Ahr valley towns lost bridges in July 2021?",
                 passage="In Schuld and Insul the {flood} swept away both bridges.", definition=DEFINITION)

# Table 10 (QA, QAdoc, Twitter).
QA_SENTENCES = {
    "direct": [
        ("You are a search quality rater evaluating passage relevance based on detailed instructions and outputting "
        "JSON."),
        ("Given a query and a passage, provide a score (0–3): 0 = Irrelevant, 1 = Related, 2 = Highly relevant, "
        "3 = Perfectly relevant."),
        "Important: 1 if somewhat related but not completely, 2 if important info + extra, 3 if only refers to topic.",
        "Consider intent, content match (M), trustworthiness (T), then decide final score (O).",
        'Output MUST be JSON: {"final_score": <0-3>}',
    ],
    "cot": [
        ("Instruction: Given a passage and a query, predict whether the passage includes an answer to the query by "
        "producing either “Yes” or “No”."),
        'Output your prediction as JSON: {"has_answer": "Yes"} or {"has_answer": "No"}',
        "Please assess how well the provided passage meets specific criteria in relation to the query.",
        ("Please rate how well the given passage meets the Exactness criterion in relation to the query. The output "
        "should be a single score (0–3) indicating how precisely the passage answers the query."),
        ("Please rate how well the given passage meets the Coverage criterion in relation to the query. The output "
        "should be a single score (0–3) indicating proportion of content discussing the query."),
        "You are a search quality rater. Provide a final relevance score (2 or 3):",
        "The passage is relevant. Rate how relevant (2 or 3).",
    ],
    "multi": [
        ("Use the following scoring scale (0–3): 0 = Not relevant at all / No information provided. 1 = Marginally "
        "relevant / Partially addresses the criterion. 2 = Fairly relevant / Adequately addresses the criterion. "
        "3 = Highly relevant / Fully satisfies the criterion."),
        "indicating subject alignment between passage and query",
        "indicating presence of relevant background information",
        ("You are a search quality rater evaluating overall relevance. Given a query, passage, and sub-scores, "
        "provide a final score (0–3): 3 = Perfectly relevant, 2 = Highly relevant, 1 = Related, 0 = Irrelevant."),
        "Please rate how relevant the passage is based on the given sub-scores.",
        'Output your final rating as JSON: {"final_relevance_score": <integer_score_0_to_3>}',
    ],
}
# Table 11 (FC).
FC_SENTENCES = {
    "direct": [
        "You are a search quality rater evaluating evidence for fact-checking and outputting JSON.",
        ("Given a claim and a passage, score relevance (0–3): 0 = Irrelevant, 1 = Related (no help), 2 = Relevant "
        "(unclear/mixed), 3 = Direct support/refutation."),
        "Important: 1 if related but no help, 2 if important info + noise, 3 if clearly supports/refutes.",
        "Consider intent, support/refutation (M), trustworthiness (T), then decide final score (O).",
    ],
    "cot": [
        ("Instruction: Given a passage and a claim, predict whether the passage includes information that supports "
        "or refutes the claim by producing either “Yes” or “No”."),
        "Please assess how well the provided passage serves as evidence for evaluating the claim.",
        "indicating how precisely the passage supports or refutes the claim",
        "indicating the extent to which the passage discusses content directly relevant to the claim",
        ("You are a rater evaluating evidence for fact-checking. Score (2 or 3): 2 = Highly relevant (some "
        "support/refutation), 3 = Perfectly relevant (direct support/refutation)."),
        "Passage is relevant. Rate its relevance (2 or 3).",
    ],
    "multi": [
        "indicating how closely the subject matter aligns with the claim topic",
        "indicating how much relevant background/context is provided to verify the claim",
        "You are a search quality rater evaluating evidence relevance for fact-checking.",
        "Please rate how relevant the given passage is to the claim based on the given scores.",
    ],
}
# Table 12 (NLI).
NLI_SENTENCES = {
    "direct": [
        "You are a rater evaluating entailment. Output only the final score in JSON.",
        ("Given a premise and hypothesis, score entailment (0–3): 0 = Not entailed/Contradicted, 1 = Related not "
        "entailed, 2 = Mostly entailed, 3 = Perfectly entailed."),
        "Consider premise implications, logical following (E), info gaps, then decide final score (O).",
    ],
    "cot": [
        ("Instruction: Given a hypothesis and a premise, predict whether the hypothesis is entailed by the premise by "
        "producing either “Yes” or “No”."),
        ("Please assess how well the given hypothesis meets the Exactness criterion in relation to the premise. Use a "
        "single score (0–3) indicating how precisely the hypothesis is entailed by the premise."),
        "the extent to which the hypothesis reflects core information from the premise",
        "Hypothesis is entailed. Rate how well (2 or 3).",
    ],
    "multi": [
        "Please assess how well the hypothesis is entailed by the premise according to the following criteria.",
        "how well the hypothesis fits within the context or background established by the premise",
        "Please rate how well the hypothesis is entailed by the premise based on the given scores.",
    ],
}


class Script:
    """Answers each call by the JSON key its prompt asks for; records every prompt."""

    def __init__(self, has_answer: str = "Yes", criterion: int = 2, final: int = 3, direct: int = 1,
                 aggregate: int = 2):
        self.answers = {"has_answer": json.dumps({"has_answer": has_answer}),
                        "criterion_score": json.dumps({"criterion_score": criterion}),
                        "relevance_score": json.dumps({"relevance_score": final}),
                        "final_relevance_score": json.dumps({"final_relevance_score": aggregate}),
                        "final_score": json.dumps({"final_score": direct}),
                        "final_similarity_score": json.dumps({"final_similarity_score": direct})}
        self.prompts: list[list[dict[str, str]]] = []

    def __call__(self, messages):
        self.prompts.append(messages)
        text = messages[-1]["content"]
        for key in ("final_relevance_score", "has_answer", "criterion_score", "relevance_score",
                    "final_similarity_score", "final_score"):
            if f'"{key}"' in text:
                return self.answers[key]
        raise AssertionError(f"no JSON key asked for in {text!r}")


def _text(messages) -> str:
    return "\n".join(message["content"] for message in messages)


@pytest.mark.parametrize(("intent", "sentences"), [("QA", QA_SENTENCES), ("QAdoc", QA_SENTENCES),
                                                   ("Twitter", QA_SENTENCES), ("FC", FC_SENTENCES),
                                                   ("NLI", NLI_SENTENCES)])
@pytest.mark.parametrize("strategy", ["direct", "cot", "multi"])
def test_the_paper_presets_prompts_hold_the_papers_printed_sentences(intent, sentences, strategy):
    script = Script()
    outcome = strategy_run(intent_get(intent), strategy, PAIR, script, prompts="paper")
    sent = "\n".join(_text(messages) for messages in script.prompts)
    for sentence in sentences[strategy]:
        assert sentence in sent, (intent, strategy, sentence)
    # The query and the passage are in every call, verbatim (braces in the passage included).
    for messages in script.prompts:
        assert PAIR.query in _text(messages) and PAIR.passage in _text(messages)
    assert outcome.score is not None


def test_sts_direct_is_table_13_and_reads_final_similarity_score():
    script = Script(direct=4)
    result = ensemble_score(PAIR, generate=script, intent="STS", prompts="paper")
    (messages,) = script.prompts
    assert messages[0]["content"] == ("You are a semantic-similarity rater. Output JSON with a score (0–5) where "
                                      "0 = unrelated, 5 = semantically equivalent.")
    assert "Rate the semantic similarity 0–5: 0 = unrelated | 1 = slight | 2 = partial | 3 = moderate | 4 = high | " \
           "5 = equivalent" in messages[1]["content"]
    assert f"Sentence A: {PAIR.query} Sentence B: {PAIR.passage}" in messages[1]["content"]
    assert result.mean == 4 and result.p == pytest.approx(4 / 5)


@pytest.mark.parametrize("intent", ["QA", "FC", "NLI"])
def test_paper_cot_makes_four_calls_one_criterion_per_phase_2_call_and_asks_no_reasoning(intent):
    script = Script(has_answer="No", criterion=1, final=1)
    outcome = strategy_run(intent_get(intent), "cot", PAIR, script, prompts="paper")
    assert len(script.prompts) == 4 == len(outcome.steps)
    assert [step.step for step in outcome.steps] == ["has_answer", "exactness", "coverage", "score"]
    phase1, exactness, coverage, final = (_text(messages) for messages in script.prompts)
    # Phase 1 asks only whether the passage answers: one key, no reason.
    assert "reason" not in phase1.lower() and '"has_answer"' in phase1
    # Phase 2: each call names one criterion (the paper's, even after a No: Exactness, then Coverage).
    assert "Exactness criterion" in exactness and "Coverage" not in exactness
    assert "Coverage criterion" in coverage and "Exactness" not in coverage
    for text in (exactness, coverage):
        assert "Topicality" not in text and "Contextual Fit" not in text
    # Phase 3 after a No: the No prompts, 0 or 1, and (as printed) no phase-2 scores.
    assert "(0 or 1)" in final and "(2 or 3)" not in final and "Exactness" not in final
    assert outcome.score == 1


def test_paper_cot_after_yes_asks_2_or_3_and_a_0_is_a_parse_error_kept_with_its_raw_text():
    script = Script(has_answer="yes", final=0)  # "yes" in lower case is read as Yes
    outcome = strategy_run(intent_get("QA"), "cot", PAIR, script, prompts="paper")
    assert "The passage is relevant. Rate how relevant (2 or 3)." in _text(script.prompts[-1])
    assert outcome.score is None and outcome.p is None
    assert outcome.parse_error == "cot, step score: 'relevance_score' is 0, outside the allowed [2, 3]"
    assert outcome.steps[-1].raw == '{"relevance_score": 0}' and outcome.steps[-1].value is None


def test_paper_multi_makes_five_calls_one_criterion_each_and_quotes_the_sub_scores():
    answers = iter(['{"criterion_score": 3}', '{"criterion_score": 1}', '{"criterion_score": 0}',
                    '{"criterion_score": 2}', '{"final_relevance_score": 2}'])
    prompts = []

    def generate(messages):
        prompts.append(messages)
        return next(answers)

    outcome = strategy_run(intent_get("FC"), "multi", PAIR, generate, prompts="paper")
    assert len(prompts) == 5
    names = ["Exactness", "Coverage", "Topicality", "Contextual Fit"]
    for name, messages in zip(names, prompts, strict=False):
        text = _text(messages)
        assert f"meets the {name} criterion" in text
        assert all(other not in text for other in names if other != name)
    assert "Exactness: 3, Coverage: 1, Topicality: 0, Contextual Fit: 2" in _text(prompts[4])
    assert [step.value for step in outcome.steps] == [3, 1, 0, 2, 2] and outcome.score == 2


@pytest.mark.parametrize("intent", ["QA", "FC", "NLI", "STS"])
def test_paper_prompts_leave_the_relevance_definition_out(intent):
    script = Script()
    ensemble_score(PAIR, generate=script, intent=intent, prompts="paper")
    for messages in script.prompts:
        assert DEFINITION not in _text(messages)
    # The legacy preset did put it in: the difference is the preset's, not the pair's.
    legacy = []

    def answer(messages):
        legacy.append(messages)
        return '{"score": 1}'

    strategy_run(intent_get(intent), "direct", PAIR, answer, prompts="legacy")
    assert DEFINITION in _text(legacy[0])


@pytest.mark.parametrize(("strategy", "answer", "error"), [
    ("direct", '{"score": 2}', "'final_score' key"),
    ("direct", '{"final_score": 4}', "'final_score' is 4, outside the allowed [0, 1, 2, 3]"),
    ("direct", '{"final_score": 2.0}', "'final_score' must be an integer"),
    ("cot", '{"has_answer": "Maybe"}', "'has_answer' must be \"yes\" or \"no\""),
    ("multi", '{"criterion_score": 5}', "'criterion_score' is 5, outside the allowed [0, 1, 2, 3]"),
    ("multi", "no JSON here", "no JSON object"),
])
def test_a_paper_answer_that_does_not_parse_is_kept_as_an_error(strategy, answer, error):
    outcome = strategy_run(intent_get("QA"), strategy, PAIR, lambda messages: answer, prompts="paper")
    assert outcome.score is None and error in outcome.parse_error
    assert outcome.raw_texts == (answer,)
    result = ensemble_combine(PAIR.pair_id, "QA", [outcome])
    assert result.status == "parse_error" and result.mean is None and result.relevant is None


def test_the_final_score_is_read_from_each_strategys_key_and_averaged():
    # direct 1 (final_score), cot 3 (relevance_score after Yes), multi 2 (final_relevance_score), fenced or not.
    def generate(messages):
        text = messages[-1]["content"]
        if '"has_answer"' in text:
            return 'Answer: ```json\n{"has_answer": "Yes"}\n```'
        if '"final_relevance_score"' in text:
            return '{"final_relevance_score": 2}'
        if '"criterion_score"' in text:
            return '{"criterion_score": 2}'
        if '"relevance_score"' in text:
            return 'I rate it {"relevance_score": 3}.'
        return '{"final_score": 1}'

    result = ensemble_score(PAIR, generate=generate, intent="QA", prompts="paper")
    assert {o.strategy: o.score for o in result.outcomes} == {"direct": 1, "cot": 3, "multi": 2}
    assert result.mean == pytest.approx((1 + 3 + 2) / 3) and result.p == pytest.approx(2 / 3)


def test_the_estimate_counts_the_papers_calls():
    # Paper: direct 1, cot 1 + 2 + 1, multi 4 + 1 = 10 calls per QA pair; STS direct only. Legacy: 1 + 3 + 2.
    sample = [(PAIR, "QA"), (PAIR, "STS")]
    paper = ensemble_token_estimate(sample, total_pairs=2, max_new_tokens=64, prompts="paper")
    legacy = ensemble_token_estimate(sample, total_pairs=2, max_new_tokens=64, prompts="legacy")
    assert paper.calls == (1 + 4 + 5) + 1
    assert legacy.calls == (1 + 3 + 2) + 1
    released = ensemble_token_estimate(sample, total_pairs=2, max_new_tokens=64, prompts="released-code")
    assert released.calls == paper.calls
    assert len(PAPER_STEPS["cot"]) == 4 and len(PAPER_STEPS["multi"]) == 5


@pytest.mark.parametrize(("intent", "after_no"), [
    # The released code's phase2_criteria_alt, in the paper's words: Table 10's and Table 11's multi definitions.
    ("QA", [("Contextual Fit criterion in relation to the query. The output should be a single score (0–3) "
            "indicating presence of relevant background information"),
            ("Topicality criterion in relation to the query. The output should be a single score (0–3) indicating "
            "subject alignment between passage and query")]),
    ("FC", [("Contextual Fit criterion in relation to the claim. The output should be a single score (0–3) "
            "indicating how much relevant background/context is provided to verify the claim"),
            ("Topicality criterion in relation to the claim. The output should be a single score (0–3) indicating "
            "how closely the subject matter aligns with the claim topic")]),
])
def test_released_code_cot_rates_contextual_fit_then_topicality_after_no_and_the_papers_two_after_yes(
        intent, after_no):
    no = Script(has_answer="No", final=0)
    outcome = strategy_run(intent_get(intent), "cot", PAIR, no, prompts="released-code")
    assert len(no.prompts) == 4 and outcome.score == 0
    assert after_no[0] in _text(no.prompts[1]) and after_no[1] in _text(no.prompts[2])
    yes = Script(has_answer="Yes", final=2)
    strategy_run(intent_get(intent), "cot", PAIR, yes, prompts="released-code")
    paper = Script(has_answer="Yes", final=2)
    strategy_run(intent_get(intent), "cot", PAIR, paper, prompts="paper")
    assert yes.prompts == paper.prompts  # after a Yes the two presets send the same four prompts
    # direct and multi are the paper's.
    for strategy in ("direct", "multi"):
        released, printed = Script(), Script()
        strategy_run(intent_get(intent), strategy, PAIR, released, prompts="released-code")
        strategy_run(intent_get(intent), strategy, PAIR, printed, prompts="paper")
        assert released.prompts == printed.prompts

"""The DisastIR ensemble's prompts as printed in the paper (Yin et al., EMNLP 2025 Findings, App. C, Tables
10-13): the `paper` prompt preset. Table 10 serves QA, QAdoc and Twitter, Table 11 FC, Table 12 NLI, Table 13
STS (direct only). The wording is the paper's, sentence by sentence; the bold markers of the PDF (**Passage:**)
are dropped. No relevance definition enters these prompts: the paper has none.

Steps, each one model call:
- direct: {"final_score": 0-3} (STS {"final_similarity_score": 0-5});
- cot: has_answer ({"has_answer": "Yes"/"No"}, nothing else asked) -> exactness -> coverage, one criterion per
  call ({"criterion_score": 0-3}) -> score ({"relevance_score": 2 or 3 after Yes, 0 or 1 after No}, the
  Yes/No-specific system and user prompts; as printed, phase 3 does not quote the phase 2 scores);
- multi: exactness -> coverage -> topicality -> contextual_fit, one per call ({"criterion_score": 0-3}) ->
  score ({"final_relevance_score": 0-3}, quoting the four sub-scores)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from models_llm.ensembles.answers import json_object, score_read, yes_no_read
from models_llm.ensembles.intents import Intent
from models_llm.types import PairInput

Messages = list[dict[str, str]]
CRITERIA_COT = ("exactness", "coverage")
CRITERIA_MULTI = ("exactness", "coverage", "topicality", "contextual_fit")
CRITERION_NAMES = {"exactness": "Exactness", "coverage": "Coverage", "topicality": "Topicality",
                   "contextual_fit": "Contextual Fit"}
_SCALE4 = ("0 = Not relevant at all / No information provided. 1 = Marginally relevant / Partially addresses the "
           "criterion. 2 = Fairly relevant / Adequately addresses the criterion. 3 = Highly relevant / Fully "
           "satisfies the criterion.")


@dataclass(frozen=True)
class PaperTable:
    """One table of App. C. `{q}` / `{p}` are the query and the passage, `{name}` / `{definition}` a
    criterion's; a None system prompt means the table prints none for that call."""

    direct_system: str | None
    direct_user: str
    has_answer: str = ""
    criterion_system: str | None = None
    criterion_user: str = ""
    cot_definitions: dict[str, str] | None = None
    final_system: dict[bool, str] | None = None
    final_user: dict[bool, str] | None = None
    multi_system: str | None = None
    multi_user: str = ""
    multi_definitions: dict[str, str] | None = None
    aggregate_system: str | None = None
    aggregate_user: str = ""


_DEFAULT_DEFINITIONS = {
    "exactness": "how precisely the passage answers the query",
    "coverage": "proportion of content discussing the query",
    "topicality": "subject alignment between passage and query",
    "contextual_fit": "presence of relevant background information",
}
TABLE_10 = PaperTable(
    direct_system="You are a search quality rater evaluating passage relevance based on detailed instructions and "
                  "outputting JSON.",
    direct_user="Given a query and a passage, provide a score (0–3): 0 = Irrelevant, 1 = Related, 2 = Highly "
                "relevant, 3 = Perfectly relevant.\n\nImportant: 1 if somewhat related but not completely, 2 if "
                "important info + extra, 3 if only refers to topic.\n\nQuery: {q}, Passage: {p}. Consider intent, "
                "content match (M), trustworthiness (T), then decide final score (O).\n"
                'Output MUST be JSON: {{"final_score": <0-3>}}',
    has_answer="Instruction: Given a passage and a query, predict whether the passage includes an answer to the "
               "query by producing either “Yes” or “No”. Query: {q}, Passage: {p}, Answer:\n\n"
               'Output your prediction as JSON: {{"has_answer": "Yes"}} or {{"has_answer": "No"}}',
    criterion_system="Please assess how well the provided passage meets specific criteria in relation to the query. "
                     "Use the following scoring scale (0–3) for evaluation: 0: Not relevant at all / No information "
                     "provided. 1: Marginally relevant / Partially addresses the criterion. 2: Fairly relevant / "
                     "Adequately addresses the criterion. 3: Highly relevant / Fully satisfies the criterion.\n\n"
                     'Your output MUST be JSON: {{"criterion_score": <0-3>}}',
    criterion_user="Please rate how well the given passage meets the {name} criterion in relation to the query. The "
                   "output should be a single score (0–3) indicating {definition}. Query: {q}, Passage: {p}, Output "
                   'JSON: {{"criterion_score": <integer_score_0_to_3>}}',
    cot_definitions=_DEFAULT_DEFINITIONS,
    final_system={
        True: "You are a search quality rater. Provide a final relevance score (2 or 3):\n\n2 = Highly relevant, "
              '3 = Perfectly relevant. Your output MUST be JSON: {{"relevance_score": <2_or_3>}}',
        False: "You are a search quality rater. Provide a final relevance score (0 or 1).\n\n0 = Irrelevant, "
               '1 = Related. Your output MUST be JSON: {{"relevance_score": <0_or_1>}}',
    },
    final_user={
        True: "The passage is relevant. Rate how relevant (2 or 3). Query: {q}, Passage: {p}, Output JSON: "
              '{{"relevance_score": <2_or_3>}}',
        False: "The passage is irrelevant. Rate how irrelevant (0 or 1). Query: {q}, Passage: {p}, Output JSON: "
               '{{"relevance_score": <0_or_1>}}',
    },
    multi_system="Please assess how well the provided passage meets specific criteria in relation to the query. Use "
                 f"the following scoring scale (0–3): {_SCALE4}\n\n"
                 'Your output MUST be JSON: {{"criterion_score": <0-3>}}',
    multi_user="Please rate how well the given passage meets the {name} criterion in relation to the query. The "
               "output should be a single score (0–3) indicating {definition}.\n\nQuery: {q}, Passage: {p}, Output "
               'JSON: {{"criterion_score": <integer_score_0_to_3>}}',
    multi_definitions=_DEFAULT_DEFINITIONS,
    aggregate_system="You are a search quality rater evaluating overall relevance. Given a query, passage, and "
                     "sub-scores, provide a final score (0–3): 3 = Perfectly relevant, 2 = Highly relevant, 1 = "
                     'Related, 0 = Irrelevant. Your output MUST be JSON: {{"final_relevance_score": <0-3>}}',
    aggregate_user="Please rate how relevant the passage is based on the given sub-scores. Query: {q}, Passage: {p}, "
                   "{scores}.\n\nOutput your final rating as JSON: "
                   '{{"final_relevance_score": <integer_score_0_to_3>}}',
)
TABLE_11 = PaperTable(
    direct_system="You are a search quality rater evaluating evidence for fact-checking and outputting JSON.",
    direct_user="Given a claim and a passage, score relevance (0–3): 0 = Irrelevant, 1 = Related (no help), 2 = "
                "Relevant (unclear/mixed), 3 = Direct support/refutation.\n\nImportant: 1 if related but no help, "
                "2 if important info + noise, 3 if clearly supports/refutes.\n\nClaim: {q}, Passage: {p}. Consider "
                "intent, support/refutation (M), trustworthiness (T), then decide final score (O). Output MUST be "
                'JSON: {{"final_score": <0_to_3>}}',
    has_answer="Instruction: Given a passage and a claim, predict whether the passage includes information that "
               "supports or refutes the claim by producing either “Yes” or “No”.\n\nClaim: {q}, Passage: {p}. "
               'Output JSON: {{"has_answer": "Yes"}} or {{"has_answer": "No"}}',
    criterion_system="Please assess how well the provided passage serves as evidence for evaluating the claim. Use "
                     f"the following scoring scale (0–3): {_SCALE4} Your output MUST be JSON: "
                     '{{"criterion_score": <0_to_3>}}',
    criterion_user="Please rate how well the given passage meets the {name} criterion in relation to the claim. The "
                   "output should be a single score (0–3) indicating {definition}.\n\nClaim: {q}, Passage: {p}. "
                   'Output JSON: {{"criterion_score": <integer_score_0_to_3>}}',
    cot_definitions={
        "exactness": "how precisely the passage supports or refutes the claim",
        "coverage": "the extent to which the passage discusses content directly relevant to the claim",
    },
    final_system={
        True: "You are a rater evaluating evidence for fact-checking. Score (2 or 3): 2 = Highly relevant (some "
              "support/refutation), 3 = Perfectly relevant (direct support/refutation). Your output MUST be JSON: "
              '{{"relevance_score": <2_or_3>}}',
        False: "You are a rater evaluating evidence for fact-checking. Score (0 or 1): 0 = Irrelevant, 1 = Related "
               '(no support/refutation). Your output MUST be JSON: {{"relevance_score": <0_or_1>}}',
    },
    final_user={
        True: "Passage is relevant. Rate its relevance (2 or 3). Claim: {q}, Passage: {p}. Output JSON: "
              '{{"relevance_score": <2_or_3>}}',
        False: "Passage irrelevant for evidence. Rate its relevance (0 or 1). Claim: {q}, Passage: {p}. Output JSON: "
               '{{"relevance_score": <0_or_1>}}',
    },
    multi_system="Please assess how well the provided passage serves as evidence for evaluating the claim according "
                 f"to the following criteria. Use a score (0–3): {_SCALE4} Your output MUST be JSON: "
                 '{{"criterion_score": <0_to_3>}}',
    multi_user="Please rate how well the given passage meets the {name} criterion in relation to the claim. The "
               "output should be a single score (0–3) indicating {definition}.\n\nClaim: {q}, Passage: {p}. Output "
               'JSON: {{"criterion_score": <0_to_3>}}',
    multi_definitions={
        "exactness": "how precisely the passage supports or refutes the claim",
        "coverage": "the extent to which the passage discusses content directly relevant to the claim",
        "topicality": "how closely the subject matter aligns with the claim topic",
        "contextual_fit": "how much relevant background/context is provided to verify the claim",
    },
    aggregate_system="You are a search quality rater evaluating evidence relevance for fact-checking. Given a claim, "
                     "passage, and sub-scores, provide a final score (0–3): 3 = Perfectly relevant (direct "
                     "support/refutation), 2 = Highly relevant (helps verification), 1 = Related (topic match, no "
                     "verification aid), 0 = Irrelevant. Your output MUST be JSON: "
                     '{{"final_relevance_score": <0_to_3>}}',
    aggregate_user="Please rate how relevant the given passage is to the claim based on the given scores.\n\n"
                   'Claim: {q}, Passage: {p}, {scores}. Output JSON: {{"final_relevance_score": <0_to_3>}}',
)
_NLI_DEFINITIONS = {
    "exactness": "how precisely the hypothesis is entailed by the premise",
    "coverage": "the extent to which the hypothesis reflects core information from the premise",
    "topicality": "how closely the subject matter of the hypothesis aligns with that of the premise",
    "contextual_fit": "how well the hypothesis fits within the context or background established by the premise",
}
TABLE_12 = PaperTable(
    direct_system="You are a rater evaluating entailment. Output only the final score in JSON.",
    direct_user="Given a premise and hypothesis, score entailment (0–3): 0 = Not entailed/Contradicted, 1 = Related "
                "not entailed, 2 = Mostly entailed, 3 = Perfectly entailed.\n\nImportant: 1 if related but not "
                "inferable, 2 if captures important implied content but not fully, 3 if clearly/fully supported.\n\n"
                "Premise: {q}, Hypothesis: {p}. Consider premise implications, logical following (E), info gaps, then "
                'decide final score (O). Output MUST be JSON: {{"final_score": <0_to_3>}}',
    has_answer="Instruction: Given a hypothesis and a premise, predict whether the hypothesis is entailed by the "
               "premise by producing either “Yes” or “No”.\n\nPremise: {q}, Hypothesis: {p}. Output JSON: "
               '{{"has_answer": "Yes"}} or {{"has_answer": "No"}}',
    # Table 12 prints phase 2 as one "System prompt" that ends with the premise and hypothesis: its instruction is
    # sent as the system message, the pair and the output line as the user message.
    criterion_system="Please assess how well the given hypothesis meets the {name} criterion in relation to the "
                     "premise. Use a single score (0–3) indicating {definition}.",
    criterion_user='Premise: {q}, Hypothesis: {p}. Output JSON: {{"criterion_score": <0_to_3>}}',
    cot_definitions={key: _NLI_DEFINITIONS[key] for key in CRITERIA_COT},
    final_system={
        True: "You are a rater evaluating entailment. Provide a final score (2 or 3): 2 = Mostly entailed, 3 = "
              'Perfectly entailed. Your output MUST be JSON: {{"relevance_score": <2_or_3>}}',
        False: "You are a rater evaluating entailment. Provide a final score (0 or 1): 0 = Not entailed/"
               "Contradicted, 1 = Related but not entailed. Your output MUST be JSON: "
               '{{"relevance_score": <0_or_1>}}',
    },
    final_user={
        True: "Hypothesis is entailed. Rate how well (2 or 3). Premise: {q}, Hypothesis: {p}. Output JSON: "
              '{{"relevance_score": <2_or_3>}}',
        False: "Hypothesis is not entailed. Rate how (0 or 1). Premise: {q}, Hypothesis: {p}. Output JSON: "
               '{{"relevance_score": <0_or_1>}}',
    },
    multi_system="Please assess how well the hypothesis is entailed by the premise according to the following "
                 f"criteria. Use a score (0–3): {_SCALE4} Your output MUST be JSON: "
                 '{{"criterion_score": <0_to_3>}}',
    multi_user="Please rate how well the given hypothesis meets the {name} criterion in relation to the premise. The "
               "output should be a single score (0–3) indicating {definition}.\n\nPremise: {q}, Hypothesis: {p}. "
               'Output JSON: {{"criterion_score": <0_to_3>}}',
    multi_definitions=_NLI_DEFINITIONS,
    aggregate_system="You are a search quality rater evaluating entailment. Given a premise, hypothesis, and "
                     "sub-scores, provide a final score (0–3): 3 = Perfectly entailed, 2 = Mostly entailed, 1 = "
                     "Related but not entailed, 0 = Not entailed/Contradicted. Your output MUST be JSON: "
                     '{{"final_relevance_score": <0_to_3>}}',
    aggregate_user="Please rate how well the hypothesis is entailed by the premise based on the given scores.\n\n"
                   'Premise: {q}, Hypothesis: {p}, {scores}. Output JSON: {{"final_relevance_score": <0_to_3>}}',
)
TABLE_13 = PaperTable(
    direct_system="You are a semantic-similarity rater. Output JSON with a score (0–5) where 0 = unrelated, 5 = "
                  "semantically equivalent.",
    direct_user="Rate the semantic similarity 0–5: 0 = unrelated | 1 = slight | 2 = partial | 3 = moderate | "
                "4 = high | 5 = equivalent\n\nSentence A: {q} Sentence B: {p}\n\n"
                'Output JSON: {{"final_similarity_score": <0_to_5>}}',
)
TABLES: dict[str, PaperTable] = {"QA": TABLE_10, "QAdoc": TABLE_10, "Twitter": TABLE_10, "FC": TABLE_11,
                                 "NLI": TABLE_12, "STS": TABLE_13}
DIRECT_KEY = {"STS": "final_similarity_score"}


def table_for(intent: Intent) -> PaperTable:
    return TABLES[intent.name]


def _passage(pair: PairInput) -> str:
    return f"{pair.title.strip()}\n{pair.passage.strip()}" if pair.title.strip() else pair.passage.strip()


def _fill(template: str, pair: PairInput, **extra: str) -> str:
    # One pass of str.format over the template: braces in the query or passage are never read as fields.
    return template.format(q=pair.query.strip(), p=_passage(pair), **extra)


def _messages(system: str | None, user: str) -> Messages:
    messages = [{"role": "system", "content": system}] if system else []
    return [*messages, {"role": "user", "content": user}]


# -- direct --------------------------------------------------------------------------------------------

def direct_build(intent: Intent, pair: PairInput, earlier: tuple[Any, ...]) -> Messages:
    table = table_for(intent)
    return _messages(table.direct_system, _fill(table.direct_user, pair))


def direct_parse(intent: Intent, raw: str, earlier: tuple[Any, ...]) -> int:
    return score_read(json_object(raw), DIRECT_KEY.get(intent.name, "final_score"), range(intent.max_score + 1))


# -- cot -----------------------------------------------------------------------------------------------

def has_answer_build(intent: Intent, pair: PairInput, earlier: tuple[Any, ...]) -> Messages:
    return _messages(None, _fill(table_for(intent).has_answer, pair))


def has_answer_parse(intent: Intent, raw: str, earlier: tuple[Any, ...]) -> bool:
    return yes_no_read(json_object(raw), "has_answer")


def _criterion_messages(system: str, user: str, definitions: dict[str, str], criterion: str,
                        pair: PairInput) -> Messages:
    names = {"name": CRITERION_NAMES[criterion], "definition": definitions[criterion]}
    return _messages(system.format(**names), _fill(user, pair, **names))


def _criterion_parse(intent: Intent, raw: str, earlier: tuple[Any, ...]) -> int:
    return score_read(json_object(raw), "criterion_score", range(4))


def cot_criterion_step(criterion: str):
    def build(intent: Intent, pair: PairInput, earlier: tuple[Any, ...]) -> Messages:
        table = table_for(intent)
        return _criterion_messages(table.criterion_system, table.criterion_user, table.cot_definitions, criterion,
                                   pair)
    return build


# The released code's cot (github.com/KaiYin97/Disaster_IR, cot_rater.py: phase2_criteria_alt) rates Contextual Fit
# then Topicality after a No, where the paper names Exactness and Coverage only. The `released-code` preset asks
# them in the paper's words (Table 10-12's cot criterion prompts, the multi strategy's definitions).
CRITERIA_AFTER_NO_RELEASED = ("contextual_fit", "topicality")


def released_criteria(holds: bool) -> tuple[str, ...]:
    """The two criteria the released code's cot rates after its phase 1 answer."""
    return CRITERIA_COT if holds else CRITERIA_AFTER_NO_RELEASED


def released_criterion_step(index: int):
    def build(intent: Intent, pair: PairInput, earlier: tuple[Any, ...]) -> Messages:
        table = table_for(intent)
        holds = earlier[0]
        definitions = table.cot_definitions if holds else table.multi_definitions
        return _criterion_messages(table.criterion_system, table.criterion_user, definitions,
                                   released_criteria(holds)[index], pair)
    return build


def cot_final_build(intent: Intent, pair: PairInput, earlier: tuple[Any, ...]) -> Messages:
    holds = earlier[0]
    table = table_for(intent)
    return _messages(table.final_system[holds].format(), _fill(table.final_user[holds], pair))


def cot_final_parse(intent: Intent, raw: str, earlier: tuple[Any, ...]) -> int:
    return score_read(json_object(raw), "relevance_score", (2, 3) if earlier[0] else (0, 1))


# -- multi ---------------------------------------------------------------------------------------------

def multi_criterion_step(criterion: str):
    def build(intent: Intent, pair: PairInput, earlier: tuple[Any, ...]) -> Messages:
        table = table_for(intent)
        return _criterion_messages(table.multi_system, table.multi_user, table.multi_definitions, criterion, pair)
    return build


def aggregate_build(intent: Intent, pair: PairInput, earlier: tuple[Any, ...]) -> Messages:
    table = table_for(intent)
    scores = ", ".join(f"{CRITERION_NAMES[name]}: {score}" for name, score in zip(CRITERIA_MULTI, earlier,
                                                                                   strict=True))
    return _messages(table.aggregate_system.format(), _fill(table.aggregate_user, pair, scores=scores))


def aggregate_parse(intent: Intent, raw: str, earlier: tuple[Any, ...]) -> int:
    return score_read(json_object(raw), "final_relevance_score", range(intent.max_score + 1))


criterion_parse = _criterion_parse

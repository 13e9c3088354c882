"""The six DisastIR search intents: what the query and the passage are, and what each grade, criterion and
yes/no question means for that intent."""
from __future__ import annotations

from dataclasses import dataclass

DEFAULT_INTENT = "QA"
STRATEGIES = ("direct", "cot", "multi")


class EnsembleConfigError(ValueError):
    """An intent or strategy the ensemble does not know, or a strategy the intent does not use."""


@dataclass(frozen=True)
class Intent:
    """How one search intent reads a (query, passage) pair. `grades[n]` is the meaning of score n, so
    len(grades) - 1 is the top score; `target` names what a relevant passage holds ("the answer")."""

    name: str
    task: str
    query_label: str
    passage_label: str
    target: str
    grades: tuple[str, ...]
    holds_question: str
    strategies: tuple[str, ...] = STRATEGIES

    @property
    def max_score(self) -> int:
        return len(self.grades) - 1


_ALL = (
    Intent(
        name="QA",
        task="decide how well a passage answers a question",
        query_label="Question",
        passage_label="Passage",
        target="the answer to the question",
        grades=(
            "the passage has nothing to do with the question",
            "the passage is on the question's topic but does not answer it",
            "the passage answers the question in part, or only with some inference",
            "the passage answers the question directly and completely",
        ),
        holds_question="Does the passage contain the answer to the question, even in part?",
    ),
    Intent(
        name="QAdoc",
        task="decide how well a document answers a question",
        query_label="Question",
        passage_label="Document",
        target="the answer to the question",
        grades=(
            "the document has nothing to do with the question",
            "the document is on the question's topic but does not answer it",
            "the document answers the question in part, or the answer must be pieced together",
            "the document answers the question fully, in one place or across its sections",
        ),
        holds_question="Does the document answer the question, even in part?",
    ),
    Intent(
        name="Twitter",
        task="decide how closely a social media post is about the people, places or events named in a query",
        query_label="Named entities",
        passage_label="Post",
        target="content about the named entities",
        grades=(
            "the post mentions none of the named entities",
            "the post names an entity in passing without saying anything about it",
            "the post is partly about the named entities",
            "the post is squarely about the named entities",
        ),
        holds_question="Is the post about the named entities?",
    ),
    Intent(
        name="FC",
        task="decide how useful a passage is as evidence to check a claim",
        query_label="Claim",
        passage_label="Passage",
        target="evidence that supports or refutes the claim",
        grades=(
            "the passage has nothing to do with the claim",
            "the passage is on the claim's topic but neither supports nor refutes it",
            "the passage gives indirect or partial evidence for or against the claim",
            "the passage clearly supports or clearly refutes the claim",
        ),
        holds_question="Does the passage hold evidence that supports or refutes the claim?",
    ),
    Intent(
        name="NLI",
        task="decide whether a passage (the premise) entails a statement (the hypothesis)",
        query_label="Hypothesis",
        passage_label="Premise",
        target="support that makes the hypothesis true",
        grades=(
            "the premise is unrelated to the hypothesis, or contradicts it",
            "the premise is on the same topic but leaves the hypothesis undecided",
            "the premise makes the hypothesis likely, with some assumptions",
            "the premise entails the hypothesis: if the premise is true, so is the hypothesis",
        ),
        holds_question="Does the premise entail the hypothesis?",
    ),
    Intent(
        name="STS",
        task="decide how close in meaning two texts are",
        query_label="Sentence",
        passage_label="Text",
        target="the meaning of the sentence",
        grades=(
            "the two texts are on different topics",
            "the two texts are not equivalent but share a topic",
            "the two texts are not equivalent but share some details",
            "the two texts are roughly equivalent, with important information differing or missing",
            "the two texts are mostly equivalent, with unimportant details differing",
            "the two texts mean the same thing",
        ),
        holds_question="Do the two texts mean the same thing?",
        strategies=("direct",),
    ),
)
INTENTS: dict[str, Intent] = {intent.name: intent for intent in _ALL}


def intent_get(name: str = DEFAULT_INTENT) -> Intent:
    """The intent called `name` (QA, QAdoc, Twitter, FC, NLI, STS); EnsembleConfigError for any other."""
    try:
        return INTENTS[name]
    except KeyError:
        raise EnsembleConfigError(f"unknown intent {name!r}; the intents are {list(INTENTS)}") from None


def strategies_check(intent: Intent, strategies: tuple[str, ...]) -> tuple[str, ...]:
    """`strategies` if each is known and used by `intent` (STS uses direct only), else EnsembleConfigError."""
    if not strategies:
        raise EnsembleConfigError("an ensemble needs at least one strategy")
    for strategy in strategies:
        if strategy not in STRATEGIES:
            raise EnsembleConfigError(f"unknown strategy {strategy!r}; the strategies are {list(STRATEGIES)}")
        if strategy not in intent.strategies:
            raise EnsembleConfigError(f"intent {intent.name} uses only {list(intent.strategies)}, not {strategy!r}")
    if len(set(strategies)) != len(strategies):
        raise EnsembleConfigError(f"a strategy is listed twice in {list(strategies)}")
    return strategies

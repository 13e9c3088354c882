"""The six DisastIR search intents: what the query and the passage are, and what each grade, criterion and
yes/no question means for that intent."""
from __future__ import annotations

from dataclasses import dataclass

DEFAULT_INTENT = "QA"
STRATEGIES = ("direct", "cot", "multi")


class EnsembleConfigError(ValueError):
    """An intent or strategy the ensemble does not know, or a strategy the intent does not use."""


@dataclass(frozen=True)
class CriterionMeanings:
    """What each 0-3 criterion of the cot and multi strategies measures for one intent (DisastIR's
    CRITERIA_DEFAULT / _FACTCHECK / _NLI, reworded)."""

    exactness: str
    coverage: str
    topicality: str
    contextual_fit: str


@dataclass(frozen=True)
class Intent:
    """How one search intent reads a (query, passage) pair. `grades[n]` is the meaning of score n, so
    len(grades) - 1 is the top score. The query always fills the `query_label` slot and the passage the
    `passage_label` slot, as in DisastIR's prompts (input1 = the query, input2 = the passage): for NLI the
    query is the premise and the passage the hypothesis it should entail."""

    name: str
    task: str
    query_label: str
    passage_label: str
    grades: tuple[str, ...]
    holds_question: str
    criteria: CriterionMeanings | None = None  # None only for an intent that uses direct alone (STS)
    strategies: tuple[str, ...] = STRATEGIES

    @property
    def max_score(self) -> int:
        return len(self.grades) - 1


def _answering(passage: str, query: str) -> CriterionMeanings:
    return CriterionMeanings(
        exactness=f"how precisely the {passage} answers the {query}",
        coverage=f"how much of the {passage}'s content discusses the {query}",
        topicality=f"how closely the subject of the {passage} matches that of the {query}",
        contextual_fit=f"how much relevant background information the {passage} gives",
    )


_ALL = (
    Intent(
        name="QA",
        task="decide how well a passage answers a question",
        query_label="Question",
        passage_label="Passage",
        grades=(
            "the passage has nothing to do with the question",
            "the passage is on the question's topic but does not answer it",
            "the passage answers the question in part, or the answer is unclear or hidden among other content",
            "the passage is dedicated to the question and holds the exact answer",
        ),
        holds_question="Does the passage contain the answer to the question, even in part?",
        criteria=_answering("passage", "question"),
    ),
    Intent(
        name="QAdoc",
        task="decide how well a document answers a question",
        query_label="Question",
        passage_label="Document",
        grades=(
            "the document has nothing to do with the question",
            "the document is on the question's topic but does not answer it",
            "the document answers the question in part, or the answer is unclear or hidden among other content",
            "the document is dedicated to the question and answers it fully",
        ),
        holds_question="Does the document answer the question, even in part?",
        criteria=_answering("document", "question"),
    ),
    Intent(
        name="Twitter",
        task="decide how much a social media post tells about the entities (organisations, places, events, "
             "people) that a query mentions",
        query_label="Query",
        passage_label="Post",
        grades=(
            "the post has nothing to do with the query",
            "the post is on the query's topic but says nothing useful about its entities",
            "the post tells something about the query's entities, but little or among other content",
            "the post is about the query's entities and informative about them",
        ),
        holds_question="Does the post give information about the entities the query mentions?",
        criteria=_answering("post", "query"),
    ),
    Intent(
        name="FC",
        task="decide how useful a passage is as evidence to check a claim",
        query_label="Claim",
        passage_label="Passage",
        grades=(
            "the passage has nothing to do with the claim",
            "the passage is on the claim's topic but does not help to verify it",
            "the passage helps to verify the claim, but its evidence is unclear or mixed with other content",
            "the passage clearly supports or clearly refutes the claim",
        ),
        holds_question="Does the passage hold information that supports or refutes the claim?",
        criteria=CriterionMeanings(
            exactness="how precisely the passage supports or refutes the claim",
            coverage="how much of the passage's content bears directly on the claim",
            topicality="how closely the subject of the passage matches the topic of the claim",
            contextual_fit="how much background information the passage gives that helps to verify the claim",
        ),
    ),
    Intent(
        name="NLI",
        task="decide whether a passage (the hypothesis) is entailed by a query (the premise)",
        query_label="Premise",
        passage_label="Hypothesis",
        grades=(
            "the premise does not entail the hypothesis, or contradicts it",
            "the hypothesis is related to the premise but not entailed by it",
            "the hypothesis is mostly entailed by the premise",
            "the hypothesis is fully entailed by the premise: if the premise is true, so is the hypothesis",
        ),
        holds_question="Is the hypothesis entailed by the premise?",
        criteria=CriterionMeanings(
            exactness="how precisely the hypothesis is entailed by the premise",
            coverage="how much of the core information of the premise the hypothesis reflects",
            topicality="how closely the subject of the hypothesis matches that of the premise",
            contextual_fit="how well the hypothesis fits the context or background the premise sets",
        ),
    ),
    Intent(
        name="STS",
        task="decide how close in meaning two sentences are",
        query_label="Sentence A",
        passage_label="Sentence B",
        grades=(
            "the two sentences are unrelated",
            "the two sentences are slightly similar: they share a topic",
            "the two sentences are partly similar: they share some details",
            "the two sentences are moderately similar, with important information differing or missing",
            "the two sentences are highly similar, with unimportant details differing",
            "the two sentences are semantically equivalent",
        ),
        holds_question="Do the two sentences mean the same thing?",
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

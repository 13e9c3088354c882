"""Reading a judge's answer text: the `[Guess]: Yes|No` and `[Confidence]: 0..1` of an Ask answer, or the
`[Probability Helpful]: 0..1` of DIRAS's probability prompt."""
from __future__ import annotations

import re
from dataclasses import dataclass

# "[Guess]: Yes or No" is the format echoed back, not an answer.
_GUESS = re.compile(r"\[\s*guess\s*\]\s*:?\s*\**\s*(yes|no)\b(?!\s*(?:or|/)\s*(?:yes|no)\b)", re.IGNORECASE)
_CONFIDENCE = re.compile(r"\[\s*confidence\s*\]\s*:?\s*\**\s*([0-9]*\.?[0-9]+)\s*(%?)", re.IGNORECASE)
# A sign is read so that "-0.2" is refused as out of range rather than read as 0.2.
_PROBABILITY = re.compile(r"\[\s*probability\s+helpful\s*\]\s*:?\s*\**\s*([-+]?[0-9]*\.?[0-9]+)\s*(%?)",
                          re.IGNORECASE)


class AnswerParseError(ValueError):
    """The answer does not hold a guess and a confidence in the asked format."""


@dataclass(frozen=True)
class AskAnswer:
    guess: bool
    confidence: float

    @property
    def p_relevant(self) -> float:
        """P(relevant): the confidence of a Yes, one minus the confidence of a No."""
        return self.confidence if self.guess else 1.0 - self.confidence


def _unit_value(match: re.Match, what: str) -> float:
    """The number of a `(<number>)(%?)` match as a value in [0, 1] ("85%" is 0.85); outside it, a parse error."""
    value = float(match.group(1))
    if match.group(2) == "%":
        value /= 100.0
    if not 0.0 <= value <= 1.0:
        raise AnswerParseError(f"{what} {match.group(1)}{match.group(2)} is outside [0, 1]")
    return value


def parse_ask_answer(text: str) -> AskAnswer:
    """Parse an Ask answer; the first `[Guess]` and the first `[Confidence]` after it count. A confidence
    written as a percentage ("85%") is read as 0.85; anything outside [0, 1] is a parse error."""
    guess = _GUESS.search(text)
    if guess is None:
        raise AnswerParseError("no '[Guess]: Yes' or '[Guess]: No' in the answer")
    confidence = _CONFIDENCE.search(text, guess.end())
    if confidence is None:
        raise AnswerParseError("no '[Confidence]: <number>' after the guess")
    return AskAnswer(guess=guess.group(1).lower() == "yes", confidence=_unit_value(confidence, "confidence"))


def parse_probability_answer(text: str) -> AskAnswer:
    """Parse DIRAS's probability answer: the first `[Probability Helpful]: <number>` is P(relevant) ("85%" is
    0.85); a missing one or one outside [0, 1] is a parse error, never a guess."""
    match = _PROBABILITY.search(text)
    if match is None:
        raise AnswerParseError("no '[Probability Helpful]: <number>' in the answer")
    value = _unit_value(match, "[Probability Helpful]")
    guess = value >= 0.5
    return AskAnswer(guess=guess, confidence=value if guess else 1.0 - value)


def parse_answer(text: str, answer: str = "guess_confidence") -> AskAnswer:
    """Parse an Ask answer in the template's answer format (prompts.SETTINGS["answer"])."""
    if answer == "probability":
        return parse_probability_answer(text)
    if answer == "guess_confidence":
        return parse_ask_answer(text)
    raise ValueError(f"unknown answer format {answer!r}")

"""DIRAS-style judging prompts, kept as data: a template is a dict of named text blocks that an admin can
read and copy into a new judge. Everything a query's pairs share (role, definition, question) comes first
and the paragraph last, so a backend can compute the shared prefix once per query: the ask and the answer
format come before the paragraph, so that only the paragraph's own tokens run per pair."""
from __future__ import annotations

from dataclasses import dataclass

from models_llm.types import JudgeConfig, PairInput

DEFAULT_TEMPLATE: dict[str, str] = {
    "role": (
        "You are an expert analyst. You read one paragraph from a longer document and decide whether it "
        "helps to answer a question."
    ),
    "definition": "Background information on the question (what it means and what it looks for):\n{definition}\n\n",
    "question": "Question: {question}\n\n",
    "ask": "Is the paragraph below helpful for answering the question, even partly?\n",
    "format": (
        "Answer in exactly this format:\n"
        "[Guess]: Yes or No\n"
        "[Confidence]: a number from 0.0 to 1.0, how likely your guess is right\n\n"
    ),
    "format_cot": (
        "Answer in exactly this format:\n"
        "[Reason]: one or two sentences on what the paragraph says about the question\n"
        "[Guess]: Yes or No\n"
        "[Confidence]: a number from 0.0 to 1.0, how likely your guess is right\n\n"
    ),
    "paragraph": "Paragraph:\n{paragraph}",
}
TEMPLATE_KEYS = tuple(DEFAULT_TEMPLATE)
TOK_ANSWER_PREFIX = "[Guess]:"


class TemplateError(ValueError):
    """A prompt template that cannot be used (unknown or missing block, bad placeholder)."""


@dataclass(frozen=True)
class PromptText:
    """One pair's prompt as chat text. `user_shared` is identical for every pair of a query and is a prefix
    of the user message; `answer_prefix` starts the assistant's turn ("[Guess]:" for Tok)."""

    system: str
    user_shared: str
    user_own: str
    answer_prefix: str

    @property
    def user(self) -> str:
        return self.user_shared + self.user_own

    def messages(self) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]


def template_validate(template: dict[str, str]) -> dict[str, str]:
    """The full template: `template` over the default; raises TemplateError naming the problem."""
    unknown = sorted(set(template) - set(TEMPLATE_KEYS))
    if unknown:
        raise TemplateError(f"unknown template blocks {unknown}; the blocks are {list(TEMPLATE_KEYS)}")
    merged = {**DEFAULT_TEMPLATE, **template}
    for key, placeholder in (("definition", "{definition}"), ("question", "{question}"), ("paragraph", "{paragraph}")):
        if placeholder not in merged[key]:
            raise TemplateError(f"template block {key!r} must contain {placeholder}")
    for key, text in merged.items():
        if not isinstance(text, str):
            raise TemplateError(f"template block {key!r} must be text")
    return merged


def _fill(block: str, **values: str) -> str:
    # str.replace, not str.format: passages and definitions are untrusted text full of braces.
    for name, value in values.items():
        block = block.replace("{" + name + "}", value)
    return block


def build_prompt(pair: PairInput, config: JudgeConfig) -> PromptText:
    """The prompt for `pair` under `config` (its template, Tok or Ask, CoT, with or without definition)."""
    template = template_validate(config.template)
    shared = ""
    if config.use_definition and pair.definition:
        shared += _fill(template["definition"], definition=pair.definition.strip())
    shared += _fill(template["question"], question=pair.query.strip())
    paragraph = f"{pair.title.strip()}\n{pair.passage.strip()}" if pair.title.strip() else pair.passage.strip()
    shared += template["ask"] + (template["format_cot"] if config.cot else template["format"])
    own = _fill(template["paragraph"], paragraph=paragraph)
    if config.method == "tok":
        answer_prefix = TOK_ANSWER_PREFIX
    else:
        answer_prefix = ""
    return PromptText(system=template["role"], user_shared=shared, user_own=own, answer_prefix=answer_prefix)

"""DIRAS-style judging prompts, kept as data: a template is a dict of named text blocks that an admin can
read and copy into a new judge, plus two settings (`layout`, `answer`). Everything a query's pairs share
(role, definition, question) comes first, so a backend can compute the shared prefix once per query. The
default layout puts the ask and the answer format before the paragraph too, so that only the paragraph's own
tokens run per pair; DIRAS's published prompts (the presets) put the paragraph before the ask."""
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
    "intro": "",  # the user message's opening, before the definition
    # ask_first: intro, definition, question, ask + format, paragraph (only the paragraph runs per pair);
    # paragraph_first: intro, definition, question, paragraph, ask + format (DIRAS's published order).
    "layout": "ask_first",
    # guess_confidence: "[Guess]: Yes|No" and "[Confidence]: 0..1"; probability: "[Probability Helpful]: 0..1"
    # (Ask only: Tok reads P(Yes) at "[Guess]:").
    "answer": "guess_confidence",
}
TEMPLATE_KEYS = tuple(DEFAULT_TEMPLATE)
SETTINGS = {"layout": ("ask_first", "paragraph_first"), "answer": ("guess_confidence", "probability")}
TOK_ANSWER_PREFIX = "[Guess]:"


class TemplateError(ValueError):
    """A prompt template that cannot be used (unknown or missing block, bad placeholder)."""


@dataclass(frozen=True)
class PromptText:
    """One pair's prompt as chat text. `user_shared` is identical for every pair of a query and is a prefix
    of the user message; `answer_prefix` is where Tok reads P(Yes) ("[Guess]:"): it starts the assistant's
    turn, or with `reason_first` (Tok with CoT) it follows the reason the model writes first. `answer` is
    the answer format the Ask parser reads (SETTINGS["answer"])."""

    system: str
    user_shared: str
    user_own: str
    answer_prefix: str
    reason_first: bool = False
    answer: str = "guess_confidence"

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
    for key, allowed in SETTINGS.items():
        if merged[key] not in allowed:
            raise TemplateError(f"template setting {key!r} must be one of {list(allowed)}, got {merged[key]!r}")
    return merged


def _fill(block: str, **values: str) -> str:
    # str.replace, not str.format: passages and definitions are untrusted text full of braces.
    for name, value in values.items():
        block = block.replace("{" + name + "}", value)
    return block


def build_prompt(pair: PairInput, config: JudgeConfig) -> PromptText:
    """The prompt for `pair` under `config` (its template, Tok or Ask, CoT, with or without definition)."""
    template = template_validate(config.template)
    shared = template["intro"]
    if config.use_definition and pair.definition:
        shared += _fill(template["definition"], definition=pair.definition.strip())
    shared += _fill(template["question"], question=pair.query.strip())
    paragraph = f"{pair.title.strip()}\n{pair.passage.strip()}" if pair.title.strip() else pair.passage.strip()
    ask = template["ask"] + (template["format_cot"] if config.cot else template["format"])
    own = _fill(template["paragraph"], paragraph=paragraph)
    if template["layout"] == "ask_first":
        shared += ask
    else:
        own += ask
    tok = config.method == "tok"
    return PromptText(system=template["role"], user_shared=shared, user_own=own,
                      answer_prefix=TOK_ANSWER_PREFIX if tok else "", reason_first=tok and config.cot,
                      answer=template["answer"])


# -- DIRAS's published prompts (Ni et al., 2024) as presets ------------------------------------------------
# Two sources word them differently: the paper's figures (Fig. 9, 10, 11) and the released code
# (github.com/EdisonNi-hku/DIRAS, code/get_training_data.py: USER_PROMPT with [Reason], TRAIN_PROMPT without).
# Where they differ there is a preset for each; the *-paper presets are the figures as printed, typos included
# ("even it only" in Fig. 10). The code has no [Probability Helpful] prompt: that preset is Fig. 10 alone.

_DIRAS_SYSTEM = ("You are a helpful assistant who assists human analysts in identifying useful information within "
                 "sustainability reports for their analysis.")
_DIRAS_ASK = ("Is <paragraph> helpful for answering <question>? Note that the <paragraph> can be helpful even it "
              "only addresses part of the <question> without fully answering it. ")
_DIRAS_REASON = ("[Reason]: <Reason why and how the paragraph is helpful or not helpful for answering the question. "
                 "Clearly indicate your stance.>\n")
_DIRAS_GUESS = '[Guess]: <Your most likely guess, should be one of "Yes" or "No".>\n'
_DIRAS_CONFIDENCE = ("[Confidence]: <Give your honest confidence score between 0.0 and 1.0 about the correctness "
                     "of your guess. 0 means your previous guess is very likely to be wrong, and 1 means you are "
                     "very confident about the guess.>")
# Fig. 10 as printed: the guess stays, and the probability is explained at both ends.
_DIRAS_PROBABILITY = ("[Probability Helpful]: <The probability between 0.0 and 1.0 that the <paragraph> is helpful "
                      "to the <question>. 0.0 is completely unhelpful and 1.0 is completely helpful.>")
_DIRAS_SLOTS = {
    "definition": '<background_information>: "{definition}"\n',
    "question": '<question>: "{question}"\n',
    "paragraph": '<paragraph>: "{paragraph}"\n\n\n',
    "layout": "paragraph_first",
}
# The figures print one blank line between the paragraph and the ask (the code has two).
_DIRAS_PAPER_SLOTS = {**_DIRAS_SLOTS, "paragraph": '<paragraph>: "{paragraph}"\n\n'}
_DIRAS_WITH_DEFINITION = (
    "You will be provided with a <question> the analyst seeks to answer, a <paragraph> extracted from a lengthy "
    "report, and <background_information> that explains the <question>. <background_information> first explains "
    "the <question> and then raises examples to help you to better understand the <question>. Your job is to "
    "assess whether the <paragraph> is useful in answering the <question>.\n\n"
)


@dataclass(frozen=True)
class Preset:
    """A published prompt a new judge can start from: its template and whether the definition is shown."""

    name: str
    label: str
    template: dict[str, str]
    use_definition: bool = True


# The ask and answer format of DIRAS's guess-and-confidence prompts in the released code (with and without the
# definition): without [Reason] the code's TRAIN_PROMPT words the guess line differently from its CoT prompt.
_DIRAS_GUESS_CONFIDENCE = {
    "ask": _DIRAS_ASK + "Provide your best guess for this question and your confidence that the guess is correct. "
           "Reply in the following format:\n",
    "format": '[Guess]: <Your most likely guess whether the paragraph is helpful or not helpful for answering the '
              'question, should be one of "Yes" or "No".>\n' + _DIRAS_CONFIDENCE,
    "format_cot": _DIRAS_REASON + _DIRAS_GUESS + _DIRAS_CONFIDENCE,
}
# Fig. 9 as printed: "even if it only", a line break after the question, and the non-CoT prompt is the CoT one
# without its "[Reason]: ..." line (App. G: "The non-CoT setup just excludes the [Reason] part").
_DIRAS_PAPER_ASK = ("Is <paragraph> helpful for answering <question>?\nNote that the <paragraph> can be helpful even "
                    "if it only addresses part of the <question> without fully answering it. ")
_DIRAS_PAPER_GUESS_CONFIDENCE = {
    "ask": _DIRAS_PAPER_ASK + "Provide your best guess for this question and your confidence that the guess is "
           "correct. Reply in the following format:\n",
    "format": _DIRAS_GUESS + _DIRAS_CONFIDENCE,
    "format_cot": _DIRAS_REASON + _DIRAS_GUESS + _DIRAS_CONFIDENCE,
}

PRESETS: dict[str, Preset] = {preset.name: preset for preset in (
    Preset(
        name="diras-definition",
        label="DIRAS pointwise, with the relevance definition (released code's wording of Fig. 9; tick CoT for "
              "its [Reason])",
        template={
            **_DIRAS_SLOTS, "role": _DIRAS_SYSTEM, "intro": _DIRAS_WITH_DEFINITION,
            **_DIRAS_GUESS_CONFIDENCE,
        },
    ),
    Preset(
        name="diras-definition-paper",
        label="DIRAS pointwise, with the relevance definition (Fig. 9 as printed; tick CoT for its [Reason])",
        template={
            **_DIRAS_PAPER_SLOTS, "role": _DIRAS_SYSTEM, "intro": _DIRAS_WITH_DEFINITION,
            **_DIRAS_PAPER_GUESS_CONFIDENCE,
        },
    ),
    Preset(
        name="diras-probability",
        label="DIRAS pointwise, asking for [Probability Helpful] (Fig. 10 as printed, P_prob; Ask only)",
        template={
            **_DIRAS_PAPER_SLOTS, "role": _DIRAS_SYSTEM, "intro": _DIRAS_WITH_DEFINITION, "answer": "probability",
            "ask": "Is <paragraph> helpful for answering <question>?\nNote that the <paragraph> can be helpful even "
                   "it only addresses part of the <question> without fully answering it. Provide your best guess "
                   "for this question and the probability that the <paragraph> is helpful. Reply in the following "
                   "format:\n",
            "format": _DIRAS_GUESS + _DIRAS_PROBABILITY,
            "format_cot": _DIRAS_REASON + _DIRAS_GUESS + _DIRAS_PROBABILITY,
        },
    ),
    Preset(
        name="diras-no-definition",
        label="DIRAS pointwise, without the relevance definition (Fig. 11 as printed; the code has none)",
        use_definition=False,
        template={
            # Fig. 11: its own task description, then "{Same output requirements}" as Fig. 9.
            **_DIRAS_PAPER_SLOTS, "role": _DIRAS_SYSTEM,
            "intro": "You will be provided with a <question> the analyst seeks to answer, and a <paragraph> "
                     "extracted from a lengthy report. Your job is to assess whether the <paragraph> is useful in "
                     "answering the <question>.\n\n",
            **_DIRAS_PAPER_GUESS_CONFIDENCE,
        },
    ),
    Preset(
        name="diras-general-qa",
        label="DIRAS general-QA distillation prompt (ASQA, QAMPARI, RAG-Bench training data)",
        template={
            **_DIRAS_SLOTS,
            "role": "You are a helpful assistant in identifying useful information for question answering.",
            "intro": "You will be provided with a <question> and a <paragraph>.  Your job is to assess whether the "
                     "<paragraph> is useful in answering the <question>, given the <background_information> "
                     "defining what is useful.\n\n",
            "ask": "Is <paragraph> useful for answering <question>? Provide your best guess and your confidence "
                   "that the guess is correct. Reply in the following format:\n",
            "format": '[Guess]: <Your most likely guess, should be one of "Yes" or "No".>\n' + _DIRAS_CONFIDENCE,
            "format_cot": "[Reason]: <Reason why and how the paragraph is useful or not useful for answering the "
                          'question. Clearly indicate your stance.>\n[Guess]: <Your most likely guess, should be '
                          'one of "Yes" or "No".>\n' + _DIRAS_CONFIDENCE,
        },
    ),
)}


def preset_get(name: str) -> Preset:
    """The preset called `name`; TemplateError naming the presets for any other."""
    try:
        return PRESETS[name]
    except KeyError:
        raise TemplateError(f"unknown prompt preset {name!r}; the presets are {list(PRESETS)}") from None

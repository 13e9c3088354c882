"""Training examples as chat text: DIRAS's prompt (the product's judging prompt, prompts.build_prompt) and the
teacher's answer `[Guess]: Yes\n\n[Confidence]: 0.9`, rendered in the student's own chat template with the loss on
the answer only. Also reads DIRAS's instruction-tuning layout, whose prompts are in Llama-3's chat template, back
into system and user turns so that another student's template can be put around them."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

from models_llm.parsing import AnswerParseError, parse_ask_answer
from models_llm.prompts import build_prompt
from models_llm.types import JudgeConfig, PairInput

# Labels of tokens the loss ignores (the prompt's): PyTorch's cross-entropy ignore_index.
IGNORE = -100


class DistillFormatError(ValueError):
    """An example that cannot be used: a prompt not in the expected chat layout, an answer without a guess and a
    confidence, a template that does not put the answer after the prompt."""


@dataclass(frozen=True)
class ChatExample:
    """One training example: the system and user turns of the prompt, and the answer the student learns.
    `passage`: the passage's text as the user turn holds it (its last occurrence there), the only part of the
    prompt that may be cut to fit the source length; "" when unknown."""

    system: str
    user: str
    answer: str
    passage: str = ""

    def messages(self) -> list[dict[str, str]]:
        turns = [{"role": "system", "content": self.system}] if self.system else []
        return [*turns, {"role": "user", "content": self.user}]


@dataclass(frozen=True)
class EncodedExample:
    """Token ids of prompt + answer, and labels: IGNORE on the prompt, the ids themselves on the answer.
    `truncated`: the passage was cut for the prompt to fit the source length."""

    input_ids: tuple[int, ...]
    labels: tuple[int, ...]
    truncated: bool = False


# DIRAS App. F (QLoRA's defaults): "a source max length of 2048, and a target max length of 512".
SOURCE_MAX_LENGTH = 2048
TARGET_MAX_LENGTH = 512


def teacher_answer(p_relevant: float) -> str:
    """The answer a student learns for a teacher's P(relevant): DIRAS's `[Guess]` and `[Confidence]` (the
    confidence in the guess, so P for a Yes and 1 - P for a No), two decimals as the teachers write it."""
    if not 0.0 <= p_relevant <= 1.0 or math.isnan(p_relevant):
        raise DistillFormatError(f"a teacher's P must be in [0, 1], got {p_relevant!r}")
    guess = p_relevant >= 0.5
    confidence = p_relevant if guess else 1.0 - p_relevant
    return f"[Guess]: {'Yes' if guess else 'No'}\n\n[Confidence]: {confidence:.2f}"


def answer_p(answer: str) -> float:
    """The teacher's P(relevant) in an answer text; DistillFormatError when it holds no guess and confidence."""
    try:
        return parse_ask_answer(answer).p_relevant
    except AnswerParseError as exc:
        raise DistillFormatError(f"the answer {answer[:80]!r} cannot be read: {exc}") from None


def pair_example(pair: PairInput, answer: str, template: dict[str, str] | None = None) -> ChatExample:
    """The example for a pair of the project: the prompt the student will be judged with (DIRAS's, Tok without
    CoT: the same system and user turns as every judge of the product) and the teacher's answer."""
    config = JudgeConfig(backend="hf", model="student", method="tok", template=template or {})
    prompt = build_prompt(pair, config)
    return ChatExample(system=prompt.system, user=prompt.user, answer=answer, passage=pair.passage.strip())


_LLAMA3_TURN = re.compile(r"<\|start_header_id\|>(system|user|assistant)<\|end_header_id\|>\n\n(.*?)(?:<\|eot_id\|>|$)",
                          re.DOTALL)
_END_TOKENS = re.compile(r"(<\|eot_id\|>|<\|end_of_text\|>|</s>|<\|im_end\|>)\s*$")


def parse_llama3_prompt(text: str) -> tuple[str, str]:
    """The system and user turns of a prompt in Llama-3's chat template (DIRAS's `input` column), without the
    template's tokens; DistillFormatError when it holds no user turn, or more than one system or user turn."""
    turns = [(role, content) for role, content in _LLAMA3_TURN.findall(text)]
    systems = [content for role, content in turns if role == "system"]
    users = [content for role, content in turns if role == "user"]
    if len(users) != 1 or len(systems) > 1:
        raise DistillFormatError(
            f"expected one user turn (and at most one system turn) in Llama-3's chat template, found "
            f"{len(users)} user and {len(systems)} system turns"
        )
    return (systems[0] if systems else ""), users[0]


def clean_answer(output: str) -> str:
    """A teacher's answer without the end-of-turn token its chat template appended (DIRAS's `output` column)."""
    return _END_TOKENS.sub("", output).strip()


def render(tokenizer, example: ChatExample) -> tuple[str, str]:
    """(prompt, answer) as text in the tokenizer's chat template: the prompt ends with the template's opening of
    the assistant's turn; the answer is what the template writes for the assistant's message, its end-of-turn
    marker included (the student learns to stop)."""
    prompt = tokenizer.apply_chat_template(example.messages(), add_generation_prompt=True, tokenize=False)
    whole = tokenizer.apply_chat_template(
        [*example.messages(), {"role": "assistant", "content": example.answer}], tokenize=False
    )
    if not whole.startswith(prompt) or example.answer not in whole[len(prompt):]:
        raise DistillFormatError("the chat template does not write the answer after the prompt it generates from")
    return prompt, whole[len(prompt):]


def _encoded(tokenizer, example: ChatExample) -> tuple[list[int], tuple[int, ...], int]:
    """(ids, labels, prompt tokens) of the rendered example: one tokenization of the whole text (so the ids are
    those the judge's prompt gives), labels IGNORE on every token that ends inside the prompt."""
    prompt, answer = render(tokenizer, example)
    encoding = tokenizer(prompt + answer, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = encoding["input_ids"], encoding["offset_mapping"]
    labels = tuple(IGNORE if end <= len(prompt) else token for token, (_, end) in zip(ids, offsets))
    return ids, labels, sum(1 for label in labels if label == IGNORE)


def _with_passage(example: ChatExample, passage: str) -> ChatExample:
    at = example.user.rfind(example.passage)
    user = example.user[:at] + passage + example.user[at + len(example.passage):]
    return ChatExample(system=example.system, user=user, answer=example.answer, passage=passage)


def encode(tokenizer, example: ChatExample, source_max: int = SOURCE_MAX_LENGTH,
           target_max: int = TARGET_MAX_LENGTH) -> EncodedExample:
    """Token ids and labels of the rendered example (_encoded). DIRAS App. F's lengths: the prompt (the source,
    chat template included) at most `source_max` tokens, the answer (the target, its end-of-turn marker included) at
    most `target_max`. A longer prompt has its passage's end cut, token by token of the passage, until it fits
    (`truncated`); the answer is never cut. DistillFormatError when the answer is too long, or when the prompt does
    not fit even with an empty passage (or its passage is unknown): cutting the question, the definition or the
    instruction would teach an answer to a prompt the judge never sees."""
    ids, labels, prompt_tokens = _encoded(tokenizer, example)
    answer_tokens = len(ids) - prompt_tokens
    if answer_tokens == 0:
        raise DistillFormatError("the example has no answer tokens to learn")
    if answer_tokens > target_max:
        raise DistillFormatError(f"the answer is {answer_tokens} tokens, over the target max length of {target_max} "
                                 "(an answer is never cut)")
    if prompt_tokens <= source_max:
        return EncodedExample(input_ids=tuple(ids), labels=labels)
    if not example.passage or example.passage not in example.user:
        raise DistillFormatError(f"the prompt is {prompt_tokens} tokens, over the source max length of {source_max}, "
                                 "and its passage cannot be found to cut")
    passage_ends = [end for _, end in tokenizer(example.passage, add_special_tokens=False,
                                                return_offsets_mapping=True)["offset_mapping"]]
    keep = len(passage_ends)
    while prompt_tokens > source_max and keep > 0:
        # Drop as many passage tokens as the prompt is over (at least one): a cut between two tokens may merge or
        # split a token or two, so measure again.
        keep = max(0, keep - max(1, prompt_tokens - source_max))
        cut = _with_passage(example, example.passage[:passage_ends[keep - 1]] if keep else "")
        ids, labels, prompt_tokens = _encoded(tokenizer, cut)
    if prompt_tokens > source_max:
        raise DistillFormatError(f"the prompt is {prompt_tokens} tokens without its passage, over the source max "
                                 f"length of {source_max}")
    return EncodedExample(input_ids=tuple(ids), labels=labels, truncated=True)

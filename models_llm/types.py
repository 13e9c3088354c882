"""The values that cross between the product and the judging code: a judge's configuration, one pair to
judge, and the verdict on it."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Backend = Literal["hf", "openai", "embedding", "crossencoder"]
Method = Literal["tok", "ask", "embedding", "ensemble", "crossencoder"]
# Between the relevance definition and the question on a cross-encoder's query side, unless the judge sets another:
# BERT-style tokenizers read it as their own separator token.
CROSSENCODER_SEPARATOR = " [SEP] "
Status = Literal["ok", "parse_error", "failed"]

# A Tok judgment whose Yes+No probability mass is below this put most of its mass on other tokens: the
# model did not answer in the format, so its P means little. It is stored, and flagged.
LOW_MASS = 0.5


@dataclass(frozen=True)
class JudgeConfig:
    """How a judge judges. `model` is a local model folder (hf, embedding) or a model name (openai)."""

    backend: Backend
    model: str
    method: Method = "tok"
    cot: bool = False
    use_definition: bool = True
    adapter: str | None = None  # a peft LoRA adapter folder (hf)
    device: str = "cpu"  # hf: "cpu", "cuda", "cuda:1"...
    dtype: str = "float32"  # hf: float32, bfloat16, float16
    batch_size: int = 8  # hf: paragraphs per forward pass after the shared prefix
    max_new_tokens: int = 64  # ask: generation budget (cot needs more)
    # 0: greedy (judging). Above 0 the generated text is sampled at that temperature: a robustness audit's
    # self-consistency test asks the same pair twice this way. Tok without CoT generates nothing: no effect.
    temperature: float = 0.0
    base_url: str = ""  # openai: e.g. http://127.0.0.1:8000/v1
    api_key_env: str = ""  # openai: NAME of the environment variable holding the key (never the key)
    allow_local: bool = False  # openai: the operator allows the endpoint to resolve to local addresses
    # openai: the endpoint continues a final assistant message (vLLM's continue_final_message), so Tok can
    # start the answer with the prompt's answer prefix as the hf backend does
    prefill: bool = False
    # openai: the endpoint returns the logprobs of named token ids (vLLM's logprob_token_ids): Tok reads P(Yes)
    # from exactly these ids, the model's spellings of Yes and of No, instead of from the top 20 alternatives
    yes_token_ids: tuple[int, ...] = ()
    no_token_ids: tuple[int, ...] = ()
    timeout_s: float = 60.0
    max_retries: int = 4
    concurrency: int = 4
    template: dict[str, str] = field(default_factory=dict)  # prompt template override (see prompts.py)
    # ensemble: the DisastIR prompt strategies to run (empty: every strategy the query's intent uses)
    strategies: tuple[str, ...] = ()
    # ensemble: the prompt preset, "paper" (DisastIR App. C as printed), "released-code" (the paper's words, the
    # released code's cot criteria after a No) or "legacy" (this product's first prompts);
    # empty: legacy, what a judge stored before the choice existed runs (models_llm.ensembles.strategies)
    prompts: str = ""
    max_length: int = 512  # crossencoder: tokens of query and passage together (the rest is cut)
    separator: str = CROSSENCODER_SEPARATOR  # crossencoder: between the definition and the question

    def __post_init__(self) -> None:
        if self.backend not in ("hf", "openai", "embedding", "crossencoder"):
            raise ValueError(f"backend must be hf, openai, embedding or crossencoder, got {self.backend!r}")
        if self.method not in ("tok", "ask", "embedding", "ensemble", "crossencoder"):
            raise ValueError(f"method must be tok, ask, embedding, ensemble or crossencoder, got {self.method!r}")
        if self.method == "ensemble" and self.backend not in ("hf", "openai"):
            raise ValueError("the ensemble method needs a generative backend: hf or openai")
        if not isinstance(self.strategies, tuple | list) or not all(isinstance(s, str) for s in self.strategies):
            raise ValueError("strategies must be a list of strategy names")
        if self.strategies and self.method != "ensemble":
            raise ValueError("strategies are for the ensemble method")
        object.__setattr__(self, "strategies", tuple(self.strategies))
        if self.prompts and self.method != "ensemble":
            raise ValueError("prompts (a prompt preset) are for the ensemble method")
        if self.prompts not in ("", "paper", "released-code", "legacy"):
            raise ValueError(f"prompts must be paper, released-code or legacy, got {self.prompts!r}")
        if self.prefill and self.backend != "openai":
            raise ValueError("prefill is a capability of an openai endpoint")
        for name in ("yes_token_ids", "no_token_ids"):
            ids = getattr(self, name)
            if not isinstance(ids, tuple | list) or not all(
                    isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids):
                raise ValueError(f"{name} must be a list of token ids (whole numbers from 0)")
            object.__setattr__(self, name, tuple(ids))
        if self.yes_token_ids or self.no_token_ids:
            if self.backend != "openai":
                raise ValueError("label token ids are a capability of an openai endpoint")
            if not (self.yes_token_ids and self.no_token_ids):
                raise ValueError("label token ids need both the Yes and the No token ids")
            if set(self.yes_token_ids) & set(self.no_token_ids):
                raise ValueError("a token id cannot spell both Yes and No")
        if self.method == "tok" and self.template.get("answer") == "probability":
            raise ValueError("the probability answer format ([Probability Helpful]) is read by the ask method; "
                             "tok reads P(Yes) at [Guess]:")
        if self.method == "tok" and self.cot and self.backend == "openai" and not self.prefill:
            # Tok with CoT reads P(Yes) after the model's own reason: the reason must be sent back as the open
            # start of the assistant's turn, which only an endpoint with assistant prefill continues.
            raise ValueError("tok with cot needs an endpoint declared with prefill: true (the reason is sent back "
                             "as the start of the answer and P(Yes) read after it); use ask, or drop cot")
        if (self.backend == "embedding") != (self.method == "embedding"):
            raise ValueError("the embedding backend and the embedding method go together")
        if (self.backend == "crossencoder") != (self.method == "crossencoder"):
            raise ValueError("the crossencoder backend and the crossencoder method go together")
        if isinstance(self.max_length, bool) or not isinstance(self.max_length, int) or not 16 <= self.max_length <= 8192:
            raise ValueError(f"max_length must be a whole number from 16 to 8192, got {self.max_length!r}")
        if not isinstance(self.separator, str) or not self.separator.strip():
            raise ValueError("separator must be a non-blank string")
        if not self.model:
            raise ValueError("a judge needs a model")
        if not (isinstance(self.temperature, int | float) and 0.0 <= self.temperature <= 2.0):
            raise ValueError(f"temperature must be a number from 0 to 2, got {self.temperature!r}")


@dataclass(frozen=True)
class PairInput:
    """One (query, passage) pair to judge, with the relevance definition shown to the judge (None: none)."""

    pair_id: int
    query: str
    passage: str
    definition: str | None = None
    title: str = ""


@dataclass(frozen=True)
class Verdict:
    """A judge's answer on one pair. `p` is set exactly when status is ok; a parse failure keeps the raw text
    and no guess (never an invented label)."""

    pair_id: int
    status: Status
    method: Method
    p: float | None = None
    guess: bool | None = None
    confidence: float | None = None
    raw_output: str = ""
    error: str = ""
    yes_no_mass: float | None = None  # tok: P(Yes) + P(No) before normalising
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    score: float | None = None  # ensemble: mean score of the members on the intent's scale
    spread: float | None = None  # ensemble: max - min of the members' P
    calls: int | None = None  # model calls made for this verdict (cached ensemble members are not counted)

    @property
    def low_mass(self) -> bool:
        return self.yes_no_mass is not None and self.yes_no_mass < LOW_MASS


@dataclass(frozen=True)
class Generation:
    """One chat completion: the generated text and, where the backend reports them, its token counts."""

    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None

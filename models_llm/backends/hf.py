"""The `hf` backend: a local transformers causal LM, optionally with a peft LoRA adapter.

Tok reads P(Yes) / (P(Yes) + P(No)) from the next-token distribution after "[Guess]:"; Ask generates greedily
and parses the answer. Tok with CoT runs as DIRAS ran it: the judge first writes its `[Reason]` greedily up to
"[Guess]:", then one forward pass over prompt + reason + "[Guess]:" reads P there. The part of the prompt that all pairs of a query share is run once per query and its
KV cache reused for every paragraph, and Tok runs the paragraphs in right-padded batches against it. Both
change only speed: the plain paths (`score_tok_plain`, `score_generate_naive`) feed the same token ids
through one forward pass or one `generate()` per pair, and the tests hold the two to the same numbers.
`generate_chat` completes prompts built elsewhere (the ensemble strategies) greedily, without the cache."""
from __future__ import annotations

import copy
import gc
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a judge runs on local folders only, never a download

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache, GenerationConfig, PreTrainedTokenizerBase

from models_llm.backends import ScorerConfigError
from models_llm.parsing import AnswerParseError, parse_answer
from models_llm.prompts import TOK_ANSWER_PREFIX, PromptText, build_prompt, template_validate
from models_llm.types import Generation, JudgeConfig, Method, PairInput, Verdict

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def spelling_ids(tokenizer: PreTrainedTokenizerBase, word: str) -> list[int]:
    """Every vocabulary id that decodes to `word` alone, in any letter case and with any surrounding white
    space. For SmolLM2-135M-Instruct: yes -> 9230 " Yes", 9805 " yes", 10407 "yes", 10539 "Yes" (there is no
    single-token "YES"); no -> 787 " no", 2838 " No", 4607 "no", 5230 "No", 10921 " NO", 13465 "NO"."""
    texts = tokenizer.batch_decode([[i] for i in range(len(tokenizer))])
    return [i for i, text in enumerate(texts) if text.strip().lower() == word]


def yes_probability(logits: torch.Tensor, yes_ids: list[int], no_ids: list[int]) -> tuple[float, float, float]:
    """(P(Yes) / (P(Yes) + P(No)), P(Yes), P(No)) from one position's next-token logits, each word's mass summed
    over its spellings."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    log_yes = torch.logsumexp(logp[yes_ids], dim=0)
    log_no = torch.logsumexp(logp[no_ids], dim=0)
    # From the log-odds rather than p_yes / (p_yes + p_no): defined even where both masses underflow.
    p = torch.sigmoid(log_yes - log_no).item()
    return p, log_yes.exp().item(), log_no.exp().item()


@dataclass(frozen=True)
class Encoded:
    """A pair's prompt as token ids: `prefix` (shared by every pair of its query) then `own`."""

    prefix: tuple[int, ...]
    own: tuple[int, ...]

    @property
    def ids(self) -> list[int]:
        return [*self.prefix, *self.own]


class HFScorer:
    """Judges pairs with a local causal LM folder (config.model) on config.device."""

    def __init__(
        self,
        config: JudgeConfig,
        model: torch.nn.Module | None = None,
        tokenizer: PreTrainedTokenizerBase | None = None,
    ) -> None:
        """Load config.model (and config.adapter) onto config.device, or take an already built `model` and
        `tokenizer` instead (benchmarks on random weights); config.model is then only a name."""
        if config.backend != "hf" or config.method not in ("tok", "ask", "ensemble"):
            raise ScorerConfigError(
                f"HFScorer runs backend hf with method tok, ask or ensemble, got {config.backend}/{config.method}"
            )
        if config.dtype not in DTYPES:
            raise ScorerConfigError(f"dtype must be one of {sorted(DTYPES)}, got {config.dtype!r}")
        if config.batch_size < 1 or config.max_new_tokens < 1:
            raise ScorerConfigError("batch_size and max_new_tokens must be >= 1")
        try:
            self.device = torch.device(config.device)
        except RuntimeError as exc:
            raise ScorerConfigError(f"device {config.device!r}: {exc}") from None
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise ScorerConfigError(f"device {config.device!r} asked for, but torch sees no CUDA device")
        if model is None or tokenizer is None:
            model, tokenizer = self._load(config)
        if not getattr(tokenizer, "is_fast", False) or not tokenizer.chat_template:
            raise ScorerConfigError(f"{config.model}: the hf backend needs a fast tokenizer with a chat template")
        self.config = config
        self.tokenizer = tokenizer
        base_config = model.config  # a PeftModel forwards .config to its base model's
        self._context: int | None = getattr(base_config, "max_position_embeddings", None)
        self._model_config = base_config
        self.model: torch.nn.Module | None = model.to(self.device).eval()
        self.yes_ids = spelling_ids(tokenizer, "yes")
        self.no_ids = spelling_ids(tokenizer, "no")
        if not self.yes_ids or not self.no_ids:
            raise ScorerConfigError(f"{config.model}: the vocabulary has no single-token Yes or No")
        eos = model.generation_config.eos_token_id if model.generation_config is not None else None
        eos = tokenizer.eos_token_id if eos is None else eos
        self._pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        sampling = {"do_sample": True, "temperature": config.temperature, "top_k": 0, "top_p": 1.0} \
            if config.temperature > 0 else {"do_sample": False}
        self._generation = GenerationConfig(
            max_new_tokens=config.max_new_tokens, eos_token_id=eos, pad_token_id=self._pad_id, **sampling
        )
        # Tok with CoT: the reason ends where the model writes the answer prefix.
        self._reason_generation = copy.deepcopy(self._generation)
        self._reason_generation.stop_strings = [TOK_ANSWER_PREFIX]
        self._answer_format = template_validate(config.template)["answer"]
        self._marker_tokens = len(tokenizer("\n" + TOK_ANSWER_PREFIX, add_special_tokens=False)["input_ids"])

    @staticmethod
    def _load(config: JudgeConfig) -> tuple[torch.nn.Module, PreTrainedTokenizerBase]:
        folder = Path(config.model)
        if not (folder / "config.json").is_file():
            raise ScorerConfigError(f"model folder {folder} does not exist or holds no config.json")
        if config.adapter and not (Path(config.adapter) / "adapter_config.json").is_file():
            raise ScorerConfigError(f"adapter folder {config.adapter} does not exist or holds no adapter_config.json")
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=DTYPES[config.dtype], local_files_only=True)
        if config.adapter:
            model = PeftModel.from_pretrained(model, config.adapter)
        return model, tokenizer

    # -- prompt -------------------------------------------------------------------------------------------

    def chat_text(self, pair: PairInput, method: Method | None = None) -> tuple[PromptText, str]:
        """`pair`'s prompt (under `method`, default the judge's) and its chat text as the model reads it: up to
        the answer prefix for Tok, up to the start of the answer for Ask and for Tok with CoT."""
        prompt = build_prompt(pair, replace(self.config, method=method or self.config.method))
        text = self.tokenizer.apply_chat_template(prompt.messages(), add_generation_prompt=True, tokenize=False)
        return prompt, text if prompt.reason_first else text + prompt.answer_prefix

    def encode(self, pair: PairInput, method: Method | None = None) -> Encoded:
        """The token ids of `pair`'s prompt (under `method`, default the judge's), cut after the shared part."""
        prompt, text = self.chat_text(pair, method)
        user_at = text.find(prompt.user)
        # A template that rewrites the user message leaves nothing known to be shared: no prefix then.
        shared_end = user_at + len(prompt.user_shared) if user_at >= 0 else 0
        # One tokenization of the whole text, cut at the last token boundary inside the shared part: the ids
        # are exactly the whole prompt's. Tokenizing the two parts separately would not be (SmolLM2 reads the
        # shared part's final "\n\n" as one token alone, but as two "\n" when "Paragraph" follows).
        encoding = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        ids, offsets = encoding["input_ids"], encoding["offset_mapping"]
        cut = next((i for i, (_, end) in enumerate(offsets) if end > shared_end), len(ids))
        cut = min(cut, len(ids) - 1)  # the last token must run to give the next-token distribution
        return Encoded(prefix=tuple(ids[:cut]), own=tuple(ids[cut:]))

    def _generates(self, method: Method) -> bool:
        return method == "ask" or (method == "tok" and self.config.cot)

    def _too_long(self, pair: PairInput, encoded: Encoded, method: Method) -> Verdict | None:
        # Tok with CoT may append "\n[Guess]:" after a reason that used the whole budget.
        budget = self.config.max_new_tokens + (self._marker_tokens if method == "tok" else 0)
        need = len(encoded.ids) + (budget if self._generates(method) else 0)
        if self._context is None or need <= self._context:
            return None
        answer = f" + {budget} answer tokens" if self._generates(method) else ""
        return Verdict(
            pair_id=pair.pair_id, status="failed", method=method, prompt_tokens=len(encoded.ids),
            error=f"the prompt is {len(encoded.ids)} tokens{answer}, over the model's context of {self._context}",
        )

    def _groups(
        self, pairs: Sequence[PairInput], method: Method, verdicts: dict[int, Verdict]
    ) -> dict[tuple[int, ...], list[tuple[int, Encoded]]]:
        """Pairs (by index) grouped by their shared prefix ids; a too long one gets its failed verdict."""
        groups: dict[tuple[int, ...], list[tuple[int, Encoded]]] = {}
        for index, pair in enumerate(pairs):
            encoded = self.encode(pair, method)
            failed = self._too_long(pair, encoded, method)
            if failed is not None:
                verdicts[index] = failed
            else:
                groups.setdefault(encoded.prefix, []).append((index, encoded))
        return groups

    # -- verdicts -----------------------------------------------------------------------------------------

    def _tok_verdict(self, pair: PairInput, logits: torch.Tensor, prompt_tokens: int) -> Verdict:
        p, p_yes, p_no = yes_probability(logits, self.yes_ids, self.no_ids)
        return Verdict(
            pair_id=pair.pair_id, status="ok", method="tok", p=p, guess=p >= 0.5, confidence=max(p, 1.0 - p),
            raw_output=f"P(yes)={p_yes:.4f} P(no)={p_no:.4f}", yes_no_mass=p_yes + p_no, prompt_tokens=prompt_tokens,
        )

    def _ask_verdict(self, pair: PairInput, output: torch.Tensor, prompt_tokens: int) -> Verdict:
        new = output[prompt_tokens:]
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        counts = {"prompt_tokens": prompt_tokens, "completion_tokens": len(new)}
        try:
            answer = parse_answer(text, self._answer_format)
        except AnswerParseError as exc:
            return Verdict(
                pair_id=pair.pair_id, status="parse_error", method="ask", raw_output=text, error=str(exc), **counts
            )
        return Verdict(
            pair_id=pair.pair_id, status="ok", method="ask", p=answer.p_relevant, guess=answer.guess,
            confidence=answer.confidence, raw_output=text, **counts,
        )

    # -- model calls --------------------------------------------------------------------------------------

    @property
    def _net(self) -> torch.nn.Module:
        if self.model is None:
            raise RuntimeError("this scorer is closed")
        return self.model

    def _prefix_cache(self, prefix: tuple[int, ...]) -> DynamicCache | None:
        if not prefix:
            return None
        cache = DynamicCache(config=self._model_config)
        ids = torch.tensor([prefix], device=self.device)
        self._net(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
        return cache

    def _suffix_logits(
        self, prefix: DynamicCache | None, prefix_len: int, owns: list[tuple[int, ...]]
    ) -> torch.Tensor:
        """Next-token logits after each suffix's last real token, all run in one right-padded batch."""
        rows, width = len(owns), max(len(own) for own in owns)
        ids = torch.full((rows, width), self._pad_id, dtype=torch.long)
        mask = torch.zeros((rows, prefix_len + width), dtype=torch.long)
        mask[:, :prefix_len] = 1
        for row, own in enumerate(owns):
            ids[row, : len(own)] = torch.tensor(own)
            mask[row, prefix_len : prefix_len + len(own)] = 1
        # Explicit positions continue the prefix in every row; the padding after a row's end gets positions
        # too, but the mask hides it from the real tokens, so a row's logits ignore its batch companions.
        positions = (prefix_len + torch.arange(width)).expand(rows, width)
        last = torch.tensor([[len(own) - 1] for own in owns])
        # forward() appends to the cache in place: each batch works on its own copy of the prefix.
        cache = copy.deepcopy(prefix) if prefix is not None else DynamicCache(config=self._model_config)
        cache.batch_repeat_interleave(rows)
        out = self._net(
            input_ids=ids.to(self.device),
            attention_mask=mask.to(self.device),
            position_ids=positions.to(self.device),
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=last.to(self.device),
        )
        return out.logits[:, 0, :]

    def _generate(
        self, ids: list[int], prefix: DynamicCache | None, max_new_tokens: int | None = None,
        stop_at_answer: bool = False,
    ) -> torch.Tensor:
        inputs = torch.tensor([ids], device=self.device)
        # generate() runs only the ids the cache does not hold yet, and grows the cache: hand it a copy.
        cache = {"past_key_values": copy.deepcopy(prefix)} if prefix is not None else {}
        if max_new_tokens is not None:
            cache["max_new_tokens"] = max_new_tokens
        if stop_at_answer:
            cache["tokenizer"] = self.tokenizer  # generate() matches stop strings through the tokenizer
        generation = self._reason_generation if stop_at_answer else self._generation
        output = self._net.generate(
            input_ids=inputs, attention_mask=torch.ones_like(inputs), generation_config=generation, **cache
        )
        return output[0].cpu()

    def _tok_after_reason(self, pair: PairInput, encoded: Encoded, cache: DynamicCache | None) -> Verdict:
        """Tok with CoT: generate the reason greedily until "[Guess]:" (or the budget, or the end of the turn),
        then read P(Yes) after "[Guess]:" in one forward pass over prompt + reason + "[Guess]:"."""
        new = self._generate(encoded.ids, cache, stop_at_answer=True)[len(encoded.ids) :]
        generated = self.tokenizer.decode(new, skip_special_tokens=True)
        at = generated.find(TOK_ANSWER_PREFIX)
        if at >= 0:
            reason, note = generated[: at + len(TOK_ANSWER_PREFIX)], ""
        else:
            reason = generated.rstrip() + "\n" + TOK_ANSWER_PREFIX
            note = (f"[the judge wrote no {TOK_ANSWER_PREFIX} in its {len(new)} answer tokens: "
                    f"{TOK_ANSWER_PREFIX} was appended after its reason]\n")
        _, text = self.chat_text(pair, "tok")
        ids = self.tokenizer(text + reason, add_special_tokens=False)["input_ids"]
        if self._context is not None and len(ids) > self._context:
            error = f"prompt and reason are {len(ids)} tokens, over the model's context of {self._context}"
            return Verdict(pair_id=pair.pair_id, status="failed", method="tok", raw_output=reason, error=error,
                           prompt_tokens=len(encoded.ids), completion_tokens=len(new))
        prefix = encoded.prefix
        if prefix and tuple(ids[: len(prefix)]) == prefix and len(ids) > len(prefix):
            logits = self._suffix_logits(cache, len(prefix), [tuple(ids[len(prefix) :])])[0]
        else:
            logits = self._net(input_ids=torch.tensor([ids], device=self.device), logits_to_keep=1).logits[0, -1]
        verdict = self._tok_verdict(pair, logits, len(encoded.ids))
        return replace(verdict, raw_output=f"{reason}\n{note}{verdict.raw_output}", completion_tokens=len(new))

    # -- public -------------------------------------------------------------------------------------------

    @torch.inference_mode()
    def score(self, pairs: Sequence[PairInput]) -> list[Verdict]:
        """One verdict per pair, in input order, by the judge's method (prefix cache; Tok also batched)."""
        verdicts: dict[int, Verdict] = {}
        method = self.config.method
        if method == "ensemble":
            raise ScorerConfigError("an ensemble judge runs its prompt strategies through generate_chat")
        for prefix, members in self._groups(pairs, method, verdicts).items():
            cache = self._prefix_cache(prefix)
            if method == "ask":
                for index, encoded in members:
                    output = self._generate(encoded.ids, cache)
                    verdicts[index] = self._ask_verdict(pairs[index], output, len(encoded.ids))
                continue
            if self.config.cot:
                for index, encoded in members:
                    verdicts[index] = self._tok_after_reason(pairs[index], encoded, cache)
                continue
            # Longest first, so that a batch holds suffixes of similar length and little padding.
            members.sort(key=lambda member: len(member[1].own), reverse=True)
            for start in range(0, len(members), self.config.batch_size):
                batch = members[start : start + self.config.batch_size]
                logits = self._suffix_logits(cache, len(prefix), [encoded.own for _, encoded in batch])
                for (index, encoded), row in zip(batch, logits):
                    verdicts[index] = self._tok_verdict(pairs[index], row, len(encoded.ids))
        return [verdicts[index] for index in range(len(pairs))]

    @torch.inference_mode()
    def score_tok_plain(self, pairs: Sequence[PairInput]) -> list[Verdict]:
        """Tok the plain way, the reference for `score`: one full forward pass per pair, no cache, no batch
        (without CoT: with it, the reason must be generated first)."""
        if self.config.cot:
            raise ScorerConfigError("score_tok_plain reads P right after the prompt: Tok with CoT runs through score")
        verdicts = []
        for pair in pairs:
            encoded = self.encode(pair, "tok")
            failed = self._too_long(pair, encoded, "tok")
            if failed is not None:
                verdicts.append(failed)
                continue
            ids = torch.tensor([encoded.ids], device=self.device)
            logits = self._net(input_ids=ids, use_cache=False, logits_to_keep=1).logits[0, -1]
            verdicts.append(self._tok_verdict(pair, logits, len(encoded.ids)))
        return verdicts

    @torch.inference_mode()
    def score_generate_naive(self, pairs: Sequence[PairInput]) -> list[Verdict]:
        """Ask the way DIRAS's and UMBRELA's scripts judge: one `generate()` per pair over the whole prompt,
        then parse the answer text."""
        verdicts = []
        for pair in pairs:
            encoded = self.encode(pair, "ask")
            failed = self._too_long(pair, encoded, "ask")
            if failed is not None:
                verdicts.append(failed)
                continue
            verdicts.append(self._ask_verdict(pair, self._generate(encoded.ids, None), len(encoded.ids)))
        return verdicts

    @torch.inference_mode()
    def generate_chat(self, messages: Sequence[dict[str, str]], max_new_tokens: int | None = None) -> Generation:
        """The greedy answer (at most `max_new_tokens`, default config.max_new_tokens) to chat `messages`, with
        its token counts."""
        text = self.tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        new = self._generate(ids, None, max_new_tokens)[len(ids) :]
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        return Generation(text=text, prompt_tokens=len(ids), completion_tokens=len(new))

    def close(self) -> None:
        """Free the model's memory; the scorer cannot score afterwards."""
        self.model = None
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

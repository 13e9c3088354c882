"""The hf backend on the real SmolLM2-135M-Instruct: Tok with the prefix cache and batching gives the numbers of
a plain full forward pass, whatever a pair's batch companions; Ask keeps unparsable answers as parse errors;
a LoRA adapter is applied as peft applies it."""
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

from models_llm.backends import ScorerConfigError, load_scorer
from models_llm.backends.hf import HFScorer
from models_llm.bundled import smollm2_folder
from models_llm.prompts import build_prompt
from models_llm.types import JudgeConfig, PairInput

VAR_DIR = Path(__file__).resolve().parents[2] / "var"  # git-ignored: the conversion is kept between runs

# SmolLM2's single-token spellings, read off its vocabulary independently of the backend's search.
SMOLLM2_YES = [9230, 9805, 10407, 10539]  # " Yes", " yes", "yes", "Yes"
SMOLLM2_NO = [787, 2838, 4607, 5230, 10921, 13465]  # " no", " No", "no", "No", " NO", "NO"

EMISSIONS = "Does the company report its greenhouse gas emissions?"
EMISSIONS_DEFINITION = "Scope 1, 2 and 3 emissions in tonnes of CO2 equivalent, with the year they refer to."
FLOODS = "Does the company assess physical climate risks such as floods?"
PASSAGES = [
    "Emissions fell 12% to 3.1 Mt CO2e.",
    "The board met four times in 2023 and approved the final dividend.",
    "Our plants near rivers were screened for flood exposure under two warming scenarios, and two of them "
    "will get new barriers by 2026. Insurance costs rose as a result.",
    "Scope 3 emissions from purchased goods were estimated for the first time this year.",
]


def make_pairs() -> list[PairInput]:
    """8 pairs over 2 queries (one without a definition), interleaved so that input order != group order."""
    pairs = []
    for index, passage in enumerate(PASSAGES):
        pairs.append(PairInput(100 + 2 * index, EMISSIONS, passage, EMISSIONS_DEFINITION, title="Report 2023"))
        pairs.append(PairInput(101 + 2 * index, FLOODS, passage))
    return pairs


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread: on a small shared machine, threads fighting other processes for the cores make
    these tests several times slower; the numbers compared do not depend on it."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def folder() -> Path:
    return smollm2_folder(VAR_DIR)


@pytest.fixture(scope="module")
def scorer(folder) -> HFScorer:
    loaded = load_scorer(JudgeConfig(backend="hf", model=str(folder), batch_size=3))
    yield loaded
    loaded.close()


def reference_p(model: torch.nn.Module, ids: list[int]) -> tuple[float, float]:
    """(P, Yes+No mass) from one plain forward pass over the whole prompt, in float64."""
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([ids]), logits_to_keep=1).logits[0, -1].double()
    probs = torch.softmax(logits, dim=-1)
    p_yes, p_no = probs[SMOLLM2_YES].sum().item(), probs[SMOLLM2_NO].sum().item()
    return p_yes / (p_yes + p_no), p_yes + p_no


def test_yes_no_spellings_of_smollm2(scorer):
    tokenizer = scorer.tokenizer
    assert scorer.yes_ids == SMOLLM2_YES and scorer.no_ids == SMOLLM2_NO
    for word, found in ((" Yes", scorer.yes_ids), (" No", scorer.no_ids), ("Yes", scorer.yes_ids)):
        ids = tokenizer.encode(word, add_special_tokens=False)
        assert len(ids) == 1 and ids[0] in found


def test_prompt_ids_are_the_whole_prompt_tokenized_and_cut_after_the_shared_part(scorer):
    pairs = make_pairs()
    encoded = [scorer.encode(pair) for pair in pairs]
    for pair, enc in zip(pairs, encoded):
        prompt = build_prompt(pair, scorer.config)
        text = scorer.tokenizer.apply_chat_template(prompt.messages(), add_generation_prompt=True, tokenize=False)
        text += prompt.answer_prefix
        assert text.endswith("<|im_start|>assistant\n[Guess]:")
        assert enc.ids == scorer.tokenizer(text, add_special_tokens=False)["input_ids"]
        assert scorer.tokenizer.decode(enc.prefix).endswith(prompt.user_shared)
        assert scorer.tokenizer.decode(enc.own).startswith("Paragraph:")
    # Pairs of one query share their prefix; the two queries do not.
    assert {enc.prefix for enc in encoded[0::2]} == {encoded[0].prefix}
    assert {enc.prefix for enc in encoded[1::2]} == {encoded[1].prefix}
    assert encoded[0].prefix != encoded[1].prefix


def test_tok_with_prefix_cache_and_batches_equals_a_plain_forward_pass(scorer):
    pairs = make_pairs()
    verdicts = scorer.score(pairs)
    plain = scorer.score_tok_plain(pairs)
    assert [v.pair_id for v in verdicts] == [p.pair_id for p in pairs] == [v.pair_id for v in plain]
    for pair, verdict, reference in zip(pairs, verdicts, plain):
        ids = scorer.encode(pair).ids
        p, mass = reference_p(scorer.model, ids)
        assert verdict.status == "ok" and verdict.method == "tok"
        assert verdict.p == pytest.approx(p, abs=1e-4)
        assert verdict.yes_no_mass == pytest.approx(mass, abs=1e-4)
        assert reference.p == pytest.approx(p, abs=1e-5)
        assert 0.0 <= verdict.p <= 1.0 and 0.0 < verdict.yes_no_mass <= 1.0
        assert verdict.guess == (verdict.p >= 0.5)
        assert verdict.confidence == pytest.approx(max(verdict.p, 1 - verdict.p))
        assert verdict.prompt_tokens == len(ids)
        assert verdict.raw_output.startswith("P(yes)=0.") and " P(no)=0." in verdict.raw_output
    # The passages are told apart: the P are not all one number.
    assert len({round(v.p, 4) for v in verdicts}) > 4


def test_a_pairs_p_does_not_depend_on_its_batch_companions(scorer):
    pairs = make_pairs()
    target = pairs[0]  # the shortest passage, padded the most when batched with the others
    alone = scorer.score([target])[0]
    companions = [target, *pairs[2:8:2]]
    for order in (companions, companions[::-1]):
        together = {v.pair_id: v for v in scorer.score(order)}
        assert together[target.pair_id].p == pytest.approx(alone.p, abs=1e-5)
    # All 4 passages of the query in one batch (the loaded model, under another batch size).
    wide = HFScorer(replace(scorer.config, batch_size=8), model=scorer.model, tokenizer=scorer.tokenizer)
    assert wide.score(pairs)[0].p == pytest.approx(alone.p, abs=1e-5)


def test_a_prompt_over_the_context_fails_alone(scorer):
    pairs = make_pairs()[:3]
    huge = PairInput(7, EMISSIONS, "emissions " * 9000, EMISSIONS_DEFINITION)
    verdicts = scorer.score([pairs[0], huge, *pairs[1:]])
    assert [v.pair_id for v in verdicts] == [pairs[0].pair_id, 7, pairs[1].pair_id, pairs[2].pair_id]
    failed = verdicts[1]
    assert failed.status == "failed" and failed.p is None and failed.guess is None
    assert "8192" in failed.error and failed.prompt_tokens > 8192
    for verdict, alone in zip(verdicts[0:1] + verdicts[2:], scorer.score(pairs)):
        assert verdict.status == "ok" and verdict.p == pytest.approx(alone.p, abs=1e-5)


@pytest.fixture(scope="module")
def asker(folder) -> HFScorer:
    loaded = HFScorer(JudgeConfig(backend="hf", model=str(folder), method="ask", max_new_tokens=4))
    yield loaded
    loaded.close()


def test_ask_answer_cut_short_is_a_parse_error_with_its_text_never_a_guess(asker):
    pairs = make_pairs()[:3]
    verdicts = asker.score(pairs)
    naive = asker.score_generate_naive(pairs)
    for pair, verdict, reference in zip(pairs, verdicts, naive):
        assert verdict.pair_id == pair.pair_id and verdict.method == "ask"
        assert verdict.status == "parse_error"
        assert verdict.p is None and verdict.guess is None and verdict.confidence is None
        assert verdict.raw_output.strip() and "[Guess]" in verdict.error
        assert verdict.completion_tokens == 4
        assert verdict.prompt_tokens == len(asker.encode(pair).ids)
        # The prefix cache changes nothing: the greedy text is the one generate() gives on the whole prompt.
        assert verdict.raw_output == reference.raw_output


def test_ask_answer_in_the_format_gives_p_from_guess_and_confidence(asker):
    pair = make_pairs()[0]
    prompt_ids = asker.encode(pair).ids
    answer = asker.tokenizer.encode("[Guess]: No\n[Confidence]: 0.7<|im_end|>", add_special_tokens=False)
    verdict = asker._ask_verdict(pair, torch.tensor(prompt_ids + answer), len(prompt_ids))
    assert verdict.status == "ok" and verdict.guess is False
    assert verdict.confidence == pytest.approx(0.7) and verdict.p == pytest.approx(0.3)
    assert verdict.raw_output == "[Guess]: No\n[Confidence]: 0.7" and verdict.completion_tokens == len(answer)


@pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")  # inside peft
def test_lora_adapter_is_applied_as_peft_applies_it(folder, scorer, tmp_path):
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(folder)
    lora = LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    peft_model = get_peft_model(base, lora).eval()
    peft_model.save_pretrained(tmp_path / "adapter")
    adapted = HFScorer(replace(scorer.config, adapter=str(tmp_path / "adapter")))
    pairs = make_pairs()[:4]
    try:
        verdicts = adapted.score(pairs)
    finally:
        adapted.close()
    for pair, verdict, plain in zip(pairs, verdicts, scorer.score(pairs)):
        p, _ = reference_p(peft_model, scorer.encode(pair).ids)
        assert verdict.p == pytest.approx(p, abs=1e-4)
        assert abs(verdict.p - plain.p) > 1e-3


def test_bad_configurations_name_the_problem(folder, tmp_path):
    missing = tmp_path / "no-model"
    with pytest.raises(ScorerConfigError, match=str(missing)):
        load_scorer(JudgeConfig(backend="hf", model=str(missing)))
    with pytest.raises(ScorerConfigError, match="adapter folder"):
        HFScorer(JudgeConfig(backend="hf", model=str(folder), adapter=str(tmp_path)))
    with pytest.raises(ScorerConfigError, match="float64"):
        HFScorer(JudgeConfig(backend="hf", model=str(folder), dtype="float64"))
    with pytest.raises(ScorerConfigError, match="batch_size"):
        HFScorer(JudgeConfig(backend="hf", model=str(folder), batch_size=0))

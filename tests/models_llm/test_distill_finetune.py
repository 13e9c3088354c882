"""The fine-tuning core without Django's job: chat examples encoded with the loss on the answer only, Tok on a
prepared prompt equal to the hf backend's Tok on the same pair, a time budget that ends training with an adapter,
and DIRAS's settings refused where they make no sense."""
import pytest
from django.conf import settings
from transformers import AutoModelForCausalLM, AutoTokenizer

from models_llm.backends.hf import HFScorer
from models_llm.bundled import smollm2_folder
from models_llm.distill.chat import IGNORE, ChatExample, pair_example, teacher_answer
from models_llm.distill.evaluation import agreement, tok_probabilities
from models_llm.distill.finetune import FinetuneError, LoraSettings, finetune
from models_llm.types import JudgeConfig, PairInput

PAIRS = [
    PairInput(pair_id=1, query="Is the paragraph about bananas?", passage="The banana harvest doubled this year."),
    PairInput(pair_id=2, query="Is the paragraph about bananas?", passage="The board approved the annual budget.",
              definition="Only paragraphs on the fruit count."),
]


@pytest.fixture(scope="module")
def base() -> str:
    return str(smollm2_folder(settings.VAR_DIR))


def test_tok_on_a_prepared_prompt_is_the_hf_backends_tok_on_the_pair(base):
    model = AutoModelForCausalLM.from_pretrained(base, local_files_only=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(base, local_files_only=True)
    examples = [pair_example(pair, teacher_answer(0.9)) for pair in PAIRS]
    mine = tok_probabilities(model, tokenizer, examples, batch_size=2)  # padded batch of two lengths
    reference = HFScorer(JudgeConfig(backend="hf", model=base, method="tok"), model=model, tokenizer=tokenizer)
    assert mine == pytest.approx([v.p for v in reference.score_tok_plain(PAIRS)], abs=1e-4)


def test_teacher_answers_are_diras_format_and_the_loss_skips_the_prompt(base):
    assert teacher_answer(0.9) == "[Guess]: Yes\n\n[Confidence]: 0.90"
    assert teacher_answer(0.2) == "[Guess]: No\n\n[Confidence]: 0.80"
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        teacher_answer(1.5)
    from models_llm.distill.chat import encode

    tokenizer = AutoTokenizer.from_pretrained(base, local_files_only=True)
    example = ChatExample(system="S", user="U", answer="[Guess]: No\n\n[Confidence]: 0.80")
    encoded = encode(tokenizer, example, 512)
    learnt = [token for token, label in zip(encoded.input_ids, encoded.labels) if label != IGNORE]
    assert tokenizer.decode(learnt) == "[Guess]: No\n\n[Confidence]: 0.80<|im_end|>\n"
    assert all(label == IGNORE for label in encoded.labels[: len(encoded.labels) - len(learnt)])


def test_a_time_budget_ends_training_after_one_step_with_an_adapter(base, tmp_path):
    examples = [pair_example(pair, teacher_answer(0.9 if pair.pair_id == 1 else 0.1)) for pair in PAIRS]
    result = finetune(base_folder=base, examples=examples, work_dir=str(tmp_path / "w"),
                      adapter_dir=str(tmp_path / "a"), stop_after_s=0.001,
                      settings=LoraSettings(r=4, batch_size=2, micro_batch=2, max_steps=50, save_steps=100))
    assert result.steps == 1 and (tmp_path / "a" / "adapter_config.json").is_file()


@pytest.mark.parametrize("values, message", [
    ({"batch_size": 30, "micro_batch": 4}, "multiple of the micro batch"),
    ({"dropout": 1.0}, "dropout"),
    ({"scheduler": "exotic"}, "scheduler"),
    ({"max_length": 8}, "maximum length"),
])
def test_settings_out_of_range_are_refused_by_name(values, message):
    with pytest.raises(FinetuneError, match=message):
        LoraSettings.from_dict(values)


def test_agreement_matches_scikit_learn():
    from sklearn.metrics import brier_score_loss, roc_auc_score

    p, y = [0.9, 0.2, 0.6, 0.4, 0.7], [1, 0, 0, 0, 1]
    found = agreement(p, y)
    assert found.auroc == pytest.approx(roc_auc_score(y, p)) and found.brier == pytest.approx(brier_score_loss(y, p))
    assert found.accuracy == pytest.approx(0.8) and agreement(p, [1] * 5).auroc is None

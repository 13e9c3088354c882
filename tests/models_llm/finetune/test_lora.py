"""The fine-tuning core without Django's job: chat examples encoded with the loss on the answer only, that loss
computed with the head on the answer's positions only equal to the model's own, Tok on a prepared prompt equal to
the hf backend's Tok on the same pair, a time budget that ends training with an adapter,
DIRAS App. F's source and target lengths (a long prompt's passage cut, never the answer, and counted), and DIRAS's
settings refused where they make no sense."""
import pytest
import torch
from django.conf import settings
from transformers import AutoModelForCausalLM, AutoTokenizer

from models_llm.backends.hf import HFScorer
from models_llm.bundled import smollm2_folder
from models_llm.finetune.answer_loss import answer_loss
from models_llm.finetune.chat import IGNORE, ChatExample, pair_example, teacher_answer
from models_llm.finetune.evaluation import agreement, tok_probabilities
from models_llm.finetune.lora import FinetuneError, LoraSettings, finetune
from models_llm.finetune.lora_training import _Collator, encode_all, load_student_base
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
    from models_llm.finetune.chat import encode

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



def test_top_layers_puts_the_adapter_on_the_last_layers_linear_layers_only(base):
    model, _, _ = load_student_base(base, LoraSettings(r=4, top_layers=2), "cpu")
    count = model.config.num_hidden_layers
    adapted = {name.split(".lora_A")[0] for name, _ in model.named_parameters() if ".lora_A." in name}
    layers = {int(name.split(".layers.")[1].split(".")[0]) for name in adapted}
    everywhere, _, _ = load_student_base(base, LoraSettings(r=4), "cpu")
    per_layer = sum(".layers.0." in name for name, _ in everywhere.named_parameters() if ".lora_A." in name)
    assert layers == {count - 2, count - 1} and len(adapted) == 2 * per_layer == 14  # q k v o gate up down
    with pytest.raises(FinetuneError, match=f"top_layers is {count + 1} but .* has {count} layers"):
        load_student_base(base, LoraSettings(r=4, top_layers=count + 1), "cpu")


def test_the_loss_with_the_head_on_answer_positions_only_is_the_models_own_loss(base):
    """The head runs on the positions that predict an answer token only, yet the loss and the LoRA gradients are
    those of the model's own loss over the whole padded batch."""
    model, tokenizer, _ = load_student_base(base, LoraSettings(r=4, dropout=0.0), "cpu")
    examples = [ChatExample(system="S", user="Is it about bananas? The banana harvest doubled this year.",
                            answer=teacher_answer(0.9)),
                ChatExample(system="S", user="U", answer=teacher_answer(0.2))]  # short: padded in the batch
    batch = _Collator(tokenizer.pad_token_id)([{"input_ids": list(e.input_ids), "labels": list(e.labels)}
                                               for e in encode_all(tokenizer, examples, LoraSettings())])

    def loss_and_gradients(loss_of):
        model.zero_grad()
        loss = loss_of()
        loss.backward()
        return loss.item(), [p.grad.clone() for p in model.parameters() if p.grad is not None]

    rows = []
    hook = model.get_output_embeddings().register_forward_hook(lambda _m, args, _o: rows.append(args[0].shape[1]))
    trimmed, trimmed_grads = loss_and_gradients(lambda: answer_loss(model, batch))
    hook.remove()
    full, full_grads = loss_and_gradients(lambda: model(**batch).loss)
    assert trimmed == pytest.approx(full, rel=1e-5)
    assert len(trimmed_grads) == len(full_grads) > 0
    for mine, reference in zip(trimmed_grads, full_grads):
        assert torch.allclose(mine, reference, rtol=1e-4, atol=1e-7)
    # Position i predicts token i + 1: the head ran where either row's next token is an answer token.
    predicting = {i - 1 for row in batch["labels"].tolist() for i, label in enumerate(row) if label != IGNORE}
    assert rows == [len(predicting)] and len(predicting) < batch["input_ids"].shape[1]


@pytest.mark.parametrize("values, message", [
    ({"batch_size": 30, "micro_batch": 4}, "multiple of the micro batch"),
    ({"dropout": 1.0}, "dropout"),
    ({"scheduler": "exotic"}, "scheduler"),
    ({"source_max_length": 8}, "source max length"),
    ({"max_length": 8}, "source max length"),  # a job's setting before App. F's two lengths
    ({"target_max_length": 0}, "target max length"),
    ({"max_length": 100, "source_max_length": 100}, "not both"),
    ({"top_layers": -1}, "top layers"),
    ({"top_layers": 2, "target_modules": "q_proj"}, "top layers needs the target modules 'all-linear'"),
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


# --- DIRAS App. F: "a source max length of 2048, and a target max length of 512" ---------------------------------

LONG = PairInput(pair_id=3, query="What is the firm's Scope 3 emission?", definition="Scope 3 figures count.",
                 passage=" ".join(f"Paragraph sentence {i} reports emissions of {i * 7} tonnes." for i in range(400)))


def chatml(example: ChatExample) -> str:
    return (f"<|im_start|>system\n{example.system}<|im_end|>\n<|im_start|>user\n{example.user}<|im_end|>\n"
            "<|im_start|>assistant\n")


def test_app_f_lengths_are_the_defaults():
    settings_ = LoraSettings()
    assert (settings_.source_max_length, settings_.target_max_length) == (2048, 512)
    assert LoraSettings.from_dict({"max_length": 1024}).source_max_length == 1024


def test_a_prompt_over_the_source_length_has_its_passage_cut_and_keeps_the_rest_and_the_answer(base):
    from models_llm.finetune.chat import encode

    tokenizer = AutoTokenizer.from_pretrained(base, local_files_only=True)
    example = pair_example(LONG, teacher_answer(0.9))
    whole = len(tokenizer(chatml(example), add_special_tokens=False)["input_ids"])
    assert whole > 2048  # by hand: 400 sentences of about 12 tokens
    encoded = encode(tokenizer, example)  # App. F's 2048 / 512
    prompt_ids = [token for token, label in zip(encoded.input_ids, encoded.labels) if label == IGNORE]
    answer_ids = [token for token, label in zip(encoded.input_ids, encoded.labels) if label != IGNORE]
    assert encoded.truncated and 2048 - 8 <= len(prompt_ids) <= 2048  # cut to fit, not far below
    assert tokenizer.decode(answer_ids) == teacher_answer(0.9) + "<|im_end|>\n"  # the answer whole
    # The prompt is the same prompt with a shorter passage: everything before and after the passage unchanged.
    shown = tokenizer.decode(prompt_ids)
    before, after = chatml(example).split(LONG.passage)
    assert shown.startswith(before) and shown.endswith(after)
    kept = shown[len(before):len(shown) - len(after)]
    assert LONG.passage.startswith(kept) and len(kept) < len(LONG.passage)
    # A prompt that fits is encoded as it is, uncut.
    short = pair_example(PAIRS[0], teacher_answer(0.9))
    assert not encode(tokenizer, short).truncated
    assert tokenizer.decode(encode(tokenizer, short).input_ids) == chatml(short) + teacher_answer(0.9) + "<|im_end|>\n"


def test_an_answer_over_the_target_length_or_a_prompt_too_long_without_its_passage_is_refused(base):
    from models_llm.finetune.chat import DistillFormatError, encode

    tokenizer = AutoTokenizer.from_pretrained(base, local_files_only=True)
    with pytest.raises(DistillFormatError, match="over the target max length of 8 .an answer is never cut"):
        encode(tokenizer, pair_example(PAIRS[0], teacher_answer(0.9)), target_max=8)
    wordy = PairInput(pair_id=4, query="why " * 3000, passage="short")
    with pytest.raises(DistillFormatError, match="without its passage, over the source max length of 2048"):
        encode(tokenizer, pair_example(wordy, teacher_answer(0.9)))
    unknown = ChatExample(system="S", user="U " * 3000, answer=teacher_answer(0.9))  # no passage to cut
    with pytest.raises(DistillFormatError, match="its passage cannot be found"):
        encode(tokenizer, unknown)


def test_fine_tuning_counts_the_examples_it_cut(base, tmp_path):
    examples = [pair_example(LONG, teacher_answer(0.9)), pair_example(PAIRS[0], teacher_answer(0.9)),
                pair_example(PAIRS[1], teacher_answer(0.1))]
    tokenizer = AutoTokenizer.from_pretrained(base, local_files_only=True)
    over = sum(len(tokenizer(chatml(e), add_special_tokens=False)["input_ids"]) > 256 for e in examples)
    assert over == 1  # by hand: only LONG's prompt is over 256 tokens
    heard = []
    result = finetune(base_folder=base, examples=examples, work_dir=str(tmp_path / "w"),
                      adapter_dir=str(tmp_path / "a"), on_encoded=lambda n, cut: heard.append((n, cut)),
                      settings=LoraSettings(r=4, batch_size=3, micro_batch=3, max_steps=1, save_steps=100,
                                            source_max_length=256))
    assert result.truncated == 1 and heard == [(3, 1)]

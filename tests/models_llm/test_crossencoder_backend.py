"""The crossencoder backend with the real bundled MiniLM weights under a classification head (made here, seeded):
P is what sentence-transformers' own CrossEncoder.predict gives (its sigmoid for one logit; scipy's softmax of its
raw logits for two), the definition goes before the question with the separator, token counts are the tokenizer's
after the cut, and a folder whose head would be random is refused."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from scipy.special import expit, softmax
from sentence_transformers import CrossEncoder

from models_llm.backends import ScorerConfigError, load_scorer
from models_llm.backends.crossencoder import probabilities, query_side
from models_llm.bundled import minilm_folder
from models_llm.types import CROSSENCODER_SEPARATOR, JudgeConfig, PairInput

PAIRS = [
    PairInput(pair_id=1, query="Does the company set an emissions target?", title="Climate report",
              passage="We commit to cutting scope 1 and 2 emissions by 40 % by 2030 against 2019.",
              definition="Relevant: a quantified target for greenhouse-gas emissions."),
    PairInput(pair_id=2, query="Does the company set an emissions target?",
              passage="The cafeteria now serves a vegetarian dish every day.", definition="Relevant: a target."),
    PairInput(pair_id=3, query="Is water use disclosed?", passage="Water withdrawal was 3.2 million m3 in 2023. " * 80),
]


def _cross_encoder(folder, labels: int) -> str:
    torch.manual_seed(labels)
    model = CrossEncoder(str(minilm_folder()), num_labels=labels, local_files_only=True, device="cpu")
    model.save_pretrained(str(folder))
    return str(folder)


@pytest.fixture(scope="module")
def one_logit(tmp_path_factory):
    return _cross_encoder(tmp_path_factory.mktemp("ce1"), 1)


@pytest.fixture(scope="module")
def two_logits(tmp_path_factory):
    return _cross_encoder(tmp_path_factory.mktemp("ce2"), 2)


def _config(folder: str, **options) -> JudgeConfig:
    return JudgeConfig(backend="crossencoder", method="crossencoder", model=folder, **options)


def _sides(pairs, use_definition: bool):
    return [(query_side(p, use_definition, CROSSENCODER_SEPARATOR),
             f"{p.title}\n{p.passage}" if p.title else p.passage) for p in pairs]


def test_p_of_a_one_logit_head_is_cross_encoder_predicts_sigmoid(one_logit):
    scorer = load_scorer(_config(one_logit, use_definition=False, max_length=256))
    verdicts = scorer.score(PAIRS)
    reference = CrossEncoder(one_logit, local_files_only=True, device="cpu", max_length=256).predict(
        _sides(PAIRS, False))
    assert [v.pair_id for v in verdicts] == [1, 2, 3] and all(v.status == "ok" for v in verdicts)
    assert np.allclose([v.p for v in verdicts], reference, atol=1e-6, rtol=0)
    assert scorer.describe()["head"] == "sigmoid of one logit" and scorer.describe()["num_labels"] == 1
    assert verdicts[0].raw_output.startswith("logit=") and verdicts[0].method == "crossencoder"


def test_p_of_a_two_logit_head_is_the_softmax_of_the_positive_class(two_logits):
    scorer = load_scorer(_config(two_logits, use_definition=False))
    raw = CrossEncoder(two_logits, local_files_only=True, device="cpu").predict(
        _sides(PAIRS, False), activation_fn=torch.nn.Identity(), apply_softmax=False)
    assert np.allclose([v.p for v in scorer.score(PAIRS)], softmax(raw, axis=1)[:, 1], atol=1e-6, rtol=0)
    assert scorer.describe()["head"].startswith("softmax of the positive class")


def test_the_definition_goes_before_the_question_with_the_separator(one_logit):
    with_definition = load_scorer(_config(one_logit, separator=" || "))
    reference = CrossEncoder(one_logit, local_files_only=True, device="cpu").predict(
        [(f"{PAIRS[0].definition} || {PAIRS[0].query}", f"{PAIRS[0].title}\n{PAIRS[0].passage}")])
    assert with_definition.score(PAIRS[:1])[0].p == pytest.approx(float(reference[0]), abs=1e-6)
    without = load_scorer(_config(one_logit, use_definition=False)).score(PAIRS[:1])[0].p
    assert without != pytest.approx(float(reference[0]), abs=1e-6)
    assert query_side(PAIRS[2], True, " || ") == PAIRS[2].query  # no definition: the question alone


def test_tokens_are_what_the_model_reads_cut_to_max_length(one_logit):
    scorer = load_scorer(_config(one_logit, use_definition=False, max_length=64))
    verdicts = scorer.score(PAIRS)
    tokenizer = CrossEncoder(one_logit, local_files_only=True, device="cpu").tokenizer
    full = [len(tokenizer(q, p)["input_ids"]) for q, p in _sides(PAIRS, False)]
    assert [v.prompt_tokens for v in verdicts] == [min(n, 64) for n in full] and full[2] > 64
    assert all(v.completion_tokens == 0 for v in verdicts)


def test_a_plain_encoder_or_a_head_of_three_classes_is_refused(tmp_path):
    with pytest.raises(ScorerConfigError, match="encoder without a relevance head"):
        load_scorer(_config(str(minilm_folder())))
    three = _cross_encoder(tmp_path / "ce3", 3)
    with pytest.raises(ScorerConfigError, match="head of 3 classes"):
        load_scorer(_config(three))
    with pytest.raises(ScorerConfigError, match="does not exist"):
        load_scorer(_config(str(tmp_path / "absent")))
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{not json")
    with pytest.raises(ScorerConfigError, match="no readable config.json"):
        load_scorer(_config(str(tmp_path / "broken")))
    # A config that claims a head over no weights.
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.json").write_text(json.dumps({"architectures": ["BertForSequenceClassification"]}))
    with pytest.raises(ScorerConfigError, match="not a loadable cross-encoder"):
        load_scorer(_config(str(tmp_path / "empty")))


@pytest.mark.parametrize("options, message", [
    ({"method": "tok"}, "crossencoder backend and the crossencoder method go together"),
    ({"max_length": 8}, "max_length must be"),
    ({"separator": "  "}, "separator must be"),
])
def test_configs_that_make_no_sense_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        JudgeConfig(**{"backend": "crossencoder", "method": "crossencoder", "model": "x", **options})


def test_probabilities_are_scipys_and_stay_finite_at_extreme_logits():
    logits = np.array([-1000.0, -30.0, -1.5, 0.0, 2.0, 40.0, 1000.0])
    assert np.allclose(probabilities(logits), expit(logits), atol=1e-12, rtol=0)
    pairs = np.array([[1000.0, -1000.0], [0.3, 1.2], [-5.0, 5.0]])
    assert np.allclose(probabilities(pairs), softmax(pairs, axis=1)[:, 1], atol=1e-12, rtol=0)
    with pytest.raises(ValueError, match="no single relevant class"):
        probabilities(np.zeros((2, 3)))

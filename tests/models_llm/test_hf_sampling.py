"""JudgeConfig.temperature on the real SmolLM2-135M-Instruct (Ask): greedy answers are the same every time, sampled
ones (the audit's self-consistency test) are drawn afresh, so two runs can differ."""
from dataclasses import replace
from pathlib import Path

import torch

from models_llm.backends.hf import HFScorer
from models_llm.bundled import smollm2_folder
from models_llm.types import JudgeConfig, PairInput

VAR_DIR = Path(__file__).resolve().parents[2] / "var"
PAIR = PairInput(pair_id=1, query="Does the company assess flood risk at its plants?",
                 passage="Our plants near rivers were screened for flood exposure under two warming scenarios.")


def answers(scorer: HFScorer, seeds: tuple[int, ...]) -> list[str]:
    out = []
    for seed in seeds:
        torch.manual_seed(seed)  # sampling draws from torch's generator: each run its own draw
        out.append(scorer.score([PAIR])[0].raw_output)
    return out


def test_greedy_answers_are_identical_and_sampled_ones_differ():
    config = JudgeConfig(backend="hf", model=str(smollm2_folder(VAR_DIR)), method="ask", max_new_tokens=12)
    model, tokenizer = HFScorer._load(config)  # one load: both scorers share the weights
    greedy = answers(HFScorer(config, model, tokenizer), (0, 1))
    assert greedy[0] == greedy[1] and greedy[0]
    sampled = answers(HFScorer(replace(config, temperature=1.5), model, tokenizer), (0, 1))
    assert sampled[0] != sampled[1], sampled

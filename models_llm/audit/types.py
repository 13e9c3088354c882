"""The values an audit passes around: a probe (one prompt the judge is asked, with what it stands for) and the
verdict labels of the report. Plain Python: the product builds probes from its data, a scorer answers them, and the
report functions read the answers."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from models_llm.types import PairInput

Verdict = Literal["robust", "watch", "sensitive", "no data"]

# The perturbation tests, in the order the report lists them (`length` makes two rows: 512 and 1024 words).
PERTURBATION_TESTS = ("length", "stuffing", "injection", "definition", "consistency")
PAD_WORDS = (512, 1024)


@dataclass(frozen=True)
class Probe:
    """One prompt of an audit. `pair.pair_id` is the probe's index in its audit's list (the scorer echoes it back).
    `sampled`: asked with sampling on (self-consistency). `role` says what the prompt is: perturbation audit:
    `original`, `length512`, `length1024`, `stuffing_base`, `stuffing`, `injection`, `definition`, `consistency_a`,
    `consistency_b`; multi-condition: `mc`. `item`: perturbation audit: the sampled pair's id (as text);
    multi-condition: the item id. `query_key` / `doc_key`: the external ids of the query and passage the prompt
    came from (a borrowed stuffing base names that passage). `pad`: words the passage was padded to
    (0: not padded)."""

    pair: PairInput
    role: str
    item: str
    query_key: str
    doc_key: str
    sampled: bool = False
    pad: int = 0

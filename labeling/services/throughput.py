"""A first guess of a local model's speed when nothing has been measured yet (labeling/selectors/throughput.py reads
what has): a timed probe of a few pairs, scored as a worker scores a part and stored nowhere. Remote endpoints are
never probed: an estimate sends nothing to a model that costs money; their speed is known from their first chunks.

The probe runs where the estimate is asked (the web process for the pages and the API, the command's own process
for `score --dry-run`): on a machine without the workers' accelerator it measures this machine, which the estimate
says (`device`)."""
from __future__ import annotations

import random
import time
from collections.abc import Sequence

from django.conf import settings

from labeling.llm_adapter import judge_config, judge_device
from labeling.models import Judge, Pair
from labeling.selectors.definitions import current_definitions
from labeling.selectors.throughput import Throughput
from labeling.services.judging import judge_pairs

LOCAL_BACKENDS = (Judge.Backend.HF, Judge.Backend.EMBEDDING, Judge.Backend.CROSSENCODER)


def throughput_probe(*, judge: Judge, pair_ids: Sequence[int], seed: int = 0) -> Throughput | None:
    """Score one part (SCORING_WRITE_PAIRS pairs, a fixed-seed sample of `pair_ids`) with the judge's local model
    after one warm-up pair (which loads the model and is not timed), storing nothing. None for a judge that is not
    a local model, or without pairs."""
    if judge.is_imported or judge.is_ensemble or judge.backend not in LOCAL_BACKENDS:
        return None
    if judge_config(judge).method == Judge.Method.ENSEMBLE:
        return None
    part = max(1, settings.SCORING_WRITE_PAIRS)
    chosen = random.Random(seed).sample(list(pair_ids), min(part + 1, len(pair_ids)))
    if len(chosen) < 2:
        return None
    pairs = {pair.id: pair for pair in Pair.objects.filter(id__in=chosen).select_related("query", "passage")}
    ordered = [pairs[pair_id] for pair_id in chosen]
    definitions = current_definitions({pair.query_id for pair in ordered})
    judge_pairs(judge=judge, pairs=ordered[:1], definitions=definitions)
    started = time.perf_counter()
    judge_pairs(judge=judge, pairs=ordered[1:], definitions=definitions)
    seconds = time.perf_counter() - started
    return Throughput(per_s=(len(ordered) - 1) / max(seconds, 1e-6), items=len(ordered) - 1,
                      device=judge_device(judge), basis="probe")

"""The crisis paper's double cascade as a preset of a cascade retrieval job (models_llm.retrieval.crisis): BM25's
`first_depth` per query, re-ranked by a cross-encoder judge that keeps `keep`; the kept passages of all queries
(each once) are the filtered corpus; dense retrieval over it, re-ranked by the judge again, keeping the final
fraction. The job's parameters hold the preset under "crisis"; its run records each stage's wall time and how many
passages each query kept there, so the time-vs-effectiveness comparison of the paper's Table 5 can be read beside
the Systems page's measures."""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from labeling.models import Project, Query
from labeling.services.retrieval_embeddings import passage_embeddings
from labeling.services.retrieval_errors import RetrievalError
from labeling.services.retrieval_rerank import rerank_parameters, retrieval_rerank
from models_llm.retrieval.bm25 import BM25Params, bm25_retrieve
from models_llm.retrieval.crisis import PRESET, CrisisCutoffs, filtered_corpus
from models_llm.retrieval.dense import HNSW_MIN_PASSAGES, DenseEncoder, dense_search
from models_llm.retrieval.hits import Hits, ProgressFn

CRISIS_KEYS = {"judge", "dense_depth", "dense_fraction", "final_fraction"}
DEFAULTS = CrisisCutoffs()


def crisis_parameters(*, project: Project | None, crisis: dict, first_depth: int, keep: int) -> dict:
    """The preset as a job stores it: {"preset", "judge", "judge_id", "backend", "dense_depth", "dense_fraction",
    "final_fraction"}, checked. `crisis` names the re-ranking judge (a crossencoder, embedding or hf judge of the
    project: both re-rankings use it) and may set the dense cut-offs (left out: the paper's 200 and 10 %, 10 %);
    `first_depth` and `keep` are the lexical step's (the paper's 200 and 60). RetrievalError names what is wrong."""
    if not isinstance(crisis, dict) or not set(crisis) <= CRISIS_KEYS or "judge" not in crisis:
        raise RetrievalError("the crisis double cascade takes {'judge': name} and optionally dense_depth, "
                             f"dense_fraction and final_fraction, got {crisis!r}"[:300])
    given = {key: crisis[key] for key in ("dense_depth", "dense_fraction", "final_fraction")
             if crisis.get(key) is not None}
    if "dense_depth" in given and (not isinstance(given["dense_depth"], int) or isinstance(given["dense_depth"], bool)):
        raise RetrievalError(f"the crisis dense depth must be a whole number, got {given['dense_depth']!r}")
    for name in ("dense_fraction", "final_fraction"):
        if name in given and (isinstance(given[name], bool) or not isinstance(given[name], int | float)):
            raise RetrievalError(f"the crisis {name.replace('_', ' ')} must be a number, got {given[name]!r}")
    try:
        cut = CrisisCutoffs(lexical_depth=first_depth, lexical_keep=keep, **given)
    except ValueError as exc:
        raise RetrievalError(f"crisis double cascade: {exc}") from None
    stage = rerank_parameters(project=project, rerank=[{"judge": crisis["judge"], "keep": keep}], depth=first_depth)[0]
    return {"preset": PRESET, "judge": stage["judge"], "judge_id": stage["judge_id"], "backend": stage["backend"],
            "dense_depth": cut.dense_depth, "dense_fraction": float(cut.dense_fraction),
            "final_fraction": float(cut.final_fraction)}


def crisis_progress_sizes(params: dict, n_queries: int, n_passages: int) -> list[int]:
    """The units of work of the six progress stages (BM25's queries, the first re-ranking's pairs, the filtered
    corpus embedded, the queries encoded and searched, the final re-ranking's pairs), at most."""
    cut = _cutoffs(params)
    filtered = min(n_passages, n_queries * cut.lexical_keep)
    return [n_queries, n_queries * min(cut.lexical_depth, n_passages), filtered, n_queries, n_queries,
            n_queries * cut.dense_cut(filtered)]


class _Stages:
    """Each stage's wall time and the passages each query kept after it, as the run records them."""

    def __init__(self, external_ids: Sequence[str]) -> None:
        self.external_ids, self.recorded, self.start = list(external_ids), [], time.perf_counter()

    def done(self, name: str, hits: Hits) -> None:
        now = time.perf_counter()
        self.recorded.append({"stage": name, "seconds": round(now - self.start, 4),
                              "per_query": {q: len(found) for q, found in zip(self.external_ids, hits.indices)}})
        self.start = now


def crisis_retrieve(
    *, project: Project, params: dict, query_ids: Sequence[int], query_texts: Sequence[str],
    passage_ids: Sequence[int], passage_texts: Sequence[str], bm25: BM25Params, encoder: DenseEncoder,
    progress: Callable[[int], ProgressFn],
) -> tuple[Hits, list[int], dict]:
    """The double cascade's final hits (positions into the returned passage ids: the filtered corpus), and what
    the run records of it: the cut-offs applied, the filtered corpus's size, each re-ranking (as a re-rank stage
    records it) and each stage's time and passages per query. `progress(i)`: the i-th stage's progress function
    (crisis_progress_sizes)."""
    cut = _cutoffs(params)
    crisis = params["crisis"]
    external = dict(Query.objects.filter(id__in=list(query_ids)).values_list("id", "external_id"))
    stages = _Stages([external[query_id] for query_id in query_ids])
    found = bm25_retrieve(passage_texts, query_texts, depth=cut.lexical_depth, params=bm25, progress=progress(0))
    stages.done("bm25", found)
    judge = {key: crisis[key] for key in ("judge", "judge_id", "backend")}
    kept, first = retrieval_rerank(project=project, stages=[{**judge, "keep": cut.lexical_keep}], hits=found,
                                   query_ids=query_ids, passage_ids=passage_ids, progress=[progress(1)])
    stages.done("cross-encoder re-rank", kept)
    filtered = filtered_corpus(kept)
    if not len(filtered):
        raise RetrievalError("the lexical step kept no passage for any query (BM25 found none sharing a query's "
                             "words): the filtered corpus is empty, there is nothing for dense retrieval to rank")
    filtered_ids = [passage_ids[i] for i in filtered]
    depth = cut.dense_cut(len(filtered))
    vectors = passage_embeddings(project=project, encoder=encoder,
                                 passages=[(passage_ids[i], passage_texts[i]) for i in filtered],
                                 progress=progress(2))
    queries = encoder.encode(list(query_texts), progress=progress(3))
    approximate = len(filtered) >= HNSW_MIN_PASSAGES
    dense = dense_search(vectors, queries, depth=depth, approximate=approximate, progress=progress(4))
    stages.done("dense over the filtered corpus", dense)
    final_keep = cut.final_keep(depth)
    hits, last = retrieval_rerank(project=project, stages=[{**judge, "keep": final_keep}], hits=dense,
                                  query_ids=query_ids, passage_ids=filtered_ids, progress=[progress(5)])
    stages.done("final cross-encoder re-rank", hits)
    recorded = {**crisis, "lexical_depth": cut.lexical_depth, "lexical_keep": cut.lexical_keep,
                "filtered_corpus": len(filtered), "dense_cut": depth, "final_keep": final_keep,
                "dense_search": "hnsw" if approximate else "exact", "rerank": [*first, *last],
                "stages": stages.recorded}
    return hits, filtered_ids, recorded


def _cutoffs(params: dict) -> CrisisCutoffs:
    crisis = params["crisis"]
    return CrisisCutoffs(lexical_depth=params["first_depth"], lexical_keep=params["keep"],
                         dense_depth=crisis["dense_depth"], dense_fraction=crisis["dense_fraction"],
                         final_fraction=crisis["final_fraction"])

"""A retrieval job's re-ranking stages: after its first retriever, each stage scores the previous stage's ranking
per query with a judge of the project whose model scores pairs here (crossencoder, embedding, hf) and keeps the
best `keep` by P. The judge's scorer is the one a scoring job loads (llm_adapter.judge_config, load_scorer);
a remote (openai) judge is refused: re-ranking sends every query's candidates, a cost no estimate asked for."""
from __future__ import annotations

import time
from collections.abc import Sequence
from functools import partial

from labeling.exceptions import NotFound
from labeling.llm_adapter import JudgeConfigError, judge_config, judge_method
from labeling.models import Judge, Judgment, Passage, Project, Query
from labeling.selectors.definitions import current_definitions
from labeling.selectors.lookups import judge_by_name
from labeling.services.retrieval_errors import RetrievalError
from models_llm.backends import Scorer, ScorerConfigError, load_scorer
from models_llm.retrieval.hits import Hits, ProgressFn
from models_llm.retrieval.rerank import judge_rerank
from models_llm.types import JudgeConfig, PairInput

# Pairs scored between two looks at whether the job still runs (each batch ends with a progress report).
RERANK_BATCH = 128
MAX_STAGES = 5
STAGE_KEYS = {"judge", "keep"}


def rerank_refusal(judge: Judge) -> str | None:
    """Why `judge` cannot re-rank a run (None: it can), read from its row: only a model that scores pairs in this
    process, one P per pair."""
    if judge.backend == Judge.Backend.OPENAI:
        return ("it asks a remote endpoint, and re-ranking sends every query's candidates to it; re-rank with a "
                "crossencoder, embedding or hf judge")
    if judge.is_ensemble:
        return "it is a judges ensemble, without a model of its own; re-rank with one of its members"
    if judge.backend not in Judge.Backend.local_model():
        return (f"a judge of backend {judge.backend!r} has no model to score pairs with; re-rank with a "
                "crossencoder, embedding or hf judge")
    if judge_method(judge) == Judge.Method.ENSEMBLE:
        return "its prompt strategies need each query's intent and many calls per pair; re-rank with a tok or ask judge"
    return None


def rerank_parameters(*, project: Project | None, rerank: Sequence[dict], depth: int) -> list[dict]:
    """The stages as a job stores them ({"judge", "judge_id", "backend", "keep"} each), checked: a judge of the
    project that can re-rank (rerank_refusal) and whose configuration loads, and 1 <= keep <= what the stage before
    ranks per query (`depth` for the first stage). RetrievalError names the stage and what is wrong."""
    if not isinstance(rerank, list | tuple) or len(rerank) > MAX_STAGES:
        raise RetrievalError(f"rerank must be a list of at most {MAX_STAGES} stages, each {{'judge': name, 'keep': N}}")
    if rerank and project is None:
        raise RetrievalError("re-ranking stages name judges of a project: give the project")
    stored, previous = [], depth
    for number, stage in enumerate(rerank, 1):
        if not isinstance(stage, dict) or set(stage) != STAGE_KEYS:
            raise RetrievalError(f"re-rank stage {number} must be {{'judge': name, 'keep': N}}, got {stage!r}"[:300])
        name, keep = stage["judge"], stage["keep"]
        if not isinstance(name, str) or not isinstance(keep, int) or isinstance(keep, bool):
            raise RetrievalError(f"re-rank stage {number}: the judge is a name and keep a whole number")
        try:
            judge = judge_by_name(project=project, name=name)
        except NotFound as exc:
            raise RetrievalError(f"re-rank stage {number}: {exc}") from None
        refusal = rerank_refusal(judge)
        if refusal:
            raise RetrievalError(f"re-rank stage {number}: judge {judge.name!r} cannot re-rank: {refusal}")
        try:
            judge_config(judge)
        except JudgeConfigError as exc:
            raise RetrievalError(f"re-rank stage {number}: {exc}") from None
        if not 1 <= keep <= previous:
            raise RetrievalError(f"re-rank stage {number} keeps {keep} passages per query of the {previous} the stage "
                                 f"before it ranks: keep must be 1 to {previous}")
        stored.append({"judge": judge.name, "judge_id": judge.id, "backend": judge.backend, "keep": keep})
        previous = keep
    return stored


def rerank_judge(*, project: Project, stage: dict) -> tuple[Judge, JudgeConfig]:
    """The stage's judge as it is now and its configuration; RetrievalError when it was deleted or changed into one
    that cannot re-rank since the job was asked for."""
    judge = Judge.objects.filter(project=project, id=stage["judge_id"]).first()
    if judge is None:
        raise RetrievalError(f"judge {stage['judge']!r} of the re-rank stage was deleted")
    refusal = rerank_refusal(judge)
    if refusal:
        raise RetrievalError(f"judge {judge.name!r} cannot re-rank: {refusal}")
    try:
        return judge, judge_config(judge)
    except JudgeConfigError as exc:
        raise RetrievalError(str(exc)) from None


def rerank_scorer(judge: Judge, config: JudgeConfig) -> Scorer:
    """The judge's model loaded as a scoring job loads it, for one job: the caller closes it (a retrieval worker
    does not keep a re-ranker's model between jobs, as scoring workers keep theirs)."""
    try:
        return load_scorer(config)
    except ScorerConfigError as exc:
        raise RetrievalError(f"judge {judge.name!r}: {exc}") from None


class RerankTexts:
    """What a judge reads of (query, passage) pairs given by id: the question, the query's current definition
    (the judge's configuration decides whether it is shown), the passage's title and text."""

    def __init__(self, query_ids: Sequence[int]) -> None:
        rows = Query.objects.filter(id__in=list(query_ids)).values_list("id", "external_id", "text")
        self.questions = {query_id: (external_id, text) for query_id, external_id, text in rows}
        self.definitions = current_definitions(self.questions)

    def definition_versions(self) -> dict[str, int]:
        """query external id -> the version of the definition shown."""
        return {self.questions[query_id][0]: definition.version for query_id, definition in self.definitions.items()}

    def inputs(self, pairs: Sequence[tuple[int, int]]) -> tuple[list[PairInput], list[str]]:
        """PairInputs for (query id, passage id) pairs (pair_id: the position in `pairs`) and each pair's name
        ("query Q, passage D") for messages."""
        passages = {passage_id: (external_id, title, text) for passage_id, external_id, title, text in
                    Passage.objects.filter(id__in={passage_id for _, passage_id in pairs})
                    .values_list("id", "external_id", "title", "text")}
        inputs, names = [], []
        for position, (query_id, passage_id) in enumerate(pairs):
            external_id, title, text = passages[passage_id]
            definition = self.definitions.get(query_id)
            inputs.append(PairInput(pair_id=position, query=self.questions[query_id][1], passage=text, title=title,
                                    definition=definition.text if definition is not None else None))
            names.append(f"query {self.questions[query_id][0]!r}, passage {external_id!r}")
        return inputs, names


def rerank_p(scorer: Scorer, judge: Judge, texts: RerankTexts, pairs: Sequence[tuple[int, int]]) -> list[float]:
    """The judge's P of each (query id, passage id) pair; RetrievalError names a pair it gave none for (a run
    ranked with a made-up P would look like the judge's ranking)."""
    inputs, names = texts.inputs(pairs)
    found = []
    for verdict, name in zip(scorer.score(inputs), names, strict=True):
        if verdict.status != Judgment.Status.OK or verdict.p is None:
            raise RetrievalError(f"judge {judge.name!r} gave no P for {name} ({verdict.status}: "
                                 f"{verdict.error or verdict.raw_output})"[:500])
        found.append(verdict.p)
    return found


def _positions_p(scorer: Scorer, judge: Judge, texts: RerankTexts, query_ids: Sequence[int],
                 passage_ids: Sequence[int], batch: Sequence[tuple[int, int]]) -> list[float]:
    return rerank_p(scorer, judge, texts, [(query_ids[query], passage_ids[position]) for query, position in batch])


def retrieval_rerank(
    *, project: Project, stages: Sequence[dict], hits: Hits, query_ids: Sequence[int], passage_ids: Sequence[int],
    progress: Sequence[ProgressFn],
) -> tuple[Hits, list[dict]]:
    """`hits` (positions into `passage_ids`, per query of `query_ids`) through each stage in turn, and what the
    run records of each (the judge, its model and method, how P was read, the definitions shown). Each judge's model
    is loaded for its stage and closed after it."""
    texts = RerankTexts(query_ids)
    recorded = []
    for stage, report in zip(stages, progress, strict=True):
        started = time.perf_counter()
        judge, config = rerank_judge(project=project, stage=stage)
        scorer = rerank_scorer(judge, config)
        try:
            score = partial(_positions_p, scorer, judge, texts, query_ids, passage_ids)
            hits = judge_rerank(hits, score, keep=stage["keep"], batch_size=RERANK_BATCH, progress=report)
            described = scorer.describe() if hasattr(scorer, "describe") else {}
        finally:
            scorer.close()
        entry = {**stage, "judge": judge.name, "model": judge.model, "method": config.method,
                 "use_definition": config.use_definition, **({"scorer": described} if described else {}),
                 "seconds": round(time.perf_counter() - started, 4)}
        if config.use_definition:
            entry["definition_versions"] = texts.definition_versions()
        recorded.append(entry)
    return hits, recorded

"""Built-in retrievers run as background jobs: a RetrievalJob asked for here (BM25, dense, or BM25 re-ranked by the
dense encoder; any of them then re-ranked by local judges, labeling.services.retrieval_rerank), which a worker runs
over the project's queries and passages and ends by writing the run in one transaction: a failed or cancelled job
leaves no run. The retrievers themselves are models_llm.retrieval."""
from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import numpy as np
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import OuterRef, Subquery
from django.utils import timezone

from labeling.exceptions import DomainError
from labeling.llm_adapter import JudgeConfigError, model_folder
from labeling.models import MAX_ERROR_CHARS, Passage, Project, Query, RelevanceDefinition, RetrievalJob, Run, RunKind
from labeling.names import NameRefused
from labeling.selectors.retrieval_jobs import retrieval_job_writing
from labeling.services.jobs import job_cancel, job_fail, job_heartbeat, job_take
from labeling.services.retrieval_crisis import crisis_parameters, crisis_progress_sizes, crisis_retrieve
from labeling.services.retrieval_embeddings import passage_embeddings
from labeling.services.retrieval_errors import RetrievalConflict, RetrievalError
from labeling.services.retrieval_rerank import rerank_parameters, retrieval_rerank
from labeling.services.runs import RunImportError, run_name_clean, run_store
from labeling.tasks import retrieval_task
from models_llm.bundled import BundledModelError, minilm_folder
from models_llm.retrieval.bm25 import BM25Params, bm25_retrieve
from models_llm.retrieval.cascade import cascade_rerank
from models_llm.retrieval.dense import (
    HNSW_CONNECTIVITY,
    HNSW_EXPANSION_ADD,
    HNSW_EXPANSION_SEARCH,
    HNSW_MIN_PASSAGES,
    DenseEncoder,
    best_device,
    dense_search,
    passage_text,
    query_text,
)
from models_llm.retrieval.hits import Hits, ProgressFn

RETRIEVERS: tuple[str, ...] = tuple(kind for kind in RunKind.values if kind != RunKind.IMPORTED)
MAX_DEPTH = 10_000
# What a request that leaves a size out gets: bm25 and dense rank DEFAULT_DEPTH, a cascade re-ranks
# DEFAULT_FIRST_DEPTH of BM25's candidates and keeps DEFAULT_KEEP.
DEFAULT_DEPTH, DEFAULT_FIRST_DEPTH, DEFAULT_KEEP = 1000, 200, 60
# How often a running job writes its progress and looks whether it was cancelled (one UPDATE does both).
PROGRESS_SECONDS = 2.0
ENCODER_BATCH = 64


class _Cancelled(DomainError):
    """The job stopped running (cancelled, or given up) while the retriever worked: stop, writing nothing."""


@dataclass(frozen=True)
class _Corpus:
    """The project's queries and passages as the retrievers see them, in id order."""

    query_ids: list[int]
    query_texts: list[str]
    definition_versions: dict[str, int]  # query external id -> the definition version in its text
    passage_ids: list[int]
    passage_texts: list[str]


def retrieval_parameters(
    *, retriever: str, depth: int | None = None, use_definition: bool = False, k1: float | None = None,
    b: float | None = None, first_depth: int | None = None, keep: int | None = None, model: str | None = None,
    project: Project | None = None, rerank: Sequence[dict] | None = None, crisis: dict | None = None,
) -> dict:
    """The job's parameters as stored on its row, checked (RetrievalError names what is wrong); only those the
    retriever uses, the sizes it was not given at their defaults. A parameter given to a retriever that does not
    use it is refused: dropped, it would write a run other than the one asked for. `rerank`: stages after the
    retriever, each {"judge": a name in `project`, "keep": N} (retrieval_rerank.rerank_parameters). `crisis`: the
    crisis paper's double cascade, a cascade preset (retrieval_crisis.crisis_parameters) whose lexical step is
    BM25's first_depth re-ranked by its judge, keep kept."""
    if retriever not in RETRIEVERS:
        raise RetrievalError(f"unknown retriever {retriever!r}; one of {', '.join(RETRIEVERS)}")
    sparse, dense = retriever in (RunKind.BM25, RunKind.CASCADE), retriever in (RunKind.DENSE, RunKind.CASCADE)
    if not sparse and (k1 is not None or b is not None):
        raise RetrievalError(f"k1 and b are BM25's: the {retriever} retriever takes neither")
    if not dense and model:
        raise RetrievalError(f"the {retriever} retriever uses no encoder model")
    if retriever == RunKind.CASCADE and depth is not None:
        raise RetrievalError("depth is for bm25 and dense: a cascade ranks keep passages of BM25's first_depth best "
                             "per query; give first_depth and keep instead")
    if retriever != RunKind.CASCADE and (first_depth is not None or keep is not None):
        raise RetrievalError(f"first_depth and keep are a cascade's: the {retriever} retriever ranks depth "
                             "passages per query; leave them out")
    parameters: dict = {"use_definition": bool(use_definition)}
    if retriever == RunKind.CASCADE:
        first_depth = DEFAULT_FIRST_DEPTH if first_depth is None else first_depth
        keep = DEFAULT_KEEP if keep is None else keep
        if not 1 <= first_depth <= MAX_DEPTH or not 1 <= keep <= first_depth:
            raise RetrievalError(f"a cascade needs 1 <= keep <= first depth <= {MAX_DEPTH}, got keep {keep} and "
                                 f"first depth {first_depth}")
        parameters.update(first_depth=first_depth, keep=keep)
    else:
        depth = DEFAULT_DEPTH if depth is None else depth
        if not 1 <= depth <= MAX_DEPTH:
            raise RetrievalError(f"depth must be 1 to {MAX_DEPTH}, got {depth}")
        parameters["depth"] = depth
    if sparse:
        retrieval_bm25_params({"k1": k1, "b": b})
        parameters.update({key: float(value) for key, value in (("k1", k1), ("b", b)) if value is not None})
    if dense:
        _encoder_folder(model)
        if model:
            parameters["model"] = model
    if crisis is not None:
        if retriever != RunKind.CASCADE or rerank:
            raise RetrievalError("the crisis double cascade is a cascade preset with its own two re-rankings: give "
                                 "it the cascade retriever and no further re-rank stages")
        parameters["crisis"] = crisis_parameters(project=project, crisis=crisis, first_depth=parameters["first_depth"],
                                                 keep=parameters["keep"])
    if rerank:
        first = parameters["keep"] if retriever == RunKind.CASCADE else parameters["depth"]
        parameters["rerank"] = rerank_parameters(project=project, rerank=rerank, depth=first)
    return parameters


@transaction.atomic
def retrieval_create(
    *, project: Project, retriever: str, name: str, user: AbstractBaseUser | None = None, depth: int | None = None,
    use_definition: bool = False, k1: float | None = None, b: float | None = None, first_depth: int | None = None,
    keep: int | None = None, model: str | None = None, rerank: Sequence[dict] | None = None,
    crisis: dict | None = None,
) -> RetrievalJob:
    """Record a request for the run `name` by `retriever`, without running it: retrieval_run does. BM25 and dense
    rank `depth` (None: DEFAULT_DEPTH) passages per query; a cascade ranks `keep` (None: DEFAULT_KEEP), BM25's
    `first_depth` (None: DEFAULT_FIRST_DEPTH) best re-ranked by the encoder; each is refused by the others.
    `use_definition`: the query text is the question and its current definition; `k1`, `b`: BM25's (None: its
    defaults); `model`: an encoder folder under a model root (None: the bundled MiniLM); `rerank`: judges that
    re-rank the retriever's ranking in turn, each {"judge": name, "keep": N} (the run's score: the last one's P);
    `crisis`: a cascade as the crisis paper's double cascade ({"judge": name, ...}: retrieval_crisis).
    RetrievalError names what is refused, the name included when the project has a run of that name or an
    unfinished job writing one."""
    parameters = retrieval_parameters(retriever=retriever, depth=depth, use_definition=use_definition, k1=k1, b=b,
                                     first_depth=first_depth, keep=keep, model=model, project=project, rerank=rerank,
                                      crisis=crisis)
    try:
        name = run_name_clean(name)
    except NameRefused as exc:
        raise RetrievalError(str(exc)) from None
    # The project's row serialises two requests for one name (two clicks, the page and the command line).
    Project.objects.select_for_update().only("id").get(id=project.id)
    if Run.objects.filter(project=project, name=name).exists():
        raise RetrievalConflict(f"project {project.slug!r} has a run named {name!r} already")
    writing = retrieval_job_writing(project=project, name=name)
    if writing is not None:
        raise RetrievalError(f"job {writing.id} is writing a run named {name!r} already")
    return RetrievalJob.objects.create(project=project, retriever=retriever, name=name, parameters=parameters,
                                       requested_by=user)


@transaction.atomic
def retrieval_request(
    *, project: Project, retriever: str, name: str, user: AbstractBaseUser | None = None, depth: int | None = None,
    use_definition: bool = False, k1: float | None = None, b: float | None = None, first_depth: int | None = None,
    keep: int | None = None, model: str | None = None, rerank: Sequence[dict] | None = None,
    crisis: dict | None = None,
) -> RetrievalJob:
    """retrieval_create, then a worker runs the job once this commits."""
    job = retrieval_create(project=project, retriever=retriever, name=name, user=user, depth=depth,
                           use_definition=use_definition, k1=k1, b=b, first_depth=first_depth, keep=keep, model=model,
                           rerank=rerank, crisis=crisis)
    transaction.on_commit(lambda: retrieval_task.delay(job.id))
    return job


def retrieval_cancel(*, job: RetrievalJob) -> RetrievalJob:
    """Stop a pending or running job: cancelled and finished, writing no run (a running worker notices within
    PROGRESS_SECONDS and stops). A finished job is returned as it is."""
    return job_cancel(job)


def retrieval_run(*, job_id: int) -> RetrievalJob | None:
    """Run the job: retrieve, then write its run and end it done, in one transaction. A configuration that
    cannot run (an encoder folder gone or outside the model roots, a project without queries or passages) or a
    name taken meanwhile ends it failed with the reason, writing nothing. A finished job is returned as it is
    (None: it is gone); a job cancelled while it runs stops at the next progress report. Other errors propagate
    for the task to retry or to record with retrieval_fail."""
    job = RetrievalJob.objects.select_related("project").filter(id=job_id).first()
    if job is None or not job_take(RetrievalJob.objects.filter(id=job_id, finished_at__isnull=True)):
        return job
    with job_heartbeat(RetrievalJob.objects.filter(id=job_id)):
        try:
            rankings, recorded = _retrieve(job)
        except _Cancelled:
            return RetrievalJob.objects.filter(id=job_id).first()
        except RetrievalError as exc:
            return _finish(job_id=job_id, error=str(exc))
        return _finish(job_id=job_id, rankings=rankings, recorded=recorded)


def retrieval_fail(*, job_id: int, error: str) -> RetrievalJob | None:
    """Give up on a job (its retries are spent): failed with the error, no run written. A finished job is
    returned as it is (None: it is gone)."""
    job_fail(RetrievalJob.objects.filter(id=job_id), error=error)
    return RetrievalJob.objects.filter(id=job_id).first()


class _Progress:
    """The job's done/total while it runs, counted in units of work over its stages (passages embedded, queries
    searched), written at most every PROGRESS_SECONDS; each write is also the look at whether it still runs."""

    def __init__(self, job_id: int, stages: Sequence[int]) -> None:
        self.job_id, self.stages, self.last = job_id, list(stages), float("-inf")
        self.total = sum(self.stages)
        RetrievalJob.objects.filter(id=job_id).update(total=self.total, done=0)

    def stage(self, index: int) -> ProgressFn:
        """The progress function of stage `index`: its (done, total) scaled to the stage's units."""
        offset, size = sum(self.stages[:index]), self.stages[index]

        def report(done: int, total: int) -> None:
            self._write(offset + (size * done // total if total else size))

        return report

    def _write(self, done: int) -> None:
        now = time.monotonic()
        if now - self.last < PROGRESS_SECONDS:
            return
        self.last = now
        running = RetrievalJob.objects.filter(id=self.job_id, status=RetrievalJob.Status.RUNNING)
        if not running.update(done=min(done, self.total)):
            raise _Cancelled


def _retrieve(job: RetrievalJob) -> tuple[Iterator[tuple[int, list[int], list[float]]], dict]:
    """The job's rankings (query id, passage ids, scores) and the parameters its run records."""
    params = job.parameters
    corpus = retrieval_corpus(job.project, use_definition=params["use_definition"])
    n_queries, n_passages = len(corpus.query_ids), len(corpus.passage_ids)
    recorded: dict = {"retriever": job.retriever, **params,
                      "query_text": "question and definition" if params["use_definition"] else "question",
                      "passage_text": "title and text"}
    if params["use_definition"]:
        recorded["definition_versions"] = corpus.definition_versions
    # Each re-rank stage's work is the pairs it scores: at most the previous stage's size per query.
    stages = params.get("rerank", [])
    sizes = [params["keep"] if job.retriever == RunKind.CASCADE else params["depth"]] + [s["keep"] for s in stages]
    reranking = [n_queries * min(size, n_passages) for size in sizes[:-1]]
    started = time.perf_counter()
    if "crisis" in params:
        return _crisis(job, corpus, recorded)
    if job.retriever == RunKind.BM25:
        progress = _Progress(job.id, [n_queries, *reranking])
        bm25 = retrieval_bm25_params(params)
        hits = bm25_retrieve(corpus.passage_texts, corpus.query_texts, depth=params["depth"], params=bm25,
                             progress=progress.stage(0))
        recorded["bm25"] = bm25.recorded()
        passage_ids, first = corpus.passage_ids, 1
    else:
        encoder = retrieval_encoder(params.get("model"))
        recorded["encoder"] = {"name": encoder.name, "folder": params.get("model") or "bundled all-MiniLM-L6-v2"}
    if job.retriever == RunKind.DENSE:
        progress = _Progress(job.id, [n_passages, n_queries, n_queries, *reranking])
        passages = passage_embeddings(project=job.project, encoder=encoder,
                                      passages=list(zip(corpus.passage_ids, corpus.passage_texts)),
                                      progress=progress.stage(0))
        queries = encoder.encode(corpus.query_texts, progress=progress.stage(1))
        approximate = n_passages >= HNSW_MIN_PASSAGES
        hits = dense_search(passages, queries, depth=params["depth"], approximate=approximate,
                            progress=progress.stage(2))
        recorded["encoder"]["search"] = _search_recorded(approximate)
        passage_ids, first = corpus.passage_ids, 3
    elif job.retriever == RunKind.CASCADE:
        # BM25's candidates only are embedded, so its cost follows first_depth, not the corpus.
        progress = _Progress(job.id, [n_queries, min(n_passages, n_queries * params["first_depth"]), n_queries,
                                      *reranking])
        bm25 = retrieval_bm25_params(params)
        found = bm25_retrieve(corpus.passage_texts, corpus.query_texts, depth=params["first_depth"], params=bm25,
                              progress=progress.stage(0))
        recorded["bm25"] = bm25.recorded()
        candidates = np.unique(np.concatenate([np.zeros(0, np.int64), *found.indices]))
        position = np.full(n_passages, -1, np.int64)
        position[candidates] = np.arange(len(candidates))
        passages = passage_embeddings(project=job.project, encoder=encoder,
                                      passages=[(corpus.passage_ids[i], corpus.passage_texts[i]) for i in candidates],
                                      progress=progress.stage(1))
        queries = encoder.encode(corpus.query_texts, progress=progress.stage(2))
        local = Hits(indices=[position[indices] for indices in found.indices], scores=found.scores)
        hits = cascade_rerank(local, passages, queries, keep=params["keep"])
        passage_ids, first = [corpus.passage_ids[i] for i in candidates], 3
    # Wall time per stage (the retriever, then each re-ranking: its model's loading included), as the Systems page
    # shows it beside the measures.
    recorded["stage_seconds"] = [{"stage": job.retriever, "seconds": round(time.perf_counter() - started, 4)}]
    if stages:
        hits, recorded["rerank"] = retrieval_rerank(
            project=job.project, stages=stages, hits=hits, query_ids=corpus.query_ids, passage_ids=passage_ids,
            progress=[progress.stage(first + index) for index in range(len(stages))])
        recorded["stage_seconds"] += [{"stage": f"re-rank by {stage['judge']}", "seconds": stage["seconds"]}
                                      for stage in recorded["rerank"]]
    return _rankings(corpus, hits, passage_ids), recorded


def _crisis(job: RetrievalJob, corpus: _Corpus, recorded: dict) -> tuple[Iterator, dict]:
    """The crisis double cascade's rankings and record (retrieval_crisis), with the stage times under
    stage_seconds as every retriever's."""
    params = job.parameters
    progress = _Progress(job.id, crisis_progress_sizes(params, len(corpus.query_ids), len(corpus.passage_ids)))
    bm25, encoder = retrieval_bm25_params(params), retrieval_encoder(params.get("model"))
    recorded["bm25"] = bm25.recorded()
    recorded["encoder"] = {"name": encoder.name, "folder": params.get("model") or "bundled all-MiniLM-L6-v2"}
    hits, passage_ids, recorded["crisis"] = crisis_retrieve(
        project=job.project, params=params, query_ids=corpus.query_ids, query_texts=corpus.query_texts,
        passage_ids=corpus.passage_ids, passage_texts=corpus.passage_texts, bm25=bm25, encoder=encoder,
        progress=progress.stage)
    recorded["stage_seconds"] = [{"stage": stage["stage"], "seconds": stage["seconds"]}
                                 for stage in recorded["crisis"]["stages"]]
    return _rankings(corpus, hits, passage_ids), recorded


def _rankings(corpus: _Corpus, hits: Hits, passage_ids: Sequence[int]) -> Iterator[tuple[int, list[int], list[float]]]:
    for query_id, found, scores in zip(corpus.query_ids, hits.indices, hits.scores):
        yield query_id, [passage_ids[i] for i in found], scores.tolist()


def _search_recorded(approximate: bool) -> dict:
    if not approximate:
        return {"method": "exact"}
    # The search breadth follows the depth (recorded beside) by models_llm.retrieval.dense's rule, from this floor.
    return {"method": "hnsw", "library": "usearch", "library_version": version("usearch"),
            "connectivity": HNSW_CONNECTIVITY, "expansion_add": HNSW_EXPANSION_ADD,
            "expansion_search_floor": HNSW_EXPANSION_SEARCH}


def retrieval_corpus(project: Project, *, use_definition: bool) -> _Corpus:
    queries = Query.objects.filter(project=project).order_by("id")
    if use_definition:
        current = RelevanceDefinition.objects.in_use().filter(query=OuterRef("pk")).order_by("-version")
        queries = queries.annotate(definition=Subquery(current.values("text")[:1]),
                                   version=Subquery(current.values("version")[:1]))
        rows = list(queries.values_list("id", "external_id", "text", "definition", "version"))
    else:
        rows = [(*row, None, None) for row in queries.values_list("id", "external_id", "text")]
    passages = Passage.objects.filter(project=project).order_by("id").values_list("id", "title", "text")
    passage_ids, passage_texts = [], []
    for passage_id, title, text in passages.iterator(chunk_size=10_000):
        passage_ids.append(passage_id)
        passage_texts.append(passage_text(title, text))
    if not rows or not passage_ids:
        raise RetrievalError(f"project {project.slug!r} has {len(rows)} queries and {len(passage_ids)} passages: "
                             "there is nothing to retrieve")
    return _Corpus(
        query_ids=[row[0] for row in rows],
        query_texts=[query_text(text, definition, use_definition) for _, _, text, definition, _ in rows],
        definition_versions={external_id: version for _, external_id, _, _, version in rows if version is not None},
        passage_ids=passage_ids, passage_texts=passage_texts,
    )


def retrieval_bm25_params(params: dict) -> BM25Params:
    given = {key: params[key] for key in ("k1", "b") if params.get(key) is not None}
    try:
        return BM25Params(**given)
    except ValueError as exc:
        raise RetrievalError(str(exc)) from None


def _encoder_folder(model: str | None) -> Path:
    """The encoder's folder: the bundled MiniLM, or `model` when it lies under a model root."""
    try:
        return Path(model_folder(model, label="encoder")) if model else minilm_folder()
    except (JudgeConfigError, BundledModelError) as exc:
        raise RetrievalError(str(exc)) from None


def retrieval_encoder(model: str | None) -> DenseEncoder:
    try:
        return DenseEncoder(_encoder_folder(model), device=best_device(), batch_size=ENCODER_BATCH)
    except ValueError as exc:
        raise RetrievalError(str(exc)) from None


@transaction.atomic
def _finish(
    *, job_id: int, rankings: Iterator[tuple[int, list[int], list[float]]] | None = None, recorded: dict | None = None,
    error: str = "",
) -> RetrievalJob | None:
    # of=("self",): PostgreSQL cannot lock the nullable side of the outer join to the requester.
    job = (RetrievalJob.objects.select_for_update(of=("self",)).select_related("project", "requested_by")
           .filter(id=job_id).first())
    if job is None or job.finished_at is not None:
        return job  # gone, or cancelled or finished by another worker while this one retrieved
    if rankings is not None:
        try:
            job.run = run_store(project=job.project, name=job.name, kind=job.retriever, rankings=rankings,
                                parameters=recorded or {}, source=f"retrieval job {job.id}", user=job.requested_by)
        except RunImportError as exc:
            error = str(exc)
    job.status = RetrievalJob.Status.FAILED if error else RetrievalJob.Status.DONE
    job.error = error[:MAX_ERROR_CHARS]
    job.done = job.total if not error else job.done
    job.finished_at = timezone.now()
    job.save(update_fields=["run", "status", "error", "done", "finished_at"])
    return job

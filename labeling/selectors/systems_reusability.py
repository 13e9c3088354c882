"""Is the pool reusable by a system that did not feed it? Leave one run out (Zobel 1998, #34): each run that
contributed to the pool is evaluated again on the qrels without the relevant passages that only it found, as if it
had been a new system scored on a pool built without it; its score drop and its rank change among the other runs
(scored on the full qrels) say how much a newcomer would be penalised for finding what the pool lacks."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from labeling.models import PairSource, Project
from labeling.selectors.qrels_sources import SystemsError, qrels_for, qrels_source_parse
from labeling.selectors.runs import RunNames, project_runs, rankings_named, run_entry_ids
from models_llm.systems.evaluation import MEASURES, QrelsEvaluator

DEFAULT_MEASURE = "nDCG@10"
# What a run is scored on: judged@10 says how much was judged, and leaving a run out judges nothing new.
LEFT_OUT_MEASURES = tuple(measure for measure in MEASURES if measure != "judged@10")
# The pool is flagged when a run left out moves by more than this many places in the ranking.
RANK_THRESHOLD = 1


@dataclass(frozen=True)
class LeftOut:
    """One run left out: the pool pairs it contributed, the relevant ones only it found, its mean score on the full
    qrels and on the qrels without those, and its rank (1: best) among the runs both ways (None: it fed nothing)."""

    run: str
    contributed: int
    unique_relevant: int
    score: float
    score_left_out: float | None
    rank: int
    rank_left_out: int | None

    @property
    def drop(self) -> float | None:
        return None if self.score_left_out is None else self.score - self.score_left_out

    @property
    def rank_change(self) -> int | None:
        return None if self.rank_left_out is None else self.rank_left_out - self.rank


@dataclass(frozen=True)
class Reusability:
    source: str
    measure: str
    threshold: int
    runs: list[LeftOut]

    @property
    def largest_move(self) -> int:
        return max((abs(row.rank_change) for row in self.runs if row.rank_change is not None), default=0)

    @property
    def flagged(self) -> bool:
        """The ranking of a left-out run moves by more than the threshold: a new system would be misjudged."""
        return self.largest_move > self.threshold


def _rank(score: float, others: list[float]) -> int:
    """1 + the runs strictly ahead (a tie shares the better place)."""
    return 1 + sum(other > score for other in others)


def pool_reusability(*, project: Project, source: str = "human", measure: str = DEFAULT_MEASURE,
                     threshold: int = RANK_THRESHOLD) -> Reusability:
    """Leave each contributing run out of the `source` qrels (a key as the Systems page names it; not an expected
    source: it grades with P, nothing is "found") on `measure`. SystemsError names what cannot be done."""
    if measure not in LEFT_OUT_MEASURES:
        raise SystemsError(f"measure must be one of {', '.join(LEFT_OUT_MEASURES)}, not {measure!r}")
    if threshold < 0:
        raise SystemsError(f"threshold must be 0 places or more, not {threshold}")
    parsed = qrels_source_parse(project=project, key=source)
    if parsed.expected or parsed.sampled:
        raise SystemsError(f"{source}: " + ("an expected source grades every judged pair with its P" if parsed.expected
                                             else "a sample grades only part of the pool")
                           + "; leave one run out needs graded qrels (human, judge:, combined: or release:)")
    qrels = qrels_for(project=project, source=parsed)
    if not any(qrels.values()):
        raise SystemsError(f"the {source} qrels of project {project.slug!r} are empty")
    relevant_from = project.label_scale.relevant_from
    finders: dict[tuple[str, str], set[str]] = defaultdict(set)
    contributed: dict[str, int] = defaultdict(int)
    for system, query, passage in PairSource.objects.filter(pair__project=project).values_list(
            "system", "pair__query__external_id", "pair__passage__external_id").iterator():
        finders[(query, passage)].add(system)
        contributed[system] += 1
    runs = list(project_runs(project))
    if not runs:
        raise SystemsError(f"project {project.slug!r} has no runs")
    names = RunNames.of(project)
    rankings = {run.name: rankings_named(run_entry_ids(run), names) for run in runs}
    full = QrelsEvaluator(qrels, relevant_from=relevant_from)
    scores = {name: full.evaluate(ranking).mean(measure) or 0.0 for name, ranking in rankings.items()}
    rows = []
    for name, ranking in rankings.items():
        others = [score for other, score in scores.items() if other != name]
        rank = _rank(scores[name], others)
        if not contributed.get(name):
            rows.append(LeftOut(name, 0, 0, scores[name], None, rank, None))
            continue
        unique = {(query, passage) for query, docs in qrels.items() for passage, grade in docs.items()
                  if grade >= relevant_from and finders.get((query, passage)) == {name}}
        left = {query: {passage: grade for passage, grade in docs.items() if (query, passage) not in unique}
                for query, docs in qrels.items()}
        # The queries stay those of the full qrels: a query whose only relevant passages were this run's scores 0.
        left = {query: docs or {"": 0} for query, docs in left.items() if qrels[query]}
        score = QrelsEvaluator(left, relevant_from=relevant_from).evaluate(ranking).mean(measure) or 0.0
        rows.append(LeftOut(name, contributed[name], len(unique), scores[name], score, rank, _rank(score, others)))
    return Reusability(source=source, measure=measure, threshold=threshold, runs=rows)


def reusability_json(found: Reusability) -> dict:
    """What `pool_reusability --json` prints and the API answers: the row's derived drop and rank change included."""
    return {"source": found.source, "measure": found.measure, "threshold": found.threshold, "flagged": found.flagged,
            "largest_move": found.largest_move,
            "runs": [{"run": row.run, "contributed": row.contributed, "unique_relevant": row.unique_relevant,
                      "score": row.score, "score_left_out": row.score_left_out, "drop": row.drop, "rank": row.rank,
                      "rank_left_out": row.rank_left_out, "rank_change": row.rank_change} for row in found.runs]}

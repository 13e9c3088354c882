"""A replay's inputs read from a project (#50): the pool in pair order with its random order keys, the truth, and
the judges' raw P, for models_llm.replay. Reads only; what a replay leaves out is said in `notes`, and what it cannot
be run on is a ReplayInputError naming why.

Truth (`truth`):
- `reference`: the project's reference grades; every pair needs one (else refused, with the count and the way on).
- `trec`: the reference grades, and every pair without one counted irrelevant (grade 0), the TREC convention for
  unjudged documents. Said on every report: an unjudged relevant pair is counted irrelevant, so recall is measured
  against the judged relevant pairs only.
- `release:NAME`, `release-trec:NAME`: the grades of a frozen qrels release (checked against its SHA-256), every
  pair needing one, or those without one counted irrelevant; relevant from the release's own relevant_from.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from django.db.models import Max

from labeling.exceptions import DomainError
from labeling.llm_adapter import judge_gives_scores, judge_relevance_rule
from labeling.models import Judge, Judgment, Pair, Project
from labeling.selectors.lookups import JudgeNotFound, judge_by_name
from labeling.selectors.releases import ReleaseDamaged, ReleaseNotFound, release_by_name, release_records
from labeling.selectors.runs import project_runs, run_top
from labeling.selectors.streams import definition_version_numbers, judge_rows
from models_llm.replay.engine import ReplayJudge, ReplayPool
from models_llm.replay.systems import SYSTEMS_DEPTH, SYSTEMS_MEASURE, ReplayRuns, runs_from_rankings

REPLAY_TRUTHS = {
    "reference": "the project's reference grades",
    "trec": "the project's reference grades, pairs without one counted irrelevant (the TREC convention)",
}


RELEASE_TRUTHS = {"release": False, "release-trec": True}  # prefix -> pairs without a grade count irrelevant


def replay_truth(truth: str) -> tuple[str | None, bool]:
    """(the release's name, or None for the reference grades; whether pairs without a grade count irrelevant);
    ReplayInputError for a truth that is none of REPLAY_TRUTHS and release[-trec]:NAME."""
    if truth in REPLAY_TRUTHS:
        return None, truth == "trec"
    prefix, _, name = str(truth).partition(":")
    if prefix in RELEASE_TRUTHS and name:
        return name, RELEASE_TRUTHS[prefix]
    raise ReplayInputError(f"truth must be one of {', '.join(REPLAY_TRUTHS)}, release:NAME or release-trec:NAME "
                           f"(a frozen release's grades), not {truth!r}")


def replay_truth_text(truth: str) -> str:
    """The truth in words, as every report says it."""
    release, unjudged = replay_truth(truth)
    if release is None:
        return REPLAY_TRUTHS[truth]
    return f"the grades of the frozen release {release!r}" + (
        ", pairs without one counted irrelevant (the TREC convention)" if unjudged else "")


def _release_grades(project: Project, name: str, rows: list[tuple]) -> tuple[np.ndarray, int]:
    """The release's grade of each pool pair (-1: none) and its relevant_from."""
    try:
        release = release_by_name(project=project, name=name)
        records = {(record["query_id"], record["doc_id"]): record["grade"] for record in release_records(release)}
    except (ReleaseNotFound, ReleaseDamaged) as exc:
        raise ReplayInputError(str(exc)) from None
    names = dict(Pair.objects.filter(project=project).values_list("id", "query__external_id"))
    docs = dict(Pair.objects.filter(project=project).values_list("id", "passage__external_id"))
    grades = [records.get((names[row[0]], docs[row[0]])) for row in rows]
    return np.asarray([-1 if grade is None else grade for grade in grades], dtype=np.int64), release.relevant_from


class ReplayInputError(DomainError):
    """A replay that cannot be run on this project as asked (the message says why and what to do)."""


@dataclass(frozen=True)
class ReplayInputs:
    pool: ReplayPool
    judges: list[ReplayJudge]
    compare: list[np.ndarray]
    runs: ReplayRuns | None
    truth: str
    notes: list[str]


def _raw_p(judge: Judge, position: dict[int, int], size: int, versions: dict[int, int]) -> np.ndarray:
    raw = np.full(size, np.nan)
    for row in judge_rows(judge, versions=versions):
        index = position.get(row.pair_id)
        if index is not None:
            raw[index] = row.p
    return raw


def replay_inputs(*, project: Project, judges: list[str], truth: str = "reference") -> ReplayInputs:
    """The arrays a replay of `project` runs on: `judges` (names) are the queue judges replayed; the disagreement
    queue compares every judge of the project that scored pairs, as the live queue does."""
    release, unjudged_irrelevant = replay_truth(truth)
    if not judges:
        raise ReplayInputError("choose at least one judge to replay")
    chosen = []
    for name in dict.fromkeys(judges):
        try:
            chosen.append(judge_by_name(project=project, name=name))
        except JudgeNotFound as exc:
            raise ReplayInputError(f"{exc} (its judges: {', '.join(exc.known) or 'none'})") from None
    rows = list(Pair.objects.filter(project=project).order_by("id")
                .values_list("id", "sample_key", "reference_grade", "query_id"))
    if not rows:
        raise ReplayInputError(f"project {project.slug!r} has no pairs to replay")
    pair_ids = np.asarray([row[0] for row in rows], dtype=np.int64)
    relevant_from = project.label_scale.relevant_from
    if release is None:
        grades = np.asarray([-1 if row[2] is None else row[2] for row in rows], dtype=np.int64)
    else:
        grades, relevant_from = _release_grades(project, release, rows)
    notes = [f"truth: {replay_truth_text(truth)}"]
    ungraded = int((grades < 0).sum())
    where = "reference grade" if release is None else f"grade in release {release!r}"
    if ungraded and not unjudged_irrelevant:
        other = "trec" if release is None else f"release-trec:{release}"
        raise ReplayInputError(
            f"the truth is incomplete: {ungraded:,} of the {len(rows):,} pairs have no {where}. Grade them, "
            f"or replay with truth {other!r} (pairs without a grade counted irrelevant)")
    if ungraded:
        notes.append(f"{ungraded:,} of the {len(rows):,} pairs have no {where} and count as irrelevant: "
                     "recall is against the graded relevant pairs only")
        grades = np.where(grades < 0, 0, grades)
    position = {pair_id: index for index, pair_id in enumerate(pair_ids.tolist())}
    versions = definition_version_numbers(project)
    raws = {judge.name: _raw_p(judge, position, len(rows), versions)
            for judge in Judge.objects.filter(project=project).order_by("name")}
    replayed = []
    for judge in chosen:
        raw = raws[judge.name]
        scored = int((~np.isnan(raw)).sum())
        if not scored:
            raise ReplayInputError(f"judge {judge.name!r} has scored none of the pool's pairs: score the pool with it "
                                   "first (a replay reads judgments, it never calls a judge)")
        if scored < len(rows):
            notes.append(
                f"judge {judge.name!r} scored {scored:,} of the {len(rows):,} pairs: its uncertain and stratified "
                "queues serve only those, its AUROC, ECE and kappa are on those only, its model-based estimate sums "
                "only the open pairs it scored (so it cannot count relevant pairs among the others), and the stopping "
                "rule is withheld while pairs it did not score are open")
        replayed.append(ReplayJudge(name=judge.name, raw_p=raw, rule=judge_relevance_rule(judge),
                                    gives_scores=judge_gives_scores(judge)))
    within = np.zeros(len(rows))
    for pair_id, spread in (Judgment.objects.filter(judge__project=project, status=Judgment.Status.OK,
                                                    spread__isnull=False)
                            .values("pair_id").annotate(top=Max("spread")).values_list("pair_id", "top")):
        within[position[pair_id]] = spread
    query_index = {query_id: index for index, query_id in enumerate(sorted({row[3] for row in rows}))}
    pool = ReplayPool(pair_ids=pair_ids, key=np.asarray([row[1] for row in rows], dtype=float), truth=grades,
                      relevant_from=relevant_from, query=np.asarray([query_index[row[3]] for row in rows]),
                      within=within)
    if not (grades >= relevant_from).any():
        notes.append("no pair is relevant under the truth: recall and the estimates' coverage are undefined")
    compare = [raw for raw in raws.values() if (~np.isnan(raw)).any()]
    runs = _runs(project, rows, pool.query, notes)
    return ReplayInputs(pool=pool, judges=replayed, compare=compare, runs=runs, truth=truth, notes=notes)


def _runs(project: Project, rows: list[tuple], query: np.ndarray, notes: list[str]) -> ReplayRuns | None:
    """The project's runs as the replay compares them (their top SYSTEMS_DEPTH per query); None, said in `notes`,
    with fewer than two."""
    found = list(project_runs(project).order_by("name"))
    if len(found) < 2:
        notes.append(f"the project has {len(found)} run(s): the systems question (tau between the runs' rankings "
                     "under the exported qrels and under the truth) needs two or more")
        return None
    passages = dict(Pair.objects.filter(project=project).values_list("id", "passage_id"))
    keys = [(row[3], passages[row[0]]) for row in rows]
    rankings = [{(query_id, passage_id): rank for query_id, passage_id, rank in run_top(run, SYSTEMS_DEPTH)}
                for run in found]
    notes.append(f"runs compared by {SYSTEMS_MEASURE}: {', '.join(run.name for run in found)}")
    return runs_from_rankings([run.name for run in found], rankings, keys, query)

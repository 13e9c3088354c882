"""`manage.py evaluate_runs`: the tables a reader sees, the JSON, and the errors named on the command line."""
from __future__ import annotations

import json
from io import StringIO

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from scipy import stats

from labeling.models import Run
from tests.factories import JudgeFactory, ProjectFactory, QueryFactory
from tests.selectors.test_systems import (
    JUDGE_P,
    LABELS,
    REFERENCE,
    RUN_NAMES,
    human_qrels,
    judge_qrels,
    systems_project,
    trec_per_query,
)

pytestmark = pytest.mark.django_db


def _run(*args: str) -> str:
    out = StringIO()
    call_command("evaluate_runs", *args, stdout=out)
    return out.getvalue()


def test_the_table_shows_each_run_under_each_source_with_its_interval_and_the_agreement():
    built = systems_project()
    # The judge lacks some of the pool pairs the runs retrieve: it is compared only when asked to be.
    text = _run("--project", "systems", "--qrels", "human", "--qrels", "judge:llm", "--measure", "nDCG@10",
                "--draws", "100", "--include-partial")
    lines = text.splitlines()
    assert lines[0].startswith("Project systems: 4 runs under 2 qrels sources")
    block = lines[lines.index("nDCG@10") + 1:lines.index("nDCG@10") + 2 + len(RUN_NAMES)]
    assert block[0].split() == ["run", "human", "judge:llm"]
    human, judge = human_qrels(), judge_qrels()
    for row in block[1:]:
        run = row.split()[0]
        means = [np.mean([v["nDCG@10"] for v in trec_per_query(built.rankings[run], qrels).values()])
                 for qrels in (human, judge)]
        # "0.512 [0.431, 0.588]" per source: the mean is the first number of each cell.
        numbers = [float(part.strip("[],")) for part in row.split()[1:]]
        assert numbers[0] == pytest.approx(means[0], abs=5e-4) and numbers[3] == pytest.approx(means[1], abs=5e-4)
        assert numbers[1] <= numbers[0] <= numbers[2]
    assert "judged@10" in lines
    assert "Qrels agreement: the rankings of the runs under two sources (nDCG@10)" in lines
    agreement = next(line for line in lines if line.startswith("human|judge:llm"))
    # pair, three "value [low, high]" cells, the five queries both sources evaluate, the run moving most.
    tokens = agreement.split()
    assert tokens[10] == "5"
    means = {source: [np.mean([v["nDCG@10"] for v in trec_per_query(built.rankings[run], qrels).values()])
                      for run in RUN_NAMES] for source, qrels in (("human", human), ("judge", judge))}
    ranks = {source: stats.rankdata([-m for m in values], method="min") for source, values in means.items()}
    moved = int(np.argmax(np.abs(ranks["human"] - ranks["judge"])))
    assert " ".join(tokens[11:]) == f"{RUN_NAMES[moved]} {ranks['human'][moved]} -> {ranks['judge'][moved]}"


def test_a_partial_judge_is_named_and_left_out_of_the_agreement_unless_included():
    built = systems_project()
    text = _run("--project", "systems", "--qrels", "human", "--qrels", "judge:llm", "--measure", "nDCG@10",
                "--draws", "0")
    # Pool pairs the runs retrieve in their top 10, and those of them the judge scored, counted in the test's data.
    pool = set(REFERENCE) | set(LABELS) | set(JUDGE_P)
    needed = {(q, d) for ranking in built.rankings.values() for q, docs in ranking.items() for d in docs[:10]} & pool
    judged = needed & set(JUDGE_P)
    assert (f"judge:llm: judge llm (its judge scored {len(judged)} of the {len(needed)} pool pairs the runs "
            "retrieve in their top 10: partial)") in text
    assert "Left out of the agreement as partial: judge:llm (--include-partial compares them all the same)." in text
    assert not any(line.startswith("human|judge:llm") for line in text.splitlines())


def test_two_runs_get_no_agreement():
    systems_project()
    Run.objects.filter(name__in=RUN_NAMES[2:]).delete()
    text = _run("--project", "systems", "--qrels", "human", "--qrels", "judge:llm", "--draws", "0",
                "--include-partial")
    assert "No agreement: it needs 3 runs or more" in text
    row = next(line for line in text.splitlines() if line.startswith("human|judge:llm"))
    assert row.split()[1:] == ["-"] * 5


def test_json_is_the_report_s_json_and_groups_break_it_down():
    systems_project()
    data = json.loads(_run("--project", "systems", "--json", "--group-by", "intent", "--draws", "50",
                           "--include-partial"))
    assert set(data["runs"]) == set(RUN_NAMES)
    assert list(data["runs"]["bm25"]) == ["human", "judge:llm", "combined:llm", "expected:llm"]
    assert set(data["agreement"]) == {"human|judge:llm", "human|combined:llm", "human|expected:llm"}
    assert set(data["groups"]["values"]) == {"(none)", "action", "info"}
    text = _run("--project", "systems", "--group-by", "intent", "--draws", "0", "--measure", "AP")
    assert "== intent = action" in text and "== intent = info" in text


@pytest.mark.parametrize(("args", "message"), [
    (["--project", "nowhere"], "nowhere"),
    (["--project", "systems", "--qrels", "judge:nobody"], "no judge 'nobody' (its judges: llm)"),
    (["--project", "systems", "--qrels", "silver"], "qrels source must be 'human', 'sample', 'judge:NAME'"),
])
def test_unknown_project_or_source_is_named(args, message):
    systems_project()
    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _run(*args)


def test_a_project_without_runs_or_without_qrels_is_an_error():
    systems_project(runs=False)
    with pytest.raises(CommandError, match="project 'systems' has no runs"):
        _run("--project", "systems")
    bare = ProjectFactory(slug="bare")
    JudgeFactory(project=bare, name="idle")
    Run.objects.create(project=bare, name="empty", kind=Run.Kind.IMPORTED)
    QueryFactory(project=bare)
    with pytest.raises(CommandError, match="project 'bare' has no qrels"):
        _run("--project", "bare")

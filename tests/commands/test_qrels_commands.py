"""The import_bundle and export_qrels commands, end to end through call_command."""
import io
import json
import re
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from labeling.models import Project
from labeling.services.bundle_import import bundle_import
from tests.factories import ProjectFactory
from tests.services.test_bundle_import import SAMPLE, SMALL, jsonl, write_bundle

pytestmark = pytest.mark.django_db


def export(tmp_path: Path, *args: str) -> str:
    out = tmp_path / "out.txt"
    call_command("export_qrels", *args, "-o", str(out), stderr=io.StringIO())
    return out.read_text()


def test_sample_beir_round_trip(tmp_path):
    call_command("import_bundle", str(SAMPLE), "--project", "cr", stdout=io.StringIO())
    exported = export(tmp_path, "--project", "cr", "--format", "beir")
    original = (SAMPLE / "qrels" / "test.tsv").read_text().splitlines()
    lines = exported.splitlines()
    assert lines[0] == original[0] == "query-id\tcorpus-id\tscore"
    assert sorted(lines[1:]) == sorted(original[1:])
    assert len(lines) == 596


def test_sample_trec_lines(tmp_path):
    bundle_import(path=SAMPLE, project_slug="cr")
    trec = export(tmp_path, "--project", "cr", "--format", "trec").splitlines()
    beir = [line.split("\t") for line in (SAMPLE / "qrels" / "test.tsv").read_text().splitlines()[1:]]
    assert sorted(trec) == sorted(f"{q} 0 {d} {s}" for q, d, s in beir)


def test_import_command_reports_and_second_run_says_nothing_changed():
    out = io.StringIO()
    call_command("import_bundle", str(SAMPLE), "--project", "cr", stdout=out)
    assert "Created project 'cr'" in out.getvalue() and "446 passages" in out.getvalue()
    out = io.StringIO()
    call_command("import_bundle", str(SAMPLE), "--project", "cr", stdout=out)
    assert "nothing changed" in out.getvalue()


def test_import_command_error_names_file_and_line(tmp_path):
    bundle = write_bundle(tmp_path / "b", {**SMALL, "corpus.jsonl": SMALL["corpus.jsonl"] + "{oops\n"})
    with pytest.raises(CommandError, match=r"corpus.jsonl:4: malformed JSON"):
        call_command("import_bundle", str(bundle), "--project", "b")


def test_import_command_refuses_to_create_a_project_named_like_another(tmp_path):
    ProjectFactory(slug="older", name="CLIMRETRIEVE (expert-judged sample)")
    name = json.loads((SAMPLE / "project.json").read_text())["name"]
    assert name.lower() == "climretrieve (expert-judged sample)"
    with pytest.raises(CommandError, match=re.escape("project.json: a project named 'CLIMRETRIEVE (expert-judged "
                                                     "sample)' exists already: choose another name")):
        call_command("import_bundle", str(SAMPLE), "--project", "cr")
    assert not Project.objects.filter(slug="cr").exists()


@pytest.fixture
def small_project(tmp_path):
    labels = SMALL["labels.jsonl"] + jsonl(
        {"query_id": "q2", "doc_id": "d2", "annotator": "ann-a", "label": 1},
        {"query_id": "q2", "doc_id": "d2", "annotator": "ann-b", "label": 1},
        {"query_id": "q2", "doc_id": "d1", "annotator": "ann-a", "label": 0},
        {"query_id": "q2", "doc_id": "d1", "annotator": "ann-b", "label": 2},
    )
    bundle_import(path=write_bundle(tmp_path / "small", {**SMALL, "labels.jsonl": labels}), project_slug="s")


def test_human_source_uses_gold_rules(tmp_path, small_project):
    rows = export(tmp_path, "--project", "s", "--format", "trec").splitlines()
    # q1/d2 and q1/d1: reference qrels; q2/d3: adjudicator; q2/d2: annotators agree; q2/d1: they disagree
    # (unresolved, left out).
    assert rows == ["q1 0 d2 0", "q1 0 d1 2", "q2 0 d2 1", "q2 0 d3 0"]


def test_judge_source_thresholds_probability(tmp_path, small_project):
    default = export(tmp_path, "--project", "s", "--format", "trec", "--source", "judge:llm").splitlines()
    # P: q1/d1 0.8, q1/d2 1 - 0.9, q2/d1 0.6
    assert default == ["q1 0 d2 0", "q1 0 d1 1", "q2 0 d1 1"]
    strict = export(tmp_path, "--project", "s", "--format", "trec", "--source", "judge:llm", "--threshold", "0.7")
    assert strict.splitlines() == ["q1 0 d2 0", "q1 0 d1 1", "q2 0 d1 0"]


def test_jsonl_has_everything_known(tmp_path, small_project):
    records = [json.loads(line) for line in export(tmp_path, "--project", "s", "--format", "jsonl").splitlines()]
    assert [(r["query_id"], r["doc_id"]) for r in records] == [
        ("q1", "d2"), ("q1", "d1"), ("q2", "d2"), ("q2", "d3"), ("q2", "d1"),
    ]
    q1d1 = records[1]
    assert q1d1["gold_grade"] == q1d1["grade"] == q1d1["reference_grade"] == 2
    assert q1d1["sources"] == [{"system": "bm25", "rank": 2}, {"system": "dense", "rank": 1}]
    assert sorted((lab["annotator"], lab["grade"], lab["role"], lab["definition_version"]) for lab in q1d1["labels"]) == [
        ("ann-a", 2, "annotator", 1), ("ann-b", 1, "annotator", 1),
    ]
    assert q1d1["judgments"] == [{
        "judge": "llm", "definition_version": 1, "p_relevant": 0.8, "guess": None, "confidence": None, "status": "ok",
    }]
    q2d1 = records[4]
    assert q2d1["gold_grade"] is None and q2d1["grade"] is None
    assert q2d1["judgments"][0]["guess"] == "yes" and q2d1["judgments"][0]["p_relevant"] == 0.6
    judged = [json.loads(line) for line in
              export(tmp_path, "--project", "s", "--format", "jsonl", "--source", "judge:llm").splitlines()]
    assert [r["grade"] for r in judged] == [0, 1, None, None, 1]


def test_stdout_output(small_project, capsys):
    call_command("export_qrels", "--project", "s", "--format", "beir", "-o", "-", stderr=io.StringIO())
    assert capsys.readouterr().out.splitlines()[0] == "query-id\tcorpus-id\tscore"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--project", "nope", "--format", "trec"], "no project 'nope'"),
        (["--project", "s", "--format", "trec", "--source", "judge:gpt"], "project 's' has no judge 'gpt' (its judges: llm)"),
        (["--project", "s", "--format", "trec", "--source", "robots"], "source must be 'human', 'judge:NAME' or 'combined:NAME'"),
        (["--project", "s", "--format", "trec", "--threshold", "0.3"], "--threshold applies to a judge source"),
        (["--project", "s", "--format", "trec", "--source", "judge:llm", "--threshold", "1.5"],
         "--threshold must be within [0, 1]"),
    ],
)
def test_export_errors(tmp_path, small_project, args, message):
    out = tmp_path / "never.txt"
    with pytest.raises(CommandError) as caught:
        call_command("export_qrels", *args, "-o", str(out))
    assert message in str(caught.value)
    assert not out.exists()
    assert not list(tmp_path.glob(".never.txt.*"))


def test_judge_source_uses_newest_definition_version(tmp_path, small_project):
    bundle = tmp_path / "small"
    queries = (bundle / "queries.jsonl").read_text().replace("Plans for floods.", "Plans for floods, revised.")
    judgments = (bundle / "judgments.jsonl").read_text().replace('"p_relevant": 0.8', '"p_relevant": 0.2')
    write_bundle(bundle, {"queries.jsonl": queries, "judgments.jsonl": judgments})
    bundle_import(path=bundle, project_slug="s")
    rows = export(tmp_path, "--project", "s", "--format", "trec", "--source", "judge:llm").splitlines()
    # q1/d1 was 0.8 under version 1 and is 0.2 under version 2: the newest version decides.
    assert rows == ["q1 0 d2 0", "q1 0 d1 0", "q2 0 d1 1"]
    records = [json.loads(line) for line in export(tmp_path, "--project", "s", "--format", "jsonl").splitlines()]
    q1d1 = next(r for r in records if (r["query_id"], r["doc_id"]) == ("q1", "d1"))
    assert [(j["definition_version"], j["p_relevant"]) for j in q1d1["judgments"]] == [(2, 0.2), (1, 0.8)]

"""Validation report and recalibration through the real import, selectors and services: the numbers a
user sees are checked against scikit-learn computed straight from the bundle files."""
import json
import random
from dataclasses import asdict
from datetime import timedelta

import numpy as np
import pytest
from django.db import OperationalError
from django.utils import timezone
from sklearn.metrics import cohen_kappa_score, f1_score

from labeling.models import Judge, JudgeCalibration, Project, ValidationResult
from labeling.selectors.definition_metrics import judge_metrics_by_definition
from labeling.selectors.export import export_source_parse, pair_records, qrels_rows
from labeling.selectors.validation import ReportOptions
from labeling.services import validation as validation_module
from labeling.services.bundle_import import bundle_import
from labeling.services.validation import (
    ValidationReportError,
    judge_calibrate,
    validation_compute,
    validation_refresh,
    validation_request,
)
from models_llm.metrics import metric_table
from tests.factories import JudgeFactory, JudgmentFactory, PairFactory, ProjectFactory, QueryFactory
from tests.services.test_bundle_import import SAMPLE, jsonl, write_bundle

pytestmark = pytest.mark.django_db


def synthetic_bundle(root, *, queries=8, per_query=60, seed=7):
    """Pairs whose true probability of relevance q is known; the judge states P squashed toward 0.5
    (P = 0.5 + 0.3 (q - 0.5)), so it is miscalibrated on purpose. Gold grades are drawn from q."""
    rng = random.Random(seed)
    qs, docs, qrels, judgments = [], [], ["query-id\tcorpus-id\tscore"], []
    for qi in range(queries):
        qs.append({"_id": f"q{qi}", "text": f"Question {qi}?", "definition": f"Definition {qi}.",
                   "metadata": {"intent": "facts" if qi % 2 else "advice"}})
        for di in range(per_query):
            doc = f"d{qi}-{di}"
            docs.append({"_id": doc, "text": f"Passage {doc}."})
            q = rng.random()
            relevant = rng.random() < q
            grade = rng.choice([1, 2]) if relevant else 0
            qrels.append(f"q{qi}\t{doc}\t{grade}")
            judgments.append({"query_id": f"q{qi}", "doc_id": doc, "judge": "squashed",
                              "p_relevant": round(0.5 + 0.3 * (q - 0.5), 4)})
    return write_bundle(root, {
        "queries.jsonl": jsonl(*qs), "corpus.jsonl": jsonl(*docs), "qrels/test.tsv": "\n".join(qrels) + "\n",
        "judgments.jsonl": jsonl(*judgments),
    })


def sample_judge_arrays(judge_name):
    """The sample's gold grades and this judge's P/guess read straight from the files, in qrels order."""
    gold = {}
    for line in (SAMPLE / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        q, d, s = line.split("\t")
        gold[(q, d)] = int(s)
    judged = {}
    for line in (SAMPLE / "judgments.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["judge"] == judge_name:
            judged[(record["query_id"], record["doc_id"])] = record
    keys = [key for key in gold if key in judged]
    return keys, gold, judged


def test_sample_report_matches_the_files(settings):
    bundle_import(path=SAMPLE, project_slug="cr")
    judge = Judge.objects.get(project__slug="cr", name="gpt4-ask-generic")
    report = validation_compute(project=judge.project, judges=[judge], bootstrap_draws=50).to_dict()
    section = report["judges"][0]
    keys, gold, judged = sample_judge_arrays("gpt4-ask-generic")
    assert report["counts"]["gold"] == 595 and section["n"] == len(keys) == 595
    assert section["n_unresolved"] == 0 and section["n_unjudged"] == 0
    # Every ClimRetrieve pair is relevant (grades 1-3): recall-type numbers exist, negatives-needing ones do not.
    predicted = [judged[k]["guess"] == "yes" for k in keys]
    assert section["recall"] == pytest.approx(sum(predicted) / len(keys))
    assert section["f1"] == pytest.approx(f1_score([True] * len(keys), predicted))
    for metric in ("auroc",):
        assert section[metric] is None
        assert "relevant" in section["null_reasons"][metric]
    assert set(section) >= {"f1", "precision", "recall", "accuracy", "kappa_vs_gold", "auroc", "brier", "ece",
                            "ece_adaptive", "cal_avg", "ndcg", "map", "info_avg", "ndcg@10", "map@10",
                            "kendall_tau", "ndcg_tie_aware", "map_tie_aware", "uncertainty_ap", "ci", "n"}
    json.dumps(report, allow_nan=False)  # the cached report and the API must be valid JSON


def test_report_on_pairs_with_negatives_matches_sklearn(tmp_path):
    bundle_import(path=synthetic_bundle(tmp_path / "b"), project_slug="syn")
    judge = Judge.objects.get(name="squashed")
    section = validation_compute(project=judge.project, judges=[judge], bootstrap_draws=100).to_dict()["judges"][0]
    grades, ps = [], []
    for line in (tmp_path / "b" / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        grades.append(int(line.split("\t")[2]))
    for line in (tmp_path / "b" / "judgments.jsonl").read_text().splitlines():
        ps.append(json.loads(line)["p_relevant"])
    gold, pred = np.array(grades) >= 1, np.array(ps) >= 0.5
    assert section["n"] == 480
    assert section["kappa_vs_gold"] == pytest.approx(cohen_kappa_score(gold, pred))
    assert section["f1"] == pytest.approx(f1_score(gold, pred))
    low, high = section["ci"]["f1"]
    assert low < section["f1"] < high
    assert set(section["group_kappa"]["intent"]) == {"facts", "advice"}
    assert sum(cell["n"] for cell in section["group_kappa"]["intent"].values()) == 480


def test_calibration_lowers_cross_validated_ece_and_exports_monotone_p(tmp_path):
    bundle_import(path=synthetic_bundle(tmp_path / "b", queries=10, per_query=100), project_slug="syn")
    judge = Judge.objects.get(name="squashed")
    calibration = judge_calibrate(judge=judge)
    cv = calibration.cv
    assert cv["calibrated"]["ece"] < cv["raw"]["ece"] - 0.05
    assert cv["calibrated"]["brier"] < cv["raw"]["brier"]
    assert calibration.n == 1000 and len(calibration.fitted_on["pair_ids"]) == 1000
    source = export_source_parse(project=judge.project, source="judge:squashed", threshold=None)
    assert source.calibrator is not None
    records = list(pair_records(project=judge.project, source=source))
    points = sorted((r["judgments"][0]["p_relevant"], r["judgments"][0]["p_calibrated"]) for r in records)
    calibrated = [c for _, c in points]
    assert all(a <= b + 1e-12 for a, b in zip(calibrated, calibrated[1:]))
    assert min(calibrated) < min(p for p, _ in points) and max(calibrated) > max(p for p, _ in points)
    # TREC grades follow the calibrated P, not the raw one.
    rows = {(r.query_id, r.doc_id): r.grade for r in qrels_rows(project=judge.project, source=source)}
    by_pair = {(r["query_id"], r["doc_id"]): r["judgments"][0]["p_calibrated"] for r in records}
    assert rows == {key: int(p >= 0.5) for key, p in by_pair.items()}


def test_combined_source_says_where_each_grade_comes_from(tmp_path):
    root = synthetic_bundle(tmp_path / "b", queries=4, per_query=30)
    qrels = (root / "qrels" / "test.tsv").read_text().splitlines()
    write_bundle(root, {"qrels/test.tsv": "\n".join(qrels[:61]) + "\n"})  # gold for the first 60 pairs only
    bundle_import(path=root, project_slug="mix")
    judge = Judge.objects.get(name="squashed")
    source = export_source_parse(project=judge.project, source="combined:squashed", threshold=None)
    rows = list(qrels_rows(project=judge.project, source=source))
    assert len(rows) == 120
    assert [r.grade_source for r in rows] == ["human"] * 60 + ["judge:squashed"] * 60
    records = list(pair_records(project=judge.project, source=source))
    assert [r["grade_source"] for r in records] == [r.grade_source for r in rows]


def test_calibration_needs_both_classes():
    bundle_import(path=SAMPLE, project_slug="cr")
    judge = Judge.objects.get(project__slug="cr", name="gpt4-ask-generic")
    with pytest.raises(ValidationReportError, match="gpt4-ask-generic"):
        judge_calibrate(judge=judge)
    assert not JudgeCalibration.objects.exists()


def test_refresh_runs_once_per_request(tmp_path, django_capture_on_commit_callbacks):
    bundle_import(path=synthetic_bundle(tmp_path / "b", queries=2, per_query=20), project_slug="syn")
    project = Judge.objects.get(name="squashed").project
    with django_capture_on_commit_callbacks() as callbacks:
        validation_request(project=project)
    assert len(callbacks) == 1
    first = validation_refresh(project_id=project.id)
    assert first.data["counts"]["gold"] == 40 and not first.is_stale
    again = validation_refresh(project_id=project.id)
    assert again.computed_at == first.computed_at  # nothing requested since: the second run writes nothing
    validation_request(project=project)
    assert ValidationResult.objects.get(project=project).is_stale


@pytest.fixture
def queued(monkeypatch):
    """The recomputations sent to the broker, one (args, options) each, however the code sends them."""
    sent: list[tuple] = []
    task = validation_module.validation_refresh_task
    monkeypatch.setattr(task, "delay", lambda *args: sent.append((args, {})))
    monkeypatch.setattr(task, "apply_async", lambda args=(), kwargs=None, **options: sent.append((tuple(args), options)))
    return sent


def test_requests_queue_one_recomputation_at_most_once_per_minimum_interval(
        tmp_path, settings, queued, monkeypatch, django_capture_on_commit_callbacks):
    settings.VALIDATION_REFRESH_MIN_SECONDS = 30
    bundle_import(path=synthetic_bundle(tmp_path / "b", queries=2, per_query=10), project_slug="syn")
    project = Judge.objects.get(name="squashed").project
    queued.clear()  # the import's own request
    validation_refresh(project_id=project.id)  # the worker ran it: the report was computed just now
    for _ in range(10):
        with django_capture_on_commit_callbacks(execute=True):
            validation_request(project=project)
    ((args, options),) = queued
    assert args == (project.id,) and 25 < options["countdown"] <= 30  # not sooner than 30 s after the last one
    validation_refresh(project_id=project.id)
    assert not ValidationResult.objects.get(project=project).is_stale and len(queued) == 1

    # A computation that fails leaves nothing pending: the next request queues one again.
    with django_capture_on_commit_callbacks(execute=True):
        validation_request(project=project)
    monkeypatch.setattr(validation_module, "gold_set", lambda project: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        validation_refresh(project_id=project.id)
    assert ValidationResult.objects.get(project=project).error.startswith("ZeroDivisionError")
    with django_capture_on_commit_callbacks(execute=True):
        validation_request(project=project)
    assert len(queued) == 3


def test_a_recomputation_whose_worker_was_lost_does_not_block_the_next_request(
        tmp_path, settings, queued, django_capture_on_commit_callbacks):
    """A report left running by a killed worker would stay stale for good: past VALIDATION_TIME_LIMIT the next
    request queues a new recomputation; before that it queues nothing."""
    settings.VALIDATION_REFRESH_MIN_SECONDS = 0
    settings.VALIDATION_TIME_LIMIT = 600
    bundle_import(path=synthetic_bundle(tmp_path / "b", queries=2, per_query=10), project_slug="syn")
    project = Judge.objects.get(name="squashed").project
    rows = ValidationResult.objects.filter(project=project)
    rows.update(status=ValidationResult.Status.RUNNING, started_at=timezone.now() - timedelta(seconds=60))
    queued.clear()
    with django_capture_on_commit_callbacks(execute=True):
        validation_request(project=project)
    assert queued == []  # still running, and not for long: its worker may well be alive
    rows.update(started_at=timezone.now() - timedelta(seconds=601))
    with django_capture_on_commit_callbacks(execute=True):
        validation_request(project=project)
    assert [args for args, _ in queued] == [(project.id,)]
    assert rows.get().status == ValidationResult.Status.PENDING


def test_the_cached_report_holds_every_judges_metrics_by_definition(tmp_path):
    bundle_import(path=synthetic_bundle(tmp_path / "b", queries=2, per_query=10), project_slug="syn")
    project = Judge.objects.get(name="squashed").project
    JudgeFactory(project=project, name="unused")
    result = validation_refresh(project_id=project.id)
    squashed = Judge.objects.get(name="squashed")
    assert result.data["by_definition"]["squashed"] == asdict(judge_metrics_by_definition(judge=squashed))
    assert result.data["by_definition"]["unused"]["by_version"]["groups"] == []


def test_the_task_retries_a_database_that_is_briefly_gone_and_counts_the_attempts(tmp_path, monkeypatch):
    bundle_import(path=synthetic_bundle(tmp_path / "b", queries=2, per_query=10), project_slug="syn")
    project = Judge.objects.get(name="squashed").project
    pending = ValidationResult.objects.get(project=project)
    assert (pending.status, pending.attempts, pending.started_at) == ("pending", 0, None)
    real, calls = validation_module.gold_set, []

    def flaky(project):
        calls.append(project)
        if len(calls) == 1:
            raise OperationalError("database is locked")
        return real(project)

    monkeypatch.setattr(validation_module, "gold_set", flaky)
    validation_module.validation_refresh_task.apply(args=[project.id])  # the retry runs eagerly
    result = ValidationResult.objects.get(project=project)
    assert (result.status, result.attempts, result.error) == ("done", 2, "") and not result.is_stale
    assert result.started_at <= result.computed_at <= result.finished_at


def coverage_study(*, non_relevant: int = 10, ungraded: int = 20) -> Project:
    """100 gold pairs over 10 queries (pair i of query i % 10), the first `non_relevant` graded 0 and the others
    2, and `ungraded` pool pairs nobody graded. Judges "full" and "rough" scored all 100 gold pairs, "full" erring
    on five relevant ones (P 0.3), "rough" on twenty and less sure; judge "partial" scored only the 60 with
    i % 10 < 6, every one right (P 0.9 or 0.1)."""
    project = ProjectFactory(slug=f"coverage-{non_relevant}")
    queries = [QueryFactory(project=project, external_id=f"q{i}") for i in range(10)]
    full = JudgeFactory(project=project, name="full")
    partial = JudgeFactory(project=project, name="partial")
    rough = JudgeFactory(project=project, name="rough")
    for i in range(100):
        relevant = i >= non_relevant
        pair = PairFactory(project=project, query=queries[i % 10], reference_grade=2 if relevant else 0)
        JudgmentFactory(pair=pair, judge=full, p_relevant=(0.3 if i in range(50, 55) else 0.7) if relevant else 0.4)
        JudgmentFactory(pair=pair, judge=rough, p_relevant=(0.35 if i in range(50, 70) else 0.55) if relevant else 0.45)
        if i % 10 < 6:
            JudgmentFactory(pair=pair, judge=partial, p_relevant=0.9 if relevant else 0.1)
    for i in range(ungraded):
        PairFactory(project=project, query=queries[i % 10])
    return project


def test_a_judge_that_scored_60_of_the_100_gold_pairs_is_partial_and_ranked_only_when_included():
    project = coverage_study()
    report = validation_compute(project=project, bootstrap_draws=0).to_dict()
    assert report["counts"]["non_relevant"] == 10 and report["counts"]["gold"] == 100
    full, partial, rough = report["judges"]
    assert full["coverage"] == rough["coverage"] == {"needed": 100, "covered": 100, "share": 1.0, "partial": False}
    # None of its 40 missing pairs is queued: an imported judge has nothing to score them with.
    assert partial["coverage"] == {"needed": 100, "covered": 60, "share": 0.6, "partial": True, "queued": 0}
    # AUROC by hand: the share of (relevant, non-relevant) pairs a judge orders right. On its 60 pairs the partial
    # judge is perfect, and would be the best of every line if it were ranked.
    assert (partial["auroc"], full["auroc"], rough["auroc"]) == (
        1.0, pytest.approx(1 - 5 * 10 / (90 * 10)), pytest.approx(1 - 20 * 10 / (90 * 10)))
    # Brier by hand (mean squared gap to 0 or 1) is better lower.
    assert full["brier"] == pytest.approx((85 * 0.3**2 + 5 * 0.7**2 + 10 * 0.4**2) / 100)
    assert rough["brier"] == pytest.approx((70 * 0.45**2 + 20 * 0.65**2 + 10 * 0.45**2) / 100)
    assert partial["brier"] == pytest.approx(0.1**2)
    ranked = [True, False, True]
    lines = {line.label: line for line in metric_table(report["judges"], ranked=ranked)}
    assert [cell.best for cell in lines["AUROC"].cells] == [True, False, False]
    assert [cell.best for cell in lines["Brier"].cells] == [True, False, False]
    assert not any(cell.best for cell in lines["pairs evaluated"].cells)  # a count has no better way
    included = {line.label: line for line in metric_table(report["judges"], ranked=[True, True, True])}
    assert [cell.best for cell in included["AUROC"].cells] == [False, True, False]
    assert [cell.best for cell in included["Brier"].cells] == [False, True, False]
    # A best of one says nothing: with one judge ranked, no line marks it.
    alone = metric_table(report["judges"], ranked=[True, False, False])
    assert not any(cell.best for line in alone for cell in line.cells)
    # With few non-relevant gold pairs precision, AUROC and MAP pick no best; Brier, which needs none, still does.
    few = {line.label: line for line in metric_table(report["judges"], ranked=ranked, few_non_relevant=True)}
    assert not any(cell.best for label in ("precision", "AUROC", "MAP") for cell in few[label].cells)
    assert [cell.best for cell in few["Brier"].cells] == [True, False, False]
    # With the unjudged pool pairs counted as irrelevant, the report needs them too.
    all_pairs = validation_compute(project=project, bootstrap_draws=0, options=ReportOptions(all_pairs=True)).to_dict()
    assert [section["coverage"]["needed"] for section in all_pairs["judges"]] == [120, 120, 120]
    assert all_pairs["counts"]["non_relevant"] == 30

"""validation_report: the JSON keys the issue names, null-with-reason on relevant-only data, the table."""
import io
import json

import pytest
from django.core.management import CommandError, call_command

from labeling.services.bundle_import import bundle_import
from tests.services.test_bundle_import import SAMPLE
from tests.services.test_validation import coverage_study, synthetic_bundle

pytestmark = pytest.mark.django_db

JUDGE_KEYS = {
    "n", "n_unresolved", "f1", "precision", "recall", "accuracy", "kappa_vs_gold", "auroc", "brier", "ece",
    "ece_adaptive", "cal_avg", "ndcg", "map", "info_avg", "ndcg@10", "map@10", "kendall_tau", "ndcg_tie_aware",
    "map_tie_aware", "uncertainty_ap", "ci", "null_reasons",
}


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("validation_report", *args, "--bootstrap", "50", stdout=out)
    return out.getvalue()


def test_sample_json_has_the_keys_and_explains_nulls():
    bundle_import(path=SAMPLE, project_slug="cr")
    report = json.loads(run("--project", "cr", "--judge", "gpt4-ask-generic", "--json"))
    judge = report["judge"]
    assert JUDGE_KEYS <= set(judge)
    assert set(report["human"]) >= {"human_kappa_binary", "human_kappa_graded", "krippendorff_alpha", "n_overlap"}
    assert judge["n"] == 595
    # Every sample pair is relevant: AUROC needs negatives, so it is null and says why.
    assert judge["auroc"] is None and judge["null_reasons"]["auroc"]
    assert set(judge["ci"]) >= {"f1", "auroc", "ece", "ndcg", "map", "kappa_vs_gold"}
    assert 0 < judge["ndcg"] <= 1


def test_several_judges_side_by_side():
    bundle_import(path=SAMPLE, project_slug="cr")
    table = run("--project", "cr", "--judge", "gpt4-ask-generic", "--judge", "llama3-tok-generic")
    header = next(line for line in table.splitlines() if "gpt4-ask-generic" in line)
    assert header.index("gpt4-ask-generic") < header.index("llama3-tok-generic")
    assert "nDCG" in table and "auroc is empty" in table
    report = json.loads(run("--project", "cr", "--judge", "gpt4-ask-generic", "--judge", "llama3-tok-generic", "--json"))
    assert [j["name"] for j in report["judges"]] == ["gpt4-ask-generic", "llama3-tok-generic"]
    # The human-agreement rows: every value starts in one column, after its label and at least two spaces.
    human = table.split("Human agreement (annotators):\n", 1)[1].splitlines()
    starts = {len(line) - len(line.rstrip().split("  ")[-1].lstrip()) for line in human
              if line.strip() and "(" not in line}
    assert len(starts) == 1 and all("  " in line.strip() for line in human if line.strip()), human


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--project", "nope", "--judge", "x"], "no project 'nope'"),
        (["--project", "cr", "--judge", "gpt5"], "project 'cr' has no judge 'gpt5' (its judges: gpt35-ask-generic"),
    ],
)
def test_errors_name_the_problem(args, message):
    bundle_import(path=SAMPLE, project_slug="cr")
    with pytest.raises(CommandError) as caught:
        call_command("validation_report", *args)
    assert message in str(caught.value)


def test_calibrate_judge_command(tmp_path):
    bundle_import(path=synthetic_bundle(tmp_path / "b"), project_slug="syn")
    out = io.StringIO()
    call_command("calibrate_judge", "--project", "syn", "--judge", "squashed", stdout=out)
    assert "Calibrated 'squashed' with" in out.getvalue() and "on 480 gold pairs" in out.getvalue()
    bundle_import(path=SAMPLE, project_slug="cr")
    with pytest.raises(CommandError, match="gpt4-ask-generic"):
        call_command("calibrate_judge", "--project", "cr", "--judge", "gpt4-ask-generic")


def test_free_text_metadata_is_not_a_query_group():
    bundle_import(path=SAMPLE, project_slug="cr")
    # Each ClimRetrieve query carries a long per-query definition in its metadata: not a grouping key.
    report = json.loads(run("--project", "cr", "--judge", "gpt4-ask-generic", "--json"))
    assert report["judge"]["group_kappa"] == {}


def test_a_partial_judge_is_named_with_what_it_lacks():
    project = coverage_study()
    text = run("--project", project.slug, "--judge", "full", "--judge", "partial")
    assert "partial: partial (60 %): judged under the current definition 60 of the 100 gold pairs." in text
    assert "full: partial" not in text
    data = json.loads(run("--project", project.slug, "--judge", "partial", "--json"))
    # None of its missing pairs is queued: an imported judge has nothing to score them with.
    assert data["judge"]["coverage"] == {"needed": 100, "covered": 60, "share": 0.6, "partial": True, "queued": 0}
    assert data["counts"]["non_relevant"] == 10

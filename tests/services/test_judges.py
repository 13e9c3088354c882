"""A judge's name follows labeling.names whichever way the judge arrives: created by judge_create (its name and the
names of an ensemble's members) or named by a bundle's judgments."""
from __future__ import annotations

import pytest

from labeling.models import Judge
from labeling.services.bundle_import import BundleImportError, bundle_import
from labeling.services.judges import JudgeError, judge_create
from tests.factories import JudgeFactory, ProjectFactory
from tests.services.test_bundle_import import SMALL, jsonl, table_state, write_bundle

pytestmark = pytest.mark.django_db


def test_an_ensemble_names_its_members_as_they_are_stored():
    project = ProjectFactory()
    JudgeFactory(project=project, name="gpt")
    ensemble = judge_create(project=project, name="both", backend=Judge.Backend.ENSEMBLE, members=["\uff47\uff50\uff54"])
    assert ensemble.parameters == {"members": ["gpt"]}
    with pytest.raises(JudgeError, match=r"^the ensemble member name holds a control character \(U\+000A\)"):
        judge_create(project=project, name="other", backend=Judge.Backend.ENSEMBLE, members=["gpt\n"])


def test_a_bundle_judge_name_that_is_not_one_line_is_a_problem_and_a_look_alike_is_one_judge(tmp_path):
    """Issue 30, finding 7, through a bundle: an imported judge's name is in the Judges page's links too."""
    line = {"query_id": "q1", "doc_id": "d1", "p_relevant": 0.8}
    bad = write_bundle(tmp_path / "bad", {**SMALL, "judgments.jsonl": jsonl({**line, "judge": "nl\njudge"})})
    before = table_state()
    with pytest.raises(BundleImportError, match=r"judgments\.jsonl:1: the judge name holds a control character "
                                                r"\(U\+000A\) at position 3"):
        bundle_import(path=bad, project_slug="s")
    assert table_state() == before
    twins = write_bundle(tmp_path / "ok", {**SMALL, "judgments.jsonl": jsonl(
        {**line, "judge": "re\u0301gle\u0301"}, {**line, "doc_id": "d2", "judge": "réglé"})})
    bundle_import(path=twins, project_slug="s")
    assert list(Judge.objects.filter(project__slug="s").values_list("name", flat=True)) == ["réglé"]
    assert Judge.objects.get(project__slug="s").judgments.count() == 2

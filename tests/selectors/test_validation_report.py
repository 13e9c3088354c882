"""The validation report as a type: a report the worker stored before the type existed (validation_report_stored.json,
written by the code of #49's start: a synthetic project of 30 gold pairs, the judge `squashed` with a calibrator and
`unused` with no judgments) reads back and writes the same keys in the same order, so the Validation page, the API
and the command show old rows as they did."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from labeling.models import Membership, ValidationResult
from labeling.selectors.validation_report import ValidationReport
from tests.factories import JudgeFactory, MembershipFactory, ProjectFactory, UserFactory

pytestmark = pytest.mark.django_db

STORED = json.loads((Path(__file__).parent / "validation_report_stored.json").read_text())


def test_a_stored_report_reads_back_and_writes_the_same_keys_in_the_same_order():
    report = ValidationReport.from_dict(STORED)
    assert json.dumps(report.to_dict()) == json.dumps(STORED)
    assert report.complete and report.cutoffs == (10,) and report.counts.gold == 30
    squashed, unused = report.judges
    assert squashed.calibration.method == STORED["judges"][0]["calibration"]["method"]
    assert squashed.metrics["n"] == 30 and unused.metrics["n"] == 0 and not squashed.is_degenerate
    assert report.metrics_by_definition("squashed").n_gold == 30
    assert report.metrics_by_definition("created-since").by_version.groups == []


def test_a_report_of_the_first_shape_reads_as_incomplete_with_the_default_cutoffs():
    """The first stored reports had no options, no count of non-relevant pairs, no judges' coverage or degeneracy
    and no metrics by definition version: they show while a complete one is computed."""
    first = {key: value for key, value in STORED.items() if key not in ("options", "by_definition", "completeness")}
    first["counts"] = {key: value for key, value in STORED["counts"].items()
                       if key not in ("non_relevant", "ungraded", "added")}
    first["judges"] = [{key: value for key, value in section.items() if key not in ("coverage", "degenerate")}
                       for section in STORED["judges"]]
    report = ValidationReport.from_dict(first)
    assert not report.complete and report.cutoffs == (10,) and report.completeness is None
    assert not report.counts.few_non_relevant and report.degenerate_judges() == {}


def test_the_api_and_the_page_show_a_stored_report_as_it_was_stored(client):
    project = ProjectFactory(slug=STORED["project"])
    JudgeFactory(project=project, name="squashed")
    JudgeFactory(project=project, name="unused")
    ValidationResult.objects.create(project=project, data=STORED, computed_at=timezone.now(),
                                    status=ValidationResult.Status.DONE)
    viewer = UserFactory()
    MembershipFactory(project=project, user=viewer, role=Membership.Role.VIEWER)
    api = APIClient()
    api.force_authenticate(viewer)

    body = api.get(f"/api/projects/{project.slug}/validation/").json()
    assert body == {**{key: STORED[key] for key in ("project", "computed_at", "options", "counts", "human", "judges")},
                    "stale": False}
    one = api.get(f"/api/projects/{project.slug}/validation/", {"judge": "squashed"}).json()
    assert one["judge"] == STORED["judges"][0] and "judges" not in one
    by_definition = api.get(f"/api/projects/{project.slug}/judges/squashed/metrics-by-definition/").json()
    assert {key: by_definition[key] for key in STORED["by_definition"]["squashed"]} == \
        STORED["by_definition"]["squashed"]

    client.force_login(viewer)
    html = client.get(reverse("labeling:validation", args=[project.slug])).content.decode()
    assert '<dd data-count="gold">30</dd>' in html and 'data-calibration="squashed"' in html
    # The judges' table reads the section's own counts beside its metrics: `unused` judged none of the 30.
    unjudged = re.findall(r'data-metric="n_unjudged">\s*(.*?)\s*</td>', html, re.DOTALL)
    assert unjudged == ["0", "30"]

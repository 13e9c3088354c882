"""An expert's label on a pair no judge scored: the validation refresh queues its scoring for the judge with a model
(ahead of the project's other scoring), not for an imported judge, once; the Validation page's partial marks say how
many gold pairs are missing and whether they are queued; once scored, the judge is complete again."""
from __future__ import annotations

import re

import pytest
from django.urls import reverse

from labeling.models import Membership, ScoringChunk, ScoringJob
from labeling.services.gold_scoring import GOLD_PRIORITY, validation_run
from labeling.services.labels import label_submit
from labeling.services.validation import validation_result_ensure
from tests.factories import (
    JudgeFactory,
    JudgmentFactory,
    MembershipFactory,
    PairFactory,
    PassageFactory,
    ProjectFactory,
    QueryFactory,
    UserFactory,
)
from tests.scoring_fixtures import minilm_judge

pytestmark = pytest.mark.django_db


def _header(html: str, judge: str) -> str:
    return re.search(rf'<th class="num" data-judge="{judge}">(.*?)</th>', html, re.DOTALL).group(1)


def _label(project, admin, pair, grade: int, capture) -> None:
    """The admin's label, its commit's callbacks run (the report marked stale, its refresh queued on this test's
    own broker)."""
    with capture(execute=True):
        label_submit(project=project, annotator=admin, pair_id=pair.id, grade=grade)


def test_a_label_on_an_unscored_pair_queues_its_scoring_and_the_partial_mark_names_what_is_missing(
        client, private_broker, django_capture_on_commit_callbacks):
    capture = django_capture_on_commit_callbacks
    project = ProjectFactory(slug="gold-scoring")
    minilm = minilm_judge(project)
    published = JudgeFactory(project=project, name="published")  # imported: nothing to score it with
    query = QueryFactory(project=project)
    for i in range(10):
        pair = PairFactory(project=project, query=query, passage=PassageFactory(project=project),
                           reference_grade=2 if i < 5 else 0)
        for judge in (minilm, published):
            JudgmentFactory(pair=pair, judge=judge, p_relevant=0.8 if i < 5 else 0.2)
    new = PairFactory(project=project, query=query, passage=PassageFactory(project=project))
    admin = UserFactory(username="gold-admin")
    MembershipFactory(project=project, user=admin, role=Membership.Role.ADMIN)
    validation_result_ensure(project=project)
    client.force_login(admin)
    page = reverse("labeling:validation", args=[project.slug])
    assert "data-partial" not in client.get(page).content.decode()

    _label(project, admin, new, 2, capture)
    validation_run(project_id=project.id)  # what the worker runs for the refresh the label asked

    job = ScoringJob.objects.get(judge=minilm)
    assert (job.scope, job.total, job.priority, job.status) == (ScoringJob.Scope.SELECTION, 1, GOLD_PRIORITY,
                                                                ScoringJob.Status.RUNNING)
    assert list(ScoringChunk.objects.filter(job=job).values_list("pair_ids", flat=True)) == [[new.id]]
    assert not ScoringJob.objects.filter(judge=published).exists()
    html = client.get(page).content.decode()
    assert "not scored yet: 1 of the 11 gold pairs, scoring queued" in _header(html, "minilm")
    imported = _header(html, "published")
    assert "not scored yet: 1 of the 11 gold pairs<" in imported and "scoring queued" not in imported

    # Asked again before the judge has scored it: nothing is queued twice.
    _label(project, admin, new, 1, capture)
    validation_run(project_id=project.id)
    assert ScoringJob.objects.filter(judge=minilm).count() == 1

    # The worker scores it: the next report finds minilm complete and ranks it again.
    JudgmentFactory(pair=new, judge=minilm, p_relevant=0.7)
    ScoringChunk.objects.filter(job=job).update(written=1)
    _label(project, admin, new, 2, capture)
    validation_run(project_id=project.id)
    html = client.get(page).content.decode()
    assert "data-partial" not in _header(html, "minilm") and "data-partial" in _header(html, "published")
    assert ScoringJob.objects.filter(judge=minilm).count() == 1

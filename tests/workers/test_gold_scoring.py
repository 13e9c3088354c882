"""A real worker: an admin's label on a pair minilm never scored makes it gold; the refresh that the label asks for
queues its scoring, the worker scores it with the bundled MiniLM, and the next report finds minilm complete."""
import pytest

from labeling.models import Judgment, Membership, ScoringJob, ValidationResult
from labeling.services.gold_scoring import GOLD_PRIORITY
from labeling.services.labels import label_submit
from tests.factories import (
    JudgmentFactory,
    MembershipFactory,
    PairFactory,
    PassageFactory,
    ProjectFactory,
    QueryFactory,
    UserFactory,
)
from tests.polling import wait_for
from tests.scoring_fixtures import minilm_judge

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_a_worker_scores_the_pair_a_label_made_gold_and_the_judge_is_complete_again(worker, settings):
    settings.VALIDATION_REFRESH_MIN_SECONDS = 0  # no debounce between the two refreshes
    project = ProjectFactory(slug="gold-worker")
    minilm = minilm_judge(project)
    query = QueryFactory(project=project, text="emissions targets")
    for i in range(6):
        pair = PairFactory(project=project, query=query, passage=PassageFactory(project=project),
                           reference_grade=2 if i < 3 else 0)
        JudgmentFactory(pair=pair, judge=minilm, p_relevant=0.8 if i < 3 else 0.2)
    new = PairFactory(project=project, query=query,
                      passage=PassageFactory(project=project, text="The company targets net zero emissions."))
    admin = UserFactory(username="gold-worker-admin")
    MembershipFactory(project=project, user=admin, role=Membership.Role.ADMIN)

    label_submit(project=project, annotator=admin, pair_id=new.id, grade=2)

    scored = Judgment.objects.filter(judge=minilm, pair=new, status=Judgment.Status.OK)
    wait_for(scored.exists, "no worker scored the new gold pair", seconds=120, every=0.5)
    job = ScoringJob.objects.get(judge=minilm)
    assert (job.scope, job.priority, job.total) == (ScoringJob.Scope.SELECTION, GOLD_PRIORITY, 1)

    def complete() -> bool:
        result = ValidationResult.objects.filter(project=project).first()
        if result is None or result.is_stale or not result.data:
            return False
        coverage = {section["name"]: section["coverage"] for section in result.data["judges"]}["minilm"]
        return coverage == {"needed": 7, "covered": 7, "share": 1.0, "partial": False}

    wait_for(complete, "the report did not find minilm complete", seconds=60, every=0.5)

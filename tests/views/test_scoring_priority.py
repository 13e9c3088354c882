"""Who may raise a scoring job's priority (issue #47, finding 9): a higher priority widens its project's share of
every project's bulk workers, so above the default 1 it is staff's to give. A project admin who is not staff may set
1 only, refused with a 403 naming the rule in the API (starting a job or changing one's priority) and on the Judges
page; staff may set 1 to 10."""
from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from labeling.models import Membership, ScoringJob
from tests.factories import MembershipFactory, UserFactory
from tests.scoring_fixtures import minilm_judge, small_scoring_project

pytestmark = pytest.mark.django_db
RULE = "Only staff can give a job a priority above 1"


@pytest.fixture
def project(tmp_path):
    return small_scoring_project(tmp_path / "b", queries=2, passages=3)


def _admin(project, *, staff: bool):
    user = UserFactory(is_staff=staff)
    MembershipFactory(project=project, user=user, role=Membership.Role.ADMIN)
    return user


def _api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_a_project_admin_who_is_not_staff_may_not_raise_a_priority_in_the_api(project):
    judge = minilm_judge(project)
    api = _api(_admin(project, staff=False))
    jobs = reverse("api:job-list", args=[project.slug])
    refused = api.post(jobs, {"judge": judge.name, "priority": 10}, format="json")
    assert refused.status_code == 403 and RULE in refused.json()["message"], refused.json()
    assert not ScoringJob.objects.exists()
    started = api.post(jobs, {"judge": judge.name, "priority": 1}, format="json")
    assert started.status_code == 201 and started.json()["priority"] == 1
    priority = reverse("api:job-priority", args=[project.slug, started.json()["id"]])
    refused = api.post(priority, {"priority": 2}, format="json")
    assert refused.status_code == 403 and RULE in refused.json()["message"]
    assert ScoringJob.objects.get().priority == 1
    # Staff raises it; the project admin may still bring it back to 1.
    staff = _api(_admin(project, staff=True))
    assert staff.post(priority, {"priority": 10}, format="json").json()["priority"] == 10
    assert api.post(priority, {"priority": 1}, format="json").json()["priority"] == 1


def test_staff_may_start_a_job_with_a_raised_priority_in_the_api(project):
    judge = minilm_judge(project)
    started = _api(_admin(project, staff=True)).post(reverse("api:job-list", args=[project.slug]),
                                                     {"judge": judge.name, "priority": 10}, format="json")
    assert started.status_code == 201 and started.json()["priority"] == 10


def test_the_judges_page_refuses_a_raised_priority_to_a_project_admin_who_is_not_staff(client, project):
    judge = minilm_judge(project)
    client.force_login(_admin(project, staff=False))
    client.post(reverse("labeling:job_start", args=[project.slug, judge.name]), {"scope": "all"})
    job = ScoringJob.objects.get()
    page = reverse("labeling:judges", args=[project.slug])
    # Nothing to choose: the page offers no priority form to someone who may set only 1.
    assert f'id="priority-{job.id}"' not in client.get(page).content.decode()
    refused = client.post(reverse("labeling:job_priority", args=[project.slug, job.id]), {"priority": "10"})
    assert refused.status_code == 403 and RULE in refused.content.decode()
    job.refresh_from_db()
    assert job.priority == 1
    client.force_login(_admin(project, staff=True))
    html = client.get(page).content.decode()
    assert f'id="priority-{job.id}"' in html and '<option value="10">10</option>' in html
    done = client.post(reverse("labeling:job_priority", args=[project.slug, job.id]), {"priority": "10"})
    job.refresh_from_db()
    assert done.status_code == 302 and job.priority == 10

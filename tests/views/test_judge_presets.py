"""The Judges page offers DIRAS's published prompts as presets: a judge created from one stores the preset's
template (and leaves the definition out for the Fig. 11 preset); a preset with another template is refused."""
import json

import pytest
from django.conf import settings
from django.urls import reverse

from labeling.models import Judge, Membership
from models_llm.bundled import smollm2_folder
from models_llm.prompts import PRESETS
from tests.factories import MembershipFactory, UserFactory
from tests.scoring_fixtures import small_scoring_project

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, tmp_path):
    project = small_scoring_project(tmp_path / "b", queries=1, passages=2)
    user = UserFactory()
    MembershipFactory(project=project, user=user, role=Membership.Role.ADMIN)
    client.force_login(user)
    return client, project


def _create(client, project, **fields):
    data = {"backend": "hf", "model": str(smollm2_folder(settings.VAR_DIR)), "method": "ask", **fields}
    return client.post(reverse("labeling:judge_create", args=[project.slug]), data)


def test_the_page_lists_the_presets(admin_client):
    client, project = admin_client
    html = client.get(reverse("labeling:judges", args=[project.slug])).content.decode()
    for preset in PRESETS.values():
        assert f'value="{preset.name}"' in html
    assert "Fig. 9" in html and "Fig. 10" in html and "Fig. 11" in html


@pytest.mark.parametrize("name", list(PRESETS))
def test_a_judge_made_from_a_preset_stores_its_template(admin_client, name):
    client, project = admin_client
    assert _create(client, project, name=f"j-{name}", preset=name).status_code == 302
    judge = Judge.objects.get(project=project, name=f"j-{name}")
    assert json.loads(judge.prompt) == PRESETS[name].template
    assert judge.parameters.get("use_definition", True) is PRESETS[name].use_definition


def test_a_preset_and_a_template_together_are_refused(admin_client):
    client, project = admin_client
    response = _create(client, project, name="both", preset="diras-definition", template='{"ask": "Helpful?\\n"}')
    assert response.status_code == 400 and "choose one of a preset" in response.content.decode()
    assert not Judge.objects.filter(project=project, name="both").exists()

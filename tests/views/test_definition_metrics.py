"""The "By definition version" section of the validation dashboard and its API endpoint through the test client:
the numbers shown are scikit-learn's on the rows the test wrote; non-members get nothing."""
from __future__ import annotations

import re

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from labeling.models import Membership
from labeling.services.validation import validation_result_ensure
from tests.factories import MembershipFactory, UserFactory
from tests.selectors.test_definition_metrics import build_study, reference

pytestmark = pytest.mark.django_db


def member(project, role=Membership.Role.VIEWER):
    user = UserFactory()
    MembershipFactory(project=project, user=user, role=role)
    return user


def cell(html, group, part, metric):
    """The text of one cell of the section's tables (the version table comes first)."""
    row = re.search(rf'<tr data-group="{group}">(.*?)</tr>', html, re.S).group(1)
    found = re.search(rf'data-part="{part}" data-metric="{metric}"[^>]*>(.*?)</td>', row, re.S)
    return found.group(1).strip()


@pytest.fixture
def study():
    study = build_study(per_query=12)
    validation_result_ensure(project=study.project)  # the section is read from the cached report
    return study


def test_the_section_shows_each_version_on_all_and_on_common_pairs(client, study):
    client.force_login(member(study.project))
    url = reverse("labeling:validation", args=[study.project.slug])
    html = client.get(url, {"judge": "qwen"}).content.decode()
    assert "By definition version" in html and 'data-grouping="version"' in html and 'data-grouping="origin"' in html
    common = sorted(set(study.judged[1]) & set(study.judged[2]) & set(study.gold))
    expected = {("v1", "gold"): reference(study.rows(1)), ("v2", "gold"): reference(study.rows(2)),
                ("v1", "common"): reference(study.rows(1, common)), ("v2", "common"): reference(study.rows(2, common))}
    for (group, part), numbers in expected.items():
        assert cell(html, group, part, "n") == str(numbers["n"])
        for metric in ("kappa", "auroc", "brier", "ece", "f1"):
            assert cell(html, group, part, metric) == f"{numbers[metric]:.3f}", (group, part, metric)
    assert f'data-n-common="{len(common)}"' in html
    assert 'data-group="llm_refined"' in html and "written by a person" in html


def test_the_default_judge_is_the_queue_judge_and_one_version_gets_one_line(client, study):
    client.force_login(member(study.project))
    url = reverse("labeling:validation", args=[study.project.slug])
    # Without a queue judge, the first judge with judgments by name: "other", judged under v1 only.
    html = client.get(url).content.decode()
    assert ("Judgments of other were all made under one definition version: re-score after a new version to "
            "compare.") in html
    assert 'data-grouping="version"' not in html
    assert f'href="{url}?judge=qwen#by-definition"' in html  # a link per judge, working without JavaScript
    study.project.queue_judge = study.judge
    study.project.save(update_fields=["queue_judge"])
    assert 'data-grouping="version"' in client.get(url).content.decode()


def test_an_htmx_judge_switch_renders_only_the_section(client, study):
    client.force_login(member(study.project))
    url = reverse("labeling:validation", args=[study.project.slug])
    response = client.get(url, {"judge": "qwen"}, headers={"HX-Request": "true", "HX-Target": "by-definition"})
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="by-definition"') and "<h1>" not in html
    assert 'data-group="v2"' in html


def test_the_section_is_not_shown_to_non_members_and_an_unknown_judge_is_404(client, study):
    url = reverse("labeling:validation", args=[study.project.slug])
    assert client.get(url, {"judge": "qwen"}).status_code == 302  # to the login page
    client.force_login(UserFactory())
    assert client.get(url, {"judge": "qwen"}).status_code == 404
    assert client.get(url, {"judge": "qwen"}, headers={"HX-Request": "true", "HX-Target": "by-definition"}
                      ).status_code == 404
    client.force_login(member(study.project))
    assert client.get(url, {"judge": "nobody"}).status_code == 404


def test_the_api_returns_the_groups_to_members_only(study):
    api = APIClient()
    url = reverse("api:judge-metrics-by-definition", args=[study.project.slug, "qwen"])
    assert api.get(url).status_code in (401, 403)
    api.force_authenticate(UserFactory())
    assert api.get(url).status_code == 404
    api.force_authenticate(member(study.project))
    body = api.get(url).json()
    assert body["project"] == study.project.slug and body["judge"] == "qwen" and body["comparable"] is True
    assert [g["key"] for g in body["by_version"]["groups"]] == ["v1", "v2"]
    assert [g["key"] for g in body["by_origin"]["groups"]] == ["manual", "llm_refined"]
    v2 = body["by_version"]["groups"][1]
    expected = reference(study.rows(2))
    assert v2["gold"]["n"] == expected["n"] and v2["n_judgments"] == 2 * 11
    for metric in ("kappa", "auroc", "brier", "ece", "f1"):
        assert v2["gold"][metric] == pytest.approx(expected[metric])
    assert body["by_version"]["n_common"] == v2["common"]["n"] == expected["n"]
    missing = api.get(reverse("api:judge-metrics-by-definition", args=[study.project.slug, "nope"]))
    assert missing.status_code == 404 and "no judge 'nope'" in missing.json()["message"]

"""The Releases page through the test client: an admin freezes the qrels with the form, the list shows each release
with its counts, each export link downloads what the live export gave when it was frozen (and what the API gives),
two releases are compared with the pairs that changed, worked out by hand; a viewer reads and cannot freeze; an
expert, labelling blind, is refused with the reason."""
import re

import pytest
from django.urls import reverse

from labeling.models import Pair, QrelsRelease
from labeling.selectors.export import QrelsFormat, export_source_parse, qrels_lines
from tests.factories import MembershipFactory, UserFactory
from tests.selectors.test_systems import systems_project

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    project = systems_project().project
    users = {role: UserFactory(username=f"{role}1") for role in ("admin", "viewer", "expert")}
    for role, user in users.items():
        MembershipFactory(project=project, user=user, role=role)
    return project, users


def _page(client, project, **params):
    return client.get(reverse("labeling:releases", args=[project.slug]), params)


def _freeze(client, project, **fields):
    return client.post(reverse("labeling:release_create", args=[project.slug]), fields)


def _download(response) -> str:
    return b"".join(response.streaming_content).decode()


def _text(html: str, testid: str) -> str:
    found = re.search(rf'data-testid="{testid}"[^>]*>(.*?)</p>', html, re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", found.group(1))).strip()


def test_an_admin_freezes_lists_exports_and_compares_releases(client, world):
    project, users = world
    client.force_login(users["admin"])
    assert 'data-testid="no-releases"' in _page(client, project).content.decode()
    live = {fmt: "".join(qrels_lines(project=project, format=fmt,
                                     source=export_source_parse(project=project, source="human", threshold=None)))
            for fmt in QrelsFormat}
    response = _freeze(client, project, name="v1", source="human", threshold="", description="first cut")
    assert response.status_code == 302 and response["Location"] == reverse("labeling:releases", args=[project.slug])

    html = _page(client, project).content.decode()
    row = re.search(r'<tr data-release="v1">(.*?)</tr>', html, re.S).group(1)
    graded = len(live[QrelsFormat.TREC].splitlines())
    assert re.search(r"data-graded>(\d+)<", row).group(1) == str(graded) and "first cut" in row
    # The nav names the page for the admin.
    assert 'data-tab="releases" aria-current="page"' in html

    # New grades after v1 (as in tests/services/test_releases.py): q1/d5 graded 2, q1/d1 regraded 2 -> 0, q3/d7
    # withdrawn.
    pairs = {(p.query.external_id, p.passage.external_id): p.id
             for p in Pair.objects.filter(project=project).select_related("query", "passage")}
    Pair.objects.filter(id=pairs[("q1", "d5")]).update(reference_grade=2)
    Pair.objects.filter(id=pairs[("q1", "d1")]).update(reference_grade=0)
    Pair.objects.filter(id=pairs[("q3", "d7")]).update(reference_grade=None)
    assert _freeze(client, project, name="v2", source="human").status_code == 302

    for fmt in QrelsFormat:
        url = reverse("labeling:release_export", args=[project.slug, "v1"])
        assert f'href="{url}?format={fmt}"' in _page(client, project).content.decode()
        page_bytes = _download(client.get(url, {"format": fmt}))
        assert page_bytes == live[fmt], fmt  # what the live export gave when v1 was frozen
        api = client.get(reverse("api:release-export", args=[project.slug, "v1"]), {"format": fmt})
        assert page_bytes == _download(api), fmt

    html = _page(client, project, b="v2").content.decode()  # against the release frozen before
    assert _text(html, "diff-summary") == (
        "From v1 to v2: 1 graded pair added, 1 removed, 1 with a changed grade.")
    assert re.findall(r'<tr data-query="(\w+)"><td class="mono">\w+</td><td class="num">(\d)</td>'
                      r'<td class="num">(\d)</td><td class="num">(\d)</td>', html) == [
        ("q1", "1", "0", "1"), ("q3", "0", "1", "0")]
    assert "~ q1 d1 2 &rarr; 0" in html and "+ q1 d5 2" in html and "&minus; q3 d7 2" in html
    # The first release has none before it: the page says so.
    refused = _page(client, project, b="v1")
    assert refused.status_code == 400 and "is the project&#x27;s first" in _text(refused.content.decode(), "diff-error")


def test_a_bad_freeze_is_shown_on_the_form_and_stores_nothing(client, world):
    project, users = world
    client.force_login(users["admin"])
    _freeze(client, project, name="v1")
    taken = _freeze(client, project, name="v1", description="again")
    assert taken.status_code == 409 and "never replaced" in _text(taken.content.decode(), "freeze-error")
    assert 'value="again"' in taken.content.decode()  # the form keeps what was typed
    bad = _freeze(client, project, name="v2", threshold="half")
    assert bad.status_code == 400 and "threshold must be a number" in _text(bad.content.decode(), "freeze-error")
    assert list(QrelsRelease.objects.values_list("name", flat=True)) == ["v1"]


def test_a_viewer_reads_and_exports_but_cannot_freeze_and_an_expert_is_told_why(client, world):
    project, users = world
    client.force_login(users["admin"])
    _freeze(client, project, name="v1")
    client.force_login(users["viewer"])
    html = _page(client, project).content.decode()
    assert 'data-release="v1"' in html and 'data-testid="freeze-form"' not in html
    assert client.get(reverse("labeling:release_export", args=[project.slug, "v1"])).status_code == 200
    assert _freeze(client, project, name="v2").status_code == 403
    client.force_login(users["expert"])
    refused = _page(client, project)
    assert refused.status_code == 403 and "Experts label blind" in refused.content.decode()
    assert 'data-tab="releases"' not in refused.content.decode()

"""The project header: every role sees exactly the tabs it may open (each shown tab opens with 200, each hidden
one is refused), the active tab is marked, and the counts are the ones the pages act on."""
from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from labeling.selectors.adjudication import adjudication_counts
from labeling.selectors.queues import queue_progress
from labeling.views.navigation import TABS
from tests.url_matrix import ADMIN, EXPERT, OUTSIDER, VIEWER, build_world
from tests.views.test_roles import ALLOWED, MATRIX

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("role", [VIEWER, EXPERT, ADMIN])
def test_each_role_sees_the_tabs_it_may_open_and_no_other(client, role):
    world = build_world()
    client.force_login(world.users[role])
    html = client.get(reverse("labeling:project_detail", args=[world.project.slug])).content.decode()
    shown = re.findall(r'<a href="([^"]+)" class="project-tab" data-tab="(\w+)"', html)
    assert shown and shown[0][1] == "overview"
    shown_keys = {key for _, key in shown}
    # The role matrix says the same: a tab shows exactly where its page's GET is allowed to the role.
    assert shown_keys == {key for key, _, name in TABS if role in ALLOWED[MATRIX[name]["GET"]]}
    for key, _, name in TABS:
        url = reverse(name, args=[world.project.slug])
        status = client.get(url).status_code
        if key in shown_keys:
            assert status == 200, f"{role} is shown the {key} tab but gets {status}"
        else:
            assert status in (403, 404), f"{role} is not shown the {key} tab but opens it ({status})"
    assert 'data-tab="overview" aria-current="page"' in html


def test_a_non_member_gets_no_header_of_the_project(client):
    world = build_world()
    client.force_login(world.users[OUTSIDER])
    response = client.get(reverse("labeling:project_detail", args=[world.project.slug]))
    assert response.status_code == 404
    assert world.project.name not in response.content.decode()


def test_the_counts_are_the_items_waiting_and_the_conflicts(client):
    world = build_world()
    admin = world.users[ADMIN]
    client.force_login(admin)
    html = client.get(reverse("labeling:judges", args=[world.project.slug])).content.decode()
    assert 'data-tab="judges" aria-current="page"' in html
    conflicts = adjudication_counts(project=world.project)["conflict"]
    assert conflicts >= 1
    assert f'title="conflicts to adjudicate"><span class="visually-hidden">(</span>{conflicts}<' in html
    # Items waiting for the admin (who labelled none): what the workspace counts as left for them.
    waiting = queue_progress(project=world.project, annotator=admin, now=timezone.now()).left_display
    assert waiting == "1"  # the world's third pair: the other two have their one label per item already
    assert f'title="items waiting for you"><span class="visually-hidden">(</span>{waiting}<' in html


@pytest.mark.parametrize("role", [VIEWER, EXPERT, ADMIN])
def test_a_page_looks_the_members_role_up_once(client, role):
    # The access check, the view and the header each ask for the role: one query answers them all.
    world = build_world()
    client.force_login(world.users[role])
    for name in ("labeling:project_detail", "labeling:rounds", "labeling:workspace"):
        with CaptureQueriesContext(connection) as queries:
            status = client.get(reverse(name, args=[world.project.slug])).status_code
        role_queries = [q["sql"] for q in queries.captured_queries
                        if q["sql"].startswith('SELECT "labeling_membership"."role"')]
        assert status in (200, 403) and len(role_queries) == 1, (name, status, role_queries)

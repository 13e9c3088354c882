"""The role matrix: every URL of the labeling app and its API, requested by an anonymous visitor, a logged-in
non-member and a viewer, an expert and an admin of the project, gets the outcome the table below says, and a
refused request changes nothing in the database. A URL missing from the table fails the suite."""
from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.urls import reverse
from rest_framework.authtoken.models import Token

from tests.url_matrix import ADMIN, ANONYMOUS, EXPERT, OUTSIDER, ROLES, VIEWER, all_routes, build_world

pytestmark = pytest.mark.django_db

# Who may use an endpoint, from the most open to the most closed.
PUBLIC = "public"  # anyone, logged in or not: the API's token login, an invitation link
LOGGED_IN = "logged-in"  # any logged-in user; no project in the URL
MEMBER = "member"  # viewers, experts and admins of the project
ANNOTATOR = "annotator"  # experts and admins: the annotation workspace and the label/queue API
# viewers and admins: the validation reports, made of the gold grades and judges' P of items experts have not
# labelled (blind first, labeling.selectors.disclosure)
READER = "reader"
ADMIN_ONLY = "admin"  # project admins: judges, jobs, definitions, calibration, settings
STAFF = "staff"  # staff and superusers (no role user of the world is): creating a project

ALLOWED = {
    PUBLIC: set(ROLES),
    LOGGED_IN: {OUTSIDER, VIEWER, EXPERT, ADMIN},
    MEMBER: {VIEWER, EXPERT, ADMIN},
    ANNOTATOR: {EXPERT, ADMIN},
    READER: {VIEWER, ADMIN},
    ADMIN_ONLY: {ADMIN},
    STAFF: set(),
}

# URL name -> {HTTP method: who may}. GET for reads, POST and DELETE for writes (sent with empty data).
MATRIX: dict[str, dict[str, str]] = {
    "labeling:project_list": {"GET": LOGGED_IN},
    "labeling:project_create": {"POST": STAFF},
    "labeling:project_detail": {"GET": MEMBER},
    "labeling:workspace": {"GET": ANNOTATOR},
    "labeling:workspace_submit": {"POST": ANNOTATOR},
    "labeling:workspace_skip": {"POST": ANNOTATOR},
    "labeling:workspace_undo": {"POST": ANNOTATOR},
    "labeling:workspace_summary": {"GET": ANNOTATOR, "POST": ANNOTATOR},
    "labeling:adjudication": {"GET": ADMIN_ONLY},
    "labeling:adjudication_set": {"POST": ADMIN_ONLY},
    "labeling:members": {"GET": ADMIN_ONLY, "POST": ADMIN_ONLY},
    "labeling:member_remove": {"POST": ADMIN_ONLY},
    "labeling:invitation_create": {"POST": ADMIN_ONLY},
    "labeling:invitation_revoke": {"POST": ADMIN_ONLY},
    # The invitation link's own page: whoever holds the link (an empty form is refused, 400).
    "labeling:invitation_accept": {"GET": PUBLIC, "POST": PUBLIC},
    "labeling:settings": {"GET": ADMIN_ONLY, "POST": ADMIN_ONLY},
    "labeling:settings_stopping": {"POST": ADMIN_ONLY},
    "labeling:validation": {"GET": READER},
    # The qrels are the gold grades and judges' P of items experts have not labelled (blind first).
    "labeling:qrels_export": {"GET": READER},
    "labeling:validation_refresh": {"POST": ADMIN_ONLY},
    "labeling:judge_calibrate": {"POST": ADMIN_ONLY},
    "labeling:judges": {"GET": MEMBER},
    "labeling:judge_create": {"POST": ADMIN_ONLY},
    "labeling:job_start": {"POST": ADMIN_ONLY},
    "labeling:judge_estimate": {"POST": ADMIN_ONLY},
    "labeling:estimate": {"GET": ADMIN_ONLY},
    "labeling:job_cancel": {"POST": ADMIN_ONLY},
    "labeling:job_priority": {"POST": ADMIN_ONLY},
    "labeling:definitions": {"GET": MEMBER},
    "labeling:definition": {"GET": MEMBER, "POST": ADMIN_ONLY},
    # Blind first is applied item by item inside (labeling.selectors.browse): experts see their own labels only.
    "labeling:browse_queries": {"GET": MEMBER},
    "labeling:browse_query": {"GET": MEMBER},
    "labeling:browse_pair": {"GET": MEMBER},
    "labeling:definition_rescore": {"POST": ADMIN_ONLY},
    "labeling:definition_draft": {"POST": ADMIN_ONLY},
    "labeling:bundles": {"GET": ADMIN_ONLY},
    "labeling:bundle_upload": {"POST": ADMIN_ONLY},
    "labeling:bundle_cancel": {"POST": ADMIN_ONLY},
    "labeling:systems": {"GET": MEMBER},
    "labeling:run_upload": {"POST": ADMIN_ONLY},
    "labeling:run_delete": {"POST": ADMIN_ONLY},
    "labeling:retrieval_start": {"POST": ADMIN_ONLY},
    "labeling:retrieval_cancel": {"POST": ADMIN_ONLY},
    "labeling:pool_preview": {"GET": ADMIN_ONLY},
    "labeling:pool_add": {"POST": ADMIN_ONLY},
    "labeling:beyond_pool_start": {"POST": ADMIN_ONLY},
    "labeling:finetune": {"GET": MEMBER},
    "labeling:training_set_sample": {"POST": ADMIN_ONLY},
    "labeling:training_set_import": {"POST": ADMIN_ONLY},
    "labeling:training_set_delete": {"POST": ADMIN_ONLY},
    "labeling:training_set_score": {"POST": ADMIN_ONLY},
    "labeling:finetune_start": {"POST": ADMIN_ONLY},
    "labeling:finetune_cancel": {"POST": ADMIN_ONLY},
    "labeling:finetune_resume": {"POST": ADMIN_ONLY},
    "labeling:finetune_score_pool": {"POST": ADMIN_ONLY},
    # Audit reports are a judge's P on gold pairs (blind first); their pages list the audits too.
    "labeling:judge_robustness": {"GET": READER},
    "labeling:audit_start": {"POST": ADMIN_ONLY},
    "labeling:audit_detail": {"GET": READER},
    "labeling:audit_cancel": {"POST": ADMIN_ONLY},
    "labeling:run_robustness": {"GET": READER},
    "api:token": {"POST": PUBLIC},
    "api:schema": {"GET": LOGGED_IN},
    "api:project-list": {"GET": LOGGED_IN, "POST": STAFF},
    "api:project-detail": {"GET": MEMBER},
    "api:query-list": {"GET": MEMBER},
    "api:passage-list": {"GET": MEMBER},
    "api:pair-list": {"GET": MEMBER},
    "api:queue-next": {"GET": ANNOTATOR},
    "api:queue-skip": {"POST": ANNOTATOR},
    "api:label-list": {"GET": MEMBER, "POST": ANNOTATOR},
    "api:label-undo": {"POST": ANNOTATOR},
    "api:validation": {"GET": READER},
    "api:validation-reannotation": {"GET": READER},
    "api:completeness": {"GET": READER},
    "api:round-list": {"GET": READER, "POST": ADMIN_ONLY},
    "api:release-list": {"GET": READER, "POST": ADMIN_ONLY},
    "api:release-export": {"GET": READER},
    "api:release-diff": {"GET": READER},
    "labeling:rounds": {"GET": READER},
    "labeling:releases": {"GET": READER},
    "labeling:release_create": {"POST": ADMIN_ONLY},
    "labeling:release_export": {"GET": READER},
    "labeling:round_start": {"POST": ADMIN_ONLY},
    # A replay reads the truth: experts and viewers never see one (blind first).
    "labeling:replay": {"GET": ADMIN_ONLY, "POST": ADMIN_ONLY},
    "labeling:replay_detail": {"GET": ADMIN_ONLY},
    "labeling:replay_cancel": {"POST": ADMIN_ONLY},
    "labeling:replay_delete": {"POST": ADMIN_ONLY},
    "api:qrels": {"GET": READER},
    "api:judge-list": {"GET": MEMBER, "POST": ADMIN_ONLY},
    "api:job-list": {"GET": MEMBER, "POST": ADMIN_ONLY},
    "api:job-detail": {"GET": MEMBER},
    "api:job-priority": {"POST": ADMIN_ONLY},
    "api:definition-list": {"GET": MEMBER, "POST": ADMIN_ONLY},
    "api:judge-metrics-by-definition": {"GET": READER},
    "api:systems-evaluation": {"GET": READER},
    "api:systems-reusability": {"GET": READER},
    "api:systems-pair-tau": {"GET": READER},
    "api:systems-lvhq": {"GET": READER},
    "labeling:query_generation_start": {"POST": ADMIN_ONLY},
    "labeling:query_generation_cancel": {"POST": ADMIN_ONLY},
    "api:query-generation-list": {"GET": MEMBER, "POST": ADMIN_ONLY},
    "api:query-generation-detail": {"GET": MEMBER},
    "api:query-generation-cancel": {"POST": ADMIN_ONLY},
    "api:bundle-list": {"GET": ADMIN_ONLY, "POST": ADMIN_ONLY},
    "api:bundle-detail": {"GET": ADMIN_ONLY},
    "api:bundle-cancel": {"POST": ADMIN_ONLY},
    "api:run-list": {"GET": MEMBER, "POST": ADMIN_ONLY},
    "api:run-detail": {"GET": MEMBER, "DELETE": ADMIN_ONLY},
    "api:retrieval-list": {"GET": MEMBER, "POST": ADMIN_ONLY},
    "api:pool": {"POST": ADMIN_ONLY},
    "api:training-set-list": {"GET": MEMBER, "POST": ADMIN_ONLY},
    "api:training-set-import": {"POST": ADMIN_ONLY},
    "api:training-set-detail": {"DELETE": ADMIN_ONLY},
    "api:training-set-score": {"POST": ADMIN_ONLY},
    # The answers are a judge's P of items experts have not labelled (blind first).
    "api:training-set-export": {"GET": READER},
    "api:finetune-list": {"GET": MEMBER, "POST": ADMIN_ONLY},
    "api:finetune-detail": {"GET": MEMBER},
    "api:finetune-cancel": {"POST": ADMIN_ONLY},
    "api:finetune-resume": {"POST": ADMIN_ONLY},
    "api:finetune-score-pool": {"POST": ADMIN_ONLY},
    "api:audit-list": {"GET": READER, "POST": ADMIN_ONLY},
    "api:audit-detail": {"GET": READER},
    "api:run-multicondition": {"GET": READER},
    # A replay reads the truth: experts never see one (blind first), nor do viewers.
    "api:replay-list": {"GET": ADMIN_ONLY, "POST": ADMIN_ONLY},
    "api:replay-detail": {"GET": ADMIN_ONLY, "DELETE": ADMIN_ONLY},
    "api:replay-cancel": {"POST": ADMIN_ONLY},
}

ROUTES = {route.name: route for route in all_routes()}
# A request that passed the role check may still find its empty data wrong (400) or redirect after the write.
PASSED = {"GET": {200, 204}, "POST": {200, 201, 202, 204, 302, 400}, "DELETE": {204}}


def _snapshot() -> dict[str, list[dict]]:
    """Every row the app owns, plus users and API tokens: a refused request must leave all of them as they were."""
    models = [*apps.get_app_config("labeling").get_models(), get_user_model(), Token]
    return {model._meta.label: list(model.objects.order_by("pk").values()) for model in models}


def test_every_url_is_in_the_table():
    missing = sorted(set(ROUTES) - set(MATRIX))
    stale = sorted(set(MATRIX) - set(ROUTES))
    assert not missing, f"URL names missing from the role matrix in tests/views/test_roles.py: {missing}"
    assert not stale, f"the role matrix names URLs that no longer exist: {stale}"


def test_the_table_lists_every_method_a_class_view_handles():
    unlisted = {
        name: sorted(route.class_methods - set(MATRIX.get(name, {})))
        for name, route in ROUTES.items()
        if route.class_methods is not None and route.class_methods - set(MATRIX.get(name, {}))
    }
    assert not unlisted, f"methods missing from the role matrix: {unlisted}"


def _post(client, route, url):
    """An empty body in the media type the endpoint reads: JSON for the API but its uploads, a form for pages."""
    view = getattr(route.pattern.callback, "cls", None)
    if view is not None and any(parser.media_type == "application/json" for parser in view().get_parsers()):
        return client.post(url, "{}", content_type="application/json")
    return client.post(url, {})


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize(("name", "method"), [(name, method) for name, methods in MATRIX.items() for method in methods])
def test_each_role_gets_what_the_table_says(client, name, method, role):
    if name not in ROUTES:
        pytest.fail(f"{name} is in the role matrix but not routed")
    route = ROUTES[name]
    world = build_world()
    if world.users[role] is not None:
        client.force_login(world.users[role])
    url = world.url(route)
    before = _snapshot()
    response = _post(client, route, url) if method == "POST" else getattr(client, method.lower())(url)

    if role in ALLOWED[MATRIX[name][method]]:
        # 409: allowed, but the seeded job's state refuses it (a finished fine-tuning job, no student yet).
        passed = PASSED[method] | ({409, 422} if route.is_api else set())
        assert response.status_code in passed, f"{role} {method} {url}: {response.status_code}"
        return
    if role == ANONYMOUS and not route.is_api:
        assert response.status_code == 302
        assert response["Location"].startswith(f"{reverse('login')}?next=")
    elif role == ANONYMOUS:
        # No credentials: 401 with the token challenge (a token client knows to log in), never a 403.
        assert response.status_code == 401 and response["WWW-Authenticate"] == "Token"
        assert response.json()["code"] == "not_authenticated"
    elif role == OUTSIDER and "slug" in route.pattern.pattern.converters:
        # A project the user is not a member of does not exist for them.
        assert response.status_code == 404
    else:
        assert response.status_code == 403
    assert _snapshot() == before, f"refused {role} {method} {url} changed the database"

"""Ids that no row can have (0, -1, 2**63, a 30-digit number) are a 404 or a 400 everywhere, never a 500 from an
overflowing query, and store nothing: every routed URL that takes an id (walked from the URL resolver, so a new
one is covered as soon as it is routed) and every API parameter, form field and link parameter that carries one
(checked against the OpenAPI schema, the templates and the forms, so a new one fails until it is listed here)."""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from django import forms
from django.apps import apps
from django.conf import settings
from django.urls import URLPattern, URLResolver, get_resolver, resolve, reverse
from django.urls.converters import IntConverter
from drf_spectacular.generators import SchemaGenerator

from labeling import forms as labeling_forms
from labeling.forms import QueueSettingsForm
from labeling.ids import ID_MAX, IdConverter
from labeling.models import Lease
from tests.factories import UserFactory
from tests.url_matrix import ADMIN, World, all_routes, build_world

pytestmark = pytest.mark.django_db

BAD_IDS = {"zero": 0, "negative": -1, "2**63": 2**63, "30 digits": 123456789012345678901234567890}
# A valid id that names no row: it passes the checks and must then be a clean "not found" from the view.
LARGEST = ID_MAX
# Stands for an id while a URL is reversed, then replaced by the value under test.
MARKER = 8765432187654321
USERS = ("project admin", "superuser")


def _user(world: World, who: str):
    if who == "superuser":
        return UserFactory(username="root", is_superuser=True, is_staff=True)
    return world.users[ADMIN]


def _snapshot() -> dict[str, list[dict]]:
    """The app's rows except leases: showing the workspace again after a refusal leases the caller an item, as
    every workspace page does; a skip is a lease too, so skipped leases are kept."""
    rows = {model._meta.label: list(model.objects.order_by("pk").values())
            for model in apps.get_app_config("labeling").get_models() if model is not Lease}
    rows["skips"] = list(Lease.objects.filter(skipped=True).order_by("pk").values())
    return rows


# --- Ids in the URL path -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class IdRoute:
    name: str  # namespaced URL name
    pattern: URLPattern
    ids: tuple[str, ...]  # the URL arguments that are database ids

    @property
    def ours(self) -> bool:
        return not self.name.startswith("admin:")


# The admin's object URLs take any text as the object id (`<path:object_id>`, `<id>`): Django's code, walked too.
ADMIN_ID_ARGUMENTS = {"object_id", "content_type_id", "id"}


def _walk(patterns: list, namespace: str) -> list[tuple[str, URLPattern]]:
    found = []
    for entry in patterns:
        if isinstance(entry, URLResolver):
            inner = ":".join(filter(None, (namespace, entry.namespace)))
            found += _walk(entry.url_patterns, inner)
        elif entry.name:
            found.append((f"{namespace}:{entry.name}" if namespace else entry.name, entry))
    return found


def _converters(pattern: URLPattern) -> dict:
    return getattr(pattern.pattern, "converters", {})


def id_routes() -> list[IdRoute]:
    routes = []
    for name, pattern in _walk(get_resolver().url_patterns, ""):
        converters = _converters(pattern)
        ids = tuple(arg for arg, converter in converters.items()
                    if isinstance(converter, (IdConverter, IntConverter))
                    or (name.startswith("admin:") and arg in ADMIN_ID_ARGUMENTS))
        if ids:
            routes.append(IdRoute(name, pattern, ids))
    return routes


ID_ROUTES = id_routes()


def test_every_id_in_a_url_is_a_database_id():
    # An <int:...> matches any digits, so an id past the bigint range used to reach the ORM and overflow.
    ints = [name for name, pattern in _walk(get_resolver().url_patterns, "")
            if any(isinstance(c, IntConverter) for c in _converters(pattern).values())]
    assert not ints, f"use <id:...> (labeling.ids.IdConverter), not <int:...>, in {ints}"
    # An external id is the importer's text; any other *_id is a row's.
    untyped = sorted(f"{route.name} {arg}" for route in all_routes()
                     for arg, converter in _converters(route.pattern).items()
                     if arg.endswith("_id") and "external" not in arg and not isinstance(converter, IdConverter))
    assert not untyped, f"use <id:...> for {untyped}"
    assert {route.name for route in ID_ROUTES if route.ours} >= {
        "labeling:adjudication_set", "labeling:member_remove", "labeling:job_cancel", "labeling:definition",
        "labeling:definition_draft", "labeling:definition_rescore", "api:job-detail",
    }


def _url_with(route: IdRoute, world: World, arg: str, value: object) -> str:
    """The route's URL with `value` as its id argument `arg` (any other id argument is 1)."""
    values = {"slug": world.project.slug, "judge": world.judge.name, "query_external_id": world.query.external_id}
    kwargs = {name: (MARKER if name == arg else 1) if name in route.ids else values[name]
              for name in _converters(route.pattern)}
    url = reverse(route.name, kwargs=kwargs)
    assert url.count(str(MARKER)) == 1, url
    return url.replace(str(MARKER), str(value))


@pytest.mark.parametrize("who", USERS)
@pytest.mark.parametrize("route", ID_ROUTES, ids=lambda route: route.name)
def test_an_id_out_of_range_in_the_path_is_not_found(client, route, who):
    world = build_world()
    client.force_login(_user(world, who))
    before = _snapshot()
    for arg in route.ids:
        for label, value in BAD_IDS.items():
            url = _url_with(route, world, arg, value)
            for method in ("get", "post"):
                status = getattr(client, method)(url).status_code
                if route.ours:
                    assert status == 404, f"{method.upper()} {url} ({arg} {label}): {status}"
                else:
                    assert status < 500, f"{method.upper()} {url} ({arg} {label}): {status}"
        url = _url_with(route, world, arg, LARGEST)
        for method in ("get", "post"):
            status = getattr(client, method)(url).status_code
            assert status in ({400, 404, 405} if route.ours else range(500)), f"{method.upper()} {url}: {status}"
    assert _snapshot() == before


# --- Ids in query strings, form fields and JSON bodies ------------------------------------------------------

@dataclass(frozen=True)
class IdParam:
    route: str
    method: str  # "GET": the id goes in the query string; "POST": in the form or (API) the JSON body
    name: str
    data: Callable[[World, object], dict]
    says: str = ""  # HTML: what the 400 page says (the API's answer names the parameter itself)


def _queue_settings(world: World, value: object) -> dict:
    initial = QueueSettingsForm(project=world.project).initial
    return {**{k: v for k, v in initial.items() if v not in (None, False)}, "queue_judge": value}


ID_PARAMS = [
    IdParam("api:label-list", "GET", "pair", lambda w, v: {"pair": v}),
    IdParam("api:label-list", "POST", "pair_id", lambda w, v: {"pair_id": v, "grade": 1}),
    IdParam("api:label-list", "POST", "definition_id",
            lambda w, v: {"pair_id": w.pair.id, "grade": 1, "definition_id": v}),
    IdParam("api:queue-skip", "POST", "pair_id", lambda w, v: {"pair_id": v}),
    IdParam("api:job-list", "POST", "pair_ids",
            lambda w, v: {"judge": w.judge.name, "scope": "selection", "pair_ids": [w.pair.id, v]}),
    IdParam("labeling:workspace_submit", "POST", "pair_id", lambda w, v: {"pair_id": v, "grade": 1},
            says="the item id must be a whole number from 1 to"),
    IdParam("labeling:workspace_submit", "POST", "definition_id",
            lambda w, v: {"pair_id": w.pair.id, "grade": 1, "definition_id": v},
            says="the definition id must be a whole number from 1 to"),
    IdParam("labeling:workspace_skip", "POST", "pair_id", lambda w, v: {"pair_id": v},
            says="the item id must be a whole number from 1 to"),
    IdParam("labeling:definition", "GET", "from", lambda w, v: {"from": v},
            says="from (the draft to review) must be a whole number from 1 to"),
    IdParam("labeling:definition", "POST", "based_on", lambda w, v: {"text": "New text.", "based_on": v},
            says="the draft being reviewed is not a version of this query"),
    IdParam("labeling:settings", "POST", "queue_judge", _queue_settings, says="Select a valid choice"),
    IdParam("labeling:judge_create", "POST", "copy_template_from",
            lambda w, v: {"name": "new-judge", "backend": "embedding", "model": "m", "copy_template_from": v},
            says="Select a valid choice"),
    IdParam("labeling:definition_draft", "POST", "judge", lambda w, v: {"judge": v},
            says="Choose one of the project&#x27;s judges"),
    IdParam("labeling:browse_query", "GET", "after", lambda w, v: {"after": v}, says="must be a whole number"),
    IdParam("labeling:browse_query", "GET", "before", lambda w, v: {"before": v}, says="must be a whole number"),
]
ROUTES = {route.name: route for route in all_routes()}


def _send(client, param: IdParam, world: World, value: object, *, htmx: bool = False):
    url = world.url(ROUTES[param.route])
    data = param.data(world, value)
    headers = {"HX-Request": "true"} if htmx else {}
    if param.method == "GET":
        return client.get(url, data, headers=headers)
    if param.route.startswith("api:"):
        return client.post(url, json.dumps(data), content_type="application/json")
    return client.post(url, data, headers=headers)


@pytest.mark.parametrize("who", USERS)
@pytest.mark.parametrize("param", ID_PARAMS, ids=lambda p: f"{p.route} {p.method} {p.name}")
def test_an_id_out_of_range_in_a_parameter_is_a_bad_request(client, param, who):
    world = build_world()
    client.force_login(_user(world, who))
    is_api = param.route.startswith("api:")
    before = _snapshot()
    for label, value in BAD_IDS.items():
        # Pages post through htmx or as plain forms; a link's query string is followed without htmx.
        for htmx in (False, True) if param.method == "POST" and not is_api else (False,):
            response = _send(client, param, world, value, htmx=htmx)
            where = f"{param.method} {param.route} {param.name}={label}{' (htmx)' if htmx else ''}"
            assert response.status_code == 400, f"{where}: {response.status_code}"
            if is_api:
                errors = response.json()["errors"]  # the API's error body names the field (dotted in a list)
                assert any(field.split(".")[0] == param.name for field in errors), f"{where}: {response.json()}"
            else:
                assert param.says in response.content.decode(), where
    assert _snapshot() == before
    # The largest id passes the check and names no row: refused or not found, but never a 500.
    assert _send(client, param, world, LARGEST).status_code < 500


def test_the_workspace_and_the_labels_api_refuse_the_reported_pair_id(client):
    world = build_world()
    client.force_login(world.users[ADMIN])
    huge = "99999999999999999999999"
    before = _snapshot()
    listed = client.get(reverse("api:label-list", args=[world.project.slug]), {"pair": huge})
    assert listed.status_code == 400 and "pair" in listed.json()["errors"]
    submit = reverse("labeling:workspace_submit", args=[world.project.slug])
    for headers in ({}, {"HX-Request": "true"}):
        response = client.post(submit, {"pair_id": huge, "grade": "2", "client_key": "k"}, headers=headers)
        assert response.status_code == 400
        assert f"the item id must be a whole number from 1 to {ID_MAX}, got &#x27;{huge}&#x27;" in (
            response.content.decode())
    assert _snapshot() == before


# --- Every parameter that carries an id is in ID_PARAMS ----------------------------------------------------

ID_NAME = re.compile(r"^(ids?|pair|query|passage|judge|job|user|label|definition)s?$|_ids?$")
LISTED = {(p.route, p.method, p.name) for p in ID_PARAMS}


def _integer(schema: dict) -> bool:
    return schema.get("type") == "integer" or schema.get("items", {}).get("type") == "integer"


def test_every_id_the_api_takes_is_checked_here_and_is_a_database_id():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema["components"]["schemas"]
    found = {}
    for path, operations in schema["paths"].items():
        name = resolve(re.sub(r"{\w+}", "1", path)).view_name
        for method, operation in operations.items():
            fields = {p["name"]: p["schema"] for p in operation.get("parameters", []) if p["in"] == "query"}
            body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            if body:
                fields |= components[body["$ref"].rsplit("/", 1)[1]].get("properties", {})
            for field, field_schema in fields.items():
                if _integer(field_schema) and ID_NAME.search(field):
                    found[(name, method.upper(), field)] = field_schema.get("items", field_schema)
    assert found, "the schema walk found no id parameter at all"
    assert not set(found) - LISTED, f"API ids missing from ID_PARAMS: {sorted(set(found) - LISTED)}"
    unbounded = sorted(key for key, s in found.items() if (s.get("minimum"), s.get("maximum")) != (1, ID_MAX))
    assert not unbounded, f"use labeling.api.fields.IdField for {unbounded}"
    job_detail = schema["paths"]["/api/projects/{slug}/jobs/{job_id}/"]["get"]["parameters"]
    assert next(p for p in job_detail if p["name"] == "job_id")["schema"]["type"] == "integer"


def test_every_id_a_page_sends_is_checked_here():
    templates = "\n".join(path.read_text() for path in Path(settings.BASE_DIR, "templates").rglob("*.html"))
    value_is_an_id = r"\{\{\s*[\w.]*\.(?:id|pk)\b"
    sent = set(re.findall(rf'name="(\w+)"\s+value="{value_is_an_id}', templates))
    sent |= set(re.findall(rf"[?&](\w+)={value_is_an_id}", templates))
    sent |= {name for form in vars(labeling_forms).values()
             if isinstance(form, type) and issubclass(form, forms.Form)
             for name, field in form.base_fields.items() if isinstance(field, forms.ModelChoiceField)}
    assert sent >= {"pair_id", "definition_id", "based_on", "from", "queue_judge"}
    html_params = {p.name for p in ID_PARAMS if not p.route.startswith("api:")}
    assert not sent - html_params, f"ids the pages send missing from ID_PARAMS: {sorted(sent - html_params)}"

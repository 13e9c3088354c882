"""A client generated from the published schema (openapi-python-client, as a researcher would make one) works
against the live app: it lists projects, claims an item, submits a label, downloads qrels, and reads the API's
errors as the schema's Error model."""
from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from rest_framework.authtoken.models import Token

from labeling.models import Label, Pair
from tests.url_matrix import ADMIN, build_world

PACKAGE = "annotator_client"


@pytest.fixture
def generated_client(tmp_path, live_server):
    """Generate the client package from /api/schema/ into tmp_path and import it (removed from sys.modules after)."""

    def generate(token: str):
        schema = httpx.get(f"{live_server.url}/api/schema/?format=json", headers={"Authorization": f"Token {token}"})
        assert schema.status_code == 200, schema.text
        (tmp_path / "schema.json").write_text(schema.text)
        # No post hooks: the generator would run ruff on the code it wrote.
        (tmp_path / "config.json").write_text(json.dumps(
            {"post_hooks": [], "project_name_override": "annotator-client", "package_name_override": PACKAGE}))
        generator = Path(sys.executable).with_name("openapi-python-client")
        done = subprocess.run([str(generator), "generate", "--path", str(tmp_path / "schema.json"),
                               "--config", str(tmp_path / "config.json"), "--output-path", str(tmp_path / "client")],
                              check=False, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        sys.path.insert(0, str(tmp_path / "client"))
        return importlib.import_module(PACKAGE)

    yield generate
    if str(tmp_path / "client") in sys.path:
        sys.path.remove(str(tmp_path / "client"))
    for name in [name for name in sys.modules if name == PACKAGE or name.startswith(f"{PACKAGE}.")]:
        del sys.modules[name]


@pytest.mark.django_db(transaction=True)
def test_a_generated_client_lists_claims_labels_and_downloads_qrels(live_server, generated_client, private_broker):
    world = build_world()
    admin = world.users[ADMIN]
    token = Token.objects.create(user=admin).key
    package = generated_client(token)
    api = importlib.import_module(f"{PACKAGE}.api.projects")
    models = importlib.import_module(f"{PACKAGE}.models")
    client = package.AuthenticatedClient(base_url=live_server.url, token=token, prefix="Token",
                                         raise_on_unexpected_status=True)
    slug = world.project.slug

    listed = importlib.import_module(f"{api.__name__}.projects_list").sync(client=client)
    assert [project.slug for project in listed.results] == [slug]
    assert listed.results[0].counts.pairs == 3

    item = importlib.import_module(f"{api.__name__}.projects_queue_next_retrieve").sync(slug, client=client)
    assert isinstance(item, models.Item)
    # The item's parts are typed models, not dicts: what the expert reads, with its definition's id to cite.
    assert isinstance(item.query, models.ItemQuery) and item.query.text == world.query.text
    assert item.passage.external_id == Pair.objects.get(id=item.pair_id).passage.external_id
    assert item.definition.text == world.query.definitions.get().text

    label = importlib.import_module(f"{api.__name__}.projects_labels_create").sync(
        slug, client=client, body=models.LabelInRequest(pair_id=item.pair_id, grade=2, note="from the client"))
    assert isinstance(label, models.Label) and (label.pair_id, label.grade, label.annotator) == (
        item.pair_id, 2, admin.username)
    assert Label.objects.get(id=label.id).note == "from the client"

    qrels = importlib.import_module(f"{api.__name__}.projects_qrels_retrieve").sync_detailed(
        slug, client=client, format_=models.ProjectsQrelsRetrieveFormat.TREC)
    assert qrels.status_code == 200 and qrels.headers["content-type"].startswith("text/plain")
    lines = [line.split() for line in qrels.content.decode().splitlines()]
    # The expert's grade 2 on the first pair is its gold grade: `qid 0 docid grade`, as trec_eval reads it.
    assert [world.query.external_id, "0", world.pair.passage.external_id, "2"] in lines

    # An error is the schema's Error model: a pair not in the project is a 404 naming it.
    missing = importlib.import_module(f"{api.__name__}.projects_labels_create").sync_detailed(
        slug, client=package.AuthenticatedClient(base_url=live_server.url, token=token, prefix="Token"),
        body=models.LabelInRequest(pair_id=2**63 - 1, grade=2))
    assert missing.status_code == 404 and isinstance(missing.parsed, models.Error)
    assert missing.parsed.code == "not_found" and "is not in project" in missing.parsed.message

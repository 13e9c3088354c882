"""A real Celery worker picks up the validation refresh that an import queues once it commits."""
import time

import pytest
from celery.contrib.testing.worker import start_worker

from annotator.celery import app
from labeling.models import Project, ValidationResult
from labeling.services.bundle_import import bundle_import
from tests.services.test_validation import synthetic_bundle

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker(private_broker):
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
        yield


def test_import_queues_a_validation_refresh_that_a_worker_computes(tmp_path, worker):
    bundle_import(path=synthetic_bundle(tmp_path / "b", queries=3, per_query=20), project_slug="w")
    project = Project.objects.get(slug="w")
    deadline = time.monotonic() + 90
    result = None
    while time.monotonic() < deadline:
        result = ValidationResult.objects.filter(project=project, computed_at__isnull=False).first()
        if result is not None:
            break
        time.sleep(0.3)
    assert result is not None, "no worker computed the report within 90 s"
    assert result.data["counts"]["gold"] == 60 and not result.is_stale
    assert [judge["name"] for judge in result.data["judges"]] == ["squashed"]

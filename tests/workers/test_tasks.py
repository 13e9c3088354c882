"""A real Celery worker picks up the validation refresh that an import queues once it commits."""
import pytest

from labeling.models import Project, ValidationResult
from labeling.services.bundle_import import bundle_import
from tests.polling import wait_for
from tests.services.test_validation import synthetic_bundle

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_import_queues_a_validation_refresh_that_a_worker_computes(tmp_path, worker):
    bundle_import(path=synthetic_bundle(tmp_path / "b", queries=3, per_query=20), project_slug="w")
    project = Project.objects.get(slug="w")
    computed = ValidationResult.objects.filter(project=project, computed_at__isnull=False)
    wait_for(computed.exists, "no worker computed the report", seconds=90, every=0.3)
    result = computed.get()
    assert result.data["counts"]["gold"] == 60 and not result.is_stale
    assert [judge["name"] for judge in result.data["judges"]] == ["squashed"]

"""Django's debug 500 page (DEBUG=1) and the error reports built like it do not show connection strings: under
runserver request.META is the process environment, with DATABASE_URL and CELERY_BROKER_URL and their passwords."""
from __future__ import annotations

import sys
import warnings

import pytest
from django.conf import settings
from django.test import RequestFactory, override_settings
from django.views.debug import technical_500_response

DATABASE_URL = "postgres://annotator:secretpw@db.internal:5432/annotator"
BROKER_URL = "redis://:brokerpw@redis.internal:6379/0"
SECRETS = ("secretpw", "brokerpw", "dbsettingpw")


def _debug_page(accept: str) -> str:
    request = RequestFactory().get("/projects/", HTTP_ACCEPT=accept)
    request.META.update(DATABASE_URL=DATABASE_URL, CELERY_BROKER_URL=BROKER_URL, SENTRY_DSN=BROKER_URL,
                        HOME="/home/annotator")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        return technical_500_response(request, *sys.exc_info()).content.decode()


@pytest.mark.parametrize("accept", ["text/html", "application/json"])  # the HTML page, and the plain-text one
def test_the_debug_page_masks_connection_strings_in_the_environment_and_the_settings(accept):
    database = {**settings.DATABASES["default"], "PASSWORD": "dbsettingpw", "NAME": "annotator"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Overriding setting DATABASES can lead to unexpected behavior": no query runs
        with override_settings(DATABASES={"default": database}, CELERY_BROKER_URL=BROKER_URL):
            page = _debug_page(accept)
    assert "boom" in page and "DATABASE_URL" in page and "CELERY_BROKER_URL" in page
    leaked = [secret for secret in SECRETS if secret in page]
    assert not leaked, f"the debug page shows {leaked}"
    assert "db.internal" not in page and "redis.internal" not in page
    # What is not a secret is still there to debug with.
    assert "/home/annotator" in page and "TIME_ZONE" in page

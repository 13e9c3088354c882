"""What Django's debug pages and error reports may show (settings.DEFAULT_EXCEPTION_REPORTER_FILTER)."""
from __future__ import annotations

import re

from django.views.debug import SafeExceptionReporterFilter


class ConnectionStringFilter(SafeExceptionReporterFilter):
    """Also hides connection strings. Under runserver request.META holds the process environment, so the debug
    page listed DATABASE_URL and CELERY_BROKER_URL with their passwords; settings like CELERY_BROKER_URL and
    DATABASES carry them too. Names with URL, DSN, DATABASE or BROKER are masked on top of Django's list."""

    hidden_settings = re.compile(
        "API|AUTH|TOKEN|KEY|SECRET|PASS|SIGNATURE|HTTP_COOKIE|URL|DSN|DATABASE|BROKER", flags=re.IGNORECASE
    )

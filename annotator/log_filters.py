"""Logging filters named in settings.LOGGING."""
from __future__ import annotations

import logging

from django.core.exceptions import PermissionDenied


class ExpectedForbidden(logging.Filter):
    """Keeps django.request's "Forbidden (Permission denied): <path>" line and drops its traceback: a role check
    refusing a member is the app working, and its traceback only buries real errors in the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], PermissionDenied):
            record.exc_info = None
            record.exc_text = None
        return True

"""The audits' error, in a module of its own: the generic audit service and each kind's module raise it."""
from __future__ import annotations

from labeling.exceptions import DomainError


class AuditError(DomainError):
    """An audit that cannot be started or priced as asked: the message says what is wrong or missing."""

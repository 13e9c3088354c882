"""The audits' error, in a module of its own: the generic audit service and each kind's module raise it."""
from __future__ import annotations

from labeling.exceptions import Conflict, DomainError


class AuditError(DomainError):
    """An audit that cannot be started or priced as asked: the message says what is wrong or missing."""


class AuditConflict(AuditError, Conflict):
    """The request is well formed but the project's state refuses it (409 in the API): a judge with no model of its
    own to ask, a project with no gold pairs or no multi-condition items to build the probes from."""

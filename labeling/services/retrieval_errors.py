"""The retrieval jobs' errors, in a module of their own: the job service and its re-ranking stages raise them."""
from __future__ import annotations

from labeling.exceptions import Conflict, DomainError


class RetrievalError(DomainError):
    """A retrieval job that cannot be asked for as given, or whose own configuration cannot run (its reason)."""


class RetrievalConflict(RetrievalError, Conflict):
    """A run name the project has already (409 in the API)."""

"""The domain's errors. Every error the app's models, selectors and services raise derives from DomainError; the
interfaces turn them into answers at the edge: the access errors below into 404 and 403 by one view decorator
(labeling/views/access.py) and one DRF exception handler (labeling/api/exceptions.py), the others where they are
caught (a form error, a 400, a CommandError)."""
from __future__ import annotations


class DomainError(ValueError):
    """Something the domain refuses or cannot find, with a message for the person who asked. A ValueError, as each
    error it replaced was: a value the caller gave that the domain does not accept."""


class NotFound(DomainError):
    """The caller named a row that does not exist or that they may not see: the two are one answer (404), so a
    project's existence does not leak to a non-member."""


class Forbidden(DomainError):
    """The caller may see the project, but their role there does not allow what they asked (403)."""


class TooLarge(DomainError):
    """What the caller sent is larger than the server accepts (413), refused before it is read."""


class FieldsRefused(DomainError):
    """The request is well formed, but what these fields hold cannot be processed (422 in the API, with `errors`
    naming each field): a file that is not a bundle, a run file with bad lines. `errors`: {field: [messages]}, with
    the summary under "detail"."""

    def __init__(self, errors: dict[str, object]) -> None:
        super().__init__(str(errors.get("detail") or errors))
        self.errors = errors


class Conflict(DomainError):
    """What the caller asked is well formed, but the project's current state refuses it (409): a finished job
    resumed, a name already taken, a judge with no model asked to score."""

"""What a database id is: the one rule every id from outside (URL path, query string, form, JSON) is checked
against before it reaches the ORM, so that an id no row can have is a 404 or a 400 instead of an overflow."""
from __future__ import annotations

from labeling.exceptions import DomainError

# Primary keys are bigints (BigAutoField) on PostgreSQL and SQLite: a larger number overflows in the driver.
ID_MIN, ID_MAX = 1, 2**63 - 1
# Digits with no leading zero and at most as many as ID_MAX has; the URL converter still checks ID_MAX itself.
ID_PATTERN = "[1-9][0-9]{0,18}"
ID_RULE = f"a whole number from {ID_MIN} to {ID_MAX}"


class IdError(DomainError):
    """A value from outside is not a database id; the message names the parameter and says what it must be."""


def parse_id(value: object, *, name: str) -> int:
    """`value` (a string from a form or query string, or an int) as a database id; IdError naming `name` when
    it is not a whole number from 1 to 2**63 - 1."""
    try:
        number = int(str(value).strip())
    except ValueError:
        number = None
    if number is None or not ID_MIN <= number <= ID_MAX:
        shown = str(value)
        shown = shown if len(shown) <= 40 else f"{shown[:40]}..."
        raise IdError(f"{name} must be {ID_RULE}, got {shown!r}")
    return number


class IdConverter:
    """The `<id:...>` path converter: a number that is not a database id does not match, so its URL is a 404."""

    regex = ID_PATTERN

    def to_python(self, value: str) -> int:
        number = int(value)
        if number > ID_MAX:
            raise ValueError(f"{value} is past the largest id")  # Django turns it into "no match": 404
        return number

    def to_url(self, value: int) -> str:
        return str(value)

"""Serializer fields the API shares."""
from __future__ import annotations

from rest_framework import serializers

from labeling.ids import ID_MAX, ID_MIN, ID_RULE


class IdField(serializers.IntegerField):
    """A database id (labeling.ids): anything else is a 400 naming the field, never a query that overflows."""

    default_error_messages = {
        "invalid": f"Must be {ID_RULE}.",
        "min_value": f"Must be {ID_RULE}.",
        "max_value": f"Must be {ID_RULE}.",
        "max_string_length": f"Must be {ID_RULE}.",
    }

    def __init__(self, **kwargs) -> None:
        super().__init__(min_value=ID_MIN, max_value=ID_MAX, **kwargs)

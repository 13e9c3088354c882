"""Serializer fields the API shares."""
from __future__ import annotations

from django.http import QueryDict
from rest_framework import serializers
from rest_framework.exceptions import ValidationError

from labeling.ids import ID_MAX, ID_MIN, ID_RULE


def _from_json(field: serializers.Field) -> bool:
    """Whether the field reads a JSON body (typed) rather than a query string or a form (all strings)."""
    root = field.root
    return not isinstance(getattr(root, "initial_data", None), QueryDict)


class StrictCharField(serializers.CharField):
    """A string in JSON is a JSON string: 0 is refused, not read as "0" (the schema says string)."""

    def to_internal_value(self, data):
        if _from_json(self) and not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    """An integer in JSON is a JSON integer: "5", 5.0 and true are refused (DRF would read them as 5 or 1)."""

    def to_internal_value(self, data):
        if _from_json(self) and (isinstance(data, bool) or not isinstance(data, int)):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    """A number in JSON is a JSON number: "0.5" and true are refused."""

    def to_internal_value(self, data):
        if _from_json(self) and (isinstance(data, bool) or not isinstance(data, (int, float))):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """A boolean in JSON is true or false: 1, "yes" and "true" are refused."""

    def to_internal_value(self, data):
        if _from_json(self) and not isinstance(data, bool):
            self.fail("invalid")
        return super().to_internal_value(data)


def query_flag(params: QueryDict, name: str) -> bool:
    """A boolean query parameter as OpenAPI writes one: `true` or `false`, given once; absent is false."""
    values = params.getlist(name)
    if not values:
        return False
    if len(values) > 1 or values[0] not in ("true", "false"):
        raise ValidationError({name: [f"must be true or false, got {', '.join(map(repr, values))}"]})
    return values[0] == "true"


class IdField(StrictIntegerField):
    """A database id (labeling.ids): anything else is a 400 naming the field, never a query that overflows."""

    default_error_messages = {
        "invalid": f"Must be {ID_RULE}.",
        "min_value": f"Must be {ID_RULE}.",
        "max_value": f"Must be {ID_RULE}.",
        "max_string_length": f"Must be {ID_RULE}.",
    }

    def __init__(self, **kwargs) -> None:
        super().__init__(min_value=ID_MIN, max_value=ID_MAX, **kwargs)

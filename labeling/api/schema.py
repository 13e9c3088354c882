"""What the OpenAPI document promises beyond what drf-spectacular reads off the views (SPECTACULAR_SETTINGS):

- `AnnotatorAutoSchema` states what DRF's fields enforce: a string field refuses NUL characters (DRF's
  ProhibitNullCharactersValidator) and, unless blank is allowed, must hold a character other than whitespace (DRF
  trims it); a list that may not be empty has minItems 1, a file that may not be empty minLength 1; a serializer
  with `refuses_unknown_fields` allows no other property. A path or query parameter refuses NUL too
  (labeling.api.middleware).
- `document_errors` (a postprocessing hook) adds to every operation the error answers it can give, each with the
  one error body (`Error`, labeling.api.exceptions): 401 with `WWW-Authenticate: Token` and 403 where login is
  required, 404 where the path names a row (or a cursor is read), 400 and 422 where anything is read from the
  request, 415 where a body is, 409 on every write. Codes an operation declares itself (413, 429...) get the same
  body. What each status means: labeling/api/exceptions.py.
"""
from __future__ import annotations

from django.core.validators import RegexValidator
from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers

NO_NUL = r"^[^\x00]*$"
NOT_BLANK = r"^[^\x00]*[^\x00\s][^\x00]*$"  # what is left after DRF trims whitespace is not empty

ERROR_SCHEMA = {
    "type": "object",
    "description": "Every error the API answers (labeling/api/exceptions.py).",
    "properties": {
        "code": {
            "type": "string",
            "description": "A stable word: invalid, parse_error, not_authenticated, authentication_failed, "
                           "permission_denied, not_found, method_not_allowed, not_acceptable, "
                           "unsupported_media_type, conflict, unprocessable, too_large, throttled, server_error.",
            "example": "not_found",
        },
        "message": {"type": "string", "description": "What went wrong, for a person.",
                    "example": "project 'climate' has no run 7"},
        "errors": {
            "type": "object",
            "description": "Each refused field's messages; nested fields are dotted (runs.0). Empty if none.",
            "additionalProperties": {"type": "array", "items": {"type": "string"}},
            "example": {"pair_id": ["Must be a whole number from 1 to 9223372036854775807."]},
        },
    },
    "required": ["code", "message", "errors"],
}

ERROR_DESCRIPTIONS = {
    400: "The request is malformed: a parameter or field is refused (see `errors`).",
    401: "No credentials, or a token or session that is not valid.",
    403: "Logged in, but your role in this project does not allow it.",
    404: "No such project for you (or not a member), or no such row in it; or an invalid cursor.",
    409: "Well formed, but the project's state refuses it (a name taken, a finished job).",
    422: "Well formed, but what it holds cannot be processed (a file's content, fields that do not go together).",
    413: "Larger than the server accepts; refused before it was read.",
    415: "The body is not in a media type this operation reads.",
    429: "Too many failed logins: wait (Retry-After says how long).",
}

_METHODS = ("get", "put", "post", "patch", "delete")


class AnnotatorAutoSchema(AutoSchema):
    def _map_serializer(self, serializer, direction, bypass_extensions=False):
        schema = super()._map_serializer(serializer, direction, bypass_extensions)
        if direction == "request" and getattr(serializer, "refuses_unknown_fields", False):
            schema["additionalProperties"] = False  # the serializer names each field it does not know
        return schema

    def _map_serializer_field(self, field, direction, bypass_extensions=False):
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if direction == "request" and isinstance(field, serializers.ListField) and not field.allow_empty:
            schema.setdefault("minItems", 1)
        if direction == "request" and isinstance(field, serializers.FileField) and not field.allow_empty_file:
            schema.setdefault("minLength", 1)  # DRF refuses an empty file
        if (
            direction == "request"
            and isinstance(field, serializers.CharField)
            and not isinstance(field, serializers.ChoiceField)
            and schema.get("type") == "string"
            and "pattern" not in schema
            and "enum" not in schema
            and "format" not in schema
            # A field with its own pattern (a RegexField): drf-spectacular writes that one after this hook.
            and not any(isinstance(validator, RegexValidator) for validator in field.validators)
        ):
            blank_refused = not field.allow_blank and getattr(field, "trim_whitespace", False)
            schema["pattern"] = NOT_BLANK if blank_refused else NO_NUL
            if not field.allow_blank:
                schema.setdefault("minLength", 1)
        return schema


def _error_response(status: int, existing: dict | None) -> dict:
    response = {
        "description": (existing or {}).get("description") or ERROR_DESCRIPTIONS.get(status, "An error."),
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }
    if status == 401:
        response["headers"] = {"WWW-Authenticate": {
            "description": "`Token`: send `Authorization: Token <key>` (POST /api/token/ gives it)",
            "schema": {"type": "string"}}}
    if status == 429:
        response["headers"] = {"Retry-After": {"description": "seconds to wait",
                                                "schema": {"type": "integer", "minimum": 0}}}
    return response


def _parameters_refuse_nul(operation: dict) -> None:
    for parameter in operation.get("parameters", []):
        schema = parameter.get("schema", {})
        if parameter.get("in") in ("path", "query") and schema.get("type") == "string" and not (
            {"pattern", "enum", "format"} & schema.keys()
        ):
            schema["pattern"] = NO_NUL


def document_errors(result: dict, generator, request, public) -> dict:
    components = result.setdefault("components", {}).setdefault("schemas", {})
    components["Error"] = ERROR_SCHEMA
    for path_item in result.get("paths", {}).values():
        for method in _METHODS:
            operation = path_item.get(method)
            if operation is None:
                continue
            _parameters_refuse_nul(operation)
            parameters = operation.get("parameters", [])
            statuses: set[int] = set()
            if operation.get("security") != [{}] and operation.get("security") != []:
                statuses |= {401, 403}
            if any(p.get("in") == "path" for p in parameters) or any(p.get("name") == "cursor" for p in parameters):
                statuses.add(404)
            if parameters or "requestBody" in operation:
                statuses.add(400)
            if "requestBody" in operation:
                statuses.add(415)
            if 400 in statuses:
                statuses.add(422)  # a domain refusal of well-formed content (labeling.api.exceptions)
            if method != "get":
                statuses.add(409)
            responses = operation.setdefault("responses", {})
            declared = {int(code) for code in responses if str(code).isdigit() and int(code) >= 400}
            for status in sorted(statuses | declared):
                responses[str(status)] = _error_response(status, responses.get(str(status)))
    return result

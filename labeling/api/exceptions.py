"""The API's one error body, made by one exception handler (REST_FRAMEWORK["EXCEPTION_HANDLER"]) and, for what never
reaches a DRF view, by the API's last route (a path that resolves to nothing) and the project's 500 handler:

    {"code": "not_found", "message": "project 'x' has no run 7", "errors": {}}

`code` is a stable machine word, `message` a sentence for the person who asked and `errors` each refused field's
messages ({"pair_id": ["Must be a whole number from 1 to 9223372036854775807."]}; nested fields as "runs.0").
The schema documents the shape once as the `Error` component (labeling.api.schema).

The statuses keep one meaning each, so a client can act on them:
- 400 `invalid`: the request breaks its schema (a type, a bound, a required field, an enum); `errors` says where.
- 404 `not_found`: the path, or a name in the request, names nothing the caller may see (a judge, a run...).
- 409 `conflict`: well formed, but the project's state refuses it (a finished job resumed, a name taken).
- 422 `unprocessable`: well formed, but what it holds cannot be processed (a file that is not a bundle, a run file
  with bad lines, fields that do not go together): any other DomainError.
- 413 `too_large` (TooLarge), 403 `permission_denied` (Forbidden), 401 with `WWW-Authenticate: Token`."""
from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.views import SpectacularAPIView
from rest_framework import exceptions
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from labeling.exceptions import Conflict, DomainError, FieldsRefused, Forbidden, NotFound, TooLarge

API_PREFIX = "/api/"


def api_error(status_code: int, code: str, detail: object, *, wait: int | None = None) -> exceptions.APIException:
    """An answer DRF has no class for (409, 413, 422, 429 with Retry-After from `wait`): `detail` is a message, or
    {field: [messages]} as a ValidationError's."""
    error = exceptions.APIException(detail, code)
    error.status_code, error.default_code = status_code, code
    if isinstance(detail, (dict, list)):
        error.detail = exceptions._get_error_details(detail, code)
    if wait is not None:
        error.wait = wait
    return error


def _as_api_exception(exc: Exception) -> Exception:
    if isinstance(exc, NotFound):
        return exceptions.NotFound(str(exc))
    if isinstance(exc, Forbidden):
        return exceptions.PermissionDenied(str(exc))
    if isinstance(exc, TooLarge):
        return api_error(413, "too_large", str(exc))
    if isinstance(exc, Conflict):
        return api_error(409, "conflict", str(exc))
    if isinstance(exc, FieldsRefused):
        return api_error(422, "unprocessable", exc.errors)
    if isinstance(exc, DomainError):
        return api_error(422, "unprocessable", str(exc))
    return exc


def _field_errors(detail: object, prefix: str = "") -> dict[str, list[str]]:
    """{field: [messages]} of a ValidationError's detail, nested dicts and lists flattened to dotted names."""
    if isinstance(detail, dict):
        out: dict[str, list[str]] = {}
        for key, value in detail.items():
            out.update(_field_errors(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(detail, list) and any(isinstance(item, (dict, list)) for item in detail):
        out = {}
        for index, value in enumerate(detail):
            if value:
                out.update(_field_errors(value, f"{prefix}.{index}" if prefix else str(index)))
        return out
    messages = [str(item) for item in detail] if isinstance(detail, list) else [str(detail)]
    return {prefix or "detail": messages}


def _validation_body(detail: object) -> tuple[str, dict[str, list[str]]]:
    errors = _field_errors(detail)
    general = errors.pop("detail", []) + errors.pop("non_field_errors", [])
    if general:
        message = " ".join(general)
    else:
        message = "; ".join(f"{field}: {' '.join(messages)}" for field, messages in errors.items()) or "Invalid input."
    return message, errors


def error_body(code: str, message: str, errors: dict[str, list[str]] | None = None) -> dict:
    return {"code": code, "message": message, "errors": errors or {}}


def exception_handler(exc: Exception, context: dict) -> Response | None:
    exc = _as_api_exception(exc)
    response = drf_exception_handler(exc, context)
    if response is None:
        return None  # a server error: the 500 handler answers
    if isinstance(exc.detail, (dict, list)):
        message, errors = _validation_body(exc.detail)
        response.data = error_body("invalid" if isinstance(exc, exceptions.ValidationError) else exc.default_code,
                                   message, errors)
    else:
        detail = getattr(exc, "detail", "")
        code = detail.code if isinstance(detail, exceptions.ErrorDetail) and detail.code else \
            getattr(exc, "default_code", "error")
        response.data = error_body(str(code), str(detail))
    return response


class SchemaView(SpectacularAPIView):
    """The OpenAPI document (YAML, or JSON with ?format=json); its errors in the API's JSON error body, as every
    other operation's, not in the YAML the document is negotiated to."""

    def handle_exception(self, exc: Exception) -> Response:
        response = super().handle_exception(exc)
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type
        return response


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX)


@csrf_exempt  # a POST to no endpoint is a 404, not a CSRF page
def unknown_path(request: HttpRequest, rest: str = "") -> HttpResponse:
    """The API's last route: a path under /api/ that matches no endpoint (an unknown path, an id out of range)
    answers the API's 404 body, with DEBUG on or off."""
    return JsonResponse(error_body("not_found", f"no API resource at {request.path}"), status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: the API's error body (nothing of the exception: it is logged), Django's page elsewhere."""
    if _is_api(request):
        return JsonResponse(error_body("server_error", "The server failed to answer this request; it is logged."),
                            status=500)
    return defaults.server_error(request)

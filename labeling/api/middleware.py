"""A NUL character in an API path or query string is refused with the API's 400 before any view reads it: no name or
value the API knows holds one, and PostgreSQL refuses it in a query (a 500 otherwise). The schema states it as a
pattern on every string parameter (labeling.api.schema)."""
from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse

from labeling.api.exceptions import API_PREFIX, error_body


def _nul_place(request: HttpRequest) -> str | None:
    if "\x00" in request.path:
        return "path"
    for name, values in request.GET.lists():
        if "\x00" in name or any("\x00" in value for value in values):
            return name.replace("\x00", "\\x00")
    return None


class RefuseNulMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith(API_PREFIX) and (place := _nul_place(request)) is not None:
            message = f"{place}: NUL characters are not allowed."
            return JsonResponse(error_body("invalid", message, {place: ["NUL characters are not allowed."]}),
                                status=400)
        return self.get_response(request)

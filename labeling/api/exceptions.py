"""The API's edge for domain errors (REST_FRAMEWORK["EXCEPTION_HANDLER"]): the domain's NotFound and Forbidden, from
the one access check or any lookup, answer 404 and 403 as DRF answers Http404 and PermissionDenied, TooLarge 413;
anything else is DRF's default handling."""
from __future__ import annotations

from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from labeling.exceptions import Forbidden, NotFound, TooLarge


def exception_handler(exc: Exception, context: dict) -> Response | None:
    if isinstance(exc, NotFound):
        exc = exceptions.NotFound(str(exc))
    elif isinstance(exc, Forbidden):
        exc = exceptions.PermissionDenied(str(exc))
    elif isinstance(exc, TooLarge):
        return Response({"detail": str(exc)}, status=413)
    return drf_exception_handler(exc, context)

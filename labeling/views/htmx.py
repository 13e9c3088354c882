"""What an htmx request asks for."""
from __future__ import annotations

from django.http import HttpRequest


def htmx_partial(request: HttpRequest) -> bool:
    """Whether to answer with the page's named partial only: an htmx request, except a history restore (htmx asks
    for the whole page when the page is not in its history cache)."""
    return bool(request.htmx) and not request.htmx.history_restore_request

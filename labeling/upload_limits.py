"""The one size check of every upload (run files, bundle archives): made from the request's Content-Length before
anything reads the body, because Django would otherwise stream a file of any size to a temporary file first."""
from __future__ import annotations

MIB = 1024 * 1024


def oversize_refusal(content_length: str | None, *, limit: int, what: str, setting: str, instead: str) -> str | None:
    """Why a body of `content_length` bytes is too large for `limit` (named by its `setting`), with what to do
    `instead`; None when it fits or the header is absent or malformed (Django then reads no body at all)."""
    try:
        size = int(content_length or 0)
    except ValueError:
        return None
    if size <= limit:
        return None
    return (f"The upload is {size / MIB:,.1f} MiB; this server takes {what} of up to {limit / MIB:,.0f} MiB "
            f"({setting}). {instead}")

"""The one size check of every upload (run files, bundle archives): made from the request's Content-Length before
anything reads the body, because Django would otherwise stream a file of any size to a temporary file first; and
the one expansion limit of every gzip file an upload holds."""
from __future__ import annotations

from django.conf import settings

from labeling.decompress import ExpansionLimits

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


def upload_expansion_limits() -> ExpansionLimits:
    """How far a gzip file that came in an upload may expand: a run file, alone or in a bundle, and a tar.gz bundle
    (BUNDLE_EXPAND_MAX_BYTES, BUNDLE_MAX_RATIO)."""
    return ExpansionLimits(max_bytes=settings.BUNDLE_EXPAND_MAX_BYTES, max_ratio=settings.BUNDLE_MAX_RATIO)

"""Where the openai backend may send a request: the host of the endpoint must resolve to public addresses
only (no loopback, private, link-local, cloud metadata, multicast or reserved address), unless the operator
allowed that endpoint to be local (`allow_local`, for a model served on the same machine or network)."""
from __future__ import annotations

import ipaddress
import socket
import time
from urllib.parse import urlsplit

from models_llm.backends import ScorerConfigError, TransientScoringError

# A host is resolved again after this long, so a name that starts pointing inward is caught (DNS rebinding
# between two checks stays possible: that window is this long at most).
RECHECK_S = 30.0


def _addresses(host: str, port: int) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise TransientScoringError(f"cannot resolve the endpoint host {host!r}: {exc}") from None
    found = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        mapped = getattr(address, "ipv4_mapped", None)
        found.append(mapped or address)
    return found


def endpoint_address_check(url: str, *, allow_local: bool) -> None:
    """Raise ScorerConfigError when `url` is not http(s) or, unless `allow_local`, when its host resolves to
    any address that is not global (loopback, private, link-local and metadata ranges among them)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ScorerConfigError(f"an endpoint must be an http(s) URL, got {url!r}")
    if allow_local:
        return
    port = parts.port or (443 if parts.scheme == "https" else 80)
    for address in _addresses(parts.hostname, port):
        if not address.is_global:
            raise ScorerConfigError(
                f"the endpoint host {parts.hostname!r} resolves to {address}, a loopback, private, link-local or "
                "reserved address: refused (the operator may declare the endpoint with allow_local)"
            )


class AddressGuard:
    """endpoint_address_check for one URL, repeated at most every RECHECK_S seconds (thread-safe enough: a
    race only checks twice)."""

    def __init__(self, url: str, *, allow_local: bool) -> None:
        self.url = url
        self.allow_local = allow_local
        self._checked_at: float | None = None

    def check(self) -> None:
        now = time.monotonic()
        if self._checked_at is not None and now - self._checked_at < RECHECK_S:
            return
        endpoint_address_check(self.url, allow_local=self.allow_local)
        self._checked_at = now

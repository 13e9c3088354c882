"""Waiting in tests for what another thread or process does (a Celery worker, a server)."""
from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(condition: Callable[[], object], failure: str, seconds: float = 60, every: float = 0.2) -> None:
    """Return once `condition()` is true; fail with "<failure> within <seconds> s" when it is not by then."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(every)
    raise AssertionError(f"{failure} within {seconds:.0f} s")

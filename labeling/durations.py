"""Time lengths as people read them ("0.4 s", "45 s", "12 min 5 s", "2 h 14 min", "3 d 4 h"): the one
formatting rule behind the `duration` template filter, so that no page shows "60050 s"."""
from __future__ import annotations

import math
from decimal import Decimal

UNKNOWN = "–"


def _half_up(value: float) -> int:
    # round() halves to even: 0.5 s would read "0 s" and 2.5 s "2 s".
    return math.floor(value + 0.5)


def _two(whole: int, unit: str, rest: int, rest_unit: str) -> str:
    return f"{whole} {unit} {rest} {rest_unit}" if rest else f"{whole} {unit}"


def duration_text(seconds: float | Decimal | None) -> str:
    """`seconds` in at most two units, the smaller one rounded and left out when it is zero: under a second to a
    tenth ("0.4 s", "< 0.1 s"), under a minute in whole seconds, then minutes and seconds, hours and minutes, days
    and hours. Rounding may carry into the larger unit (59.6 s reads "1 min"). None, a negative value and one that is
    not finite read "–" (no length is known)."""
    if seconds is None:
        return UNKNOWN
    value = float(seconds)
    if not math.isfinite(value) or value < 0:
        return UNKNOWN
    tenths = _half_up(value * 10)
    if tenths < 10:
        if tenths == 0:
            return "0 s" if value == 0 else "< 0.1 s"
        return f"0.{tenths} s"
    whole = _half_up(value)
    if whole < 60:
        return f"{whole} s"
    minutes, rest = divmod(whole, 60)
    if minutes < 60:
        return _two(minutes, "min", rest, "s")
    # Rounded again at the coarser unit: 2 h 14 min 40 s reads "2 h 15 min", not "2 h 14 min".
    hours, rest = divmod(_half_up(value / 60), 60)
    if hours < 24:
        return _two(hours, "h", rest, "min")
    days, rest = divmod(_half_up(value / 3600), 24)
    return _two(days, "d", rest, "h")

"""{{ seconds|duration }}: a time length as people read it (labeling.durations)."""
from __future__ import annotations

from decimal import Decimal

from django import template

from labeling.durations import duration_text

register = template.Library()


@register.filter
def duration(seconds: float | Decimal | None) -> str:
    """Nothing for what is not a number (a missing variable renders as ""), as Django's floatformat does."""
    try:
        return duration_text(seconds)
    except (TypeError, ValueError):
        return ""

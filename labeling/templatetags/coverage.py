"""{% partial_mark coverage "gold pairs" %}: the mark of a judge that has scored only part of what a report needs
(labeling.selectors.coverage), with a title saying what is missing; nothing for a complete judge."""
from __future__ import annotations

from django import template

from labeling.selectors.coverage import Coverage

register = template.Library()


@register.inclusion_tag("labeling/_partial_mark.html")
def partial_mark(coverage: Coverage | dict | None, needed: str, ranked: bool | None = None) -> dict:
    """`coverage` as a Coverage or its JSON (a cached report's); `needed`: what the report needs, in words ("gold
    pairs"); `ranked`: whether the report ranks it all the same (partial judges included), None for a report
    that ranks nothing (an export)."""
    if isinstance(coverage, dict):
        coverage = Coverage.from_json(coverage)
    if coverage is None or not coverage.partial:
        return {"coverage": None}
    return {"coverage": coverage, "percent": coverage.percent, "needed": needed, "ranked": ranked}

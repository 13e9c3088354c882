"""A stored multi-condition report in its reading order again. PostgreSQL keeps JSON objects as jsonb, which orders
their keys its own way (shorter keys first): what a report lists by style, padding and domain comes back in that
order, not the report's. Readers that show those lists (the pages, the command's table) put them back in order."""
from __future__ import annotations

from models_llm.audit.multicondition import STYLES


def _curve_in_order(curve: dict, domains: list[str]) -> dict:
    by_domain = curve.get("by_domain", {})
    known = [domain for domain in domains if domain in by_domain]
    return {**curve, "by_domain": {domain: by_domain[domain] for domain in
                                   known + sorted(set(by_domain) - set(known))}}


def multicondition_in_order(report: dict) -> dict:
    """A copy of `report` whose styles follow STYLES, paddings ascend, and domains follow report["domains"]."""
    domains = list(report.get("domains", []))
    ordered = dict(report)
    task1 = report.get("task1")
    if isinstance(task1, dict) and "styles" in task1:
        styles = task1["styles"]
        names = sorted(styles, key=lambda style: (STYLES.index(style) if style in STYLES else len(STYLES), style))
        ordered["task1"] = {**task1, "styles": {name: _curve_in_order(styles[name], domains) for name in names}}
    for key in ("task2", "task3"):
        if isinstance(report.get(key), dict) and "by_domain" in report[key]:
            ordered[key] = _curve_in_order(report[key], domains)
    task4 = report.get("task4")
    if isinstance(task4, dict) and "pads" in task4:
        pads = task4["pads"]
        ordered["task4"] = {**task4, "pads": {pad: _curve_in_order(pads[pad], domains)
                                              for pad in sorted(pads, key=lambda pad: int(pad))}}
    return ordered

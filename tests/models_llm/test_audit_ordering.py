"""A multi-condition report read back from PostgreSQL's jsonb (keys reordered, shorter first) is put back in its
reading order: styles as STYLES, paddings ascending, domains as the report lists them."""
from models_llm.audit.ordering import multicondition_in_order


def _curve(domains):
    return {"k": [1, 2], "by_domain": {domain: [1.0, 0.5] for domain in domains}, "average": [1.0, 0.5], "mean": 0.75}


def test_a_report_in_jsonb_order_is_read_in_the_report_s_order():
    domains = ["recipes", "law", "books"]
    jsonb = {  # what jsonb gives back: keys by length, then bytewise
        "domains": domains,
        "task1": {"styles": {"descriptive": _curve(["law", "books", "recipes"]),
                             "instruction": _curve(["law", "books", "recipes"])}},
        "task2": _curve(["law", "books", "recipes"]),
        "task3": {"title": "no figures"},
        "task4": {"pads": {"0": _curve(domains), "512": _curve(domains), "1024": _curve(domains), "64": _curve([])}},
    }
    ordered = multicondition_in_order(jsonb)
    assert list(ordered["task1"]["styles"]) == ["instruction", "descriptive"]
    assert all(list(curve["by_domain"]) == domains for curve in ordered["task1"]["styles"].values())
    assert list(ordered["task2"]["by_domain"]) == domains
    assert ordered["task3"] == {"title": "no figures"}
    assert list(ordered["task4"]["pads"]) == ["0", "64", "512", "1024"]
    assert list(jsonb["task1"]["styles"]) == ["descriptive", "instruction"]  # the stored report is not changed

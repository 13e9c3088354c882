"""What the Robustness pages draw of a multi-condition report (labeling.services.audit_multicondition's shape, the
same for a judge and a run): per task its verdict, a chart of the rate against k with one line per style, domain
or padding, and the same numbers as a table. The perturbation report is drawn as it is stored."""
from __future__ import annotations

from dataclasses import dataclass

from labeling.charts import LineChart, line_chart
from models_llm.audit.ordering import multicondition_in_order

AVERAGE = "average"


@dataclass(frozen=True)
class RateRow:
    label: str
    values: list[float | None]  # one per k of the table
    mean: float | None  # the report's mean over k: on the rows of domain averages only
    average: bool


@dataclass(frozen=True)
class TaskView:
    key: str  # task1..task4
    title: str
    measure: str  # "Win Rate" or "Flip Rate"
    x_name: str
    verdict: str
    why: str
    unavailable: str  # why the task has no figures ("" when it has)
    ks: list[int]
    rows: list[RateRow]
    chart: LineChart | None


def _rows(curve: dict, prefix: str = "") -> list[RateRow]:
    """The per-domain rows of one curve ({k, by_domain, average, mean}), then its average over domains."""
    rows = [RateRow(label=f"{prefix}{domain}", values=list(values), mean=None, average=False)
            for domain, values in curve.get("by_domain", {}).items()]
    return rows + [RateRow(label=f"{prefix}{AVERAGE}", values=list(curve.get("average", [])), mean=curve.get("mean"),
                           average=True)]


def _series(curve: dict) -> dict[str, list[tuple[float, float | None]]]:
    """The average over domains, then each domain's curve when there is more than one domain."""
    ks = curve.get("k", [])
    lines = {AVERAGE: list(zip(ks, curve.get("average", [])))}
    domains = curve.get("by_domain", {})
    if len(domains) > 1:
        lines |= {domain: list(zip(ks, values)) for domain, values in domains.items()}
    return lines


def _pad_label(pad: str) -> str:
    return "no padding" if str(pad) == "0" else f"{pad} words"


def _task(key: str, task: dict, *, measure: str, x_name: str) -> TaskView:
    """Tasks 2 and 3: one curve over k."""
    ks = list(task.get("k", []))
    return TaskView(key=key, title=task.get("title", ""), measure=measure, x_name=x_name,
                    verdict=task.get("verdict", "no data"), why=task.get("why", ""), unavailable="", ks=ks,
                    rows=_rows(task), chart=line_chart(_series(task), x_name=x_name, y_name=measure) if ks else None)


def _by_group(key: str, task: dict, groups: dict[str, dict], label, *, x_name: str) -> TaskView:
    """Tasks 1 and 4: one curve per style or per padding; the chart draws their averages over domains."""
    ks = max((list(curve.get("k", [])) for curve in groups.values()), key=len, default=[])
    rows = [row for group, curve in groups.items() for row in _rows(curve, prefix=f"{label(group)} \u00b7 ")]
    series = {label(group): list(zip(curve.get("k", []), curve.get("average", []))) for group, curve in groups.items()}
    return TaskView(key=key, title=task.get("title", ""), measure="Win Rate", x_name=x_name,
                    verdict=task.get("verdict", "no data"), why=task.get("why", ""),
                    unavailable=task.get("unavailable", ""), ks=ks, rows=rows,
                    chart=line_chart(series, x_name=x_name, y_name="Win Rate") if ks else None)


def parameters_text(parameters: dict) -> str:
    """An audit's parameters on one line: `sample 200, seed 0, tests length, stuffing`."""
    def shown(value: object) -> str:
        return ", ".join(map(str, value)) if isinstance(value, list | tuple) else str(value)

    # In the order the forms ask for them (PostgreSQL's jsonb returns an object's keys in an order of its own).
    order = {name: index for index, name in enumerate(("sample", "seed", "tests", "pads", "filler", "runs"))}
    names = sorted(parameters, key=lambda name: (order.get(name, len(order)), name))
    return "; ".join("runs all" if name == "runs" and not parameters[name] else f"{name} {shown(parameters[name])}"
                     for name in names)


def multicondition_tasks(report: dict) -> list[TaskView]:
    """The four tasks of a multi-condition report, each ready to draw."""
    report = multicondition_in_order(report)
    task1, task4 = report.get("task1", {}), report.get("task4", {})
    return [
        _by_group("task1", task1, task1.get("styles", {}), str, x_name="k (conditions in the query)"),
        _task("task2", report.get("task2", {}), measure="Win Rate", x_name="condition index k"),
        _task("task3", report.get("task3", {}), measure="Flip Rate", x_name="condition index k"),
        _by_group("task4", task4, task4.get("pads", {}), _pad_label, x_name="condition index k"),
    ]

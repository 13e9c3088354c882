"""Geometry of the dashboard's server-side SVG charts: the reliability diagram and the F1-vs-threshold
curve. Numbers in, coordinates out; the template draws them (so every label is escaped)."""
from __future__ import annotations

from dataclasses import dataclass

WIDTH, HEIGHT, PAD = 260, 220, 34


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    opacity: float
    title: str


@dataclass(frozen=True)
class Tick:
    x: float
    y: float
    label: str


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    plot_left: float
    plot_right: float
    plot_top: float
    plot_bottom: float
    bars: list[Bar]
    lines: dict[str, str]
    x_ticks: list[Tick]
    y_ticks: list[Tick]


def _x(value: float) -> float:
    return PAD + value * (WIDTH - PAD - 8)


def _y(value: float) -> float:
    return HEIGHT - PAD - value * (HEIGHT - PAD - 10)


def _ticks() -> tuple[list[Tick], list[Tick]]:
    steps = [0.0, 0.25, 0.5, 0.75, 1.0]
    return (
        [Tick(_x(v), HEIGHT - PAD + 14, f"{v:g}") for v in steps],
        [Tick(PAD - 6, _y(v) + 4, f"{v:g}") for v in steps],
    )


def _chart(bars: list[Bar], lines: dict[str, str]) -> Chart:
    x_ticks, y_ticks = _ticks()
    return Chart(WIDTH, HEIGHT, _x(0), _x(1), _y(1), _y(0), bars, lines, x_ticks, y_ticks)


def reliability_chart(bins: list[dict]) -> Chart:
    """One bar per equal-width bin at the fraction of relevant pairs; its opacity grows with the bin's share
    of the pairs, so a bar resting on three pairs reads as such. The diagonal is perfect calibration."""
    total = sum(b["count"] for b in bins) or 1
    bars = []
    for b in bins:
        if not b["count"]:
            continue
        top = _y(b["fraction_relevant"])
        bars.append(
            Bar(
                x=_x(b["lower"]) + 1,
                y=top,
                width=_x(b["upper"]) - _x(b["lower"]) - 2,
                height=_y(0) - top,
                opacity=round(0.25 + 0.75 * (b["count"] / total) ** 0.5, 3),
                title=f"P in ({b['lower']:g}, {b['upper']:g}]: {b['count']:,} pairs, mean P {b['mean_p']:.2f}, "
                f"{b['fraction_relevant']:.0%} relevant",
            )
        )
    return _chart(bars, {"diagonal": f"{_x(0):.1f},{_y(0):.1f} {_x(1):.1f},{_y(1):.1f}"})


def f1_curve_chart(points: list[dict]) -> Chart:
    """F1, precision and recall when every pair with P >= threshold is retrieved (DIRAS Fig. 6)."""
    lines = {}
    for key in ("f1", "precision", "recall"):
        coords = [f"{_x(p['threshold']):.1f},{_y(p[key]):.1f}" for p in points if p.get(key) is not None]
        lines[key] = " ".join(coords)
    return _chart([], lines)

"""Geometry of the server-side SVG charts: the dashboard's reliability diagram and F1-vs-threshold curve, the
systems page's scatter of two qrels' scores, the robustness reports' rates against k and the replay's bands over
seeds against labels spent. Numbers in, coordinates out; the template draws them (so every label is escaped)."""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

WIDTH, HEIGHT, PAD = 260, 220, 34
TOP = 22  # above the plot: room for the y axis's label, clear of the top tick's


@dataclass(frozen=True)
class PlotArea:
    """The SVG's size and the plot's edges within it (pixels), as every chart's template reads them."""

    width: int
    height: int
    plot_left: float
    plot_right: float
    plot_top: float
    plot_bottom: float


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
class Chart(PlotArea):
    bars: list[Bar]
    lines: dict[str, str]
    x_ticks: list[Tick]
    y_ticks: list[Tick]


def _x(value: float) -> float:
    return PAD + value * (WIDTH - PAD - 8)


def _y(value: float) -> float:
    return HEIGHT - PAD - value * (HEIGHT - PAD - TOP)


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


# The systems scatter plot: bigger than the dashboard's charts, with room on the left for the tick labels.
SCATTER_SIZE, SCATTER_PAD = 340, 40
# Tick steps tried in order: the first that gives at most six ticks over the plotted range.
SCATTER_STEPS = (0.05, 0.1, 0.2, 0.25, 0.5, 1.0)
SCATTER_MARGIN = 0.02


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    label: str
    title: str
    label_x: float
    label_y: float
    label_anchor: str  # "start" right of the point, "end" left of it (points in the right half)


@dataclass(frozen=True)
class Scatter(PlotArea):
    points: list[Point]
    diagonal: str
    x_ticks: list[Tick]
    y_ticks: list[Tick]


def _scatter_range(values: list[float]) -> tuple[float, float, float]:
    """The plotted range and tick step: the values' span, widened by SCATTER_MARGIN and rounded out to tenths, so
    systems bunched between 0.3 and 0.5 spread over the plot instead of sitting in one corner of [0, 1], and no
    point sits on an axis unless it is a score of 0 or 1 (the range stays within [0, 1] when the values do)."""
    low = math.floor((min(values) - SCATTER_MARGIN) * 10) / 10
    high = math.ceil((max(values) + SCATTER_MARGIN) * 10) / 10
    if min(values) >= 0:
        low = max(low, 0.0)
    if max(values) <= 1:
        high = min(high, 1.0)
    step = next((s for s in SCATTER_STEPS if (high - low) / s <= 5 + 1e-9), SCATTER_STEPS[-1])
    low = math.floor(round(low / step, 9)) * step
    high = math.ceil(round(high / step, 9)) * step
    return low, high, step


def scatter_chart(points: list[tuple[str, float, float]], *, label_chars: int = 24) -> Scatter:
    """One point per (name, x, y): a system's score under two qrels. Both axes share one range, so the diagonal
    (the same score under both) runs at 45 degrees and a point above it scores higher on y than on x."""
    low, high, step = _scatter_range([value for _, x, y in points for value in (x, y)])
    left, bottom = SCATTER_PAD, SCATTER_SIZE - SCATTER_PAD
    # Room above the plot for the y axis's label, which _chart_axes.html writes at the top left.
    right, top = SCATTER_SIZE - 10, 24
    span = high - low

    def px(value: float) -> float:
        return round(left + (value - low) / span * (right - left), 1)

    def py(value: float) -> float:
        return round(bottom - (value - low) / span * (bottom - top), 1)

    middle = (left + right) / 2
    drawn = []
    for name, x, y in points:
        at_right = px(x) > middle
        short = name if len(name) <= label_chars else name[: label_chars - 1] + "\u2026"
        drawn.append(Point(x=px(x), y=py(y), label=short, title=f"{name}: {x:.3f} vs {y:.3f}",
                           label_x=px(x) + (-6 if at_right else 6), label_y=py(y) - 5, label_anchor="end" if at_right else "start"))
    count = round(span / step)
    steps = [round(low + i * step, 6) for i in range(count + 1)]
    return Scatter(
        width=SCATTER_SIZE, height=SCATTER_SIZE, plot_left=left, plot_right=right, plot_top=top, plot_bottom=bottom,
        points=drawn, diagonal=f"{px(low)},{py(low)} {px(high)},{py(high)}",
        x_ticks=[Tick(px(v), bottom + 14, f"{v:g}") for v in steps],
        y_ticks=[Tick(left - 6, py(v) + 4, f"{v:g}") for v in steps],
    )


# Line charts of a rate (0..1) against a whole number (k, a condition index): the robustness reports' curves.
LINE_WIDTH, LINE_HEIGHT, LINE_LEFT, LINE_RIGHT_PAD, LINE_TOP, LINE_BOTTOM_PAD = 300, 200, 34, 10, 18, 30
# Above this many x values, every other one is labelled.
LINE_MAX_X_LABELS = 12


@dataclass(frozen=True)
class LinePoint:
    x: float
    y: float
    title: str


@dataclass(frozen=True)
class LineSeries:
    name: str
    index: int  # the series' colour: the template's class s<index>
    segments: list[str]  # polyline points; a missing value ends one segment, the next value starts another
    points: list[LinePoint]  # every value, as a dot: a value between two missing ones is still seen


@dataclass(frozen=True)
class LineChart(PlotArea):
    series: list[LineSeries]
    x_ticks: list[Tick]
    y_ticks: list[Tick]


def _x_scale(low: float, high: float, left: float, right: float) -> Callable[[float], float]:
    """The x pixel of a value, `low`..`high` spread over `left`..`right` (one value alone sits in the middle)."""
    def px(value: float) -> float:
        if high == low:
            return round((left + right) / 2, 1)
        return round(left + (value - low) / (high - low) * (right - left), 1)
    return px


def line_chart(series: dict[str, list[tuple[float, float | None]]], *, x_name: str = "k",
               y_name: str = "rate") -> LineChart:
    """One line per named series of (x, y) points, y in [0, 1]; a None y leaves a gap in its line. The x axis spans
    the smallest to the largest x of all series (one x alone sits in the middle)."""
    xs = sorted({x for points in series.values() for x, _ in points})
    left, right = LINE_LEFT, LINE_WIDTH - LINE_RIGHT_PAD
    top, bottom = LINE_TOP, LINE_HEIGHT - LINE_BOTTOM_PAD
    low, high = (xs[0], xs[-1]) if xs else (0.0, 1.0)

    px = _x_scale(low, high, left, right)

    def py(value: float) -> float:
        return round(bottom - value * (bottom - top), 1)

    drawn = []
    for index, (name, points) in enumerate(series.items()):
        segments, current, dots = [], [], []
        for x, y in points:
            if y is None:
                segments += [" ".join(current)] if len(current) > 1 else []
                current = []
                continue
            current.append(f"{px(x)},{py(y)}")
            dots.append(LinePoint(x=px(x), y=py(y), title=f"{name}: {x_name} = {x:g}, {y_name} {y:.2f}"))
        segments += [" ".join(current)] if len(current) > 1 else []
        drawn.append(LineSeries(name=name, index=index, segments=segments, points=dots))
    every = 1 if len(xs) <= LINE_MAX_X_LABELS else 2
    return LineChart(
        width=LINE_WIDTH, height=LINE_HEIGHT, plot_left=left, plot_right=right, plot_top=top, plot_bottom=bottom,
        series=drawn,
        x_ticks=[Tick(px(x), bottom + 14, f"{x:g}") for x in xs[::every]],
        y_ticks=[Tick(left - 6, py(v) + 4, f"{v:g}") for v in (0.0, 0.25, 0.5, 0.75, 1.0)],
    )


# Band charts: a measure's mean over seeds and its band (10th to 90th percentile) against labels spent, one series
# per queue mix (the Replay page), with an optional reference line (the true count beside its estimates).
BAND_WIDTH, BAND_HEIGHT, BAND_LEFT, BAND_RIGHT_PAD, BAND_TOP, BAND_BOTTOM_PAD = 320, 200, 40, 10, 18, 30
# Tick steps, times a power of ten: the first giving at most BAND_TICKS intervals.
NICE_STEPS = (1.0, 2.0, 2.5, 5.0, 10.0)
BAND_TICKS = 5


@dataclass(frozen=True)
class BandPoint:
    x: float
    mean: float | None
    low: float | None
    high: float | None
    seeds: int


@dataclass(frozen=True)
class BandSeries:
    name: str
    index: int  # the series' colour: the template's class s<index>
    band: list[str]  # polygons: the band's high edge left to right, then its low edge back (one per unbroken run)
    segments: list[str]  # the mean's polylines; a point no seed had ends one, the next known point starts another
    points: list[LinePoint]


@dataclass(frozen=True)
class BandChart(PlotArea):
    series: list[BandSeries]
    reference: str | None  # the reference line's points, across the plot
    clipped: bool  # a band reached above the plot's top and is cut there
    x_ticks: list[Tick]
    y_ticks: list[Tick]


def nice_ticks(low: float, high: float) -> list[float]:
    """Round tick values covering [low, high], at most BAND_TICKS intervals apart (the first and last may lie outside:
    the axis then spans them)."""
    span = high - low if high > low else abs(high) or 1.0
    power = 10 ** math.floor(math.log10(span / BAND_TICKS))
    step = next(power * s for s in NICE_STEPS if span / (power * s) <= BAND_TICKS + 1e-9)
    first, last = math.floor(round(low / step, 9)), math.ceil(round(high / step, 9))
    if first == last:
        last += 1
    return [round(i * step, 10) for i in range(first, last + 1)]


def _shown(value: float) -> str:
    """A count as a whole number, a rate to three significant digits."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _runs(points: list[BandPoint]) -> list[list[BandPoint]]:
    runs, current = [], []
    for point in points:
        if point.mean is None:
            runs += [current] if current else []
            current = []
        else:
            current.append(point)
    return runs + ([current] if current else [])


def band_chart(series: dict[str, list[BandPoint]], *, low: float | None = None, high: float | None = None,
               reference: float | None = None, cap: float | None = None, x_name: str = "labels") -> BandChart:
    """One mean line and band per named series of points. The y axis spans `low` to `high` where given, else the
    values (0 included, and `reference`), widened to round ticks; a band above `cap` is cut there (`clipped`)."""
    known = [p for points in series.values() for p in points if p.mean is not None]
    values = [v for p in known for v in (p.mean, p.low, p.high) if v is not None] + [0.0]
    values += [reference] if reference is not None else []
    top = max(values) if cap is None else min(max(values), cap)
    ticks = nice_ticks(min(values) if low is None else low, top if high is None else high)
    y_low, y_high = ticks[0], ticks[-1]
    xs = sorted({p.x for points in series.values() for p in points})
    x_ticks = nice_ticks(xs[0], xs[-1]) if xs else [0.0, 1.0]
    x_ticks = [x for x in x_ticks if xs and xs[0] <= x <= xs[-1]] or [xs[0] if xs else 0.0]
    left, right = BAND_LEFT, BAND_WIDTH - BAND_RIGHT_PAD
    plot_top, bottom = BAND_TOP, BAND_HEIGHT - BAND_BOTTOM_PAD
    x_low, x_high = (xs[0], xs[-1]) if xs else (0.0, 1.0)

    px = _x_scale(x_low, x_high, left, right)

    def py(value: float) -> float:
        inside = min(max(value, y_low), y_high)
        return round(bottom - (inside - y_low) / (y_high - y_low) * (bottom - plot_top), 1)

    clipped = any(v > y_high + 1e-9 for p in known for v in (p.mean, p.high) if v is not None)
    drawn = []
    for index, (name, points) in enumerate(series.items()):
        bands, segments = [], []
        for run in _runs(points):
            if len(run) > 1:
                segments.append(" ".join(f"{px(p.x)},{py(p.mean)}" for p in run))
                edge = [f"{px(p.x)},{py(p.high if p.high is not None else p.mean)}" for p in run]
                back = [f"{px(p.x)},{py(p.low if p.low is not None else p.mean)}" for p in reversed(run)]
                bands.append(" ".join(edge + back))
        dots = [LinePoint(x=px(p.x), y=py(p.mean), title=f"{name}: {p.x:,.0f} {x_name}, mean {_shown(p.mean)}, band "
                          f"{_shown(p.low)} to {_shown(p.high)} ({p.seeds} seed{'s' * (p.seeds != 1)})")
                for p in points if p.mean is not None]
        drawn.append(BandSeries(name=name, index=index % 6, band=bands, segments=segments, points=dots))
    line = None
    if reference is not None:
        line = f"{left},{py(reference)} {right},{py(reference)}"
    return BandChart(
        width=BAND_WIDTH, height=BAND_HEIGHT, plot_left=left, plot_right=right, plot_top=plot_top, plot_bottom=bottom,
        series=drawn, reference=line, clipped=clipped,
        x_ticks=[Tick(px(x), bottom + 14, f"{x:,g}") for x in x_ticks],
        y_ticks=[Tick(left - 6, py(v) + 4, f"{v:,g}") for v in ticks],
    )

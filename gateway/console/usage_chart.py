"""Stacked bar charts for the usage console, drawn on the server as SVG markup that the page's
template places (no JavaScript, no file from outside the project). One bar per day that has a
value, one segment per series (model) in it, bottom-up in the legend's order; each segment names
its day, series and value in a tooltip (<title>). The markup is written here rather than by
template loops: at 90 days and 8 models the loops took 60 ms of the page's time, this takes 3."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import date
from html import escape

from django.utils.safestring import SafeString, mark_safe

WIDTH, HEIGHT = 900, 240
LEFT, RIGHT, TOP, BOTTOM = 64, 8, 10, 24
MAX_SERIES = 8  # the models after the first seven are drawn as one series, "other models"
OTHER = "other models"
# The theme's primary colour first (the home's bars), then Okabe and Ito's palette (told apart with most kinds
# of colour blindness), the theme's grey for the rest: colours that read on the light and the dark theme.
COLORS = ["var(--color-primary-600, #7c3aed)", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
          "#0072B2"]
OTHER_COLOR = "var(--color-base-400, #9ca3af)"


@dataclass(frozen=True)
class Series:
    name: str
    color: str
    models: frozenset[str]


@dataclass
class Segment:
    series: Series
    value: int
    x: float
    y: float
    width: float
    height: float


@dataclass
class Bar:
    day: date
    total: int
    segments: list[Segment] = field(default_factory=list)


@dataclass
class Chart:
    title: str
    unit: str
    bars: list[Bar]
    y_ticks: list[tuple[float, str]]  # (y, label)
    x_labels: list[tuple[float, str]]  # (x, label)

    def svg(self) -> SafeString:
        """The chart as an <svg> element, every text escaped."""
        # Not class="chart": the theme's script takes every `.chart` for a canvas of its own charts and
        # fails on an <svg> (a JavaScript error on every load).
        parts = [f'<svg class="usage-bars" data-unit="{escape(self.unit)}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
                 f'aria-label="{escape(self.title)}, stacked by model" xmlns="http://www.w3.org/2000/svg">']
        for y, label in self.y_ticks:
            parts.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y}" y2="{y}"></line>'
                         f'<text x="{LEFT - 6}" y="{y}" text-anchor="end" dominant-baseline="middle">{label}</text>')
        for bar in self.bars:
            day = bar.day.isoformat()
            parts.append(f'<g class="bar" data-day="{day}" data-total="{bar.total}">')
            for s in bar.segments:
                name = escape(s.series.name)
                parts.append(f'<rect class="segment" data-series="{name}" data-value="{s.value}" x="{s.x}" y="{s.y}" '
                             f'width="{s.width}" height="{s.height}" style="fill: {s.series.color}">'
                             f'<title>{day} · {name}: {s.value:,} {escape(self.unit)}</title></rect>')
            parts.append("</g>")
        for x, label in self.x_labels:
            parts.append(f'<text x="{x}" y="{HEIGHT - 6}" text-anchor="middle">{label}</text>')
        parts.append("</svg>")
        return mark_safe("".join(parts))  # noqa: S308 — every text in it is escaped above


def chart_series(totals_by_model: dict[str, int]) -> list[Series]:
    """The series of the charts, biggest first: one per model, the smallest lumped together when
    there are more than MAX_SERIES. The same for every chart of the page, so colours agree."""
    ranked = sorted(totals_by_model, key=lambda m: (-totals_by_model[m], m))
    if len(ranked) <= MAX_SERIES:
        return [Series(m, COLORS[i], frozenset([m])) for i, m in enumerate(ranked)]
    kept = ranked[:MAX_SERIES - 1]
    return [*(Series(m, COLORS[i], frozenset([m])) for i, m in enumerate(kept)),
            Series(OTHER, OTHER_COLOR, frozenset(ranked[MAX_SERIES - 1:]))]


def stacked_bars(*, title: str, unit: str, days: list[date], values: dict[tuple[date, str], int],
                 series: list[Series]) -> Chart:
    """A chart of `values` ((day, model) -> amount) over `days`, stacked by `series`."""
    of_series = {model: s for s in series for model in s.models}
    per_day: dict[date, dict[Series, int]] = {}
    for (day, model), value in values.items():
        if value and model in of_series:
            stack = per_day.setdefault(day, {})
            stack[of_series[model]] = stack.get(of_series[model], 0) + value
    top, step = axis_top(max((sum(s.values()) for s in per_day.values()), default=0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / max(len(days), 1)
    bar_w = max(slot * 0.8, 1.0)
    bars = []
    for i, day in enumerate(days):
        stack = per_day.get(day)
        if not stack:
            continue
        bar = Bar(day, sum(stack.values()))
        base = HEIGHT - BOTTOM
        for s in series:
            if value := stack.get(s, 0):
                h = value / top * plot_h
                base -= h
                bar.segments.append(Segment(s, value, round(LEFT + i * slot + (slot - bar_w) / 2, 2), round(base, 2),
                                            round(bar_w, 2), round(h, 2)))
        bars.append(bar)
    ticks = [(round(HEIGHT - BOTTOM - v / top * plot_h, 2), compact(v)) for v in range(0, top + 1, step)]
    every = max(1, math.ceil(len(days) / 8))
    labels = [(round(LEFT + (i + 0.5) * slot, 2), day.strftime("%b %d"))
              for i, day in enumerate(days) if i % every == 0]
    return Chart(title, unit, bars, ticks, labels)


def axis_top(peak: int) -> tuple[int, int]:
    """The top of the value axis and its step: whole numbers, a step of 1, 2 or 5 times a power
    of ten, at most 5 steps."""
    if peak <= 0:
        return 1, 1
    magnitude = 10 ** max(0, math.floor(math.log10(peak / 5)))
    step = magnitude
    for m in (1, 2, 5, 10):
        step = m * magnitude
        if step * 5 >= peak:
            break
    return step * math.ceil(peak / step), step


def compact(value: int) -> str:
    """1234 -> '1.2k', 5000000 -> '5M'."""
    for size, suffix in ((10**9, "G"), (10**6, "M"), (10**3, "k")):
        if abs(value) >= size:
            text = f"{value / size:.1f}".rstrip("0").rstrip(".")
            return f"{text}{suffix}"
    return str(value)

"""The home's bar charts, drawn on the server as SVG (no script, nothing loaded from outside), in
the usage console's manner (gateway/console/usage_chart.py: its axis and its compact numbers): one
bar per minute, hour or day of the span, each with a tooltip (<title>) naming its time and value."""

from __future__ import annotations

from datetime import datetime
from html import escape

from django.utils.safestring import SafeString, mark_safe

from gateway.console.usage_chart import axis_top, compact

WIDTH, HEIGHT = 640, 180
LEFT, RIGHT, TOP, BOTTOM = 48, 6, 8, 22
LABELS = 6  # time labels under the bars, at most
TIME_FORMATS = {"minute": "%H:%M", "hour": "%H:00", "day": "%b %d"}
TIP_FORMATS = {"minute": "%Y-%m-%d %H:%M UTC", "hour": "%Y-%m-%d %H:00 UTC", "day": "%Y-%m-%d"}


def bars(*, name: str, title: str, unit: str, bucket: str, points: list[tuple[datetime, int]],
         color: str = "var(--color-primary-600, #7c3aed)") -> SafeString:
    """An <svg class="home-chart"> of `points` ((bucket start, value), oldest first); `name` is its
    data-chart attribute."""
    top, step = axis_top(max((value for _, value in points), default=0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / max(len(points), 1)
    bar_w = max(slot * 0.75, 1.0)
    parts = [f'<svg class="home-chart" data-chart="{escape(name)}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
             f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">']
    for value in range(0, top + 1, step):
        y = round(HEIGHT - BOTTOM - value / top * plot_h, 2)
        parts.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y}" y2="{y}"></line>'
                     f'<text x="{LEFT - 6}" y="{y}" text-anchor="end" dominant-baseline="middle">'
                     f'{compact(value)}</text>')
    for i, (start, value) in enumerate(points):
        if not value:
            continue
        h = round(value / top * plot_h, 2)
        x = round(LEFT + i * slot + (slot - bar_w) / 2, 2)
        tip = f"{start.strftime(TIP_FORMATS[bucket])}: {value:,} {escape(unit)}"
        parts.append(f'<rect class="bar" data-start="{start.isoformat()}" data-value="{value}" x="{x}" '
                     f'y="{round(HEIGHT - BOTTOM - h, 2)}" width="{round(bar_w, 2)}" height="{h}" fill="{color}">'
                     f'<title>{tip}</title></rect>')
    every = max(1, -(-len(points) // LABELS))
    for i, (start, _) in enumerate(points):
        if i % every == 0:
            parts.append(f'<text x="{round(LEFT + (i + 0.5) * slot, 2)}" y="{HEIGHT - 5}" text-anchor="middle">'
                         f'{start.strftime(TIME_FORMATS[bucket])}</text>')
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 — every text in it is escaped or a number

"""Charts for the admin page, drawn on the server as inline SVG: no script, no chart library, nothing
fetched. Every label goes through escaping; each point carries a <title> a pointer or a screen reader
can read, and the figure has a text summary for those who cannot see it."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from markupsafe import Markup

_WIDTH, _HEIGHT = 600, 160
_LEFT, _RIGHT, _TOP, _BOTTOM = 48, 8, 10, 22  # room for the axis labels


@dataclass(frozen=True)
class _Frame:
    """What every chart is drawn in: its title, the labels along its axis, the unit of its values and the axis top."""

    title: str
    labels: list[str]
    unit: str
    top: float


def line_chart(title: str, labels: list[str], series: dict[str, list[float]], unit: str) -> Markup:
    """One line per series over the labels (hours, syncs); a series' name is its CSS class suffix."""
    top = _nice_top(max((v for values in series.values() for v in values), default=0))
    parts = []
    for number, (name, values) in enumerate(series.items()):
        points = [(_x(i, len(labels)), _y(v, top)) for i, v in enumerate(values)]
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        parts.append(f'<polyline class="series-{number}" points="{path}"/>')
        parts += [
            f'<circle class="series-{number}" cx="{x:.1f}" cy="{y:.1f}" r="3">'
            f"<title>{escape(name)} {escape(label)}: {_figure(v)} {escape(unit)}</title></circle>"
            for (x, y), label, v in zip(points, labels, values)
        ]
    legend = " · ".join(f'<tspan class="legend-{n}">■ {escape(name)}</tspan>' for n, name in enumerate(series))
    summary = "; ".join(f"{name}: latest {_figure(values[-1])} {unit}" for name, values in series.items() if values)
    return _figure_svg(_Frame(title, labels, unit, top), "".join(parts), legend, summary)


def bar_chart(title: str, labels: list[str], values: list[float], unit: str) -> Markup:
    """One bar per label."""
    top = _nice_top(max(values, default=0))
    step = (_WIDTH - _LEFT - _RIGHT) / max(len(values), 1)
    bars = []
    for i, (label, value) in enumerate(zip(labels, values)):
        y = _y(value, top)
        bars.append(
            f'<rect class="bar" x="{_LEFT + i * step + step * 0.15:.1f}" y="{y:.1f}" '
            f'width="{step * 0.7:.1f}" height="{_HEIGHT - _BOTTOM - y:.1f}">'
            f"<title>{escape(label)}: {_figure(value)} {escape(unit)}</title></rect>"
        )
    summary = f"latest {_figure(values[-1])} {unit}, highest {_figure(max(values))} {unit}" if values else "no data"
    return _figure_svg(_Frame(title, labels, unit, top), "".join(bars), "", summary)


def _figure_svg(frame: _Frame, body: str, legend: str, summary: str) -> Markup:
    title, labels, unit, top = frame.title, frame.labels, frame.unit, frame.top
    axis = (
        f'<line class="axis" x1="{_LEFT}" y1="{_HEIGHT - _BOTTOM}" x2="{_WIDTH - _RIGHT}" y2="{_HEIGHT - _BOTTOM}"/>'
        f'<line class="grid" x1="{_LEFT}" y1="{_TOP}" x2="{_WIDTH - _RIGHT}" y2="{_TOP}"/>'
        f'<text class="tick" x="{_LEFT - 4}" y="{_TOP + 4}" text-anchor="end">{_figure(top)}</text>'
        f'<text class="tick" x="{_LEFT - 4}" y="{_HEIGHT - _BOTTOM}" text-anchor="end">0</text>'
    )
    if labels:
        axis += (
            f'<text class="tick" x="{_LEFT}" y="{_HEIGHT - 6}">{escape(labels[0])}</text>'
            f'<text class="tick" x="{_WIDTH - _RIGHT}" y="{_HEIGHT - 6}" text-anchor="end">'
            f"{escape(labels[-1])}</text>"
        )
    heading = f'<figcaption>{escape(title)} <span class="unit">({escape(unit)})</span>'
    heading += f' <span class="legend">{legend}</span></figcaption>' if legend else "</figcaption>"
    return Markup(
        f'<figure class="chart">{heading}<svg viewBox="0 0 {_WIDTH} {_HEIGHT}" role="img" '
        f'aria-label="{escape(title)}: {escape(summary)}">{axis}{body}</svg></figure>'
    )


def _x(i: int, count: int) -> float:
    span = _WIDTH - _LEFT - _RIGHT
    return _LEFT + (span / 2 if count == 1 else span * i / (count - 1))


def _y(value: float, top: float) -> float:
    return _HEIGHT - _BOTTOM - (_HEIGHT - _TOP - _BOTTOM) * (value / top if top else 0)


def _nice_top(highest: float) -> float:
    """The axis top: 1, 2 or 5 times a power of ten, at or above the highest value."""
    if highest <= 0:
        return 1.0
    power = 10 ** len(str(int(highest))) / 10 if highest >= 1 else 1.0
    while power / 10 >= highest and power > 0.01:
        power /= 10
    return next(step * power for step in (1, 2, 5, 10) if step * power >= highest)


def _figure(value: float) -> str:
    return f"{value:.0f}" if value >= 100 or value == int(value) else f"{value:.1f}" if value >= 10 else f"{value:.2f}"

"""The report's charts as inline SVG strings (matplotlib's SVG backend; no pyplot, no display, no network).

Text stays real SVG <text> (`svg.fonttype: none`) so the file stays small and a test can find legend labels;
every drawn series carries an SVG id (matplotlib's `gid`) such as `spectrum-e2e-response`. Dense scatter
layers are rasterized into an embedded PNG so a million samples do not become a million SVG elements.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.axis import Axis
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from .labels import spread, stack_rows
from .spectrum import Spectrum, axis_ticks, tail_x
from .svg_compact import compact_svg

# One sans-serif family: matplotlib writes the whole fallback list into every <text> element otherwise.
matplotlib.rcParams.update(
    {"svg.fonttype": "none", "svg.hashsalt": "sixnines", "font.size": 9, "font.sans-serif": ["DejaVu Sans"]}
)

BASIS_STYLE = {  # response time (from intended) is what a user waits; service time hides coordinated omission
    "intended": ("response time", "#c0392b"),
    "sent": ("service time", "#2471a3"),
}
PHASE_SHADE = {"warmup": "#f2f2f2", "cooldown": "#f2f2f2"}
NO_METADATA = {"Creator": None, "Date": None, "Format": None, "Type": None}
CYCLE = ("#c0392b", "#2471a3", "#27ae60", "#8e44ad", "#d68910", "#17a589", "#5d6d7e", "#cb4335", "#1f618d")


@dataclass(frozen=True)
class Curve:
    """One spectrum line: legend label, SVG id, colour, dashed or not."""

    label: str
    gid: str
    spectrum: Spectrum
    color: str
    dashed: bool = False


@dataclass(frozen=True)
class Marker:
    """A vertical line on a time axis (a fault or a leader change), seconds since t0."""

    at_s: float
    label: str
    color: str
    end_s: float | None = None  # a stall's end: the span is shaded


def plain_log_ticks(axis: Axis) -> None:
    """Log axis ticks at 1-2-5 steps written as plain numbers (0.5, 2, 10): latencies rarely span enough
    decades for matplotlib's default 10^k labels to show more than one tick."""
    axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


RASTER_DPI = 100  # of the rasterized scatter dots only (the rest is vector): ~900 px across the page's charts


def to_svg(fig: Figure) -> str:
    """The figure as an <svg> element without the XML prolog, ready to inline in HTML."""
    buf = io.StringIO()
    # No RDF metadata block: it only adds namespace URLs and a creation date that changes every build.
    fig.savefig(buf, format="svg", bbox_inches="tight", dpi=RASTER_DPI, metadata=NO_METADATA)
    text = buf.getvalue()
    return compact_svg(text[text.index("<svg") :])


MAX_LABEL_GAP = 0.075  # axes fraction between two max labels: one 7.5 pt line of text with air, 4.2 in high


def spectrum_chart(title: str, curves: Sequence[Curve]) -> str:
    """Latency (log) against percentile on the 1/(1−p) axis; table percentiles dotted, each max marked."""
    return to_svg(spectrum_figure(title, curves))


def spectrum_figure(title: str, curves: Sequence[Curve]) -> Figure:
    """The spectrum chart as a figure (tests measure where its labels landed)."""
    fig = Figure(figsize=(9, 4.2))
    ax = fig.add_subplot()
    most = max((c.spectrum.count for c in curves), default=1)
    for c in curves:
        s = c.spectrum
        if s.count == 0:
            continue
        keep = s.latency_ns > 0
        ax.plot(
            s.x[keep],
            s.latency_ns[keep] / 1e6,
            color=c.color,
            ls="--" if c.dashed else "-",
            lw=1.6,
            label=f"{c.label} (n={s.count:,})",
            gid=c.gid,
        )
        xs = [tail_x(p) for p in s.marks]
        ax.plot(xs, [v / 1e6 for v in s.marks.values()], "o", color=c.color, ms=3.5, gid=f"{c.gid}-percentiles")
        if s.max_ns:
            ax.plot([s.count], [s.max_ns / 1e6], marker="^", color=c.color, ms=7, ls="none", gid=f"{c.gid}-max")
    ticks = axis_ticks(most)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks([x for x, _ in ticks], [label for _, label in ticks])
    ax.minorticks_off()
    plain_log_ticks(ax.yaxis)
    ax.set_xlim(1, ticks[-1][0] * 1.05)
    ax.set_xlabel("percentile (HdrHistogram 1/(1−p) axis; drawn only where the sample count supports it)")
    ax.set_ylabel("latency (ms, log)")
    ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    _max_labels(ax, [c for c in curves if c.spectrum.count and c.spectrum.max_ns])
    return fig


def _max_labels(ax: Axes, curves: Sequence[Curve]) -> None:
    """Each curve's max as a label in a column right of the plot, spread so no two overlap, with a leader
    line to its marker (labels beside their markers collided whenever two cells had similar maxima)."""
    ax.get_ylim()  # settle the autoscaled limits before mapping data to axes fractions
    to_axes = ax.transData + ax.transAxes.inverted()
    points = [(c.spectrum.count, c.spectrum.max_ns / 1e6) for c in curves]  # type: ignore[operator]
    wanted = [float(to_axes.transform(p)[1]) for p in points]
    for c, point, y in zip(curves, points, spread(wanted, MAX_LABEL_GAP, 0.02, 0.98), strict=True):
        ax.annotate(
            f"max {point[1]:.3g} ms",
            point,
            xytext=(1.01, y),
            textcoords="axes fraction",
            va="center",
            ha="left",
            fontsize=7.5,
            color=c.color,
            annotation_clip=False,
            arrowprops={"arrowstyle": "-", "color": c.color, "lw": 0.6, "alpha": 0.7, "shrinkA": 0, "shrinkB": 4},
            gid=f"{c.gid}-max-label",
        )


@dataclass(frozen=True)
class Points:
    """One scatter layer: seconds since t0 and latency in ns."""

    label: str
    gid: str
    at_s: np.ndarray
    latency_ns: np.ndarray
    color: str


def scatter_chart(
    title: str, layers: Sequence[Points], phases_s: Sequence[tuple[str, float, float]], markers: Sequence[Marker]
) -> str:
    """Every sample's latency against its intended send time (seed 001's view): phases shaded, faults and
    leader changes as labelled vertical lines. The dots are rasterized; axes, labels and lines stay vector."""
    return to_svg(scatter_figure(title, layers, phases_s, markers))


def scatter_figure(
    title: str, layers: Sequence[Points], phases_s: Sequence[tuple[str, float, float]], markers: Sequence[Marker]
) -> Figure:
    """The scatter chart as a figure (tests measure where its labels landed)."""
    fig = Figure(figsize=(9, 4.2))
    ax = fig.add_subplot()
    for name, start, end in phases_s:
        if name in PHASE_SHADE:
            ax.axvspan(start, end, color=PHASE_SHADE[name], zorder=0, gid=f"phase-{name}")
    for layer in layers:
        keep = layer.latency_ns > 0
        ax.scatter(
            layer.at_s[keep],
            layer.latency_ns[keep] / 1e6,
            s=2,
            lw=0,
            color=layer.color,
            alpha=0.55,
            label=f"{layer.label} ({int(keep.sum()):,} samples)",
            rasterized=True,
            gid=layer.gid,
        )
    if any(bool((layer.latency_ns > 0).any()) for layer in layers):  # a log axis without data cannot be drawn
        ax.set_yscale("log")
        plain_log_ticks(ax.yaxis)
    top = ax.get_ylim()[1]
    for name, start, end in phases_s:
        ax.text((start + end) / 2, top, name, ha="center", va="bottom", fontsize=7.5, color="#555")
    for i, m in enumerate(markers):
        ax.axvline(m.at_s, color=m.color, lw=1.2, ls="--", gid=f"marker-{i}")
        if m.end_s is not None:
            ax.axvspan(m.at_s, m.end_s, color=m.color, alpha=0.12)
    for m, row in zip(markers, _marker_rows(fig, ax, markers), strict=True):
        ax.annotate(
            m.label,
            (m.at_s, 0.97 - MARKER_ROW * row),
            xycoords=("data", "axes fraction"),
            fontsize=MARKER_FONT_PT,
            color=m.color,
            ha="left",
            va="top",
            xytext=(3, 0),
            textcoords="offset points",
        )
    ax.set_xlabel("intended send time (s since t0)")
    ax.set_ylabel("latency (ms, log)")
    ax.set_title(title, pad=14)
    ax.grid(True, alpha=0.3)
    if layers:
        legend = ax.legend(loc="lower right", fontsize=8, markerscale=4)
        # Rasterized dots merge into one embedded PNG and lose their ids; the legend keys stay vector and
        # carry each layer's id, so the SVG still names the series it shows.
        for handle, layer in zip(legend.legend_handles, layers, strict=True):
            if handle is not None:
                handle.set_gid(layer.gid)
    return fig


MARKER_ROW = 0.07  # axes fraction per row of marker labels
MARKER_FONT_PT = 7.5


def _marker_rows(fig: Figure, ax: Axes, markers: Sequence[Marker]) -> list[int]:
    """Rows for the marker labels so that none runs into another: each label's extent along the time axis is
    estimated from its length (DejaVu Sans averages under 0.62 em per character)."""
    ax.get_xlim()  # settle the autoscaled limits
    x0, x1 = ax.get_xlim()
    width_pt = ax.get_position().width * fig.get_figwidth() * 72
    per_pt = (x1 - x0) / width_pt
    spans = [(m.at_s, m.at_s + (3 + 0.62 * MARKER_FONT_PT * len(m.label)) * per_pt) for m in markers]
    return stack_rows(spans, pad=2 * per_pt)


def histogram_chart(title: str, layers: Sequence[Points], buckets_per_decade: int = 20) -> str:
    """How many samples fell in each log-spaced latency bucket (equal width per factor of 10^(1/20))."""
    fig = Figure(figsize=(9, 3.6))
    ax = fig.add_subplot()
    values = [layer.latency_ns[layer.latency_ns > 0] / 1e6 for layer in layers]
    present = [v for v in values if v.size]
    if present:
        lo = min(float(v.min()) for v in present)
        hi = max(float(v.max()) for v in present)
        decades = max(np.log10(hi) - np.log10(lo), 0.1)
        edges = np.geomspace(lo, hi * 1.0001, int(np.ceil(decades * buckets_per_decade)) + 1)
        for layer, v in zip(layers, values, strict=True):
            if v.size:
                ax.hist(
                    v,
                    bins=edges,
                    histtype="step",
                    lw=1.4,
                    color=layer.color,
                    gid=layer.gid,
                    label=f"{layer.label} (n={v.size:,})",
                )
        ax.set_xscale("log")
        ax.set_yscale("log")
        plain_log_ticks(ax.xaxis)
        ax.legend(loc="upper right", fontsize=8)
    ax.set_xlabel(f"latency (ms, log buckets, {buckets_per_decade} per decade)")
    ax.set_ylabel("samples per bucket (log)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    return to_svg(fig)


@dataclass(frozen=True)
class RatioLine:
    """B/A per percentile key ('50', …, 'max'); None where either side is unsupported."""

    label: str
    gid: str
    ratios: dict[str, float | None]
    color: str
    dashed: bool = False


def ratio_chart(
    title: str, keys: Sequence[str], lines: Sequence[RatioLine], ylabel: str = "latency ratio B/A (log; 1 = equal)"
) -> str:
    """B/A per percentile on a log ratio axis (seed 002's view): above 1 B is slower, below 1 B is faster."""
    fig = Figure(figsize=(9, 3.8))
    ax = fig.add_subplot()
    x = np.arange(len(keys))
    for line in lines:
        ys = np.array([np.nan if line.ratios.get(k) is None else line.ratios[k] for k in keys], dtype=float)
        ax.plot(
            x,
            ys,
            marker="o",
            ms=4,
            lw=1.5,
            color=line.color,
            ls="--" if line.dashed else "-",
            label=line.label,
            gid=line.gid,
        )
    ax.axhline(1.0, color="#333", lw=0.8)
    ax.set_yscale("log")
    plain_log_ticks(ax.yaxis)
    ax.set_xticks(x, [k if k == "max" else f"{k} %" for k in keys])
    ax.set_xlabel("percentile (points missing where either side is unsupported)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if lines:
        ax.legend(loc="best", fontsize=7.5)  # ratios often hug the top left, where a fixed legend hid them
    return to_svg(fig)


def history_chart(
    title: str,
    run_labels: Sequence[str],
    values: Sequence[float],
    change_index: int,
    gid: str,
    axis_label: str = "latency (ms)",
) -> str:
    """One regressed series over its runs, the change point marked and each side's mean drawn: the alert as a
    picture, so a reader can judge the shift against the night-to-night noise. `axis_label` names the values'
    quantity and unit (a latency in ms, a capacity in msg/s)."""
    fig = Figure(figsize=(9, 3.4))
    ax = fig.add_subplot()
    x = np.arange(len(values))
    ax.plot(x, values, marker="o", ms=3, lw=1.2, color=CYCLE[1], gid=gid, label=f"{axis_label} per run")
    ax.axvline(change_index - 0.5, color=CYCLE[0], lw=1.5, ls="--", label="change point")
    for start, end in ((0, change_index), (change_index, len(values))):
        if end > start:
            mean = float(np.mean(values[start:end]))
            ax.hlines(mean, start, end - 1, color="#333", lw=1.2, alpha=0.7)
    step = max(1, len(run_labels) // 12)
    ax.set_xticks(x[::step], [run_labels[i] for i in range(0, len(run_labels), step)], rotation=30, fontsize=7)
    ax.set_ylabel(axis_label)
    ax.set_xlabel("run (oldest → newest; means of each side drawn)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    return to_svg(fig)


@dataclass(frozen=True)
class ReleaseLine:
    """One percentile across releases (ms; None where unsupported) and the band of each release's repeats."""

    label: str
    gid: str
    values: Sequence[float | None]
    bands: Sequence[tuple[float, float] | None]
    color: str


def release_chart(title: str, releases: Sequence[str], lines: Sequence[ReleaseLine], moved: int | None) -> str:
    """Every percentile against release (release order, log latency), each release's run-to-run band shaded,
    and the first release whose tail moved beyond the noise marked: which release moved the tail, at a glance."""
    fig = Figure(figsize=(9, 4.2))
    ax = fig.add_subplot()
    x = np.arange(len(releases))
    for k, line in enumerate(lines):
        ys = np.array([np.nan if v is None else v for v in line.values], dtype=float)
        ax.plot(x, ys, marker="o", ms=4, lw=1.2, color=line.color, label=line.label, gid=line.gid)
        banded = [(i, b) for i, b in enumerate(line.bands) if b is not None]
        if banded:  # each release's own band, drawn where it was measured (a band is not a trend), side by side
            at = np.array([i for i, _ in banded], dtype=float) + 0.035 * (k - (len(lines) - 1) / 2)
            ax.vlines(at, [b[0] for _, b in banded], [b[1] for _, b in banded], color=line.color, lw=6, alpha=0.25,
                      gid=f"{line.gid}-band")  # fmt: skip
    if moved is not None:
        ax.axvline(moved - 0.5, color="#333", lw=1.5, ls="--", label=f"tail moved at {releases[moved]}")
    ax.set_yscale("log")
    plain_log_ticks(ax.yaxis)
    ax.set_xticks(x, releases, rotation=30, fontsize=8)
    ax.set_xlabel("release (release order; bars: min–max across the repeats of each release)")
    ax.set_ylabel("latency (ms, log)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize=7.5, ncol=2)
    return to_svg(fig)

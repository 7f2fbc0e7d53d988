"""Figures: matplotlib, Axes in, Axes out.

Every function takes one :class:`~headroom.summary.Summary` or a list of
them (overlaid, each run in its own colour with its label in the legend),
keyword-only options and an optional ``ax``, and returns the Axes it drew
on.  Nothing here reads files or computes statistics: the numbers come from
the summary, or from :mod:`headroom.binning` helpers called for the plot.
Axes start at zero and scale to the data.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import LinearSegmentedColormap, LogNorm
from matplotlib.ticker import EngFormatter, FuncFormatter, MaxNLocator

from .binning import bucket_percentiles, density, latency_edges
from .model import PERCENTILES, percentile_label
from .steps import percentile_interval
from .summary import Summary
from .text import run_labels

_NS = 1e9
#: titles sit on the Axes' top edge (no Axes here has ticks on top): a fixed place saves matplotlib
#: measuring every tick label of the Axes at each draw to find one
_TITLE_Y = 1.0
_STYLE = {"p50": "--", "p90": "-.", "p95": "-.", "p99": "-", "p995": ":", "p999": ":", "mean": "-."}
_PNAME = {"p995": "p99.5", "p999": "p99.9"}


def _runs(summaries: Summary | Sequence[Summary]) -> list[Summary]:
    if isinstance(summaries, Summary):
        return [summaries]
    runs = list(summaries)
    if not runs:
        raise ValueError("no runs to plot")
    return runs


def _colors(n: int) -> list[str]:
    cycle = mpl.rcParams["axes.prop_cycle"].by_key().get("color", ["C0", "C1", "C2"])
    return [cycle[i % len(cycle)] for i in range(n)]


def _ax(ax, figsize=(9, 5.5)):
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def _pname(name: str) -> str:
    return percentile_label(name)


def _load_start_ns(s: Summary) -> int:
    has = s.steps.requests > 0
    return int(s.steps.start_ns[has].min()) if has.any() else 0  # 0: a run that got no response


def _fmt_ms(v: float) -> str:
    return f"{v:.3g}" if v < 10 else f"{v:,.0f}"


def _legend_below(
    ax,
    *,
    lines_below: int = 1,
    ncol: int = 2,
    fontsize: float = 8,
    handles=None,
    labels=None,
    fit: bool = True,
):
    """A legend under the Axes, clear of the tick labels and the (possibly multi-line) x label;
    ``fit``: no more columns than fit under the Axes (a panel beside it would be run into)."""
    from matplotlib.transforms import ScaledTranslation

    drop = (18 + 15 * lines_below) / 72
    transform = ax.transAxes + ScaledTranslation(0, -drop, ax.figure.dpi_scale_trans)
    extra = {} if handles is None else {"handles": handles, "labels": labels}
    shown = labels if labels is not None else ax.get_legend_handles_labels()[1]
    return ax.legend(
        **extra,
        loc="upper center",
        bbox_to_anchor=(0.5, 0),
        bbox_transform=transform,
        ncol=_fitting_columns(ax, shown, ncol, fontsize) if fit else ncol,
        fontsize=fontsize,
        frameon=False,
    )


def _fitting_columns(ax, labels, ncol: int, fontsize: float) -> int:
    """At most ``ncol`` legend columns, as many as fit under the Axes' width (a legend wider than its
    Axes runs into the neighbouring panel)."""
    if not labels:
        return 1
    width_in = ax.get_position().width * ax.figure.get_size_inches()[0]
    longest = max(len(str(x)) for x in labels) * fontsize * 0.55 / 72 + 0.6  # text + handle and gap
    return int(max(1, min(ncol, len(labels), width_in // longest)))


def _step_values(t, name: str) -> np.ndarray:
    """Per-step latency (seconds) of a percentile, or of the mean."""
    return t.latency.mean_s if name == "mean" else t.latency.pct[name]


def _steps_xy(s: Summary, name: str):
    """(step indices, throughput, latency s) of the usable steps in concurrency order.

    The same steps, in the same order, that :func:`headroom.capacity.crossing`
    interpolates the throughput at the objective between.
    """
    t = s.table
    v = _step_values(t, name)
    o = np.array([int(i) for i in t.order() if t.usable[i] and np.isfinite(v[i])], dtype=int)
    return o, t.goodput_rps[o], v[o]


def _quantile(name: str, obj) -> tuple[int, int] | None:
    for pname, num, den in PERCENTILES:
        if pname == name:
            return num, den
    return obj.q if obj is not None and obj.name == name else None


def _latency_range(runs: list[Summary], names, obj, *, log: bool, y_max_ms: float | None):
    """(bottom, top) of the latency axis in seconds: the steps' percentiles and the objective fit."""
    if log:
        top = max(float(s.hist.values.max()) if len(s.hist.values) else 1e-3 for s in runs) * 1.05
        lows = [float(s.hist.values[s.hist.values > 0].min()) for s in runs if (s.hist.values > 0).any()]
        for s in runs:
            for name in names:
                y = _steps_xy(s, name)[2]
                lows += [float(y[y > 0].min())] if (y > 0).any() else []
        bottom = max(min(lows) if lows else 1e-4, 1e-5) / 1.5
    else:
        tops = [obj.bound_s] if obj is not None else []
        for s in runs:
            for name in names:
                y = _steps_xy(s, name)[2]
                tops += [float(y.max())] if y.size else []
        top, bottom = (max(tops) if tops else 1e-3) * 1.25, 0.0
    return bottom, (y_max_ms / 1e3 if y_max_ms else top)


#: throughput columns of the headroom plot's shading: a time bucket shades a band 1/60 of the axis
#: wide (with 120 the few buckets of a ramp drew hairline stripes that cluttered the plot)
DENSITY_COLUMNS = 60


def density_grids(runs: list[Summary], *, x_max: float, y_top_s: float, y_bottom_s: float, log: bool):
    """One 2-D histogram of requests per run, on bins defined once on the pooled runs.

    As seaborn's ``Histogram.define_bin_params``: the throughput columns
    (0 to ``x_max``) and the latency rows (halfway between the pooled
    latencies' quantization steps) are the same for every run, so two runs'
    shading compares cell by cell.
    """
    pooled = np.unique(np.concatenate([s.hist.values for s in runs]))
    edges = latency_edges(pooled, y_top_s, ny=100, log=log, y_min_s=y_bottom_s or None)
    return [
        density(s.buckets, s.hist, x_max=x_max, y_max_s=y_top_s, y_edges_s=edges, nx=DENSITY_COLUMNS)
        for s in runs
    ]


def _headroom_frame(runs, names, obj, *, log: bool, y_max_ms: float | None, grids: bool):
    """((bottom, top) of the latency axis in s, top of the throughput axis, density grids or [])."""
    y_bottom, y_top = _latency_range(runs, names, obj, log=log, y_max_ms=y_max_ms)
    x_top = 1.08 * max(
        max(
            float(np.nanmax(s.buckets.rps)) if len(s.buckets) else 1.0,
            float(np.nanmax(s.table.goodput_rps, initial=0)),
        )
        for s in runs
    )
    if not grids:
        return (y_bottom, y_top), x_top, []
    out = density_grids(runs, x_max=x_top, y_top_s=y_top, y_bottom_s=y_bottom, log=log)
    if not log and not y_max_ms:  # end on the grid's top edge: "not shown" counts exactly what is cut
        y_top = float(out[0].y_edges[-1])
    return (y_bottom, y_top), x_top, out


def _draw_density(ax, grids, colors) -> None:
    for grid, color in zip(grids, colors):
        if not grid.counts.any():
            continue
        ax.pcolormesh(
            grid.x_edges,
            grid.y_edges * 1e3,
            np.ma.masked_equal(grid.counts.T, 0),
            cmap=LinearSegmentedColormap.from_list("run", [(1, 1, 1, 0), color]),
            norm=LogNorm(vmin=1, vmax=max(2, int(grid.counts.max()))),
            alpha=0.3 if len(grids) > 1 else 0.4,
            shading="flat",
            rasterized=True,
            zorder=1,
        )


def _draw_stop(ax, s: Summary, name: str, *, color, label: str) -> None:
    """A cross at the run's last step when its server stopped answering, with where it stopped."""
    from .stopped import run_stop

    st = run_stop(s, label)
    if st is None:
        return
    o, x, y = _steps_xy(s, name)
    if not len(o):
        return
    kept = st.kept
    ax.plot(x[-1], y[-1] * 1e3, "X", color="C3", mec="black", ms=13, zorder=7)
    text = f"{label}: stopped answering at {st.where()}" + ("" if kept else " (the next step)")
    ax.annotate(
        text, (x[-1], y[-1] * 1e3), xytext=(-10, 14), textcoords="offset points", ha="right",
        fontsize=9, color="C3", fontweight="bold", zorder=7,
    )  # fmt: skip


def _draw_steps(ax, s: Summary, names, obj, *, color, label: str, intervals: bool) -> set[str]:
    """Each usable step at its throughput and latency, joined in concurrency order, with intervals."""
    drawn = set()
    for name in names:
        o, x, y = _steps_xy(s, name)
        if not len(o):
            continue
        ms = 1e3
        ax.plot(
            x, y * ms, _STYLE.get(name, "-"), color=color, lw=1.6, zorder=4, label=f"{label} {_pname(name)}"
        )
        thin = s.table.latency.thin[name][o] if name in s.table.latency.thin else np.zeros(len(o), bool)
        ax.plot(
            x[~thin], y[~thin] * ms, "o", color=color, ms=5, zorder=5, label=f"{label} {_pname(name)} steps"
        )
        if thin.any():
            ax.plot(x[thin], y[thin] * ms, "o", mfc="white", color=color, ms=5, zorder=5)
            drawn.add("thin")
        q = _quantile(name, obj)
        if intervals and q is not None:
            lo, hi, _ = percentile_interval(s.table.latency.counts[o], s.hist.values, *q)
            ax.vlines(
                x, lo * ms, hi * ms, color=color, lw=1.3, zorder=4, label=f"{label} {_pname(name)} interval"
            )
            drawn.add("interval")
    return drawn


def _draw_usl(ax, s: Summary, *, color, label: str) -> set[str]:
    """The USL's mean latency N / X(N) against X(N): up to its peak, past it thin and dashed."""
    m = s.capacity.model
    if m is None:
        return set()
    if not m.trusted:
        n = np.linspace(m.n_lo, m.n_hi, 200)
        ax.plot(
            m.rps_at(n),
            m.latency_s_at(n) * 1e3,
            ls=":",
            color=color,
            lw=1,
            alpha=0.35,
            zorder=3,
            label=f"{label} USL model: poor fit, R\u00b2 {m.r2_log:.2f}",
        )
        return {"poor"}
    drawn = {"usl"}
    peak = min(m.peak_concurrency, m.n_hi)
    n = np.linspace(m.n_lo, peak, 200)
    ax.plot(
        m.rps_at(n),
        m.latency_s_at(n) * 1e3,
        color=color,
        lw=2.6,
        alpha=0.5,
        zorder=4.5,  # above the p50 lines it runs beside (translucent: they show through), below the dots
        solid_capstyle="butt",
        label=f"{label} USL model (mean latency)",
    )
    if peak < m.n_hi:
        n = np.linspace(peak, m.n_hi, 100)
        ax.plot(
            m.rps_at(n),
            m.latency_s_at(n) * 1e3,
            ls=(0, (3, 2)),
            color=color,
            lw=1,
            alpha=0.7,
            zorder=3,
            label=f"{label} USL past its peak (retrograde)",
        )
        drawn.add("retrograde")
    if m.knee_rps is not None:
        ax.plot(
            [m.knee_rps],
            [float(m.latency_s_at(m.knee_concurrency)) * 1e3],
            "*",
            ms=14,
            color=color,
            mec="black",
            mew=0.6,
            zorder=6,
            label=f"{label} knee",
        )
        drawn.add("knee")
    return drawn


def _draw_crossing(ax, s: Summary, *, color, label: str, y_bottom_s: float, row: int = 0) -> set[str]:
    """The throughput at the objective, where the step curve crosses the objective line, and its value.

    The value is written beside the mark, above the line (the second run's
    a row higher), where the steps that still hold the objective are not.
    """
    cap = s.capacity
    c = cap.at_objective
    if c is None or c.rps is None:
        return set()
    y = cap.objective.bound_s * 1e3
    held = c.status == "held"
    if held:
        ax.plot([c.rps], [y], ">", ms=10, color=color, mec="black", mew=0.8, zorder=7, label=f"{label} held")
    else:
        ax.plot([c.rps, c.rps], [y_bottom_s * 1e3, y], ":", color=color, lw=1.2, zorder=3)
        ax.plot(
            [c.rps], [y], "D", ms=8, color=color, mec="black", mew=0.8, zorder=7, label=f"{label} crossing"
        )
    band = _crossing_band(ax, c, y, color, label, float(np.nanmax(s.table.goodput_rps)))
    ax.annotate(
        f"{'>= ' if held else ''}{c.rps:,.0f} req/s{band}",
        (c.rps, y),
        xytext=(7, 5 + 12 * (row % 2)),
        textcoords="offset points",
        fontsize=8,
        color=color,
        fontweight="bold",
        bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8},
        zorder=8,
    )
    return {"held" if held else "crossing"} | ({"crossing interval"} if band else set())


def _crossing_band(ax, c, y: float, color, label: str, x_max: float) -> str:
    """The throughput at the objective's 95 % interval as a bar on the objective line (an open end runs
    to 0 or to the run's highest step throughput); its text for the mark's label ("" when there is none)."""
    if c.status != "crossed" or (c.low is None and c.high is None):
        return ""
    lo, hi = c.low if c.low is not None else 0.0, c.high if c.high is not None else max(x_max, c.rps)
    ax.plot([lo, hi], [y, y], color=color, lw=5, alpha=0.45, solid_capstyle="butt", zorder=6,
            label=f"{label} interval at the objective")  # fmt: skip
    for end, known in ((lo, c.low is not None), (hi, c.high is not None)):
        if known:
            ax.plot([end], [y], "|", color=color, ms=12, mew=2, zorder=6)

    def num(v):
        return "open" if v is None else f"{v:,.0f}"

    return f" [{num(c.low)}, {num(c.high)}]"


def _draw_probes(ax, s: Summary, name: str, *, color) -> set[str]:
    """A search's steps (headroom ramp --find) numbered in the order it probed them."""
    search = (s.run.meta.fields or {}).get("search") if s.run.meta is not None else None
    if not isinstance(search, dict) or not search.get("probes"):
        return set()
    o, x, y = _steps_xy(s, name)
    at = {int(k): (xi, yi) for k, xi, yi in zip(o, x, y)}
    for p in search["probes"]:
        step = p.get("step")
        if isinstance(step, int) and step - 1 in at:
            xi, yi = at[step - 1]
            ax.annotate(str(p.get("probe", step)), (xi, yi * 1e3), xytext=(3, 3), textcoords="offset points",
                        fontsize=7, color=color, zorder=8)  # fmt: skip
    return {"probes"}


def _run_entry(s: Summary, label: str) -> str:
    """The run's legend entry: its name once, with its crossing and knee (the tables' words)."""
    cap = s.capacity
    parts = []
    c = cap.at_objective
    if c is not None and c.status == "crossed":
        band = (
            ""
            if c.low is None and c.high is None
            else (
                f" [{'open' if c.low is None else f'{c.low:,.0f}'}, {'open' if c.high is None else f'{c.high:,.0f}'}]"
            )
        )
        parts.append(f"at {cap.objective}: {c.rps:,.0f} req/s{band}")
    elif c is not None and c.status == "held":
        parts.append(f"at {cap.objective}: >= {c.rps:,.0f} req/s (held at every step)")
    elif c is not None and c.status == "at lowest step":
        parts.append(f"{cap.objective} broken already at the lowest step")
    m = cap.model
    if m is not None and not m.trusted:
        parts.append(f"USL fits poorly (R\u00b2 {m.r2_log:.2f}): no knee")
    elif cap.knee_rps is not None:
        parts.append(f"knee {cap.knee_rps:,.0f} req/s")
    return label + (": " + "; ".join(parts) if parts else "")


def _headroom_legend(ax, runs, labels, colors, names, obj, drawn: set[str], *, lines_below: int):
    """One entry per run (with its figures), then one grey key per kind of mark."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    g = "0.35"
    keys = [
        (Line2D([], [], color=c, lw=6, alpha=0.8), _run_entry(s, lb))
        for s, lb, c in zip(runs, labels, colors)
    ]
    for name in names:
        what = "mean latency" if name == "mean" else _pname(name)
        keys.append(
            (Line2D([], [], color=g, ls=_STYLE.get(name, "-"), marker="o", ms=4), f"{what} of each load step")
        )
    optional = [
        (
            "interval",
            Line2D([], [], color=g, marker="|", ms=12, mew=1.3, ls="none"),
            "bar: 95 % order-statistic interval of the step's percentile",
        ),
        (
            "thin",
            Line2D([], [], color=g, marker="o", mfc="white", ls="none"),
            "hollow: < 10 requests above it",
        ),
        ("usl", Line2D([], [], color=g, lw=2.6, alpha=0.5), "USL model: mean latency (Little's law)"),
        (
            "retrograde",
            Line2D([], [], color=g, lw=1, ls=(0, (3, 2))),
            "USL past its peak: throughput falls (retrograde)",
        ),
        ("poor", Line2D([], [], color=g, lw=1, ls=":", alpha=0.5), "USL model, poor fit: no knee"),
        ("knee", Line2D([], [], color=g, marker="*", ms=10, ls="none"), "knee (USL, max power)"),
        ("objective", Line2D([], [], color=g, ls="--", lw=1), f"objective {obj}"),
        (
            "crossing",
            Line2D([], [], color=g, marker="D", mec="black", ls="none"),
            "throughput at the objective (as in the tables)",
        ),
        (
            "crossing interval",
            Line2D([], [], color=g, lw=5, alpha=0.45),
            "bar on the objective: its 95 % interval (monotone fit of the steps)",
        ),
        (
            "held",
            Line2D([], [], color=g, marker=">", mec="black", ls="none"),
            "objective held at every step: plateau, a lower bound",
        ),
        ("probes", Line2D([], [], ls="none"), "numbers: the order of a search's probes (ramp --find)"),
        ("density", Patch(color=g, alpha=0.4), "shading: requests of each time bucket (log)"),
    ]
    keys += [(h, t) for k, h, t in optional if k in drawn]
    _legend_below(  # two columns under the whole figure: nothing is beside the headroom plot's legend
        ax,
        lines_below=lines_below,
        ncol=2,
        handles=[h for h, _ in keys],
        labels=[t for _, t in keys],
        fit=False,
    )


def headroom(
    summaries: Summary | Sequence[Summary],
    *,
    percentiles: Sequence[str] = ("p50", "p99"),
    density: bool = True,
    intervals: bool = True,
    fit: bool = True,
    objective: bool = True,
    marginals: bool = False,
    color_by_time: bool = False,
    log_latency: bool = False,
    y_max_ms: float | None = None,
    ax=None,
):
    """The headroom plot: latency against throughput, one point per load step.

    Each usable step is a point at its throughput with its p50 and p99 (and
    the objective's percentile), a bar for the percentile's 95 %
    order-statistic interval (within-step sampling; see
    :func:`headroom.steps.percentile_interval`), lines joining the steps in
    concurrency order.  Behind them, each run's requests as a density (time
    bucket throughput against latency) on bins shared by all runs.  The USL
    model's mean latency is drawn up to its peak and, past it (retrograde),
    thin and dashed; a poor fit (R² < 0.5) faint, without a knee.  The
    objective line, and a diamond where each run's step curve crosses it:
    the throughput at the objective of the tables.  The legend, under the
    Axes, names each run once with its figures.

    Parameters
    ----------
    summaries
        One summary or several to overlay.
    percentiles
        Step percentiles to draw (``"p50"``, ``"p99"``, ``"p999"``...); the
        objective's is added.
    density, intervals, fit, objective, marginals
        Draw the request density, the step intervals, the USL model, the
        objective, histograms of throughput (top) and latency (right).
    color_by_time
        Add every time bucket's percentile (the last of ``percentiles``),
        coloured by seconds since load start, so that a drifting run shows.
    log_latency
        Logarithmic latency axis, up to the slowest request: nothing is cut.
    y_max_ms
        Top of the latency axis in ms.
    ax
        Axes to draw on (default: a new figure); returned.
    """
    runs, ax = _runs(summaries), _ax(ax)
    labels, colors = run_labels(runs), _colors(len(runs))
    obj = next((s.capacity.objective for s in runs if s.capacity.objective is not None), None)
    names = tuple(percentiles) + ((obj.name,) if obj is not None and obj.name not in percentiles else ())
    (y_bottom, y_top), x_top, grids = _headroom_frame(
        runs,
        names,
        obj if objective else None,
        log=log_latency,
        y_max_ms=y_max_ms,
        grids=density or marginals,
    )
    drawn = {"density"} if density and grids else set()
    if density:
        _draw_density(ax, grids, colors)
    for s, color, label in zip(runs, colors, labels):
        drawn |= _draw_steps(ax, s, names, obj, color=color, label=label, intervals=intervals)
        drawn |= _draw_usl(ax, s, color=color, label=label) if fit else set()
        if objective and obj is not None:
            drawn |= _draw_crossing(ax, s, color=color, label=label, y_bottom_s=y_bottom, row=runs.index(s))
        if color_by_time:
            _draw_by_time(ax, s, percentiles[-1], last=s is runs[-1], marginals=marginals)
        _draw_stop(ax, s, names[-1], color=color, label=label)
        drawn |= _draw_probes(ax, s, names[-1], color=color)
    if objective and obj is not None:
        ax.axhline(obj.bound_s * 1e3, color="0.3", ls="--", lw=1, zorder=2, label=f"objective {obj}")
        drawn.add("objective")
    xlabel = _finish_headroom(ax, runs, labels, grids, x_top=x_top, y=(y_bottom, y_top), log=log_latency)
    _headroom_legend(ax, runs, labels, colors, names, obj, drawn, lines_below=xlabel.count("\n") + 1)
    if marginals:
        _marginals(ax, grids, colors)
    return ax


def _draw_by_time(ax, s: Summary, p: str, *, last: bool, marginals: bool) -> None:
    bp = bucket_percentiles(s.buckets, s.hist, (p,))[p]
    t = (s.buckets.start_ns - _load_start_ns(s)) / _NS + s.buckets.length_s / 2
    sc = ax.scatter(s.buckets.rps, bp * 1e3, c=t, cmap="viridis", s=14, zorder=3, edgecolors="none")
    if last:
        cax = ax.inset_axes([1.22 if marginals else 1.02, 0, 0.025, 1])
        ax.figure.colorbar(sc, cax=cax, label=f"bucket {_pname(p)}: seconds since load start")


def _finish_headroom(ax, runs, labels, grids, *, x_top: float, y: tuple[float, float], log: bool) -> str:
    """Limits, scales, labels; returns the x label (which says what the cut axis hides)."""
    y_bottom, y_top = y
    ax.set_xlim(0, x_top)
    if log:
        ax.set_yscale("log")
        _log_ms_ticks(ax)
    ax.set_ylim(y_bottom * 1e3, y_top * 1e3)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    xlabel = "throughput (requests/s): points per load step, shading per time bucket"
    cut = [(lb, g.above, int(g.counts.sum()) + g.above) for lb, g in zip(labels, grids) if g.above]
    if cut:
        who = (
            "; ".join(f"{lb}: {n:,} ({n / tot:.2%})" for lb, n, tot in cut)
            if len(runs) > 1
            else f"{cut[0][1]:,} ({cut[0][1] / cut[0][2]:.2%})"
        )
        xlabel += f"\nrequests above {_fmt_ms(y_top * 1e3)} ms not shown: {who}" + (
            "" if log else "; --log-latency (log_latency=True) shows them"
        )
    ax.set_xlabel(xlabel)
    ax.set_ylabel("latency (ms" + (", log scale)" if log else ")"))
    ax.set_title("Headroom plot: latency against throughput", y=_TITLE_Y)
    ax.grid(True, alpha=0.3)
    return xlabel


def _marginals(ax, grids, colors) -> None:
    """Histograms of throughput (top) and latency (right) of the density's requests."""
    top = ax.inset_axes([0, 1.02, 1, 0.18], sharex=ax)
    right = ax.inset_axes([1.02, 0, 0.15, 1], sharey=ax)
    for grid, color in zip(grids, colors):
        xc = (grid.x_edges[:-1] + grid.x_edges[1:]) / 2
        yc = (grid.y_edges[:-1] + grid.y_edges[1:]) / 2 * 1e3
        top.fill_between(xc, grid.x_marginal, step="mid", color=color, alpha=0.4)
        right.fill_betweenx(yc, grid.y_marginal, step="mid", color=color, alpha=0.4)
    top.set_ylim(bottom=0)
    right.set_xlim(left=0)
    compact = EngFormatter(sep="")
    top.yaxis.set_major_locator(MaxNLocator(2))
    top.yaxis.set_major_formatter(compact)
    # the right strip's counts go on top: at the bottom they would run into the main x labels
    right.xaxis.tick_top()
    right.xaxis.set_major_locator(MaxNLocator(2))
    right.xaxis.set_major_formatter(compact)
    top.tick_params(labelbottom=False, labelsize=7)
    right.tick_params(labelleft=False, labelsize=7)
    top.set_ylabel("requests", fontsize=7)
    right.set_xlabel("requests", fontsize=7)
    right.xaxis.set_label_position("top")
    top.set_title(ax.get_title(), y=_TITLE_Y)
    ax.set_title("")


def _step_breaks(s: Summary, values: np.ndarray):
    """x (s since load start) and y arrays drawing each bucket as a flat segment,
    broken (NaN) between steps so gaps stay gaps."""
    b = s.buckets
    t0 = _load_start_ns(s)
    xs, ys = [], []
    for i in range(len(b)):
        if i and b.step[i] != b.step[i - 1]:
            xs.append(np.nan)
            ys.append(np.nan)
        a = (b.start_ns[i] - t0) / _NS
        xs += [a, a + b.length_s[i]]
        ys += [values[i], values[i]]
    return np.array(xs), np.array(ys)


def _step_marks(s: Summary) -> list[tuple[float, float, float | None]]:
    """(start, middle) in seconds since load start and the concurrency of every step with requests."""
    t0 = _load_start_ns(s)
    st = s.steps
    out = []
    for k in range(len(st)):
        if st.requests[k] == 0:
            continue
        a = (st.start_ns[k] - t0) / _NS
        c = st.concurrency[k]
        out.append((a, a + (st.end_ns[k] - st.start_ns[k]) / _NS / 2, c))
    return out


def _end_s(runs: list[Summary]) -> float:
    ends = []
    for s in runs:
        has = s.steps.requests > 0
        if has.any():  # a run that got no response at all has no span
            ends.append((int(s.steps.end_ns[has].max()) - _load_start_ns(s)) / _NS)
    return max(ends, default=1.0)


def _mark_steps(ax, runs: list[Summary], labels: list[str], colors: list[str]) -> None:
    """Step starts as grey lines and each step's concurrency above the Axes (8 pt).

    When the runs' steps coincide (same concurrency, starts within a quarter
    of a step), one row of labels serves all; otherwise every run gets its
    own row in its colour.  Labels that would run into their neighbour are
    skipped (every other one, every third...), never overprinted.
    """
    marks = [_step_marks(s) for s in runs]
    same = all(
        len(m) == len(marks[0])
        and all(
            c == c0 and abs(a - a0) <= 0.25 * max(m0 - a0, 1e-9) * 2
            for (a, _, c), (a0, m0, c0) in zip(m, marks[0])
        )
        for m in marks
    )
    rows = [marks[0]] if same else marks
    x0, x1 = ax.get_xlim()
    fig = ax.figure
    width_pt = ax.get_position().width * fig.get_figwidth() * 72
    for r, (row, color) in enumerate(zip(rows, ["0.35"] if same else colors)):
        for a, _, _ in row:
            ax.axvline(a, color=color if not same else "0.85", lw=0.8, zorder=0, alpha=1 if same else 0.35)
        last_right = -np.inf
        for _a, mid, c in row:
            if c is None or not np.isfinite(c):
                continue
            text = f"c={c:g}"
            w = (len(text) * 0.6 * 8 + 4) / width_pt * (x1 - x0)  # label width in data units, 8 pt font
            if mid - w / 2 < last_right:
                continue
            last_right = mid + w / 2
            ax.annotate(
                text,
                (mid, 1.0),
                xycoords=("data", "axes fraction"),
                xytext=(0, 2 + 11 * r),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=8,
                color=color,
            )
    if not same:
        ax.annotate(
            "concurrency per step: " + ", ".join(labels),
            (0, 1.0),
            xycoords="axes fraction",
            xytext=(0, 4 + 11 * len(rows)),
            textcoords="offset points",
            fontsize=8,
            color="0.35",
        )


def throughput_over_time(summaries: Summary | Sequence[Summary], *, steps: bool = True, ax=None):
    """Throughput of every time bucket against seconds since load start.

    Each bucket is a flat segment; gaps between steps stay gaps and an empty
    bucket shows as zero.  Step starts are marked, with their concurrency
    (every run's, when the runs' steps differ).
    """
    runs = _runs(summaries)
    labels = run_labels(runs)
    colors = _colors(len(runs))
    ax = _ax(ax)
    for s, color, label in zip(runs, colors, labels):
        x, y = _step_breaks(s, s.buckets.rps)
        ax.plot(x, y, color=color, lw=1.5, label=label)
    ax.set_xlim(0, _end_s(runs) * 1.01)
    ax.set_ylim(bottom=0)
    if steps:
        _mark_steps(ax, runs, labels, colors)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set_xlabel("seconds since load start")
    ax.set_ylabel(f"throughput (requests/s,\n{runs[0].buckets.bucket_s:g} s buckets)")
    ax.grid(True, alpha=0.3)
    _legend_below(ax, ncol=len(runs))
    return ax


def cpu_over_time(summaries: Summary | Sequence[Summary], *, per_cpu: bool = True, ax=None):
    """CPU busy % against seconds since load start (the throughput plot's time axis).

    Each sample covers the interval since the previous one (drawn as a step);
    a gap in sampling stays a gap.  Per-CPU lines are drawn thin when present.
    A run without CPU samples is named in the legend.
    """
    runs = _runs(summaries)
    labels = run_labels(runs)
    ax = _ax(ax)
    top = 100.0
    cores = {s.run.cpu.cores for s in runs if s.run.cpu is not None and len(s.run.cpu)}
    for s, color, label in zip(runs, _colors(len(runs)), labels):
        cpu = s.run.cpu
        if cpu is None or len(cpu) == 0:
            ax.plot([], [], " ", label=f"{label}: no CPU samples")
            continue
        t = (cpu.time_ns - _load_start_ns(s)) / _NS
        gap = np.diff(t) > 1.5 * np.median(np.diff(t)) if len(t) > 2 else np.zeros(max(len(t) - 1, 0), bool)
        cut = np.flatnonzero(gap) + 1

        def broken(v, t=t, cut=cut):
            return np.insert(t.astype(float), cut, np.nan), np.insert(v.astype(float), cut, np.nan)

        if per_cpu and cpu.per_cpu is not None:
            for j in range(cpu.per_cpu.shape[1]):
                ax.plot(*broken(cpu.per_cpu[:, j]), drawstyle="steps-pre", color=color, lw=0.6, alpha=0.5)
        name = f"{label} (mean of {cpu.per_cpu.shape[1]} CPUs)" if cpu.per_cpu is not None else label
        if len(cores) > 1:
            name += f", 100 % = {cpu.cores:g} core(s)"
        ax.plot(*broken(cpu.pct), drawstyle="steps-pre", color=color, lw=1.6, label=name)
        top = max(top, float(np.nanmax(cpu.pct)) * 1.05)
        has = s.steps.requests > 0
        end = (s.steps.end_ns[has].max() - _load_start_ns(s)) / _NS
        ax.axvspan(0, end, color=color, alpha=0.06, lw=0)
    ax.set_ylim(0, top)
    if not cores:
        ax.set_xlim(0, _end_s(runs) * 1.01)
        ax.text(0.5, 0.5, "no CPU samples", transform=ax.transAxes, ha="center", color="0.5")
    ax.set_xlabel("seconds since load start")
    ax.set_ylabel("CPU busy (%" + (f", 100 % = {cores.pop():g} core(s))" if len(cores) == 1 else ")"))
    ax.grid(True, alpha=0.3)
    _legend_below(ax, ncol=len(runs))
    return ax


def cpu_vs_throughput(summaries: Summary | Sequence[Summary], *, per_request: bool = False, ax=None):
    """CPU of each load step (or CPU microseconds per request) against its throughput, and the CPU target.

    A run without CPU samples is named in the legend; with none at all the
    Axes say "no CPU samples" and show no scale.
    """
    runs = _runs(summaries)
    labels = run_labels(runs)
    ax = _ax(ax)
    drawn = False
    missing = []
    for s, color, label in zip(runs, _colors(len(runs)), labels):
        t = s.table
        o = [i for i in t.order() if np.isfinite(t.cpu_pct[i]) and t.usable[i]]
        if not o:
            missing.append(label)
            continue
        drawn = True
        y = t.cpu_s_per_req[o] * 1e6 if per_request else t.cpu_pct[o]
        ax.plot(t.goodput_rps[o], y, "o-", color=color, label=f"{label} (steps)")
        x_cpu = s.capacity.rps_at_cpu_target
        if not per_request and x_cpu is not None:
            ax.axvline(
                x_cpu, color=color, ls=":", lw=1, label=f"{label} at the CPU target: {x_cpu:,.0f} req/s"
            )
    if not drawn:
        ax.text(0.5, 0.5, "no CPU samples", transform=ax.transAxes, ha="center", color="0.5")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title("CPU per request" if per_request else "CPU against throughput", fontsize=10, y=_TITLE_Y)
        return ax
    for label in missing:
        ax.plot([], [], " ", label=f"{label}: no CPU samples")
    cores = runs[0].table.cpu_cores
    if not per_request:
        target = runs[0].capacity.cpu_target_pct
        ax.axhline(target, color="0.3", ls="--", lw=1, label=f"CPU target {target:g} %")
        ax.set_ylabel(f"CPU busy (%, 100 % = {cores:g} core(s))")
        ax.set_ylim(0, max(ax.get_ylim()[1], target * 1.1))
    else:
        ax.set_ylabel("CPU per request of each step (us)")
        ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.xaxis.set_major_locator(MaxNLocator(5))
    ax.set_xlabel("throughput (requests/s)")
    ax.grid(True, alpha=0.3)
    _legend_below(ax, ncol=1)
    return ax


def latency_over_time(
    summaries: Summary | Sequence[Summary],
    *,
    percentiles: Sequence[str] = ("p50", "p99"),
    log_latency: bool = False,
    objective: bool = True,
    ax=None,
):
    """Latency percentiles of every time bucket against seconds since load start, and the objective."""
    from matplotlib.lines import Line2D

    runs = _runs(summaries)
    labels = run_labels(runs)
    colors = _colors(len(runs))
    ax = _ax(ax)
    for s, color, label in zip(runs, colors, labels):
        bp = bucket_percentiles(s.buckets, s.hist, tuple(percentiles))
        for p in percentiles:
            x, y = _step_breaks(s, bp[p] * 1e3)
            ax.plot(x, y, _STYLE.get(p, "-"), color=color, lw=1.3, label=f"{label} {_pname(p)}")
    ax.set_xlim(0, _end_s(runs) * 1.01)
    _latency_axis(ax, log=log_latency)
    if objective:  # after the scale: its room above the data is set on the final axis
        _objective_line(ax, runs)
    _mark_steps(ax, runs, labels, colors)
    ax.set_xlabel("seconds since load start")
    ax.set_ylabel("latency (ms" + (", log scale)" if log_latency else ")"))
    ax.grid(True, alpha=0.3)
    handles = [Line2D([], [], color=c, lw=2) for c in colors]
    texts = list(labels)
    for p in percentiles:
        handles.append(Line2D([], [], color="0.35", ls=_STYLE.get(p, "-")))
        texts.append(f"{_pname(p)} of each time bucket")
    for ln in ax.get_lines():
        if ln.get_label().startswith("objective"):
            handles.append(Line2D([], [], color="0.3", ls="--", lw=1))
            texts.append(ln.get_label())
    _legend_below(ax, ncol=min(len(texts), 4), handles=handles, labels=texts)
    return ax


def _objective_line(ax, runs: list[Summary]) -> None:
    """The latency objective as a dashed grey line (its label names it in the legend)."""
    obj = next((s.capacity.objective for s in runs if s.capacity.objective is not None), None)
    if obj is not None:
        bound = obj.bound_s * 1e3
        top = ax.get_ylim()[1]  # the data's; leave room so the line is not lost on the frame
        ax.axhline(bound, color="0.3", ls="--", lw=1, zorder=2, label=f"objective {obj}")
        ax.set_ylim(top=max(top, bound * (1.4 if ax.get_yscale() == "log" else 1.15)))


def _log_ms_ticks(ax) -> None:
    """Plain numbers on a log latency axis: decades, and 2 and 5 between them (no 4x10^0)."""

    def minor(v, _):
        m = round(v / 10 ** np.floor(np.log10(v))) if v > 0 else 0
        return _fmt_ms(v) if m in (2, 5) else ""

    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: _fmt_ms(v)))
    ax.yaxis.set_minor_formatter(FuncFormatter(minor))


def _latency_axis(ax, *, log: bool) -> None:
    """A latency axis in ms: from zero, or logarithmic with plain-number ticks."""
    if log:
        ax.set_yscale("log")
        _log_ms_ticks(ax)
    else:
        ax.set_ylim(bottom=0)


def _runs_legend_above(ax, runs, labels, colors, keys) -> None:
    """One legend above a row of Axes: each run once (its colour), then the line styles."""
    from matplotlib.lines import Line2D
    from matplotlib.transforms import ScaledTranslation

    handles = [Line2D([], [], color=c, lw=2, marker="o", ms=4) for c in colors] + [h for h, _ in keys]
    texts = list(labels) + [t for _, t in keys]
    transform = ax.transAxes + ScaledTranslation(0, 22 / 72, ax.figure.dpi_scale_trans)
    ax.legend(
        handles,
        texts,
        loc="lower left",
        bbox_to_anchor=(0, 1),
        bbox_transform=transform,
        ncol=min(len(texts), 5),
        fontsize=8,
        frameon=False,
    )


def by_concurrency(
    summaries: Summary | Sequence[Summary],
    comparison=None,
    *,
    log_latency: bool = False,
    objective: bool = True,
    axes=None,
):
    """Throughput and p50/p99 latency of every load step against its concurrency, runs overlaid.

    The latency objective is drawn on the latency Axes; ``log_latency``
    gives them a log scale.  One legend above the first row names each run
    once.  With a :class:`~headroom.compare.Comparison` of the first two
    runs, a second row shows each step pair's change (candidate / baseline
    - 1) as neutral bars, the decision metric's geometric-mean change as a
    line with its interval as a band, and the +-threshold as dotted lines:
    a bar is a single pair, the band is what the verdict judged.  Steps
    without concurrency in the metadata are placed by step index.

    ``axes``: 2 Axes (no comparison) or 4 (2 x 2), default a new figure.
    Returns the array of Axes.
    """
    from matplotlib.lines import Line2D

    runs = _runs(summaries)
    labels, colors = run_labels(runs), _colors(len(runs))
    rows = 2 if comparison is not None else 1
    if axes is None:
        _, axes = plt.subplots(rows, 2, figsize=(12, 4.2 * rows + 0.4), squeeze=False, sharex="col")
    axes = np.asarray(axes).reshape(rows, 2)
    known = all(s.table.known_concurrency for s in runs)
    for s, color, label in zip(runs, colors, labels):
        t = s.table
        o = [i for i in t.order() if t.usable[i]]
        x = t.concurrency[o] if known else t.index[o].astype(float)
        axes[0, 0].plot(x, t.goodput_rps[o], "o-", color=color, label=label)
        axes[0, 1].plot(x, t.latency.pct["p50"][o] * 1e3, "o--", color=color, ms=3, label=f"{label} p50")
        axes[0, 1].plot(x, t.latency.pct["p99"][o] * 1e3, "o-", color=color, label=f"{label} p99")
    axes[0, 0].set_ylabel("throughput (requests/s, per step)")
    axes[0, 0].yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    axes[0, 1].set_ylabel("latency (ms, per step" + (", log scale)" if log_latency else ")"))
    axes[0, 0].set_title("Throughput by concurrency", fontsize=10, y=_TITLE_Y)
    axes[0, 1].set_title("Latency by concurrency", fontsize=10, y=_TITLE_Y)
    axes[0, 0].set_ylim(bottom=0)
    _latency_axis(axes[0, 1], log=log_latency)
    if objective:
        _objective_line(axes[0, 1], runs)
    xlabel = "concurrency (clients)" if known else "step (concurrency unknown)"
    for ax in axes[0]:
        ax.set_xlim(left=0)
        ax.grid(True, alpha=0.3)
    keys = [(Line2D([], [], color="0.35", ls="--", marker="o", ms=3), "p50 (dashed)")]
    keys.append((Line2D([], [], color="0.35", marker="o", ms=4), "p99 (solid)"))
    obj_line = [ln for ln in axes[0, 1].get_lines() if ln.get_label().startswith("objective")]
    keys += [(Line2D([], [], color="0.3", ls="--", lw=1), obj_line[0].get_label())] if obj_line else []
    _runs_legend_above(axes[0, 0], runs, labels, colors, keys)
    if comparison is None:
        for ax in axes[0]:
            ax.set_xlabel(xlabel)
        return axes
    _pair_changes(axes[1], comparison, xlabel)
    return axes


def _pair_changes(axes, comparison, xlabel: str) -> None:
    """The comparison row: each step pair's change, the decision metric's change and interval."""
    pairs = comparison.pairs
    xs = np.array([p.concurrency if p.concurrency is not None else p.baseline_steps[0] for p in pairs], float)
    width = 0.6 * (np.min(np.diff(xs)) if len(xs) > 1 else 1.0)
    every_level = comparison.design == "interleaved steps"  # throughput judged at every level pair
    for ax, key, mkey, name in (
        (axes[0], "rps", "paired_plateau_rps", "throughput"),
        (axes[1], "p99_s", "p99_s", "p99 latency"),
    ):
        ch = np.array([np.nan if p.change(key) is None else p.change(key) * 100 for p in pairs])
        plateau = np.array([p.plateau for p in pairs], dtype=bool)
        drawn = np.isfinite(ch)
        if drawn.any():
            ax.bar(
                xs[~plateau & drawn], ch[~plateau & drawn], width=width, color="0.75", label="one step pair"
            )
        if (plateau & drawn).any():
            ax.bar(
                xs[plateau & drawn],
                ch[plateau & drawn],
                width=width,
                color="0.5",
                label="saturated pair (plateau)",
            )
        if not drawn.any():
            _no_pairs(ax, key)
        ax.axhline(0, color="0.2", lw=0.8)
        thr = comparison.threshold * 100
        ax.axhline(thr, color="0.4", ls=":", lw=1)
        ax.axhline(-thr, color="0.4", ls=":", lw=1, label=f"threshold +-{thr:g} %")
        m = next((m for m in comparison.metrics if m.key == mkey), None)
        _change_and_interval_and_cuts(
            ax, m, ch, thr, xs, width, plateau if mkey == "paired_plateau_rps" and not every_level else None
        )
        ax.set_title(f"{name}: change per step pair (candidate / baseline - 1)", fontsize=10, y=_TITLE_Y)
        ax.set_ylabel("change (%)")
        ax.set_xlabel(xlabel)
        ax.grid(True, axis="y", alpha=0.3)
        _legend_below(ax, ncol=1)


def _no_pairs(ax, key: str) -> None:
    """An empty change panel says why: no step pair has the figure on both sides."""
    why = (
        "no step pair has a p99 on both sides\n(10 requests above it needed: longer steps judge more pairs)"
        if key.startswith("p")
        else "no step pair has this figure on both sides"
    )
    ax.text(0.5, 0.5, why, transform=ax.transAxes, ha="center", va="center", fontsize=9, color="0.4")


def _change_and_interval_and_cuts(ax, m, ch: np.ndarray, thr: float, xs, width: float, plateau) -> None:
    """The decision metric's change as a line over the pairs it was judged on, its interval as a band
    where it fits on the axis, and as a bracket right of the last bar (arrow heads where it runs off)."""
    lo_y, hi_y = _clip_to_bars(ax, ch, thr, m)
    _cut_bars(ax, xs, ch, lo_y, hi_y)
    right = (xs.max() if len(xs) else 0.0) + width
    bracket_x = right + 0.9 * width
    ax.set_xlim(left=min(0.0, (xs.min() if len(xs) else 0.0) - width), right=bracket_x + 0.9 * width)
    if m is None:
        return
    if m.change is None or m.ci is None:
        ax.plot([], [], " ", label=f"{m.name}: not judged ({m.note})")
        return
    span = xs[plateau] if plateau is not None and plateau.any() else xs
    lo, hi = span.min() - width / 2, span.max() + width / 2
    c0, c1, mid = m.ci[0] * 100, m.ci[1] * 100, m.change * 100
    off = c0 < lo_y or c1 > hi_y
    if not off:  # a band only where it ends on the axis; past it a band would read as background
        ax.fill_between([lo, hi], c0, c1, color="0.3", alpha=0.15, lw=0)
    b0, b1 = max(c0, lo_y), min(c1, hi_y)
    ax.plot([bracket_x, bracket_x], [b0, b1], color="0.1", lw=1.6, solid_capstyle="butt")
    for end, clipped, marker in ((b0, c0 < lo_y, "v"), (b1, c1 > hi_y, "^")):
        if clipped:  # runs off the axis: an arrow head at the edge
            ax.plot([bracket_x], [end], marker, color="0.1", ms=7, clip_on=False)
        else:
            ax.plot([bracket_x - width / 3, bracket_x + width / 3], [end, end], color="0.1", lw=1.6)
    ax.plot([bracket_x], [mid], "o", color="0.1", ms=4)
    how = "interval: the bracket at the right" + ("; arrows: it runs off the axis" if off else "")
    ax.plot(
        [lo, hi],
        [mid, mid],
        color="0.1",
        lw=1.6,
        label=f"{m.name}: {mid:+.1f} % [{c0:+.1f}, {c1:+.1f}]: {m.decision}\n{how}",
    )


def _clip_to_bars(ax, ch: np.ndarray, thr: float, m) -> tuple[float, float]:
    """Scale the axis to the bars, the threshold and the estimate, not to a wide interval or one
    extreme pair; returns the axis' (bottom, top).

    With the shared-machine noise an interval can span several hundred per cent and
    would flatten every bar; it then runs off the axis (the bracket's arrow heads and the
    legend say where it ends).  So does a single pair far beyond the others (a p99 of
    +38,000 % at one level of a busy machine's recording would leave the other bars
    invisible): the axis ends at three times the median pair's size, and such a bar
    is cut at the edge with its value written there (:func:`_cut_bars`).
    """
    bars = ch[np.isfinite(ch)]
    vals = [*bars, thr, -thr]
    if m is not None and m.change is not None:
        vals.append(m.change * 100)
    lo, hi = min(vals), max(vals)
    if len(bars) >= 4:
        fence = max(3 * float(np.median(np.abs(bars))), 2 * thr, *(abs(v) * 1.2 for v in vals[len(bars) :]))
        lo, hi = max(lo, -fence), min(hi, fence)
    pad = 0.15 * (hi - lo)
    ax.set_ylim(lo - pad, hi + pad)
    return lo - pad, hi + pad


def _cut_bars(ax, xs, ch: np.ndarray, lo_y: float, hi_y: float) -> None:
    """Bars beyond the axis: an arrow head at the edge and the pair's change written beside it."""
    for x, v in zip(xs, ch):
        if not np.isfinite(v) or lo_y <= v <= hi_y:
            continue
        edge, marker, va = (hi_y, "^", "top") if v > hi_y else (lo_y, "v", "bottom")
        ax.plot([x], [edge], marker, color="0.2", ms=6, clip_on=False, zorder=5)
        ax.annotate(f"{v:+,.0f} %", (x, edge), xytext=(0, -9 if va == "top" else 9), textcoords="offset points",
                    ha="center", va=va, fontsize=7, color="0.1", zorder=6,
                    bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.85})  # fmt: skip


#: The figures of the report notebooks, in order (``report_figure`` draws each).
_MIB = 2**20


def memory_over_time(summaries: Summary | Sequence[Summary], *, heap: bool = True, ax=None):
    """The server's resident memory (MiB) against seconds since load start; the Go heap in use dashed.

    Each sample covers the interval before it (a step line); a missing sample
    stays a gap.  A run without memory telemetry is named in the legend.
    """
    from .telemetry import telemetry_of

    runs = _runs(summaries)
    labels = run_labels(runs)
    ax = _ax(ax)
    drawn = False
    for s, color, label in zip(runs, _colors(len(runs)), labels):
        tel = telemetry_of(s.run)
        rss = tel.get("rss_bytes") if tel is not None else None
        if rss is None or len(rss) == 0:
            ax.plot([], [], " ", label=f"{label}: no memory samples")
            continue
        for key, style, name in (("rss_bytes", "-", "RSS"), ("heap_inuse_bytes", "--", "Go heap in use")):
            ser = tel.get(key)
            if ser is None or (key != "rss_bytes" and not heap):
                continue
            t = (ser.end_ns - _load_start_ns(s)) / _NS
            v = ser.values / _MIB
            # a hole between samples (more than half an interval: not the scrapes' jitter) stays a gap
            hole = ser.start_ns[1:] - ser.end_ns[:-1]
            cut = np.flatnonzero(hole > 0.5 * np.median(ser.end_ns - ser.start_ns)) + 1
            ax.plot(np.insert(t, cut, np.nan), np.insert(v, cut, np.nan), style, drawstyle="steps-pre",
                    color=color, lw=1.6 if key == "rss_bytes" else 1.0, label=f"{label}: {name}")  # fmt: skip
            drawn = True
        has = s.steps.requests > 0
        ax.axvspan(0, (s.steps.end_ns[has].max() - _load_start_ns(s)) / _NS, color=color, alpha=0.06, lw=0)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    if not drawn:
        _no_memory(ax)
    ax.set_xlabel("seconds since load start")
    ax.set_ylabel("server memory (MiB)")
    ax.grid(True, alpha=0.3)
    _legend_below(ax, ncol=1)  # two panels side by side: one column each
    return ax


def _no_memory(ax) -> None:
    """Empty memory axes: say so, and show no scale (it would number an empty range)."""
    ax.text(0.5, 0.5, "no memory samples", transform=ax.transAxes, ha="center", color="0.5")
    ax.set_xticks([])
    ax.set_yticks([])


def memory_vs_throughput(summaries: Summary | Sequence[Summary], *, ax=None):
    """Each load step's median resident memory (MiB; the bar reaches the step's maximum) against
    its throughput."""
    runs = _runs(summaries)
    labels = run_labels(runs)
    ax = _ax(ax)
    drawn = False
    for s, color, label in zip(runs, _colors(len(runs)), labels):
        m = s.memory
        if m is None:
            ax.plot([], [], " ", label=f"{label}: no memory samples")
            continue
        x = s.table.goodput_rps
        y = m.rss_bytes / _MIB
        up = np.clip(m.rss_max_bytes / _MIB - y, 0, None)
        ok = np.isfinite(x) & np.isfinite(y)
        ax.errorbar(x[ok], y[ok], yerr=[np.zeros(int(ok.sum())), up[ok]], fmt="o-", color=color, ms=4,
                    capsize=2, lw=1.4, label=f"{label}: median RSS per step (bar: max)")  # fmt: skip
        drawn = drawn or bool(ok.any())
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    if not drawn:
        _no_memory(ax)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set_xlabel("throughput (requests/s, per load step)")
    ax.set_ylabel("server resident memory (MiB)")
    ax.grid(True, alpha=0.3)
    _legend_below(ax, ncol=1)  # two panels side by side: one column each
    return ax


REPORT_FIGURES = (
    "headroom",
    "by_concurrency",
    "throughput_over_time",
    "cpu_over_time",
    "cpu_vs_throughput",
    "latency_over_time",
    "memory",
)


class FigureImage:
    """A drawn figure as image bytes that Jupyter displays (PNG, or SVG text).

    The report notebooks show these instead of live figures: the figure is
    drawn once, to its image, and closed (the inline backend's
    ``bbox_inches="tight"`` drew every figure twice, once only to measure it).
    """

    def __init__(self, data: bytes | str, fmt: str):
        self.data, self.fmt = data, fmt

    def _repr_png_(self):
        return self.data if self.fmt == "png" else None

    def _repr_svg_(self):
        return self.data if self.fmt == "svg" else None

    def __repr__(self) -> str:
        return f"<{self.fmt.upper()} figure, {len(self.data):,} bytes>"


#: room added around a figure before it is drawn (inches): legends and labels hang outside the Axes
_PAD_IN = 2.0
#: white kept around the drawn content (inches), as savefig's pad_inches
_MARGIN_IN = 0.1


def image_bytes(fig, *, fmt: str = "png") -> bytes | str:
    """The figure as PNG bytes (drawn once, cropped to what was drawn) or SVG text (tight box).

    For PNG the canvas is first enlarged by 2 inches on every side (the Axes
    keep their size and place), drawn once with Agg, and cropped to the
    pixels that are not background plus 0.1 inch: the result equals
    ``savefig(bbox_inches="tight")``, which draws the figure a second time
    to measure it.  Content reaching the enlarged canvas' edge falls back to
    ``savefig`` (nothing is cut).
    """
    import io

    if fmt == "svg":
        buf = io.StringIO()
        fig.savefig(buf, format="svg", bbox_inches="tight")
        return buf.getvalue()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    _enlarge(fig, _PAD_IN)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    rgba = np.asarray(canvas.buffer_rgba())
    box = _drawn_box(rgba, canvas.figure.get_facecolor())
    buf = io.BytesIO()
    if box is None:  # something reaches the edge: let savefig measure it
        fig.savefig(buf, format="png", bbox_inches="tight")
        return buf.getvalue()
    (r0, r1), (c0, c1) = box
    m = round(_MARGIN_IN * fig.dpi)
    h, w = rgba.shape[:2]
    crop = rgba[max(r0 - m, 0) : min(r1 + m, h), max(c0 - m, 0) : min(c1 + m, w), :3]
    # zlib level 1: a figure's flat colours compress as well as at the default 6 (406 against 411 kB
    # for the report's figures), in less time
    Image.fromarray(np.ascontiguousarray(crop)).save(
        buf, format="png", dpi=(fig.dpi, fig.dpi), compress_level=1
    )
    return buf.getvalue()


def _enlarge(fig, pad: float) -> None:
    """Add ``pad`` inches on every side of the figure, keeping every Axes' size and place in inches."""
    w, h = fig.get_size_inches()
    boxes = [(ax, ax.get_position()) for ax in fig.axes if ax.get_axes_locator() is None]
    nw, nh = w + 2 * pad, h + 2 * pad
    fig.set_size_inches(nw, nh)
    for ax, b in boxes:
        ax.set_position([(b.x0 * w + pad) / nw, (b.y0 * h + pad) / nh, b.width * w / nw, b.height * h / nh])


def _drawn_box(rgba: np.ndarray, face) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """(rows, columns) spans of the pixels unlike the background, None when they touch the edge."""
    bg = np.round(np.asarray(face[:3]) * 255).astype(np.uint8)
    pixels = np.ascontiguousarray(rgba).view(np.uint32)[:, :, 0]  # one compare per pixel, not three
    ink = pixels != np.frombuffer(bytes([*bg, 255]), dtype=np.uint32)[0]
    rows, cols = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
    if not len(rows):
        return (0, rgba.shape[0]), (0, rgba.shape[1])
    r0, r1, c0, c1 = int(rows[0]), int(rows[-1]) + 1, int(cols[0]), int(cols[-1]) + 1
    if r0 == 0 or c0 == 0 or r1 == rgba.shape[0] or c1 == rgba.shape[1]:
        return None
    return (r0, r1), (c0, c1)


def report_image(
    name: str,
    summaries: Summary | Sequence[Summary],
    *,
    comparison=None,
    log_latency: bool = False,
    fmt: str = "png",
) -> FigureImage:
    """One figure of the report notebooks (:func:`report_figure`), drawn once to an image and closed.

    Text is drawn without font hinting (:data:`REPORT_RC`): as matplotlib's
    SVG and PDF output are; at the report's size it looks the same, and it
    takes a sixth of the figures' CPU less.
    """
    with plt.rc_context(REPORT_RC):
        fig = report_figure(name, summaries, comparison=comparison, log_latency=log_latency)
        try:
            return FigureImage(image_bytes(fig, fmt=fmt), fmt)
        finally:
            plt.close(fig)


#: matplotlib settings of the report's figures
REPORT_RC = {"text.hinting": "none"}


def report_figure(
    name: str, summaries: Summary | Sequence[Summary], *, comparison=None, log_latency: bool = False
):
    """One figure of the report notebooks, drawn exactly as the report draws it; returns the Figure.

    ``name`` is one of :data:`REPORT_FIGURES`; ``comparison`` (two runs)
    adds the per-pair change row to ``"by_concurrency"``; ``log_latency``
    gives the latency axes a log scale.
    """
    runs = _runs(summaries)
    if name == "headroom":
        fig, ax = plt.subplots(figsize=(11, 6.5))
        headroom(runs, ax=ax, marginals=True, log_latency=log_latency)
    elif name == "by_concurrency":
        fig = by_concurrency(runs, comparison, log_latency=log_latency)[0, 0].figure
    elif name == "throughput_over_time":
        fig, ax = plt.subplots(figsize=(11, 4))
        throughput_over_time(runs, ax=ax)
    elif name == "cpu_over_time":
        fig, ax = plt.subplots(figsize=(11, 4))
        cpu_over_time(runs, ax=ax)
    elif name == "cpu_vs_throughput":
        fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
        cpu_vs_throughput(runs, ax=left)
        cpu_vs_throughput(runs, per_request=True, ax=right)
    elif name == "latency_over_time":
        fig, ax = plt.subplots(figsize=(11, 4))
        latency_over_time(runs, ax=ax, log_latency=log_latency)
    elif name == "memory":
        fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
        memory_over_time(runs, ax=left)
        memory_vs_throughput(runs, ax=right)
    else:
        raise ValueError(f"unknown report figure {name!r}; one of {', '.join(REPORT_FIGURES)}")
    return fig

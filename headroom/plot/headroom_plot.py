"""The headroom plot: latency percentiles against throughput, per step and per bin."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.colors import LinearSegmentedColormap, LogNorm
from matplotlib.ticker import EngFormatter, FuncFormatter, MaxNLocator

from ..binning import bucket_percentiles, density, latency_edges
from ..steps import percentile_interval
from ..summary import Summary
from ..text import run_labels
from ._base import (
    _NS,
    _STYLE,
    _TITLE_Y,
    _ax,
    _colors,
    _fmt_ms,
    _legend_below,
    _load_start_ns,
    _log_ms_ticks,
    _pname,
    _quantile,
    _runs,
    _steps_xy,
)


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
    from ..stopped import run_stop

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


def _level_line(s: Summary, o, x, y):
    """The line through the steps: in load order, and where a load was run several times (two pairs a
    level, a search's repeated probes) through that load's mean throughput and geometric-mean latency,
    so that it does not zigzag between the repeats (the steps stay points)."""
    t = s.table
    load = (
        t.concurrency[o]
        if t.known_concurrency
        else (t.intended_rps[o] if t.intended_rps is not None else None)
    )
    if load is None or len(np.unique(load)) == len(load):
        return x, y
    levels = np.unique(load)
    lx = np.array([float(np.mean(x[load == v])) for v in levels])
    ly = np.array([float(np.exp(np.mean(np.log(np.maximum(y[load == v], 1e-12))))) for v in levels])
    return lx, ly


def _draw_steps(ax, s: Summary, names, obj, *, color, label: str, intervals: bool) -> set[str]:
    """Each usable step at its throughput and latency, joined in concurrency order, with intervals (a
    search's probes: joined faintly through each load's mean)."""
    from ..search_view import search_of

    drawn = set()
    for name in names:
        o, x, y = _steps_xy(s, name)
        if not len(o):
            continue
        ms = 1e3
        lx, ly = _level_line(s, o, x, y)
        faint = (
            {"lw": 0.8, "alpha": 0.35} if search_of(s.run) is not None else {"lw": 1.6}
        )  # probes, not a ramp
        ax.plot(
            lx,
            ly * ms,
            _STYLE.get(name, "-"),
            color=color,
            zorder=4,
            label=f"{label} {_pname(name)}",
            **faint,
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
    """A search's steps (headroom ramp --find): points, unnumbered (the order is in the report's probe
    table; numbers over a cluster of repeats hide the answer); said in the legend."""
    from ..search_view import search_of

    return {"probes"} if search_of(s.run) is not None else set()


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
        (
            "probes",
            Line2D([], [], color=g, lw=0.8, alpha=0.35, marker="o"),
            "a search's probes (ramp --find): faint line through each load's mean, in load order",
        ),
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
    concurrency order (the levels' means where a level ran more than once:
    two pairs a level, repeats).  Behind them, each run's requests as a density (time
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

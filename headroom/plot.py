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

from . import binning
from .summary import Summary
from .text import run_labels

_NS = 1e9
_STYLE = {"p50": "--", "p90": "-.", "p95": "-.", "p99": "-", "p995": ":", "p999": ":"}
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
    return _PNAME.get(name, name)


def _load_start_ns(s: Summary) -> int:
    has = s.steps.requests > 0
    return int(s.steps.start_ns[has].min())


def _y_top_s(runs: list[Summary], percentiles: Sequence[str], objective_s: float | None) -> float:
    tops = []
    for s in runs:
        lat = s.bins.latency
        for p in percentiles:
            v = lat.pct[p][(lat.requests > 0) & ~lat.thin[p]]
            if v.size == 0:
                v = lat.pct[p][lat.requests > 0]
            if v.size:
                tops.append(float(np.nanmax(v)))
    if objective_s:
        tops.append(objective_s)
    top = max(tops) if tops else 0.001
    return top * 1.2 if top > 0 else 0.001


def _y_bottom_s(runs: list[Summary], percentiles: Sequence[str]) -> float:
    """Bottom of a log latency axis: below the lowest plotted percentile and most requests."""
    lows = []
    for s in runs:
        lat = s.bins.latency
        for p in ("p50", *percentiles):
            v = lat.pct[p][lat.requests > 0]
            if v.size:
                lows.append(float(np.nanmin(v)))
        if len(s.hist.values):
            lows.append(float(s.hist.values[s.hist.values > 0].min()) if (s.hist.values > 0).any() else 1e-4)
    low = max(min(lows) if lows else 1e-4, 1e-5)
    return low / 1.5


def _fmt_ms(v: float) -> str:
    return f"{v:.3g}" if v < 10 else f"{v:,.0f}"


def _legend_below(ax, *, lines_below: int = 1, ncol: int = 2, fontsize: float = 8):
    """A legend under the Axes, clear of the tick labels and the (possibly multi-line) x label."""
    from matplotlib.transforms import ScaledTranslation

    drop = (18 + 15 * lines_below) / 72
    transform = ax.transAxes + ScaledTranslation(0, -drop, ax.figure.dpi_scale_trans)
    return ax.legend(
        loc="upper center",
        bbox_to_anchor=(0.5, 0),
        bbox_transform=transform,
        ncol=ncol,
        fontsize=fontsize,
        frameon=False,
    )


def headroom(
    summaries: Summary | Sequence[Summary],
    *,
    percentiles: Sequence[str] = ("p50", "p99"),
    density: bool = True,
    fit: bool = True,
    objective: bool = True,
    marginals: bool = False,
    color_by_time: bool = False,
    log_latency: bool = False,
    y_max_ms: float | None = None,
    ax=None,
):
    """The headroom plot: latency against throughput.

    Requests are drawn as a density (a 2-D histogram per run, darker where
    more requests fell; its rows follow the latencies' 0.1 ms quantization,
    so no empty stripes), with the per-bin percentile curves on top (hollow
    markers: fewer than 10 requests above the percentile; the curve breaks
    at empty bins), the USL model's latency curve and its knee (faint and
    dashed when the model fits poorly, R² < 0.5), the latency objective and
    the throughput at which each run crosses it.  The values of the knee
    and the crossings are in the legend, which sits under the plot.  When
    the latency axis is cut, the x label says how many requests lie above it.

    Parameters
    ----------
    summaries
        One summary or several to overlay.
    percentiles
        Which per-bin percentile curves to draw (``"p50"``, ``"p99"``, ``"p999"``...).
    density
        Draw the requests as a 2-D histogram.
    fit
        Draw the fitted latency curve and mark the knee.
    objective
        Draw the latency objective and each run's crossing throughput.
    marginals
        Add histograms of throughput (top) and latency (right), as in
        Cockcroft's headroom plot.
    color_by_time
        Add every time bucket's percentile (the last of ``percentiles``),
        coloured by seconds since load start, so that a drifting run shows.
    log_latency
        Logarithmic latency axis, up to the slowest request: nothing is cut.
    y_max_ms
        Top of the latency axis in ms (default: 1.2 x the highest plotted
        percentile; with ``log_latency``, the slowest request).
    ax
        Axes to draw on (default: a new figure).

    Returns
    -------
    matplotlib.axes.Axes
    """
    runs = _runs(summaries)
    labels = run_labels(runs)
    ax = _ax(ax)
    colors = _colors(len(runs))
    obj = next((s.capacity.objective for s in runs if s.capacity.objective is not None), None)
    if y_max_ms:
        y_top = y_max_ms / 1e3
    elif log_latency:
        y_top = max(float(s.hist.values.max()) if len(s.hist.values) else 0.001 for s in runs) * 1.05
    else:
        y_top = _y_top_s(runs, percentiles, obj.bound_s if obj and objective else None)
    y_bottom = _y_bottom_s(runs, percentiles) if log_latency else 0.0
    if not log_latency and not y_max_ms and (density or marginals):
        # end the axis on the density's top edge, so "not shown" counts exactly what is cut
        y_top = max(float(binning.latency_edges(s.hist.values, y_top, ny=100)[-1]) for s in runs)
    x_top = max(float(np.nanmax(s.buckets.rps)) if len(s.buckets) else 1.0 for s in runs) * 1.08
    grids = []
    above = []
    for s, color, label in zip(runs, colors, labels):
        grid = None
        if density or marginals:
            edges = binning.latency_edges(
                s.hist.values, y_top, ny=100, log=log_latency, y_min_s=y_bottom or None
            )
            grid = binning.density(s.buckets, s.hist, x_max=x_top, y_max_s=y_top, y_edges_s=edges)
            above.append((label, grid.above, int(grid.counts.sum()) + grid.above))
        grids.append(grid)
        if density and grid is not None and grid.counts.any():
            cmap = LinearSegmentedColormap.from_list("run", [(1, 1, 1, 0), color])
            c = np.ma.masked_equal(grid.counts.T, 0)
            ax.pcolormesh(
                grid.x_edges,
                grid.y_edges * 1e3,
                c,
                cmap=cmap,
                norm=LogNorm(vmin=1, vmax=max(2, int(grid.counts.max()))),
                alpha=0.55 if len(runs) > 1 else 0.8,
                shading="flat",
                rasterized=True,
            )
        lat = s.bins.latency
        has = lat.requests > 0
        # one point per bin, NaN for an empty bin: the line breaks there instead of bridging the gap
        x_all = np.where(has, s.bins.rps, (s.bins.rps_lo + s.bins.rps_hi) / 2)
        for p in percentiles:
            y_all = np.where(has, lat.pct[p] * 1e3, np.nan)
            thin = lat.thin[p] & has
            ax.plot(x_all, y_all, _STYLE.get(p, "-"), color=color, lw=1.6, label=f"{label} {_pname(p)}")
            ax.plot(x_all[has & ~thin], y_all[has & ~thin], "o", color=color, ms=4)
            if thin.any():
                ax.plot(x_all[thin], y_all[thin], "o", mfc="none", color=color, ms=4)
        model = s.capacity.model
        if fit and model is not None:
            poor = not (model.r2_log >= 0.5)
            # the USL through Little's law: mean latency N / X(N) against X(N), measured range only
            n = np.linspace(model.n_lo, model.n_hi, 200)
            ax.plot(
                model.rps_at(n),
                model.latency_s_at(n) * 1e3,
                ls=(0, (2, 3)) if poor else ":",
                color=color,
                lw=1.0 if poor else 1.4,
                alpha=0.4 if poor else 1.0,
                label=f"{label} USL model (mean latency)"
                + (f": poor fit, R\u00b2 {model.r2_log:.2f}, not to be trusted" if poor else ""),
            )
            if model.knee_rps is not None and not poor:
                ax.axvline(
                    model.knee_rps,
                    color=color,
                    ls=":",
                    lw=1,
                    label=f"{label} knee {model.knee_rps:,.0f} req/s",
                )
        cap = s.capacity
        if objective and cap.objective is not None and cap.rps_at_objective is not None:
            held = cap.at_objective.lower_bound
            ax.axvline(
                cap.rps_at_objective,
                color=color,
                ls="--",
                lw=1,
                label=f"{label} at {cap.objective}: {'>= ' if held else ''}{cap.rps_at_objective:,.0f} req/s"
                + (" (held at every step: a lower bound)" if held else ""),
            )
        if color_by_time:
            p = percentiles[-1]
            bp = binning.bucket_percentiles(s.buckets, s.hist, (p,))[p]
            t = (s.buckets.start_ns - _load_start_ns(s)) / _NS + s.buckets.length_s / 2
            sc = ax.scatter(s.buckets.rps, bp * 1e3, c=t, cmap="viridis", s=14, zorder=3, edgecolors="none")
            if s is runs[-1]:
                cax = ax.inset_axes([1.22 if marginals else 1.02, 0, 0.025, 1])
                ax.figure.colorbar(sc, cax=cax, label=f"bucket {_pname(p)}: seconds since load start")
    if objective and obj is not None:
        ax.axhline(obj.bound_s * 1e3, color="0.3", ls="--", lw=1, label=f"objective {obj}")
    ax.set_xlim(0, x_top)
    if log_latency:
        ax.set_yscale("log")
        ax.set_ylim(y_bottom * 1e3, y_top * 1e3)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: _fmt_ms(v)))
    else:
        ax.set_ylim(0, y_top * 1e3)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    xlabel = "throughput (requests/s, per time bucket)"
    cut = [(lb, n, tot) for lb, n, tot in above if n]
    if cut:
        who = (
            "; ".join(f"{lb}: {n:,} ({n / tot:.2%})" for lb, n, tot in cut)
            if len(runs) > 1
            else (f"{cut[0][1]:,} ({cut[0][1] / cut[0][2]:.2%})")
        )
        xlabel += f"\nrequests above {_fmt_ms(y_top * 1e3)} ms not shown: {who}" + (
            "" if log_latency else "; log_latency=True shows them"
        )
    ax.set_xlabel(xlabel)
    ax.set_ylabel("latency (ms" + (", log scale)" if log_latency else ")"))
    ax.set_title("Headroom plot: latency against throughput")
    ax.grid(True, alpha=0.3)
    _legend_below(ax, lines_below=xlabel.count("\n") + 1, ncol=2 if len(runs) > 1 else 3)
    if marginals:
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
        ax.set_title("")
        top.set_title("Headroom plot: latency against throughput")
    return ax


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
        ends.append((int(s.steps.end_ns[has].max()) - _load_start_ns(s)) / _NS)
    return max(ends)


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
        ax.set_title("CPU per request" if per_request else "CPU against throughput", fontsize=10)
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
        ax.set_ylabel("CPU per request (us)")
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
    ax=None,
):
    """Latency percentiles of every time bucket against seconds since load start."""
    runs = _runs(summaries)
    labels = run_labels(runs)
    colors = _colors(len(runs))
    ax = _ax(ax)
    for s, color, label in zip(runs, colors, labels):
        bp = binning.bucket_percentiles(s.buckets, s.hist, tuple(percentiles))
        for p in percentiles:
            x, y = _step_breaks(s, bp[p] * 1e3)
            ax.plot(x, y, _STYLE.get(p, "-"), color=color, lw=1.3, label=f"{label} {_pname(p)}")
    ax.set_xlim(0, _end_s(runs) * 1.01)
    if log_latency:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: _fmt_ms(v)))
    else:
        ax.set_ylim(bottom=0)
    _mark_steps(ax, runs, labels, colors)
    ax.set_xlabel("seconds since load start")
    ax.set_ylabel("latency (ms" + (", log scale)" if log_latency else ")"))
    ax.grid(True, alpha=0.3)
    _legend_below(ax, ncol=len(percentiles) * len(runs) if len(runs) * len(percentiles) <= 4 else 2)
    return ax


def by_concurrency(summaries: Summary | Sequence[Summary], comparison=None, *, axes=None):
    """Throughput and p50/p99 latency of every load step against its concurrency, runs overlaid.

    With a :class:`~headroom.compare.Comparison` of the first two runs, a
    second row shows each step pair's change (candidate / baseline - 1) as
    neutral bars, the decision metric's geometric-mean change as a line with
    its interval as a band, and the +-threshold as dotted lines: a bar is a
    single pair, the band is what the verdict judged.  Steps without
    concurrency in the metadata are placed by step index.

    ``axes``: 2 Axes (no comparison) or 4 (2 x 2), default a new figure.
    Returns the array of Axes.
    """
    runs = _runs(summaries)
    labels = run_labels(runs)
    colors = _colors(len(runs))
    rows = 2 if comparison is not None else 1
    if axes is None:
        _, axes = plt.subplots(rows, 2, figsize=(12, 4.2 * rows), squeeze=False, sharex="col")
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
    axes[0, 1].set_ylabel("latency (ms, per step)")
    axes[0, 0].set_title("Throughput by concurrency", fontsize=10)
    axes[0, 1].set_title("Latency by concurrency", fontsize=10)
    xlabel = "concurrency (clients)" if known else "step (concurrency unknown)"
    for ax in axes[0]:
        ax.set_ylim(bottom=0)
        ax.set_xlim(left=0)
        ax.grid(True, alpha=0.3)
    if comparison is None:
        for ax in axes[0]:
            ax.set_xlabel(xlabel)
            _legend_below(ax, ncol=2 if len(runs) > 1 else 1)
        return axes
    for ax in axes[0]:
        ax.legend(fontsize=8, loc="best")
    pairs = comparison.pairs
    xs = np.array([p.concurrency if p.concurrency is not None else p.baseline_steps[0] for p in pairs], float)
    width = 0.6 * (np.min(np.diff(xs)) if len(xs) > 1 else 1.0)
    for ax, key, mkey, name in (
        (axes[1, 0], "rps", "plateau_rps", "throughput"),
        (axes[1, 1], "p99_s", "p99_s", "p99 latency"),
    ):
        ch = np.array([np.nan if p.change(key) is None else p.change(key) * 100 for p in pairs])
        plateau = np.array([p.plateau for p in pairs])
        ax.bar(xs[~plateau], ch[~plateau], width=width, color="0.75", label="one step pair")
        if plateau.any():
            ax.bar(xs[plateau], ch[plateau], width=width, color="0.5", label="saturated pair (plateau)")
        ax.axhline(0, color="0.2", lw=0.8)
        thr = comparison.threshold * 100
        ax.axhline(thr, color="0.4", ls=":", lw=1)
        ax.axhline(-thr, color="0.4", ls=":", lw=1, label=f"threshold +-{thr:g} %")
        m = next((m for m in comparison.metrics if m.key == mkey), None)
        if m is not None and m.change is not None and m.ci is not None:
            span = xs[plateau] if mkey == "plateau_rps" and plateau.any() else xs
            lo, hi = span.min() - width, span.max() + width
            ax.fill_between([lo, hi], m.ci[0] * 100, m.ci[1] * 100, color="0.3", alpha=0.15, lw=0)
            ax.plot(
                [lo, hi],
                [m.change * 100] * 2,
                color="0.1",
                lw=1.6,
                label=f"{m.name}: {m.change * 100:+.1f} % [{m.ci[0] * 100:+.1f}, {m.ci[1] * 100:+.1f}]: "
                f"{m.decision}",
            )
        elif m is not None:
            ax.plot([], [], " ", label=f"{m.name}: not judged ({m.note})")
        ax.set_title(f"{name}: change per step pair (candidate / baseline - 1)", fontsize=10)
        ax.set_ylabel("change (%)")
        ax.set_xlabel(xlabel)
        ax.grid(True, axis="y", alpha=0.3)
        _legend_below(ax, ncol=1)
    return axes


#: The figures of the report notebooks, in order (``report_figure`` draws each).
REPORT_FIGURES = (
    "headroom",
    "by_concurrency",
    "throughput_over_time",
    "cpu_over_time",
    "cpu_vs_throughput",
    "latency_over_time",
)


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
        fig = by_concurrency(runs, comparison)[0, 0].figure
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
    else:
        raise ValueError(f"unknown report figure {name!r}; one of {', '.join(REPORT_FIGURES)}")
    return fig

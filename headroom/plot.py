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

from . import binning
from .summary import Summary

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


def _ax(ax):
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 5.5))
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


def headroom(
    summaries: Summary | Sequence[Summary],
    *,
    percentiles: Sequence[str] = ("p50", "p99"),
    density: bool = True,
    fit: bool = True,
    objective: bool = True,
    marginals: bool = False,
    color_by_time: bool = False,
    y_max_ms: float | None = None,
    ax=None,
):
    """The headroom plot: latency against throughput.

    Requests are drawn as a density (a 2-D histogram per run, darker where
    more requests fell), with the per-bin percentile curves on top (hollow
    markers: fewer than 10 requests above the percentile), the fitted latency
    curve and its knee, the latency objective and the throughput at which
    each run crosses it.

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
    y_max_ms
        Top of the latency axis (default: 1.2 x the highest plotted percentile).
    ax
        Axes to draw on (default: a new figure).

    Returns
    -------
    matplotlib.axes.Axes
    """
    runs = _runs(summaries)
    ax = _ax(ax)
    colors = _colors(len(runs))
    obj = next((s.capacity.objective for s in runs if s.capacity.objective is not None), None)
    y_top = (
        (y_max_ms / 1e3)
        if y_max_ms
        else _y_top_s(runs, percentiles, obj.bound_s if obj and objective else None)
    )
    x_top = max(float(np.nanmax(s.buckets.rps)) if len(s.buckets) else 1.0 for s in runs) * 1.08
    grids = []
    for s, color in zip(runs, colors):
        grid = (
            binning.density(s.buckets, s.hist, x_max=x_top, y_max_s=y_top) if (density or marginals) else None
        )
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
        for p in percentiles:
            x, y = s.bins.rps[has], lat.pct[p][has] * 1e3
            thin = lat.thin[p][has]
            ax.plot(x, y, _STYLE.get(p, "-"), color=color, lw=1.6, label=f"{s.label} {_pname(p)}")
            ax.plot(x[~thin], y[~thin], "o", color=color, ms=4)
            if thin.any():
                ax.plot(x[thin], y[thin], "o", mfc="none", color=color, ms=4)
        model = s.capacity.model
        if fit and model is not None:
            # the USL through Little's law: mean latency N / X(N) against X(N), measured range only
            n = np.linspace(model.n_lo, model.n_hi, 200)
            ax.plot(
                model.rps_at(n),
                model.latency_s_at(n) * 1e3,
                ":",
                color=color,
                lw=1.4,
                label=f"{s.label} USL model (mean latency)",
            )
            if model.knee_rps is not None:
                ax.axvline(model.knee_rps, color=color, ls=":", lw=1)
                ax.annotate(
                    f"knee {model.knee_rps:,.0f}",
                    (model.knee_rps, y_top * 1e3 * 0.97),
                    rotation=90,
                    va="top",
                    ha="right",
                    fontsize=8,
                    color=color,
                )
        cap = s.capacity
        if objective and cap.objective is not None and cap.rps_at_objective is not None:
            ax.axvline(cap.rps_at_objective, color=color, ls="--", lw=1)
            held = cap.at_objective.lower_bound
            ax.annotate(
                f"{'>= ' if held else ''}{cap.rps_at_objective:,.0f} req/s",
                (cap.rps_at_objective, cap.objective.bound_s * 1e3),
                xytext=(3, 3),
                textcoords="offset points",
                fontsize=8,
                color=color,
            )
        if color_by_time:
            p = percentiles[-1]
            bp = binning.bucket_percentiles(s.buckets, s.hist, (p,))[p]
            t = (s.buckets.start_ns - _load_start_ns(s)) / _NS + s.buckets.length_s / 2
            sc = ax.scatter(s.buckets.rps, bp * 1e3, c=t, cmap="viridis", s=14, zorder=3, edgecolors="none")
            if s is runs[-1]:
                ax.figure.colorbar(sc, ax=ax, label=f"bucket {_pname(p)}: seconds since load start", pad=0.01)
    if objective and obj is not None:
        ax.axhline(obj.bound_s * 1e3, color="0.3", ls="--", lw=1, label=f"objective {obj}")
    ax.set_xlim(0, x_top)
    ax.set_ylim(0, y_top * 1e3)
    ax.set_xlabel("throughput (requests/s, per time bucket)")
    ax.set_ylabel("latency (ms)")
    ax.set_title("Headroom plot: latency against throughput")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
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
        top.tick_params(labelbottom=False, labelsize=7)
        right.tick_params(labelleft=False, labelsize=7)
        top.set_ylabel("requests", fontsize=7)
        right.set_xlabel("requests", fontsize=7)
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


def _mark_steps(ax, s: Summary, *, label: bool) -> None:
    t0 = _load_start_ns(s)
    st = s.steps
    for k in range(len(st)):
        if st.requests[k] == 0:
            continue
        a = (st.start_ns[k] - t0) / _NS
        ax.axvline(a, color="0.85", lw=0.8, zorder=0)
        if label and st.concurrency[k] is not None:
            mid = a + (st.end_ns[k] - st.start_ns[k]) / _NS / 2
            ax.annotate(
                f"c={st.concurrency[k]}",
                (mid, 1.0),
                xycoords=("data", "axes fraction"),
                ha="center",
                va="bottom",
                fontsize=7,
                color="0.4",
            )


def throughput_over_time(summaries: Summary | Sequence[Summary], *, steps: bool = True, ax=None):
    """Throughput of every time bucket against seconds since load start.

    Each bucket is a flat segment; gaps between steps stay gaps and an empty
    bucket shows as zero.  Step starts are marked, with their concurrency.
    """
    runs = _runs(summaries)
    ax = _ax(ax)
    for s, color in zip(runs, _colors(len(runs))):
        x, y = _step_breaks(s, s.buckets.rps)
        ax.plot(x, y, color=color, lw=1.5, label=s.label)
        if steps:
            _mark_steps(ax, s, label=s is runs[0])
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("seconds since load start")
    ax.set_ylabel(f"throughput (requests/s, {runs[0].buckets.bucket_s:g} s buckets)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return ax


def cpu_over_time(summaries: Summary | Sequence[Summary], *, per_cpu: bool = True, ax=None):
    """CPU busy % against seconds since load start (the throughput plot's time axis).

    Each sample covers the interval since the previous one (drawn as a step);
    a gap in sampling stays a gap.  Per-CPU lines are drawn thin when present.
    """
    runs = _runs(summaries)
    ax = _ax(ax)
    top = 100.0
    for s, color in zip(runs, _colors(len(runs))):
        cpu = s.run.cpu
        if cpu is None or len(cpu) == 0:
            continue
        t = (cpu.time_ns - _load_start_ns(s)) / _NS
        gap = np.diff(t) > 1.5 * np.median(np.diff(t)) if len(t) > 2 else np.zeros(max(len(t) - 1, 0), bool)
        cut = np.flatnonzero(gap) + 1

        def broken(v, t=t, cut=cut):
            return np.insert(t.astype(float), cut, np.nan), np.insert(v.astype(float), cut, np.nan)

        if per_cpu and cpu.per_cpu is not None:
            for j in range(cpu.per_cpu.shape[1]):
                ax.plot(*broken(cpu.per_cpu[:, j]), drawstyle="steps-pre", color=color, lw=0.6, alpha=0.5)
        label = f"{s.label} (mean of {cpu.per_cpu.shape[1]} CPUs)" if cpu.per_cpu is not None else s.label
        ax.plot(*broken(cpu.pct), drawstyle="steps-pre", color=color, lw=1.6, label=label)
        top = max(top, float(np.nanmax(cpu.pct)) * 1.05)
        has = s.steps.requests > 0
        end = (s.steps.end_ns[has].max() - _load_start_ns(s)) / _NS
        ax.axvspan(0, end, color=color, alpha=0.06, lw=0)
    ax.set_ylim(0, top)
    ax.set_xlabel("seconds since load start")
    ax.set_ylabel("CPU busy (%)")
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="lower right")
    else:
        ax.text(0.5, 0.5, "no CPU samples", transform=ax.transAxes, ha="center", color="0.5")
    return ax


def cpu_vs_throughput(summaries: Summary | Sequence[Summary], *, per_request: bool = False, ax=None):
    """CPU of each load step (or CPU microseconds per request) against its throughput, and the CPU target."""
    runs = _runs(summaries)
    ax = _ax(ax)
    drawn = False
    for s, color in zip(runs, _colors(len(runs))):
        t = s.table
        o = [i for i in t.order() if np.isfinite(t.cpu_pct[i]) and t.usable[i]]
        if not o:
            continue
        drawn = True
        y = t.cpu_s_per_req[o] * 1e6 if per_request else t.cpu_pct[o]
        ax.plot(t.goodput_rps[o], y, "o-", color=color, label=f"{s.label} (steps)")
        x_cpu = s.capacity.rps_at_cpu_target
        if not per_request and x_cpu is not None:
            ax.axvline(x_cpu, color=color, ls=":", lw=1)
    if not drawn:
        ax.text(0.5, 0.5, "no CPU samples", transform=ax.transAxes, ha="center", color="0.5")
        ax.set_xticks([])
        ax.set_yticks([])
        return ax
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
    ax.set_xlabel("throughput (requests/s)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return ax


def latency_over_time(
    summaries: Summary | Sequence[Summary], *, percentiles: Sequence[str] = ("p50", "p99"), ax=None
):
    """Latency percentiles of every time bucket against seconds since load start."""
    runs = _runs(summaries)
    ax = _ax(ax)
    for s, color in zip(runs, _colors(len(runs))):
        bp = binning.bucket_percentiles(s.buckets, s.hist, tuple(percentiles))
        for p in percentiles:
            x, y = _step_breaks(s, bp[p] * 1e3)
            ax.plot(x, y, _STYLE.get(p, "-"), color=color, lw=1.3, label=f"{s.label} {_pname(p)}")
        _mark_steps(ax, s, label=s is runs[0])
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("seconds since load start")
    ax.set_ylabel("latency (ms)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return ax

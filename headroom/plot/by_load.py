"""Per-load panels of one or two runs and, for a comparison, the per-pair change row."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import FuncFormatter

from ..summary import Summary
from ..text import run_labels
from ._base import _TITLE_Y, _colors, _latency_axis, _legend_below, _objective_line, _runs


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


def _steps_and_levels(row, runs, labels, colors, place: str) -> None:
    """Throughput (left) and p50/p99 (right) of every step as points, the line through each level's
    mean (two pairs a level, repeated probes of a search: a line through every step in order would
    zigzag between a level's steps)."""
    for s, color, label in zip(runs, colors, labels):
        t = s.table
        o = [i for i in t.order() if t.usable[i]]
        x = _xs(s, place)
        for ax, y, style, ms, name in (
            (row[0], t.goodput_rps[o], "-", 5, label),
            (row[1], t.latency.pct["p50"][o] * 1e3, "--", 3, f"{label} p50"),
            (row[1], t.latency.pct["p99"][o] * 1e3, "-", 5, f"{label} p99"),
        ):
            lv, mean = level_means(x, y, geometric=ax is row[1])
            one = len(lv) == len(x)  # one step a level: the points as before, else lighter
            ax.plot(lv, mean, style, color=color, label=name)
            ax.plot(x, y, "o", color=color, ms=ms if one else ms * 0.8, alpha=1.0 if one else 0.6)


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
    a bar is a single pair, the band is what the verdict judged.  The
    steps of open-loop ramps are placed at their intended rates, steps
    without either in the metadata by step index.

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
    place = _placement(runs)
    _steps_and_levels(axes[0], runs, labels, colors, place)
    axes[0, 0].set_ylabel("throughput (requests/s, per step)")
    axes[0, 0].yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    axes[0, 1].set_ylabel("latency (ms, per step" + (", log scale)" if log_latency else ")"))
    by = {"concurrency": "concurrency", "rate": "intended rate"}.get(place, "load step")
    axes[0, 0].set_title(f"Throughput by {by}", fontsize=10, y=_TITLE_Y)
    axes[0, 1].set_title(f"Latency by {by}", fontsize=10, y=_TITLE_Y)
    axes[0, 0].set_ylim(bottom=0)
    _latency_axis(axes[0, 1], log=log_latency)
    if objective:
        _objective_line(axes[0, 1], runs)
    xlabel = {"concurrency": "concurrency (clients)", "rate": "intended rate (requests/s, open loop)"}.get(
        place
    ) or _step_label(runs)
    top = max((float(np.nanmax(_xs(s, place))) for s in runs if len(_xs(s, place))), default=1.0)
    for ax in axes[0]:
        ax.set_xlim(left=0, right=top * 1.04 + 0.5)  # the last level's points inside the axes
        ax.grid(True, alpha=0.3)
        if place == "rate":
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    keys = [(Line2D([], [], color="0.35", ls="--", marker="o", ms=3), "p50 (dashed)")]
    keys.append((Line2D([], [], color="0.35", marker="o", ms=4), "p99 (solid)"))
    obj_line = [ln for ln in axes[0, 1].get_lines() if ln.get_label().startswith("objective")]
    keys += [(Line2D([], [], color="0.3", ls="--", lw=1), obj_line[0].get_label())] if obj_line else []
    _runs_legend_above(axes[0, 0], runs, labels, colors, keys)
    if comparison is None:
        for ax in axes[0]:
            ax.set_xlabel(xlabel)
        return axes
    rates = runs[0].table.intended_rps if place == "rate" else None
    _pair_changes(axes[1], comparison, xlabel, rates)
    return axes


def _step_label(runs) -> str:
    """The x label of runs placed by step index: rate steps say their intended rates."""
    rates = [float(r) for s in runs if s.table.kind == "rate" for r in s.table.intended_rps if np.isfinite(r)]
    if rates:
        return f"step (open loop: intended rates {min(rates):,.0f} to {max(rates):,.0f} req/s)"
    return "step (concurrency unknown)"


def _placement(runs) -> str:
    """Where the steps go on the x axis: ``concurrency`` (every run says it), ``rate`` (every run is an
    open loop whose usable steps all have an intended rate), else ``index``."""
    if all(s.table.known_concurrency for s in runs):
        return "concurrency"
    if all(s.table.kind == "rate" and np.isfinite(s.table.intended_rps[s.table.usable]).all() for s in runs):
        return "rate"
    return "index"


def _xs(s, place: str) -> np.ndarray:
    """The x of a run's usable steps (in :meth:`StepTable.order`) for a :func:`_placement`."""
    t = s.table
    o = [i for i in t.order() if t.usable[i]]
    if place == "concurrency":
        return t.concurrency[o]
    return (t.intended_rps[o] if place == "rate" else t.index[o]).astype(float)


def level_means(x: np.ndarray, y: np.ndarray, *, geometric: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The distinct levels of ``x`` (ascending) and the mean of ``y`` at each (geometric for latencies;
    values that are not finite and positive left out)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y) & ((y > 0) if geometric else True)
    levels = np.unique(x[ok])
    means = np.array(
        [float(np.exp(np.mean(np.log(y[ok & (x == v)])))) if geometric else float(np.mean(y[ok & (x == v)]))
         for v in levels]
    )  # fmt: skip
    return levels, means


def _bar_positions(xs: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Each pair's bar position and the bars' width: pairs that share a level side by side within 60 %
    of the gap between distinct levels (with one pair a level, at the level itself); and that gap."""
    levels = np.unique(xs[np.isfinite(xs)])
    gap = float(np.min(np.diff(levels))) if len(levels) > 1 else 1.0
    pos = xs.astype(float).copy()
    width = 0.6 * gap
    for v in levels:
        idx = np.flatnonzero(xs == v)
        k = len(idx)
        if k > 1:
            w = 0.6 * gap / k
            width = min(width, w)
            pos[idx] = v + (np.arange(k) - (k - 1) / 2) * w
    return pos, width, gap


def _pair_changes(axes, comparison, xlabel: str, rates=None) -> None:
    """The comparison row: each step pair's change (bars per level: its pairs side by side), the decision
    metric's change and interval.  ``rates``: the baseline's intended rate of each step (open loops), where
    the pairs go; else at their concurrency, or their baseline step's index."""
    pairs = comparison.pairs
    levels = np.array(
        [
            rates[p.baseline_steps[0]] if rates is not None
            else p.concurrency if p.concurrency is not None
            else p.baseline_steps[0]
            for p in pairs
        ],
        float,
    )  # fmt: skip
    xs, width, gap = _bar_positions(levels)
    every_level = comparison.design == "interleaved steps"  # throughput judged at every level pair
    for ax, key, mkey, name in (
        (axes[0], "rps", "paired_plateau_rps", "throughput"),
        (axes[1], "p99_s", "p99_s", "p99 latency"),
    ):
        ch = np.array([np.nan if p.change(key) is None else p.change(key) * 100 for p in pairs])
        plateau = np.array([p.plateau for p in pairs], dtype=bool)
        drawn = np.isfinite(ch)
        if (~plateau & drawn).any():
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
            ax,
            m,
            ch,
            thr,
            xs,
            0.6 * gap,
            plateau if mkey == "paired_plateau_rps" and not every_level else None,
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

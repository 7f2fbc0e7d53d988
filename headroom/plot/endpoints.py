"""Small multiples of the headroom plot, one panel per endpoint (a run whose requests carry names).

Each panel draws one request name: its own throughput (its requests over each step's duration) against
its own p50 (dashed) and tail percentile (solid), one colour per run; the panel's title gives the name,
its share of the requests and, in a comparison, its verdict.  Steps are joined in concurrency order.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np

from ..summary import Summary
from ..text import run_labels
from ._base import _colors, _fmt_ms, _runs


def _names(runs: list[Summary], top: int) -> list[str]:
    """The endpoints of the first run that has them (the most requested first), at most ``top``."""
    for s in runs:
        if s.endpoints is not None:
            return [e.name for e in s.endpoints][:top]
    return []


def endpoint_grid(
    summaries: Summary | Sequence[Summary],
    *,
    tail: str = "p99",
    comparison=None,
    top: int = 6,
    ncols: int = 3,
    axes=None,
):
    """One headroom plot per endpoint; returns the (rows, cols) array of Axes.

    ``summaries``: one run or several (baseline first); ``tail``: the solid line's percentile;
    ``comparison`` (a :class:`~headroom.compare.result.Comparison`): each panel's title says its
    endpoint's verdict; ``top``: the most requested endpoints drawn; ``axes``: an array of Axes to
    draw into (default: a new figure).
    """
    runs = _runs(summaries)
    names = _names(runs, top)
    if not names:
        raise ValueError("no run's requests carry names: nothing to draw per endpoint")
    ncols = min(ncols, len(names))
    nrows = math.ceil(len(names) / ncols)
    if axes is None:
        _, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.3 * nrows), squeeze=False)
    axes = np.atleast_2d(axes)
    verdicts = {e.name: e.verdict for e in getattr(comparison, "endpoints", None) or []}
    colors = _colors(len(runs))
    labels = run_labels(runs)  # two runs of one label (JTLs named results.csv) told apart
    for i, name in enumerate(names):
        ax = axes.flat[i]
        share = None
        for s, color, label in zip(runs, colors, labels):
            ep = _endpoint(s, name)
            if ep is None:
                continue
            share = share if share is not None else ep.total / max(sum(e.total for e in s.endpoints), 1)
            for pct, style in (("p50", "--"), (tail, "-")):
                x, y = ep.rps, ep.latency.pct[pct] * 1e3
                ok = np.isfinite(x) & np.isfinite(y)
                ax.plot(x[ok], y[ok], "o", color=color, ms=2.5, alpha=0.35)  # every step
                lx, ly = _by_level(ep.concurrency[ok], x[ok], y[ok])  # the line through each level's median
                ax.plot(lx, ly, style, color=color, lw=1.3, label=f"{label} {pct}" if i == 0 else None)
        title = name if share is None else f"{name}  ({share:.0%} of requests)"
        if name in verdicts:
            title += f"\n{verdicts[name].upper()}"
        ax.set_title(title, fontsize=9, color="#b00020" if verdicts.get(name) == "regressed" else "black")
        ax.set_xlabel("endpoint throughput (req/s)", fontsize=8)
        ax.set_ylabel("latency (ms)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.set_ylim(bottom=0)
        ax.set_xlim(left=0)
        ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: _fmt_ms(v)))
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(names) :]:
        ax.set_visible(False)
    fig = axes.flat[0].figure
    if axes.flat[0].get_legend_handles_labels()[0]:
        axes.flat[0].legend(fontsize=7, loc="upper left", frameon=False)
    fig.tight_layout()
    return axes


def _by_level(conc: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each concurrency level's median throughput and latency (several steps a level: interleaved pairs),
    in concurrency order; steps of unknown concurrency each their own point, in step order."""
    if not len(conc) or not np.isfinite(conc).all():
        return x, y
    levels = np.unique(conc)
    return (
        np.array([np.median(x[conc == c]) for c in levels]),
        np.array([np.median(y[conc == c]) for c in levels]),
    )


def _endpoint(s: Summary, name: str):
    if s.endpoints is None:
        return None
    try:
        return s.endpoints[name]
    except KeyError:
        return None

"""Helpers every figure family shares: runs and colours, legends, the latency axis."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import FuncFormatter

from ..model import PERCENTILES, percentile_label
from ..summary import Summary

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

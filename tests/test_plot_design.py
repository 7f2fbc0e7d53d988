"""Figures drawn right for the recommended design: two pairs a level of an interleaved recording (issue 49:
the change-per-pair panels drew no bars, the lines zigzagged between a level's two pairs, the last points
and the interval bracket were clipped).  Reads the drawn figure's data, not only that a PNG exists."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
from conftest import ROOT

IL = ROOT / "data" / "calibration" / "interleaved" / "r5-go-cpu30-70"


@pytest.fixture(scope="module")
def pair():
    from headroom import analyze, reduce_run
    from headroom.compare import compare_runs

    a, b = analyze(reduce_run(str(IL / "a-01"))), analyze(reduce_run(str(IL / "b-01")))
    return a, b, compare_runs(a, b)


def _inside(ax, xs, ys) -> bool:
    x0, x1 = sorted(ax.get_xlim())
    y0, y1 = sorted(ax.get_ylim())
    xs, ys = np.asarray(xs, float), np.asarray(ys, float)
    ok = np.isfinite(xs) & np.isfinite(ys)
    return bool(np.all((xs[ok] >= x0) & (xs[ok] <= x1) & (ys[ok] >= y0) & (ys[ok] <= y1)))


def test_bars_per_level_and_every_point_inside_the_axes(pair):
    from headroom import plot

    a, b, c = pair
    axes = plot.by_concurrency([a, b], c)
    levels = sorted({p.concurrency for p in c.pairs})
    per_level = {lv: sum(p.concurrency == lv for p in c.pairs) for lv in levels}
    assert set(per_level.values()) == {2}  # the recording has two pairs a level
    for ax, key in ((axes[1, 0], "rps"), (axes[1, 1], "p99_s")):
        bars = [r for r in ax.patches if r.get_width() > 0]
        want = sum(p.change(key) is not None for p in c.pairs)
        assert len(bars) == want and want > 0, (key, len(bars), want)
        # the two bars of a level side by side, neither on top of the other, both near the level
        gap = min(np.diff(levels))
        for lv in levels:
            near = sorted(r.get_x() + r.get_width() / 2 for r in bars if abs(r.get_x() - lv) < gap / 2)
            assert len(near) <= 2 and (len(near) < 2 or near[1] - near[0] >= bars[0].get_width() * 0.99)
        x0, x1 = ax.get_xlim()
        assert all(x0 <= r.get_x() and r.get_x() + r.get_width() <= x1 for r in bars)
        # the bracket of the interval inside the axes, right of the last bar
        bracket = [
            ln for ln in ax.get_lines() if len(ln.get_xdata()) == 2 and ln.get_xdata()[0] == ln.get_xdata()[1]
        ]
        assert bracket and all(x0 < ln.get_xdata()[0] < x1 for ln in bracket)
    for ax in axes[0]:
        for ln in ax.get_lines():
            if ln.get_linestyle() == "None" and len(ln.get_xdata()) > 1:  # the steps, as points
                assert _inside(ax, ln.get_xdata(), ln.get_ydata()), ln.get_label()
    # the line joins each level's mean once: as many points as levels, in load order
    lines = [ln for ln in axes[0, 0].get_lines() if ln.get_linestyle() == "-" and len(ln.get_xdata()) > 2]
    assert lines and all(list(ln.get_xdata()) == levels for ln in lines)
    thr = a.table.goodput_rps[a.table.concurrency == levels[0]].mean()
    assert lines[0].get_ydata()[0] == pytest.approx(thr)


def test_the_headroom_plot_joins_level_means(pair):
    from headroom import plot

    a, b, _ = pair
    ax = plot.headroom([a, b])
    n = len(np.unique(a.table.concurrency))
    joined = [ln for ln in ax.get_lines() if ln.get_linestyle() in ("-", "--") and len(ln.get_xdata()) == n]
    assert len(joined) >= 4  # p50 and p99 of both runs, one point a level


def test_the_memory_axes_hold_every_line():
    """A flat RSS line at the data's maximum sat on the top edge and hid under the frame (issue 49)."""
    from headroom import analyze, plot, reduce_run

    tel = ROOT / "data" / "telemetry"
    runs = [analyze(reduce_run(str(tel / n))) for n in ("go-gogc100", "go-gogc400")]
    for ax in (plot.memory_over_time(runs), plot.memory_vs_throughput(runs)):
        top = max(float(np.nanmax(ln.get_ydata())) for ln in ax.get_lines() if len(ln.get_ydata()))
        assert top < ax.get_ylim()[1] * 0.99, (top, ax.get_ylim())

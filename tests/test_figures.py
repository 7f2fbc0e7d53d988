"""Every figure of both reports, rendered: no two pieces of text overlap.

The figures are drawn by ``plot.report_figure``, the function the report
notebooks call, on the bundled runs, on two runs sharing one label, and on a
copy of a bundled run without its cpuStats.csv.  After ``fig.canvas.draw()``
every visible text (titles, axis labels, tick labels, legend entries,
annotations, colour bar labels) is measured with ``get_window_extent``; any
two that intersect fail the test, and so does any text (outside the legend)
that intersects a legend box.  Legends are also checked against the data:
every drawn point (line vertices, markers, bar corners, segment ends) that
lies inside an Axes is transformed to display coordinates, and none may fall
inside a legend box.
"""

import itertools
import shutil

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from conftest import RUNS  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from headroom import plot, report  # noqa: E402


@pytest.fixture(scope="module")
def no_cpu_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("runs") / "nginx-keepalive-no-cpu"
    shutil.copytree(RUNS / "nginx-keepalive", folder)
    (folder / "cpuStats.csv").unlink()
    return folder


CASES = {
    "run": ["nginx-keepalive"],
    "comparison": ["nginx-no-keepalive", "nginx-keepalive"],
    "same-label": ["nginx-keepalive", "nginx-keepalive-repeat"],
    "no-cpu": ["nginx-no-keepalive", None],
    "no-cpu-run": [None],
}


@pytest.fixture(scope="module", params=list(CASES))
def case(request, no_cpu_run):
    paths = [str(no_cpu_run if n is None else RUNS / n) for n in CASES[request.param]]
    summaries = report.load_summaries(paths, objective="p99<=5ms")
    comparison = report.compare_summaries(summaries, objective="p99<=5ms") if len(paths) == 2 else None
    return request.param, summaries, comparison


def _axes(fig):
    out = []
    todo = list(fig.axes)
    while todo:
        ax = todo.pop()
        if ax not in out:
            out.append(ax)
            todo += list(ax.child_axes)
    return out


def _texts(fig, renderer):
    """(description, bbox) of every text drawn, and the legends' boxes."""
    texts, legends = [], []
    for ax in _axes(fig):
        if not ax.get_visible():
            continue
        items = [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label]
        items += [ax.xaxis.get_offset_text(), ax.yaxis.get_offset_text()]
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis._update_ticks():
                items += [tick.label1, tick.label2]
        items += [t for t in ax.texts]
        leg = ax.get_legend()
        if leg is not None and leg.get_visible():
            items += list(leg.get_texts())
            legends.append((ax, leg.get_window_extent(renderer), set(map(id, leg.get_texts()))))
        for t in items:
            if isinstance(t, Text) and t.get_visible() and t.get_text().strip():
                texts.append((f"{t.get_text()!r} in {ax.get_title() or ax.get_ylabel()!r}", t))
    texts += [(repr(t.get_text()), t) for t in fig.texts if t.get_visible() and t.get_text().strip()]
    out = []
    for name, t in texts:
        bb = t.get_window_extent(renderer)
        if bb.width > 0 and bb.height > 0:
            out.append((name, id(t), bb))
    return out, legends


def overlaps(fig) -> list[str]:
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts, legends = _texts(fig, renderer)
    bad = []
    for (n1, _, b1), (n2, _, b2) in itertools.combinations(texts, 2):
        if b1.shrunk(0.98, 0.9).overlaps(b2.shrunk(0.98, 0.9)):
            bad.append(f"{n1} overlaps {n2}")
    for _, box, inside in legends:
        for n, ident, b in texts:
            if ident not in inside and box.overlaps(b.shrunk(0.98, 0.9)):
                bad.append(f"{n} overlaps a legend")
    return bad


def _data_points(ax):
    """Display coordinates of every data point drawn in ``ax`` that lies inside it."""
    import numpy as np
    from matplotlib.collections import LineCollection, PathCollection
    from matplotlib.patches import Rectangle

    pts = []
    for ln in ax.get_lines():
        if ln.get_visible() and len(ln.get_xdata()):
            xy = np.column_stack([ln.get_xdata(), ln.get_ydata()]).astype(float)
            pts.append(ln.get_transform().transform(xy[np.isfinite(xy).all(axis=1)]))
    for c in ax.collections:
        if isinstance(c, PathCollection) and len(c.get_offsets()):
            pts.append(c.get_offset_transform().transform(np.asarray(c.get_offsets(), float)))
        elif isinstance(c, LineCollection):
            for seg in c.get_segments():
                pts.append(c.get_transform().transform(np.asarray(seg, float)))
    for p in ax.patches:
        if isinstance(p, Rectangle):
            pts.append(p.get_transform().transform(np.asarray(p.get_bbox().get_points(), float)))
    if not pts:
        return np.zeros((0, 2))
    xy = np.concatenate(pts)
    box = ax.get_window_extent()
    inside = (xy[:, 0] >= box.x0) & (xy[:, 0] <= box.x1) & (xy[:, 1] >= box.y0) & (xy[:, 1] <= box.y1)
    return xy[inside]


def legends_over_data(fig) -> list[str]:
    """Every legend that covers a data point of any Axes of the figure."""
    fig.canvas.draw()
    legends = [ax.get_legend() for ax in _axes(fig)] + list(fig.legends)
    bad = []
    for leg in [lg for lg in legends if lg is not None and lg.get_visible()]:
        box = leg.get_window_extent()
        for ax in _axes(fig):
            xy = _data_points(ax)
            hit = (xy[:, 0] > box.x0) & (xy[:, 0] < box.x1) & (xy[:, 1] > box.y0) & (xy[:, 1] < box.y1)
            if hit.any():
                bad.append(f"a legend covers {int(hit.sum())} data point(s) of {ax.get_title()!r}")
    return bad


@pytest.mark.parametrize("name", plot.REPORT_FIGURES)
@pytest.mark.parametrize("log_latency", [False, True])
def test_report_figures_keep_legends_off_the_data(case, name, log_latency):
    key, summaries, comparison = case
    fig = plot.report_figure(name, summaries, comparison=comparison, log_latency=log_latency)
    try:
        assert legends_over_data(fig) == [], key
    finally:
        plt.close(fig)


@pytest.mark.parametrize("name", plot.REPORT_FIGURES)
@pytest.mark.parametrize("log_latency", [False, True])
def test_report_figures_have_no_overlapping_text(case, name, log_latency):
    key, summaries, comparison = case
    fig = plot.report_figure(name, summaries, comparison=comparison, log_latency=log_latency)
    try:
        assert overlaps(fig) == [], key
    finally:
        plt.close(fig)


def test_the_overlap_check_catches_overlap():
    fig, ax = plt.subplots()
    ax.set_xlim(0, 1)
    ax.annotate("knee 12,345 req/s", (0.5, 0.5))
    ax.annotate("at p99<=5ms: 12,400 req/s", (0.52, 0.5))
    try:
        assert len(overlaps(fig)) == 1
    finally:
        plt.close(fig)
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], label="a long legend entry for a run")
    ax.legend(loc="upper left")
    ax.text(0.05, 0.93, "under the legend", transform=ax.transAxes)
    try:
        assert any("legend" in b for b in overlaps(fig))
    finally:
        plt.close(fig)
    # a legend inside the Axes over the points it describes: caught by the data check
    fig, ax = plt.subplots()
    ax.plot([0.05, 0.1, 0.9], [0.95, 0.9, 0.1], "o-", label="a legend entry long enough to cover a point")
    ax.legend(loc="upper left")
    try:
        assert legends_over_data(fig)
    finally:
        plt.close(fig)

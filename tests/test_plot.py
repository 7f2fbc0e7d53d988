import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from conftest import RUNS  # noqa: E402
from matplotlib.collections import PathCollection, QuadMesh  # noqa: E402
from test_analysis import nearest_rank  # noqa: E402

from headroom import analyze, load_run, parse_objective, plot  # noqa: E402
from headroom.binning import bucket_percentiles, density  # noqa: E402


@pytest.fixture(scope="module")
def pair():
    obj = parse_objective("p99<=5ms")
    return [analyze(load_run(RUNS / n), objective=obj) for n in ("nginx-no-keepalive", "nginx-keepalive")]


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _line(ax, label):
    found = [ln for ln in ax.get_lines() if ln.get_label() == label]
    assert found, f"no line labelled {label!r}; have {[ln.get_label() for ln in ax.get_lines()]}"
    return found[0]


def _raw_steps(s, num=99, den=100):
    """Per step, from the raw requests (not the tables): concurrency, goodput and the num/den percentile."""
    r = s.run.requests
    out = []
    for k in range(r.n_steps):
        a, b = r.step_offsets[k], r.step_offsets[k + 1]
        start, lat = r.start_ns[a:b], r.latency_s[a:b]
        dur = (np.max(start + np.rint(lat * 1e9).astype(np.int64)) - start.min()) / 1e9
        out.append((s.steps.concurrency[k], (b - a) / dur, nearest_rank(lat, num, den)))
    return sorted(out)


def test_headroom_plot_draws_steps(pair):
    ax = plot.headroom(pair)
    assert ax.get_xlim()[0] == 0 and ax.get_ylim()[0] == 0
    for s in pair:
        assert s.table.usable.all()  # every step of the bundled runs is drawn
        for p, (num, den) in (("p50", (1, 2)), ("p99", (99, 100))):
            raw = np.array(_raw_steps(s, num, den))
            ln = _line(ax, f"{s.label} {p}")  # steps joined in concurrency order
            np.testing.assert_allclose(ln.get_xdata(), raw[:, 1], rtol=1e-3)
            np.testing.assert_allclose(ln.get_ydata(), raw[:, 2] * 1e3)
            assert ln.get_linestyle() == ("--" if p == "p50" else "-")
    # the axes scale to the steps: the highest p99 fits with room, the x axis covers every bucket
    top = max(np.max(s.table.latency.pct["p99"]) for s in pair) * 1e3
    assert top < ax.get_ylim()[1] < 2 * top
    assert ax.get_xlim()[1] >= max(s.buckets.rps.max() for s in pair)
    assert _line(ax, "objective p99<=5ms").get_ydata()[0] == pytest.approx(5.0)


def test_headroom_crossing_lies_on_the_p99_curve_and_is_the_tables_figure(pair):
    from headroom.text import capacity_rows

    ax = plot.headroom(pair)
    s = pair[0]  # no keep-alive: p99 breaks 5 ms between concurrency 17 and 21
    raw = np.array(_raw_steps(s))
    i = int(np.flatnonzero(raw[:, 2] > 0.005)[0])
    (x0, y0), (x1, y1) = raw[i - 1, 1:], raw[i, 1:]
    expect = x0 + (0.005 - y0) / (y1 - y0) * (x1 - x0)  # linear between the two steps, by hand
    mark = _line(ax, f"{s.label} crossing")
    x, y = float(mark.get_xdata()[0]), float(mark.get_ydata()[0])
    assert y == pytest.approx(5.0)
    # issue 39: the throughput there is read off a line through the steps near the crossing, not the
    # two steps alone: near the polyline's crossing on these steady steps, and inside its interval bar
    assert x == pytest.approx(expect, rel=0.01)
    assert x == s.capacity.rps_at_objective
    assert dict(capacity_rows(s))["throughput at p99<=5ms"].startswith(f"{x:,.0f} req/s")
    assert any(t.get_text().startswith(f"{x:,.0f} req/s") for t in ax.texts)  # written beside the mark
    bar = _line(ax, f"{s.label} interval at the objective")
    assert list(bar.get_xdata()) == [s.capacity.at_objective.low, s.capacity.at_objective.high]
    assert bar.get_xdata()[0] < x < bar.get_xdata()[1] and list(bar.get_ydata()) == [5.0, 5.0]
    # the drawn p99 polyline crosses 5 ms between the same two steps
    p99 = _line(ax, f"{s.label} p99")
    px, py = np.asarray(p99.get_xdata()), np.asarray(p99.get_ydata())
    on = [k for k in range(len(px) - 1) if min(py[k], py[k + 1]) <= y <= max(py[k], py[k + 1])]
    assert on == [i - 1]
    # the keep-alive run holds 5 ms at every step: a lower bound at its plateau, on the objective line
    held = _line(ax, f"{pair[1].label} held")
    assert held.get_xdata()[0] == pair[1].capacity.plateau_rps and held.get_marker() == ">"
    assert not [ln for ln in ax.get_lines() if ln.get_label() == f"{pair[1].label} crossing"]


def test_headroom_density_bins_are_shared_by_both_runs(pair):
    ax = plot.headroom(pair)
    meshes = [c for c in ax.collections if isinstance(c, QuadMesh)]
    assert len(meshes) == 2
    c0, c1 = (np.asarray(m.get_coordinates()) for m in meshes)
    np.testing.assert_array_equal(c0, c1)
    x_edges, y_edges = c0[0, :, 0], c0[:, 0, 1] / 1e3
    for s, mesh in zip(pair, meshes):  # each run's counts on the shared grid, by numpy
        lat = s.run.requests.latency_s
        rps = s.buckets.rps[s.buckets.of_request]
        keep = lat < y_edges[-1]
        expect, _, _ = np.histogram2d(rps[keep], np.maximum(lat[keep], y_edges[0]), bins=[x_edges, y_edges])
        np.testing.assert_array_equal(np.ma.filled(mesh.get_array(), 0).reshape(expect.T.shape), expect.T)


def test_headroom_step_intervals_are_order_statistic_intervals(pair):
    from scipy.stats import binom

    s = pair[0]
    ax = plot.headroom(s)
    bars = next(c for c in ax.collections if c.get_label() == f"{s.label} p99 interval")
    segs = bars.get_segments()
    r = s.run.requests
    for k, seg in zip(s.table.order(), segs):
        lat = np.sort(r.latency_s[r.step_offsets[k] : r.step_offsets[k + 1]])
        n = len(lat)
        lo, hi = int(binom.ppf(0.025, n, 0.99)), int(binom.ppf(0.975, n, 0.99)) + 1
        assert seg[0][1] == pytest.approx(lat[max(lo, 1) - 1] * 1e3)
        assert seg[1][1] == pytest.approx(lat[min(hi, n) - 1] * 1e3)
        assert seg[0][1] <= s.table.latency.pct["p99"][k] * 1e3 <= seg[1][1]


def test_headroom_usl_up_to_its_peak_then_retrograde(pair):
    s = pair[1]  # keep-alive: the fitted peak (concurrency 18) lies inside the ramp (1-29)
    m = s.capacity.model
    assert m.trusted and m.n_lo < m.peak_concurrency < m.n_hi
    ax = plot.headroom(s)
    up = _line(ax, f"{s.label} USL model (mean latency)")
    n = np.linspace(m.n_lo, m.peak_concurrency, len(up.get_xdata()))
    x_model = m.lambda_rps * n / (1 + m.sigma * (n - 1) + m.kappa * n * (n - 1))
    np.testing.assert_allclose(up.get_xdata(), x_model)
    np.testing.assert_allclose(up.get_ydata(), n / x_model * 1e3)
    assert up.get_xdata()[-1] == pytest.approx(m.capacity_rps)  # it ends at the peak
    past = _line(ax, f"{s.label} USL past its peak (retrograde)")
    assert past.get_xdata()[0] == pytest.approx(m.capacity_rps) and past.get_linewidth() < up.get_linewidth()
    assert np.all(np.diff(past.get_xdata()) < 0)  # throughput falls as concurrency rises
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("retrograde" in t for t in texts)
    knee = _line(ax, f"{s.label} knee")
    assert knee.get_xdata()[0] == pytest.approx(s.capacity.knee_rps)


def test_headroom_legend_names_each_run_once_under_the_axes(pair):
    ax = plot.headroom(pair)
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    for s in pair:
        assert sum(s.label in t for t in texts) == 1
    assert f"{pair[0].label}: at p99<=5ms: {pair[0].capacity.rps_at_objective:,.0f} req/s" in texts[0]
    assert "(held at every step)" in texts[1]
    ax.figure.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    assert legend.y1 < ax.get_window_extent().y0  # below the Axes, not over the data


def test_headroom_plot_options(pair):
    s = pair[1]
    ax = plot.headroom(s, marginals=True, color_by_time=True, percentiles=("p999",), density=False)
    assert not [c for c in ax.collections if isinstance(c, QuadMesh)]
    # throughput histogram on top, latency on the right, and the colour bar beside them
    assert len(ax.child_axes) == 3
    assert sum("seconds since load start" in a.get_ylabel() for a in ax.child_axes) == 1
    dots = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert len(dots) == 1 and len(dots[0].get_offsets()) == len(s.buckets)
    _line(ax, f"{s.label} p99.9")
    ax2 = plot.headroom(s, y_max_ms=50)
    assert ax2.get_ylim() == (0, 50)


def test_density_matches_numpy_histogram2d(pair):
    s = pair[1]
    d = density(s.buckets, s.hist, x_max=30_000, y_max_s=0.01, nx=60, ny=50)
    req_rps = s.buckets.rps[s.buckets.of_request]
    lat = s.run.requests.latency_s
    keep = lat < 0.01
    expect, _, _ = np.histogram2d(req_rps[keep], lat[keep], bins=[d.x_edges, d.y_edges])
    np.testing.assert_array_equal(d.counts, expect)
    assert d.above == int((~keep).sum())


def test_bucket_percentiles_match_nearest_rank(pair):
    s = pair[0]
    bp = bucket_percentiles(s.buckets, s.hist, ("p50", "p99", "p999"))
    lat = s.run.requests.latency_s
    for i in range(len(s.buckets)):
        mine = lat[s.buckets.of_request == i]
        assert bp["p50"][i] == nearest_rank(mine, 1, 2)
        assert bp["p99"][i] == nearest_rank(mine, 99, 100)
        assert bp["p999"][i] == nearest_rank(mine, 999, 1000)


def test_throughput_over_time_keeps_gaps(pair):
    s = pair[0]
    ax = plot.throughput_over_time(s)
    ln = _line(ax, s.label)
    y = ln.get_ydata()
    assert np.isnan(y).sum() == s.steps.index.size - 1  # one break between consecutive steps
    np.testing.assert_allclose(np.unique(y[~np.isnan(y)]), np.unique(s.buckets.rps))
    x = ln.get_xdata()
    assert np.nanmin(x) == 0 and ax.get_xlim()[0] == 0 and ax.get_ylim()[0] == 0
    texts = [t.get_text() for t in ax.texts]
    assert [f"c={c}" for c in s.steps.concurrency] == texts


def test_cpu_over_time_same_time_axis(pair):
    s = pair[1]
    ax = plot.cpu_over_time(s)
    ln = _line(ax, s.label)
    assert ln.get_drawstyle() == "steps-pre"
    t0 = s.steps.start_ns.min()
    np.testing.assert_allclose(ln.get_xdata(), (s.run.cpu.time_ns - t0) / 1e9)
    np.testing.assert_allclose(ln.get_ydata(), s.run.cpu.pct)
    assert ax.get_ylim() == (0, 100)


def test_cpu_vs_throughput_and_latency_over_time(pair):
    ax = plot.cpu_vs_throughput(pair)
    for s in pair:
        t = s.table
        o = np.argsort(t.concurrency)
        o = o[np.isfinite(t.cpu_pct[o])]
        ln = _line(ax, f"{s.label} (steps)")
        np.testing.assert_allclose(ln.get_xdata(), t.goodput_rps[o])
        np.testing.assert_allclose(ln.get_ydata(), t.cpu_pct[o])
    assert _line(ax, "CPU target 70 %").get_ydata()[0] == 70
    assert "100 % = 1 core" in ax.get_ylabel()
    ax = plot.cpu_vs_throughput(pair, per_request=True)
    t = pair[0].table
    o = np.argsort(t.concurrency)
    np.testing.assert_allclose(_line(ax, f"{pair[0].label} (steps)").get_ydata(), t.cpu_s_per_req[o] * 1e6)
    assert ax.get_ylabel() == "CPU per request of each step (us)"
    ax = plot.latency_over_time(pair, percentiles=("p50", "p99"))
    assert len([ln for ln in ax.get_lines() if ln.get_label().startswith("nginx")]) == 4


def test_cpu_vs_throughput_without_cpu_says_so(pair):
    import dataclasses

    s = pair[0]
    no_cpu = dataclasses.replace(s, table=dataclasses.replace(s.table, cpu_pct=np.full(len(s.table), np.nan)))
    ax = plot.cpu_vs_throughput(no_cpu)
    assert not ax.get_lines() and [t.get_text() for t in ax.texts] == ["no CPU samples"]


def test_plots_reuse_given_axes(pair):
    fig, axes = plt.subplots(1, 5)
    out = [
        plot.headroom(pair[0], ax=axes[0]),
        plot.throughput_over_time(pair[0], ax=axes[1]),
        plot.cpu_over_time(pair[0], ax=axes[2]),
        plot.cpu_vs_throughput(pair[0], ax=axes[3]),
        plot.latency_over_time(pair[0], ax=axes[4]),
    ]
    assert out == list(axes)


def test_density_rows_follow_the_latency_quantization(pair):
    """No empty stripes: every latency row of the grid holds the same whole number of 0.1 ms values."""
    from headroom.binning import latency_edges, latency_tick

    s = pair[1]
    assert latency_tick(s.hist.values) == pytest.approx(1e-4)
    for y_max in (0.0093, 0.0123, 0.05):
        edges = latency_edges(s.hist.values, y_max, ny=100)
        ticks = np.arange(0, int(y_max / 1e-4) + 1) * 1e-4
        per_row = np.histogram(ticks, bins=edges)[0]
        assert per_row[:-1].min() == per_row[:-1].max() >= 1  # the top row may be cut by the axis
        assert edges[-1] >= y_max
    log_edges = latency_edges(s.hist.values, 0.05, ny=100, log=True, y_min_s=1e-4)
    per_row = np.histogram(np.arange(1, 500) * 1e-4, bins=log_edges)[0]
    assert per_row.min() >= 1  # log rows are never narrower than one step
    ax = plot.headroom(s)
    mesh = next(c for c in ax.collections if isinstance(c, QuadMesh))
    rows = np.asarray(mesh.get_array()).reshape(-1, plot.DENSITY_COLUMNS).sum(axis=1)
    low = rows[: int(0.002 / 2e-4)]  # below 2 ms every row of this run has requests
    assert (low > 0).all()


def test_cut_latency_axis_says_how_many_requests_are_hidden(pair):
    s = pair[0]
    ax = plot.headroom(s)
    top_s = ax.get_ylim()[1] / 1e3
    lat = s.run.requests.latency_s
    hidden = int((lat > top_s).sum())
    assert hidden > 0
    assert f"{hidden:,} ({hidden / len(lat):.2%})" in ax.get_xlabel()
    assert "log_latency=True" in ax.get_xlabel()
    ax = plot.headroom(s, log_latency=True)
    assert ax.get_yscale() == "log" and "not shown" not in ax.get_xlabel()
    assert ax.get_ylim()[1] >= lat.max() * 1e3
    # every request is in the log density, the 0.0 ms ones (keep-alive run) in its lowest row
    for run in pair:
        lat = run.run.requests.latency_s
        ax = plot.headroom(run, log_latency=True)
        mesh = next(c for c in ax.collections if isinstance(c, QuadMesh))
        assert int(np.asarray(mesh.get_array()).sum()) == len(lat)
        assert 0 < ax.get_ylim()[0] <= lat[lat > 0].min() * 1e3
    assert (pair[1].run.requests.latency_s == 0).any()


def test_poor_usl_fit_is_drawn_faint_without_a_knee(pair):
    import dataclasses

    s = pair[0]
    poor = dataclasses.replace(s.capacity.model, r2_log=0.2)
    bad = dataclasses.replace(s, capacity=dataclasses.replace(s.capacity, model=poor))
    ax = plot.headroom(bad)
    fit = next(ln for ln in ax.get_lines() if "USL model" in ln.get_label())
    assert "poor fit" in fit.get_label() and fit.get_alpha() < 0.5
    assert not [ln for ln in ax.get_lines() if "knee" in ln.get_label()]
    good = plot.headroom(s)
    assert [ln for ln in good.get_lines() if "knee" in ln.get_label()]


def test_same_labels_are_told_apart_in_legends():
    runs = [analyze(load_run(RUNS / n)) for n in ("nginx-keepalive", "nginx-keepalive-repeat")]
    assert runs[0].label == runs[1].label
    for fn in (plot.headroom, plot.throughput_over_time, plot.latency_over_time, plot.cpu_over_time):
        ax = fn(runs)
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert any("(nginx-keepalive)" in t for t in labels), fn
        assert any("(nginx-keepalive-repeat)" in t for t in labels), fn


def test_step_labels_readable_for_every_run(pair):
    ax = plot.throughput_over_time(pair)
    texts = [t for t in ax.texts if t.get_text().startswith("c=")]
    assert texts and all(t.get_fontsize() >= 8 for t in texts)
    # the two bundled runs were stepped alike: one row of labels, one per step
    assert len(texts) == len(pair[0].steps)


def test_by_concurrency_draws_steps_and_pair_changes(pair):
    from headroom.compare import compare_runs

    c = compare_runs(pair[0], pair[1], objective=parse_objective("p99<=5ms"))
    axes = plot.by_concurrency(pair, c)
    for s in pair:
        t = s.table
        o = [i for i in t.order() if t.usable[i]]
        ln = _line(axes[0, 0], s.label)
        np.testing.assert_allclose(ln.get_xdata(), t.concurrency[o])
        np.testing.assert_allclose(ln.get_ydata(), t.goodput_rps[o])
        np.testing.assert_allclose(
            _line(axes[0, 1], f"{s.label} p99").get_ydata(), t.latency.pct["p99"][o] * 1e3
        )
    # bars: candidate / baseline - 1 of each pair, from the step tables directly
    b, k = pair[0].table, pair[1].table
    heights = sorted((r.get_x() + r.get_width() / 2, r.get_height()) for r in axes[1, 0].patches)
    expect = []
    for p in c.pairs:
        i, j = p.baseline_steps[0], p.candidate_steps[0]
        expect.append((p.concurrency, (k.goodput_rps[j] / b.goodput_rps[i] - 1) * 100))
    np.testing.assert_allclose(heights, sorted(expect))
    m = c.metric("paired_plateau_rps")
    line = next(ln for ln in axes[1, 0].get_lines() if ln.get_label().startswith("plateau throughput"))
    assert line.get_ydata()[0] == pytest.approx(m.change * 100)
    assert m.decision in line.get_label()


@pytest.mark.parametrize("log_latency", [False, True])
def test_every_latency_chart_has_the_objective_and_the_log_option(pair, log_latency):
    """The latency Axes of every report figure: objective line at 5 ms, log scale when asked."""
    latency_axes = []
    for name in plot.REPORT_FIGURES:
        fig = plot.report_figure(name, pair, log_latency=log_latency)
        latency_axes += [ax for ax in fig.axes if ax.get_ylabel().startswith("latency")]
    assert len(latency_axes) == 3  # headroom, latency by concurrency, latency over time
    for ax in latency_axes:
        line = _line(ax, "objective p99<=5ms")
        assert line.get_ydata()[0] == pytest.approx(5.0)
        lo, hi = ax.get_ylim()
        assert lo < 5.0 < hi and hi > 5.0 * 1.1  # drawn inside, clear of the frame
        assert ax.get_yscale() == ("log" if log_latency else "linear"), ax.get_title()
        assert ("log scale" in ax.get_ylabel()) == log_latency


def test_open_loop_steps_are_placed_at_their_intended_rates(tmp_path):
    """vegeta's five attacks (tests/data/formats/real/README.md: 250, 500, 1000, 2000 and 4000 req/s) go
    at those rates on both rows, the pair bars too, and the axis says it is the intended rate."""
    import shutil

    from conftest import ROOT

    from headroom.compare import compare_runs
    from headroom.io import reduce_run

    src = ROOT / "tests" / "data" / "formats" / "real" / "vegeta-rates.csv.gz"
    copy = tmp_path / "vegeta-again.csv.gz"
    shutil.copy(src, copy)
    a, b = (analyze(reduce_run(str(p))) for p in (src, copy))
    axes = plot.by_concurrency([a, b], compare_runs([a], [b]))
    planned = [250, 500, 1000, 2000, 4000]
    for s in (a, b):
        np.testing.assert_allclose(_line(axes[0, 0], s.label).get_xdata(), planned)
    centres = sorted(r.get_x() + r.get_width() / 2 for r in axes[1, 0].patches)
    np.testing.assert_allclose(centres, planned)
    assert axes[1, 0].get_xlabel() == "intended rate (requests/s, open loop)"
    assert axes[0, 0].get_title() == "Throughput by intended rate"
    plt.close("all")

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


def test_headroom_plot_artists(pair):
    ax = plot.headroom(pair)
    assert ax.get_xlim()[0] == 0 and ax.get_ylim()[0] == 0
    meshes = [c for c in ax.collections if isinstance(c, QuadMesh)]
    assert len(meshes) == 2  # one density per run
    for s in pair:
        has = s.bins.latency.requests > 0
        for p in ("p50", "p99"):
            ln = _line(ax, f"{s.label} {p}")
            x, y = np.asarray(ln.get_xdata()), np.asarray(ln.get_ydata())
            np.testing.assert_allclose(x[has], s.bins.rps[has])
            np.testing.assert_allclose(y[has], s.bins.latency.pct[p][has] * 1e3)
            # an empty bin breaks the line (NaN) instead of a straight segment across it
            assert np.isnan(y[~has]).all() and len(y) == len(s.bins)
        # the USL model through Little's law: mean latency N / X(N) against X(N)
        m = s.capacity.model
        fit = _line(ax, f"{s.label} USL model (mean latency)")
        n = np.linspace(m.n_lo, m.n_hi, len(fit.get_xdata()))
        x_model = m.lambda_rps * n / (1 + m.sigma * (n - 1) + m.kappa * n * (n - 1))
        np.testing.assert_allclose(fit.get_xdata(), x_model)
        np.testing.assert_allclose(fit.get_ydata(), n / x_model * 1e3)
    # the axes scale to the data: the highest p99 fits, and the x axis covers every bucket
    top = max(np.nanmax(s.bins.latency.pct["p99"]) for s in pair) * 1e3
    assert top < ax.get_ylim()[1] < 3 * top
    assert ax.get_xlim()[1] >= max(s.buckets.rps.max() for s in pair)
    # objective line and the crossing throughput of the run that crosses it
    obj = _line(ax, "objective p99<=5ms")
    assert obj.get_ydata()[0] == pytest.approx(5.0)
    xs = [
        ln.get_xdata()[0]
        for ln in ax.get_lines()
        if ln.get_linestyle() == "--" and len(set(ln.get_xdata())) == 1
    ]
    assert any(x == pytest.approx(pair[0].capacity.rps_at_objective) for x in xs)
    # the values sit in the legend, with their qualifier, not in labels drawn over the data
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    cap0, cap1 = pair[0].capacity, pair[1].capacity
    assert f"{pair[0].label} at p99<=5ms: {cap0.rps_at_objective:,.0f} req/s" in labels
    assert cap1.at_objective.lower_bound  # the keep-alive run never breaks 5 ms
    assert f"{pair[1].label} at p99<=5ms: >= {cap1.rps_at_objective:,.0f} req/s" in labels[-9:][0] or any(
        t.startswith(f"{pair[1].label} at p99<=5ms: >= {cap1.rps_at_objective:,.0f} req/s (held")
        for t in labels
    )
    assert f"{pair[0].label} knee {cap0.model.knee_rps:,.0f} req/s" in labels
    assert ax.get_xlabel().startswith("throughput (requests/s") and ax.get_ylabel() == "latency (ms)"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert all(any(s.label in t for t in labels) for s in pair)


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
    assert ax.get_ylabel() == "CPU per request (us)"
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
    rows = np.asarray(mesh.get_array()).reshape(-1, 120).sum(axis=1)
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
    m = c.metric("plateau_rps")
    line = next(ln for ln in axes[1, 0].get_lines() if ln.get_label().startswith("plateau throughput"))
    assert line.get_ydata()[0] == pytest.approx(m.change * 100)
    assert m.decision in line.get_label()

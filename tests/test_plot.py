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
            np.testing.assert_allclose(ln.get_xdata(), s.bins.rps[has])
            np.testing.assert_allclose(ln.get_ydata(), s.bins.latency.pct[p][has] * 1e3)
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
    assert ax.get_xlabel().startswith("throughput (requests/s") and ax.get_ylabel() == "latency (ms)"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert all(any(s.label in t for t in labels) for s in pair)


def test_headroom_plot_options(pair):
    s = pair[1]
    ax = plot.headroom(s, marginals=True, color_by_time=True, percentiles=("p999",), density=False)
    assert not [c for c in ax.collections if isinstance(c, QuadMesh)]
    assert len(ax.child_axes) == 2  # throughput histogram on top, latency on the right
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

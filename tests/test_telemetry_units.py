"""Telemetry pieces checked against independent computations, without a Prometheus server."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from headroom.cli import main
from headroom.model import CpuSamples
from headroom.telemetry.files import read_mem_stats, write_mem_stats
from headroom.telemetry.model import Series, Telemetry, TelemetryError, cpu_inner
from headroom.telemetry.prometheus import counter_rate, gauge_intervals
from headroom.telemetry.steps import compare_memory, step_memory

T0 = 1_700_000_000.0


def test_counter_rate_resets_and_gaps_stay_missing():
    rng = np.random.default_rng(7)
    t = T0 + np.arange(40, dtype=float) + rng.uniform(-0.05, 0.05, 40)
    use = rng.uniform(0.2, 1.5, 40)  # cores used in each second
    v = np.cumsum(use * np.r_[1.0, np.diff(t)])
    v[25:] -= v[24] + 0.3  # a restart: the counter starts again from a small value
    v[25:] = np.abs(v[25:])
    keep = np.ones(40, bool)
    keep[10:13] = False  # three scrapes missed
    a, b, r = counter_rate(t[keep], v[keep])
    tk, vk = t[keep], v[keep]
    for i in range(len(r)):
        dt, dv = tk[i + 1] - tk[i], vk[i + 1] - vk[i]
        if dv < 0 or dt > 1.5:
            assert np.isnan(r[i])
        else:
            assert r[i] == pytest.approx(dv / dt)
            assert a[i] == int(tk[i] * 1e9) and b[i] == int(tk[i + 1] * 1e9)
    assert np.isnan(r).sum() == 2  # the gap and the reset, nothing else
    assert np.nanmin(r) >= 0


def test_gauge_intervals_never_span_a_gap():
    t = T0 + np.array([0, 1, 2, 6, 7, 8], float)
    a, b, v = gauge_intervals(t, np.arange(6.0))
    assert np.all((b - a) == 1_000_000_000)  # the median interval, not the 4 s pause


def test_cpu_inner_uses_whole_intervals():
    # 1 s samples: idle, then 2 cores for 4 s, then idle; a step from 2.5 s to 6.5 s
    t = (T0 + np.arange(10, dtype=float)) * 1e9
    pct = np.array([0, 0, 0, 200, 200, 200, 200, 0, 0, 0], float)  # sample i covers (t[i-1], t[i]]
    cpu = CpuSamples(t.astype(np.int64), pct, None, 1.0, "prometheus test")
    got = cpu_inner(cpu, np.array([int((T0 + 2.5) * 1e9)]), np.array([4.0]))
    assert got[0] == pytest.approx(200.0)  # the whole intervals (3,4], (4,5], (5,6]
    # with a missing interval inside, the others still give the mean
    pct2 = pct.copy()
    pct2[4] = np.nan
    got = cpu_inner(
        CpuSamples(cpu.time_ns, pct2, None, 1.0, cpu.source),
        np.array([int((T0 + 2.5) * 1e9)]),
        np.array([4.0]),
    )
    assert got[0] == pytest.approx(200.0)


def test_step_memory_median_and_max_against_numpy():
    rng = np.random.default_rng(3)
    end = ((T0 + np.arange(1, 61)) * 1e9).astype(np.int64)
    rss = rng.uniform(50e6, 80e6, 60)
    alloc = np.full(60, 2e6)  # 2 MB/s
    tel = Telemetry(
        {
            "rss_bytes": Series("rss_bytes", "bytes", end - 10**9, end, rss, "x"),
            "alloc_bytes_per_s": Series("alloc_bytes_per_s", "bytes_per_s", end - 10**9, end, alloc, "x"),
        },
        "x",
    )
    starts = ((T0 + np.array([0.0, 20.0, 40.0])) * 1e9).astype(np.int64)
    ends = starts + 20 * 10**9
    m = step_memory(tel, starts, ends, np.array([100.0, 200.0, 400.0]))
    for k in range(3):
        sel = rss[(end > starts[k]) & (end <= ends[k])]
        assert m.rss_bytes[k] == np.median(sel) and m.rss_max_bytes[k] == sel.max() and m.samples[k] == 20
    assert m.alloc_bytes_per_req == pytest.approx([2e4, 1e4, 5e3])
    c = compare_memory(m, m, [1, 2, 3], [1, 2, 3])
    assert c.median_ratio == 1.0 and len(c.steps) == 3


def test_mem_stats_round_trip(tmp_path):
    end = ((T0 + np.arange(1, 6)) * 1e9).astype(np.int64)
    v = np.array([1e6, 2e6, np.nan, 4e6, 5e6])
    tel = Telemetry({"rss_bytes": Series("rss_bytes", "bytes", end - 10**9, end, v, "x")}, "x")
    p = write_mem_stats(tmp_path, tel)
    assert p.read_text().startswith("# headroom memStats.csv schema 1\n")
    back = read_mem_stats(p).get("rss_bytes")
    np.testing.assert_array_equal(back.end_ns, end)
    np.testing.assert_array_equal(back.start_ns, end - 10**9)
    np.testing.assert_array_equal(np.isnan(back.values), np.isnan(v))
    assert np.nansum(back.values) == np.nansum(v)


@pytest.mark.parametrize(
    "text, says",
    [
        ("# headroom memStats.csv schema 9\n", "schema 1"),
        ("timestamp,rss\n", "unexpected header"),
        ("timestamp,interval_s,rss_bytes\n2024-01-02T03:04:05Z,1,-1\n", "negative"),
        ("timestamp,interval_s,rss_bytes\n2024-01-02T03:04:05Z,1,1e300\n", "impossible"),
        ("timestamp,interval_s,rss_bytes\nyesterday,1,5\n", "bad timestamp"),
        ("timestamp,interval_s,rss_bytes\n2024-01-02T03:04:05Z,1\n", "2 fields"),
    ],
)
def test_bad_mem_stats_name_the_line(tmp_path, text, says):
    p = tmp_path / "memStats.csv"
    p.write_text(text)
    with pytest.raises(TelemetryError) as e:
        read_mem_stats(p)
    assert says in str(e.value) and str(p) in str(e.value)


def test_metric_declaration_matches_its_readers():
    from headroom import history, noise
    from headroom.metrics import METRICS, deciding, noise_defaults

    # history's deciding metrics and noise.py's defaults are the declaration's
    assert history.METRICS == tuple((m.key, m.name, m.unit, m.better) for m in deciding(history=True))
    assert noise_defaults() == noise.DEFAULTS
    assert [m.key for m in METRICS if not m.decides and m.history] == ["rss_bytes"]


def test_cli_refusals(capsys):
    assert main(["telemetry", "data/runs/nginx-keepalive"]) == 2
    assert "needs --prometheus" in capsys.readouterr().err
    args = ["compare", "data/runs/nginx-keepalive", "data/runs/nginx-keepalive-repeat", "--prometheus",
            "http://127.0.0.1:9", *["--prometheus-match", 'job="x"'] * 3]  # fmt: skip
    assert main(args) == 2
    assert "given 3 times for 2 runs" in capsys.readouterr().err


def test_import_loads_no_matplotlib():
    code = "import sys, headroom.telemetry, headroom.metrics; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out.strip().lower()) is False


def test_history_shows_memory_and_round_trips(tmp_path):
    """The stored example runs (memStats.csv saved from Prometheus): history shows their RSS, never
    judges it, and its JSON reads back with it."""
    from pathlib import Path

    from headroom.history import history, to_json
    from headroom.history_view import format_history
    from headroom.serialize import from_json
    from headroom.telemetry.files import read_mem_stats

    data = Path(__file__).resolve().parent.parent / "data" / "telemetry"
    runs = [data / "go-gogc100", data / "go-gogc400"]
    h = history([str(r) for r in runs], cache=None)
    rss = [r.values["rss_bytes"] for r in h.releases]
    # independently: the run's memStats.csv samples, whose median sits between the steps' medians' extremes
    for v, r in zip(rss, runs):
        raw = read_mem_stats(r / "memStats.csv").get("rss_bytes").values
        assert np.nanmin(raw) <= v <= np.nanmax(raw)
    assert rss[1] > 1.5 * rss[0]  # GOGC=400
    assert "RSS" in format_history(h) and all(c.metric != "rss_bytes" for c in h.change_points)
    back = from_json(json.loads(json.dumps(to_json(h))))
    assert [r.values["rss_bytes"] for r in back.releases] == pytest.approx(rss, rel=1e-5)

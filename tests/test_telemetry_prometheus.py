"""Server telemetry from a real Prometheus scraping the real Go test server.

One module-scoped recording (a 4-step ramp, ``headroom ramp --cpu-pid``, so that the
run carries psutil's CPU) is read back with ``--prometheus``: its CPU per request must
agree with psutil's at every step, its memory with /proc, and ``headroom telemetry``
must save what it fetched so that the run reads the same offline.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from conftest import need_tool

from headroom.cli import main

#: 5 s steps: a step's CPU from 1 s scrapes stands on its 4 whole intervals inside it
RAMP = ["--concurrency", "1:4:1", "--step-duration", "5s"]


def _proc_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _instant(prom_url: str, query: str, at_s: float | None = None) -> float:
    t = "" if at_s is None else f"&time={at_s:.3f}"
    with urllib.request.urlopen(
        f"{prom_url}/api/v1/query?query={urllib.parse.quote(query)}{t}", timeout=10
    ) as r:
        res = json.loads(r.read())["data"]["result"]
    assert len(res) == 1, res
    return float(res[0]["value"][1])


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """(run folder, Prometheus URL, server PID, RSS from /proc and Prometheus at the end)."""
    need_tool("hey")
    need_tool("go")
    need_tool("prometheus")
    from goserver import GoServer
    from prometheus import Prometheus

    tmp = tmp_path_factory.mktemp("telemetry")
    with GoServer(work=20000, alloc=64 << 10, max_lifetime="4m") as srv:
        with Prometheus({"goserver": f"127.0.0.1:{srv.port}"}, tmp / "prom") as prom:
            prom.wait_for_target()
            run = tmp / "run"
            r = subprocess.run(
                [sys.executable, "-m", "headroom", "ramp", srv.url, "-o", str(run), *RAMP, "--cpu-pid", str(srv.pid)],
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert r.returncode == 0, r.stderr
            time.sleep(2.5)  # the last scrapes after the load
            proc_rss = _proc_rss(srv.pid)
            prom_rss = _instant(prom.url, 'process_resident_memory_bytes{job="goserver"}')
            yield run, prom.url, srv.pid, proc_rss, prom_rss


def _summary(capsys, *argv) -> dict:
    capsys.readouterr()
    assert main(["summary", *map(str, argv), "--json", "-"]) == 0
    return json.loads(capsys.readouterr().out)


def test_cpu_per_request_from_prometheus_matches_psutil(recorded, tmp_path, capsys):
    """A run with no cpuStats.csv (as k6 or JMeter write none) gets its CPU per request from
    Prometheus: over the whole ramp within 6 % of psutil's exact figure of the same run, and
    within 15 % at every 5 s step (a 1 s scrape taken late on a loaded machine moves a step's
    share by up to ~12 %: 0.999-1.116 seen under a full test run beside other jobs; a wrong core
    count or unit would be off by 2x or more)."""
    import shutil

    run, url, _, _, _ = recorded
    psutil_doc = _summary(capsys, run)
    bare = tmp_path / "run"
    shutil.copytree(run, bare)
    (bare / "cpuStats.csv").unlink()
    assert _summary(capsys, bare)["cpu"] is None
    prom_doc = _summary(capsys, bare, "--prometheus", url)
    assert prom_doc["cpu"]["source"].startswith("prometheus")
    a = np.array([s["cpu_s_per_req"] for s in psutil_doc["steps"]], float)
    b = np.array([s["cpu_s_per_req"] for s in prom_doc["steps"]], float)
    assert np.isfinite(a).all() and np.isfinite(b).all()
    n = np.array([s["requests"] for s in psutil_doc["steps"]], float)
    assert abs((b * n).sum() / (a * n).sum() - 1) < 0.06, (
        f"Prometheus / psutil, whole ramp: {np.round(b / a, 3)}"
    )
    assert np.all(np.abs(b / a - 1) < 0.15), f"Prometheus / psutil per step: {np.round(b / a, 3)}"


def test_memory_per_step_and_against_proc(recorded, capsys):
    run, url, pid, proc_rss, prom_rss = recorded
    # Prometheus' own scrape of the Go client against the kernel's count, read independently
    assert abs(prom_rss / proc_rss - 1) < 0.10, (prom_rss, proc_rss)
    doc = _summary(capsys, run, "--prometheus", url)
    rss = np.array([s["rss_bytes"] for s in doc["steps"]], float)
    top = np.array([s["rss_max_bytes"] for s in doc["steps"]], float)
    assert np.isfinite(rss).all() and (top >= rss).all()
    # the steps' RSS is of the same server: between 1 MiB and twice what /proc said at the end
    assert (rss > 2**20).all() and (top < 2 * proc_rss).all()
    # a Go server: allocation per request is known: -alloc 64 KiB per request plus the handler's own
    # (the rate over 1 s intervals against the step's requests: a few % either way)
    alloc = np.array([s["alloc_bytes_per_req"] for s in doc["steps"]], float) / (64 << 10)
    assert np.all((alloc > 0.85) & (alloc < 1.5)), alloc


def test_telemetry_saves_the_run_offline(recorded, tmp_path, capsys):
    run, url, _, _, _ = recorded
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    live = _summary(capsys, copy, "--prometheus", url)
    assert main(["telemetry", str(copy), "--prometheus", url]) == 2  # has psutil's cpuStats.csv
    assert "--force" in capsys.readouterr().err
    assert main(["telemetry", str(copy), "--prometheus", url, "--force"]) == 0
    assert (copy / "memStats.csv").is_file() and (copy / "telemetry.json").is_file()
    info = json.loads((copy / "telemetry.json").read_text())
    assert info["schema"] == 1 and info["source"] == url
    offline = _summary(capsys, copy)
    for a, b in zip(live["steps"], offline["steps"]):
        assert b["rss_bytes"] == pytest.approx(a["rss_bytes"], rel=1e-6)
        assert b["cpu_s_per_req"] == pytest.approx(a["cpu_s_per_req"], rel=0.02)


@pytest.mark.parametrize(
    "extra, says",
    [
        (["--cpu-query", "no_such_metric_total"], "returned no series"),
        (["--cpu-query", "go_gc_duration_seconds"], "returned 5 series"),
        (["--cpu-query", "go_goroutines"], "not a counter"),
        (["--memory-query", 'process_resident_memory_bytes{job="nope"}'], "returned no series"),
    ],
)
def test_bad_queries_are_one_line(recorded, capsys, extra, says):
    run, url, _, _, _ = recorded
    capsys.readouterr()
    assert main(["summary", str(run), "--prometheus", url, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and says in err and url in err, err


def test_prometheus_down_and_window_not_covered(recorded, tmp_path, capsys):
    run, url, _, _, _ = recorded
    from prometheus import free_port

    capsys.readouterr()
    assert main(["summary", str(run), "--prometheus", f"http://127.0.0.1:{free_port()}"]) == 2
    err = capsys.readouterr().err.strip()
    assert "cannot reach Prometheus" in err and err.count("\n") == 0
    old = Path(__file__).parent.parent / "data" / "runs" / "nginx-keepalive"  # recorded in 2017
    assert main(["summary", str(old), "--prometheus", url]) == 2
    err = capsys.readouterr().err.strip()
    assert ("no series" in err or "covers" in err) and err.count("\n") == 0, err


def test_counter_reset_across_a_server_restart(tmp_path):
    """The server restarts mid-window: the interval across the restart is missing, never negative,
    and the CPU after it adds up to what the new process' own counter says."""
    need_tool("go")
    need_tool("prometheus")
    from goserver import GoServer
    from prometheus import Prometheus, free_port

    from headroom.telemetry.prometheus import PromSource, fetch

    port = free_port()
    listen = ["-listen", f"127.0.0.1:{port}"]
    with Prometheus({"srv": f"127.0.0.1:{port}"}, tmp_path / "prom") as prom:
        t0 = time.time_ns()
        with GoServer(work=20000, extra_args=listen, max_lifetime="2m") as a:
            prom.wait_for_target()
            _load(a.url, 3.0)
        with GoServer(work=20000, extra_args=listen, max_lifetime="2m") as b:
            prom.wait_for_target()
            _load(b.url, 3.0)
            time.sleep(2.5)
            t1 = time.time_ns()
            tel = fetch(PromSource(prom.url, match='job="srv"'), t0, t1, pad_s=0)
            cpu = tel.get("cpu_cores")
            v = cpu.values
            assert np.nanmin(v) >= 0
            assert np.isnan(v).any()  # the restart (and the scrapes missed while it was down)
            after = int(np.flatnonzero(np.isnan(v))[-1]) + 1
            used = float(np.nansum(v[after:] * (cpu.end_ns[after:] - cpu.start_ns[after:]) / 1e9))
            # independently, by instant queries: the new process' counter at the last interval's end
            # minus its value at the first interval's start after the restart
            q = 'process_cpu_seconds_total{job="srv"}'
            first = _instant(prom.url, q, cpu.start_ns[after] / 1e9)
            last = _instant(prom.url, q, cpu.end_ns[-1] / 1e9)
    assert last - first > 0.3  # 3 s of load on the new process
    assert used == pytest.approx(last - first, abs=0.02)


def _load(url: str, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        with urllib.request.urlopen(url, timeout=5) as r:
            r.read()


def test_bad_mem_stats_are_one_line(tmp_path, capsys):
    src = Path(__file__).parent.parent / "data" / "runs" / "nginx-keepalive"
    import shutil

    run = tmp_path / "run"
    shutil.copytree(src, run)
    head = "# headroom memStats.csv schema 1\ntimestamp,interval_s,rss_bytes,heap_inuse_bytes,gc_cpu_share,alloc_bytes_per_s,gc_cycles_per_s\n"
    for cell, says in (("-5", "negative"), ("1e300", "impossible")):
        (run / "memStats.csv").write_text(head + f"2017-08-25T21:07:34.000000000Z,1.000,{cell},,,,\n")
        capsys.readouterr()
        assert main(["summary", str(run)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "memStats.csv:3" in err and says in err, err
    os.remove(run / "memStats.csv")


def test_record_time_psutil_rss_and_prometheus(recorded, tmp_path):
    """What headroom ramp calls after a recording: psutil's RSS of the --cpu-pid tree (checked
    against /proc), Prometheus' telemetry beside psutil's CPU, and a warning when Prometheus is down."""
    from argparse import Namespace

    from prometheus import free_port

    from headroom.ramp.cpu import CpuSampler
    from headroom.telemetry.files import read_mem_stats
    from headroom.telemetry.load import record_time

    _, url, pid, _, _ = recorded
    sampler = CpuSampler([pid], interval_s=0.5)
    sampler.start()
    time.sleep(1.6)
    proc = _proc_rss(pid)
    sampler.finish()
    rows = sampler.rss_rows
    window = (rows[0][0] - 3 * 10**9, rows[-1][0])

    def args(prom):
        return Namespace(prometheus=prom, prometheus_match=['job="goserver"'], cpu_query=None, memory_query=None,
                         prometheus_step=1.0)  # fmt: skip

    warns: list[str] = []
    only_psutil = tmp_path / "psutil"
    only_psutil.mkdir()
    assert record_time(args(None), only_psutil, window, warns.append, sampler) == [
        only_psutil / "memStats.csv"
    ]
    rss = read_mem_stats(only_psutil / "memStats.csv").get("rss_bytes").values
    assert abs(np.median(rss) / proc - 1) < 0.05, (rss, proc)
    both = tmp_path / "both"
    both.mkdir()
    written = record_time(args(url), both, window, warns.append, sampler)
    assert warns == [] and not (both / "cpuStats.csv").exists()  # psutil's exact CPU is the recorder's
    tel = read_mem_stats(both / "memStats.csv")
    assert {"rss_bytes", "heap_inuse_bytes", "alloc_bytes_per_s"} <= set(tel.series) and len(written) == 2
    down = tmp_path / "down"
    down.mkdir()
    written = record_time(args(f"http://127.0.0.1:{free_port()}"), down, window, warns.append, sampler)
    assert written == [down / "memStats.csv"] and len(warns) == 1 and "cannot reach Prometheus" in warns[0]


def test_gogc_raised_memory_up_collections_down(tmp_path):
    """Two releases that differ as GOGC does, read from Prometheus: GOGC=400 holds more resident
    memory (as /proc says too) and collects less often per request."""
    need_tool("go")
    need_tool("hey")
    need_tool("prometheus")
    from goserver import GoServer
    from prometheus import Prometheus

    from headroom.telemetry.prometheus import PromSource, fetch

    hey = need_tool("hey")
    alloc = 256 << 10
    with (
        GoServer(work=2000, alloc=alloc, max_lifetime="2m") as base,
        GoServer(work=2000, alloc=alloc, env={"GOGC": "400"}, max_lifetime="2m") as high,
    ):
        with Prometheus(
            {"base": f"127.0.0.1:{base.port}", "high": f"127.0.0.1:{high.port}"}, tmp_path
        ) as prom:
            prom.wait_for_target()
            got = {}
            for job, srv in (("base", base), ("high", high)):
                t0 = time.time_ns()
                out = subprocess.run(
                    [hey, "-z", "4s", "-c", "4", srv.url], capture_output=True, text=True, timeout=60
                )
                t1 = time.time_ns()
                # hey's "Status code distribution:" line ("  [200]\t12345 responses"), not a
                # latency histogram bucket that happens to hold 200 requests ("0.002 [200]\t|■■")
                n = int(re.search(r"^\s*\[200\]\s+(\d+) responses", out.stdout, re.M).group(1))
                time.sleep(2.2)
                tel = fetch(PromSource(prom.url, match=f'job="{job}"'), t0, t1, pad_s=0)
                gc = tel.get("gc_cycles_per_s")
                cycles = float(np.nansum(gc.values * (gc.end_ns - gc.start_ns) / 1e9))
                got[job] = (float(np.nanmedian(tel.get("rss_bytes").values)), cycles / n, _proc_rss(srv.pid))
    (rss_b, per_b, proc_b), (rss_h, per_h, proc_h) = got["base"], got["high"]
    assert rss_h > 1.2 * rss_b and proc_h > 1.2 * proc_b, got
    assert per_h < 0.6 * per_b, got  # GOGC=400: about a quarter of the collections per request


def test_report_with_prometheus_shows_memory(recorded, tmp_path):
    run, url, _, _, _ = recorded
    out = tmp_path / "report.html"
    assert (
        main(
            ["report", str(run), "-o", str(out), "--prometheus", url, "--prometheus-match", 'job="goserver"']
        )
        == 0
    )
    page = out.read_text()
    assert "Server memory" in page and "RSS median MiB" in page and "GC pause share %" in page
    assert f"prometheus {url}" in page  # the memory table names its source

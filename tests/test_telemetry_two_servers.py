"""A real Prometheus scraping two Go test servers: a run given --cpu-query and --memory-query for one of
them reads (issue 41): the required series are the user's, and the optional Go runtime series the user
did not ask for, which match both servers, are left out with a note instead of failing the run.  The CPU
read is server A's: its CPU seconds over the load window against psutil's count of the same process."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from conftest import need_tool

from headroom.cli import main


@pytest.fixture(scope="module")
def two_servers(tmp_path_factory):
    need_tool("hey")
    need_tool("go")
    need_tool("prometheus")
    from goserver import GoServer
    from prometheus import Prometheus

    tmp = tmp_path_factory.mktemp("two")
    with GoServer(work=20000, max_lifetime="3m") as a, GoServer(work=1000, max_lifetime="3m") as b:
        with Prometheus({"a": f"127.0.0.1:{a.port}", "b": f"127.0.0.1:{b.port}"}, tmp / "prom") as prom:
            prom.wait_for_target()
            run = tmp / "run"
            r = subprocess.run(
                [sys.executable, "-m", "headroom", "ramp", a.url, "-o", str(run), "--concurrency", "1:2:1",
                 "--step-duration", "4s", "--cpu-pid", str(a.pid)],
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert r.returncode == 0, r.stderr
            time.sleep(2.5)  # the last scrapes after the load
            yield run, prom.url


def _summary(capsys, *argv) -> tuple[int, dict | None, str]:
    capsys.readouterr()
    code = main(["summary", *map(str, argv), "--json", "-"])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code == 0 else None), out.err


def test_queries_for_one_server_read_and_the_optional_go_series_are_left_out(two_servers, capsys):
    run, url = two_servers
    code, doc, err = _summary(
        capsys, run, "--prometheus", url,
        "--cpu-query", 'process_cpu_seconds_total{job="a"}',
        "--memory-query", 'process_resident_memory_bytes{job="a"}',
    )  # fmt: skip
    assert code == 0, err
    assert doc["cpu"]["source"].startswith("prometheus")
    notes = [w for w in doc["warnings"] if "several servers" in w]
    assert notes and all("left out" in w and len(w) <= 300 for w in notes)
    assert any("go_memstats_heap_inuse_bytes" in w for w in notes)
    # server A's CPU per request: psutil's exact figure of the same process and steps, within 15 %
    psutil_doc = _summary(capsys, run)[1]
    for mine, theirs in zip(doc["steps"], psutil_doc["steps"]):
        assert abs(mine["cpu_s_per_req"] / theirs["cpu_s_per_req"] - 1) < 0.15
        assert mine.get("rss_bytes") and mine["rss_bytes"] > 2**20
        assert mine.get("heap_inuse_bytes") is None  # the ambiguous Go series are not anyone's


def test_a_required_series_matching_two_servers_is_still_an_error(two_servers, capsys):
    run, url = two_servers
    code, _, err = _summary(capsys, run, "--prometheus", url, "--cpu-query", "process_cpu_seconds_total",
                            "--memory-query", 'process_resident_memory_bytes{job="a"}')  # fmt: skip
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "returned 2 series" in lines[0] and len(lines[0]) <= 300

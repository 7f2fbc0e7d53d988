import json
import math
import subprocess
import sys

import numpy as np
import pytest
import reference
from conftest import RUNS, ts, write_run

from headroom.cli import main


def run_cli(*args):
    p = subprocess.run([sys.executable, "-m", "headroom", *map(str, args)], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def test_summary_json_document(tmp_path):
    out = tmp_path / "s.json"
    rc, stdout, stderr = run_cli(
        "summary", RUNS / "nginx-keepalive", "--objective", "p99<=5ms", "--json", out
    )
    assert rc == 0, stderr
    doc = json.loads(out.read_text())
    assert doc["schema"] == 2 and doc["kind"] == "summary" and doc["label"] == "nginx-1.22.1-keepalive"
    ref = reference.read_perf(RUNS / "nginx-keepalive" / "perfResults.csv.gz")
    n = sum(map(len, ref))
    # throughputramp files have no status column: failed requests are unknown, never 0
    assert doc["requests"] == {"total": None, "successful": n, "errors": None}
    assert [s["requests"] for s in doc["steps"]] == [len(s) for s in ref]
    assert all(s["errors"] is None for s in doc["steps"])
    assert [s["concurrency"] for s in doc["steps"]] == [1, 5, 9, 13, 17, 21, 25, 29]
    for s, sec in zip(doc["steps"], ref):
        starts = [r[0] for r in sec]
        ends = [r[0] + round(r[1] * 1e9) for r in sec]
        assert s["goodput_rps"] == pytest.approx(len(sec) / ((max(ends) - min(starts)) / 1e9), rel=1e-5)
        lat = sorted(r[1] for r in sec)
        assert s["p99_s"] == pytest.approx(lat[math.ceil(0.99 * len(lat)) - 1])
        # Little's law: goodput x mean latency / concurrency, from the raw rows
        little = s["goodput_rps"] * (sum(lat) / len(lat)) / s["concurrency"]
        assert s["little"] == pytest.approx(little, rel=1e-4)
    cap = doc["capacity"]
    assert cap["peak_step_rps"] == max(s["goodput_rps"] for s in doc["steps"])
    assert cap["peak_step_rps"] >= cap["plateau_rps"]
    assert cap["capacity_rps"] >= cap["knee_rps"]
    assert cap["max_useful_rps"] <= cap["peak_step_rps"]
    keys = {"rps_lo", "rps_hi", "requests", "mean_s", "p50_s", "p90_s", "p99_s", "p999_s", "max_s", "cpu_pct"}
    assert all(keys <= set(b) for b in doc["bins"])
    assert sum(b["requests"] for b in doc["bins"]) == n
    assert {"samples", "overlap_s"} <= set(doc["cpu"])
    assert doc["cpu"]["samples"] == 15
    assert {"model", "capacity_rps", "knee_rps", "plateau_rps", "at_objective", "at_cpu_target"} <= set(cap)
    assert cap["objective"] == "p99<=5ms"
    assert cap["model"]["capacity_rps"] == cap["capacity_rps"]
    # the table on stdout names the run and shows the same capacity figures
    assert "nginx-1.22.1-keepalive" in stdout and "modelled capacity (USL)" in stdout
    assert f"{round(cap['capacity_rps']):,} req/s" in stdout
    assert f"{round(cap['plateau_rps']):,} req/s" in stdout


def test_json_is_byte_identical(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for p in (a, b):
        assert main(["summary", str(RUNS / "nginx-no-keepalive"), "--json", str(p)]) == 0
    assert a.read_bytes() == b.read_bytes()


def test_errors_exit_2_one_line_no_traceback(tmp_path):
    rows = [(ts(0.1 * i), "0.001") for i in range(10)]
    folder = write_run(tmp_path / "bad", [rows[:3] + [("not-a-time", "0.1")]])
    rc, out, err = run_cli("summary", folder)
    assert rc == 2 and out == ""
    assert err == (
        f"headroom: error: {folder / 'perfResults.csv'}:5: bad start-time 'not-a-time' "
        "(expected RFC 3339 UTC, e.g. 2017-08-25T21:07:33.008Z) "
        "(or pass --skip-bad-rows to drop and count such rows)\n"
    )
    rc, out, err = run_cli("summary", tmp_path / "missing")
    assert rc == 2 and err.count("\n") == 1 and "no such file or folder" in err
    rc, _, err = run_cli("summary", folder, "--objective", "p99 under 5")
    assert rc == 2 and "bad objective" in err


def test_help_has_examples():
    rc, out, _ = run_cli("summary", "--help")
    assert rc == 0 and "examples:" in out and "--objective" in out


def test_bucket_and_bins_options(tmp_path):
    out = tmp_path / "o.json"
    assert (
        main(
            ["summary", str(RUNS / "nginx-keepalive"), "--bucket", "500ms", "--bins", "4", "--json", str(out)]
        )
        == 0
    )
    doc = json.loads(out.read_text())
    assert doc["bucket_s"] == 0.5 and len(doc["bins"]) == 4
    lo = [b["rps_lo"] for b in doc["bins"]]
    assert np.all(np.diff(lo) > 0)


def test_hey_start_anchors_relative_offsets(tmp_path):
    head = "response-time,DNS+dialup,DNS,Request-write,Response-delay,Response-read,status-code,offset\n"
    rows = "".join(f"0.0010,0,0,0,0.0010,0,200,{i * 0.01:.4f}\n" for i in range(300))
    p = tmp_path / "hey.csv"
    p.write_text(head + rows)
    out = tmp_path / "h.json"
    assert main(["summary", str(p), "--hey-start", "2024-01-02T03:04:05.5Z", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["steps"][0]["start"] == "2024-01-02T03:04:05.500000000Z"
    assert not any("modification time" in w for w in doc["warnings"])

"""A release that stops answering under load: recorded with its errors, judged a regression.

Real ramps (``headroom ramp`` driving hey, or vegeta for a rate ramp) against the Go
test server (testserver/): a healthy baseline, a candidate killed by PID in the middle
of a step, one that crashes when 9 requests are in flight, one that hangs from then on,
and an interleaved A/B job whose B crashes.  Checked independently of headroom's
analysis: the rows of every section of perfResults.csv counted in Python, hey's own
error count of a refused port, the exit codes and the numbers named in the verdict.
Skips without Go or hey unless HEADROOM_REQUIRE_TOOLS=1.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import need_tool
from goserver import GoMissing, GoServer, build

from headroom.ramp.engines import HEY_TEMPLATE, Hey, StepPlan, error_kind, split_hey_trailer

RAMP = ["--concurrency", "1:13:4", "--step-duration", "2s"]
HEY = shutil.which("hey")


def flat(text: str) -> str:
    """Output with its line wrapping undone: a verdict line wraps where its figures make it long."""
    return " ".join(text.split())


@pytest.fixture(scope="module")
def binary():
    try:
        b = build()
    except GoMissing as e:
        if os.environ.get("HEADROOM_REQUIRE_TOOLS") == "1":
            pytest.fail(f"HEADROOM_REQUIRE_TOOLS=1 but: {e}")
        pytest.skip(str(e))
    if HEY is None:
        if os.environ.get("HEADROOM_REQUIRE_TOOLS") == "1":
            pytest.fail("HEADROOM_REQUIRE_TOOLS=1 but hey is not installed")
        pytest.skip("hey not installed")
    return b


def headroom(*args, timeout=180) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "headroom", *map(str, args)], capture_output=True, text=True, timeout=timeout
    )


def ramp(srv: GoServer, out: Path, *extra) -> subprocess.CompletedProcess:
    return headroom("ramp", srv.url, "-o", out, *RAMP, "--cpu-pid", srv.pid, *extra)


def sections(path: Path) -> list[list[tuple[str, float, int]]]:
    """perfResults.csv read in plain Python: one list of (start, response time, status) per section."""
    out = []
    for line in path.read_text().splitlines():
        if line.startswith("start-time,"):
            out.append([])
        elif line:
            t, r, c = line.split(",")
            out[-1].append((t, float(r), int(c)))
    return out


def meta(run: Path) -> dict:
    return yaml.safe_load((run / "metadata.yml").read_text())


def served_rps(section) -> float:
    """Successful rows over the span from the first start to the last response end (as headroom defines it)."""
    import numpy as np

    from headroom.ramp.metadata import rfc3339_ns  # noqa: F401  (the same time format)

    ok = [(t, r) for t, r, c in section if 200 <= c <= 299]
    start = np.array([np.datetime64(t[:-1], "ns").astype(np.int64) for t, _ in ok])
    end = start + np.round(np.array([r for _, r in ok]) * 1e9).astype(np.int64)
    return len(ok) / ((end.max() - start.min()) / 1e9)


@pytest.fixture(scope="module")
def runs(binary, tmp_path_factory):
    """A baseline, a candidate killed by PID 1 s into step 3, and one that crashes at concurrency 9."""
    d = tmp_path_factory.mktemp("stop")
    with GoServer(binary=binary, work=2000, delay=0.002, cpu=1) as srv:
        r = ramp(srv, d / "base")
        assert r.returncode == 0, r.stderr
    with GoServer(binary=binary, work=2000, delay=0.002, cpu=1) as srv:
        p = subprocess.Popen(
            [sys.executable, "-m", "headroom", "ramp", srv.url, "-o", str(d / "killed"), *RAMP,
             "--cpu-pid", str(srv.pid)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60:
            try:
                if meta(d / "killed")["steps"] >= 2:
                    break
            except (OSError, TypeError, KeyError, yaml.YAMLError):
                pass
            time.sleep(0.05)
        time.sleep(1.0)  # into step 3 (concurrency 9)
        os.kill(srv.pid, signal.SIGKILL)
        _, err = p.communicate(timeout=90)
        assert p.returncode == 1, err
    with GoServer(binary=binary, work=2000, delay=0.002, cpu=1, crash_at=9) as srv:
        r = ramp(srv, d / "crashed")
        assert r.returncode == 1, r.stderr
    return d


def test_hey_template_counts_transport_errors_exactly(binary, tmp_path):
    """A refused port: hey's own summary (default output) and headroom's trailer agree on the kind,
    and the trailer's count is all of hey's results (no row for any of them)."""
    wd = tmp_path
    plan = StepPlan(concurrency=2, requests=400)
    h = Hey(HEY)
    with open(wd / "out", "wb") as f:
        subprocess.run(h.command("http://127.0.0.1:1/", plan, wd), stdout=f, timeout=30, check=True)
    rows = h.parse(wd, 0, plan)
    assert len(rows) == 0 and rows.transport_errors == 400 and rows.error_kinds == {"connection refused": 400}
    # hey's own summary of the same request count says the same
    own = subprocess.run([HEY, "-n", "400", "-c", "2", "http://127.0.0.1:1/"], capture_output=True, text=True)
    m = re.search(r"\[(\d+)\]\s+Get .*connection refused", own.stdout)
    assert m and int(m[1]) == 400


def test_hey_trailer_parse(tmp_path):
    head = "response-time,DNS+dialup,DNS,Request-write,Response-delay,Response-read,status-code,offset"
    out = tmp_path / "out"
    out.write_text(
        f"{head}\n0.0021,0,0,0,0,0,200,0.0003\n0.0100,0,0,0,0,0,503,1.2500\n"
        'headroom-hey-results,7\nheadroom-hey-error,3,Get "http://x/": dial tcp: connect: connection refused\n'
        'headroom-hey-error,2,Get "http://x/": context deadline exceeded (Client.Timeout exceeded)\n\n'
    )
    rows = Hey("/x/hey").parse(tmp_path, 0, StepPlan(concurrency=2, duration_s=1))
    assert rows.status == [200, 503] and rows.transport_errors == 5
    assert rows.error_kinds == {"connection refused": 3, "timeout": 2}
    assert out.read_text().endswith(",1.2500\n")  # the trailer is cut off, hey's CSV stays
    assert split_hey_trailer(out) is None  # hey run with -o csv: no trailer
    assert "-o" in Hey("/x/hey").command("http://x/", StepPlan(concurrency=1, duration_s=1), tmp_path)
    assert HEY_TEMPLATE.count("{{ end }}") == 2
    assert error_kind("read tcp 1->2: read: connection reset by peer") == "connection reset"


def test_killed_mid_step_is_kept_with_its_errors(runs):
    m = meta(runs / "killed")
    st = m["stopped"]
    assert st["step"] == 3 and st["concurrency"] == 9 and st["by"] == "server" and st["step_kept"]
    secs = sections(runs / "killed" / "perfResults.csv")
    assert len(secs) == 3 == m["steps"]  # the step in which it died is kept
    ok_rows = len(secs[2])
    assert ok_rows > 0 and st["errors"] > 0
    assert st["requests"] == ok_rows + st["errors"]  # rows + failed requests without a row
    assert m["step_errors"][2] == st["errors"] == m["step_rowless_errors"][2]
    assert m["step_requests"] == [len(s) for s in secs] and m["errors"] == st["errors"]
    assert set(st["error_kinds"]) <= {"connection refused", "connection reset", "connection closed"}
    assert sum(st["error_kinds"].values()) == st["errors"]
    # the summary counts them
    r = headroom("summary", runs / "killed", "--json", "-")
    doc = json.loads(r.stdout)
    assert r.returncode == 0 and doc["steps"][2]["errors"] == st["errors"]


def test_killed_candidate_is_regressed(runs):
    r = headroom("compare", runs / "base", runs / "killed", "--json", runs / "k.json")
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads((runs / "k.json").read_text())
    assert doc["verdict"] == "regressed" and doc["exit_code"] == 1
    reason = doc["reason"]
    assert reason.startswith("the candidate stopped answering at concurrency 9 (step 3: ")
    st = meta(runs / "killed")["stopped"]
    assert f"{st['errors']:,} of {st['requests']:,} requests failed" in reason
    want = served_rps(sections(runs / "base" / "perfResults.csv")[2])
    got = float(re.search(r"the baseline served ([\d,]+) req/s", reason)[1].replace(",", ""))
    assert abs(got - want) <= 0.5 + 1e-9 * want
    assert doc["stopped"][0]["level"] == 9 and doc["stopped"][0]["errors"] == st["errors"]
    # the matched step at concurrency 9 carries the failed requests: the error rate is worse too
    err = next(m for m in doc["metrics"] if m["key"] == "error_rate")
    assert err["decision"] == "worse"
    assert "verdict: REGRESSED: the candidate stopped answering at concurrency 9" in flat(r.stdout)
    assert "STOPPED ANSWERING: candidate" in flat(r.stdout)


def test_crash_before_any_response_and_the_reverse(runs):
    m = meta(runs / "crashed")
    st = m["stopped"]
    assert st["step"] == 3 and st["concurrency"] == 9 and st["errors"] > 0
    secs = sections(runs / "crashed" / "perfResults.csv")
    r = headroom("compare", runs / "base", runs / "crashed")
    if not st["step_kept"]:  # the usual case: nine requests in flight before any answer
        assert len(secs) == 2 == m["steps"] and st["requests"] == st["errors"]
        assert r.returncode == 1 and f"all {st['errors']:,} requests failed" in flat(r.stdout), r.stdout
    else:  # on a busy machine a few answers can come back before the ninth request is in flight
        assert len(secs) == 3 == m["steps"] and st["requests"] == len(secs[-1]) + st["errors"]
        assert r.returncode == 1 and "stopped answering at concurrency 9" in flat(r.stdout), r.stdout
    r = headroom("compare", runs / "crashed", runs / "base")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "verdict: IMPROVED: the baseline stopped answering at concurrency 9" in flat(r.stdout)
    assert "the candidate did not: it served" in flat(r.stdout)


def test_plans_that_differ_without_a_stop_stay_bad_input(binary, runs):
    with GoServer(binary=binary, work=2000, delay=0.002, cpu=1) as srv:
        r = headroom(
            "ramp", srv.url, "-o", runs / "other", "--concurrency", "2:14:6", "--step-duration", "1s"
        )
        assert r.returncode == 0, r.stderr
    r = headroom("compare", runs / "base", runs / "other")
    assert r.returncode == 2
    assert "the runs' concurrency plans do not match" in r.stderr
    assert "record baseline and candidate with the same concurrency steps" in r.stderr


def test_a_hang_is_a_stop_with_its_timeouts_counted(binary, runs):
    with GoServer(binary=binary, work=2000, delay=0.002, cpu=1, hang_at=9) as srv:
        r = ramp(srv, runs / "hung", "--timeout", "1s")
    assert r.returncode == 1, r.stderr
    st = meta(runs / "hung")["stopped"]
    assert st["concurrency"] == 9 and st["errors"] >= 9 and st["error_kinds"] == {"timeout": st["errors"]}
    r = headroom("compare", runs / "base", runs / "hung")
    assert r.returncode == 1, r.stdout + r.stderr
    n, e = st["requests"], st["errors"]
    # on a busy machine a few answers can come back before the ninth request is in flight
    failed = f"all {e:,} requests failed" if n == e else f"{e:,} of {n:,} requests failed"
    assert f"stopped answering at concurrency 9 (step 3: {failed} ({e:,} timeout))" in flat(r.stdout), (
        r.stdout
    )


def test_interleaved_job_whose_b_crashes(binary, tmp_path):
    with (
        GoServer(binary=binary, work=2000, delay=0.002, cpu=1) as a,
        GoServer(binary=binary, work=2000, delay=0.002, cpu=1, crash_at=9) as b,
    ):
        r = headroom(
            "ramp", "--ab", a.url, b.url, "-o", tmp_path / "ab", "--interleave", "steps", *RAMP,
            "--cpu-pid-a", a.pid, "--cpu-pid-b", b.pid,
        )  # fmt: skip
    assert r.returncode == 1, r.stderr
    ma, mb = meta(tmp_path / "ab" / "a-01"), meta(tmp_path / "ab" / "b-01")
    assert mb["stopped"]["concurrency"] == 9 and "stopped" not in ma
    assert ma["concurrency"] == [1, 5, 9]  # level 9 runs A first (AB), then B fell over
    r = headroom("compare", "--baseline", tmp_path / "ab" / "a-01", "--candidate", tmp_path / "ab" / "b-01")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "stopped answering at concurrency 9" in flat(r.stdout) and "the baseline served" in flat(r.stdout)


def test_open_loop_rate_the_server_cannot_take(binary, tmp_path):
    need_tool("vegeta")  # skips, or fails under HEADROOM_REQUIRE_TOOLS=1 (a skipif never failed)

    def rec(out, **kw):
        with GoServer(binary=binary, work=2000, delay=0.02, cpu=1, **kw) as srv:
            return headroom(
                "ramp", srv.url, "-o", out, "--rate", "200:800:200", "--engine", "vegeta",
                "--step-duration", "2s", "--cpu-pid", srv.pid,
            )  # fmt: skip

    assert rec(tmp_path / "vb").returncode == 0
    r = rec(tmp_path / "vc", crash_at=10)
    assert r.returncode == 1, r.stderr
    m = meta(tmp_path / "vc")
    st = m["stopped"]
    secs = sections(tmp_path / "vc" / "perfResults.csv")
    # vegeta writes a row with code 0 per failure, so the stopped step is the last section whether
    # or not the server answered any of its requests before the crash (a matter of timing; metadata's
    # step_kept says whether it did)
    failed = sum(1 for _, _, c in secs[-1] if c == 0)
    assert len(secs) == st["step"] and st["errors"] == failed > 0 and st["requests"] == len(secs[-1])
    assert st["step_kept"] == (failed < len(secs[-1]))
    r = headroom("compare", tmp_path / "vb", tmp_path / "vc")
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"stopped answering at {st['rate']:g} req/s" in flat(r.stdout)

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
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import need_tool
from goserver import GoServer, built_or_skip

from headroom.ramp.engines import HEY_TEMPLATE, Hey, StepPlan, error_kind, split_hey_trailer

RAMP = ["--concurrency", "1:13:4", "--step-duration", "2s"]


def flat(text: str) -> str:
    """Output with its line wrapping undone: a verdict line wraps where its figures make it long."""
    return " ".join(text.split())


@pytest.fixture(scope="module")
def binary():
    b = built_or_skip()
    need_tool("hey")  # looked up when the tests run, not at import (a tool installed meanwhile)
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
    h = Hey(need_tool("hey"))
    with open(wd / "out", "wb") as f:
        subprocess.run(h.command("http://127.0.0.1:1/", plan, wd), stdout=f, timeout=30, check=True)
    rows = h.parse(wd, 0, plan)
    assert len(rows) == 0 and rows.transport_errors == 400 and rows.error_kinds == {"connection refused": 400}
    # hey's own summary of the same request count says the same
    own = subprocess.run(
        [need_tool("hey"), "-n", "400", "-c", "2", "http://127.0.0.1:1/"], capture_output=True, text=True
    )
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
    # two pairs a level (ABBA, BAAB, ABBA): level 9 runs A first, then B fell over
    assert ma["concurrency"] == [1, 1, 5, 5, 9]
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


# --------------------------------------------------------------------------
# a death at a chosen moment (issue 38): the test server's -crash-after-requests places it at an exact
# request, so a step is known to die mid-way or at its first request.  Every headroom ramp sends one
# GET before the ramp (its preflight): request N + 1 of the server is request N of the ramp.

R = 800  # requests per closed-loop step
HEY_PLAN = ["--concurrency", "1:13:4", "--requests-per-step", str(R)]
VEG_PLAN = ["--rate", "100:300:100", "--step-duration", "1s", "--engine", "vegeta"]
VEG_N = [100, 200, 300]  # vegeta sends rate x duration requests a step (starved, a few less)


def hey_sent(c: int) -> int:
    return R // c * c  # hey -n R -c C: each of C workers sends R // C


def summary_of(run: Path) -> tuple[dict, list[str]]:
    """``headroom summary`` of a run: its JSON and the lines of its text (each exit 0, never 2)."""
    r = headroom("summary", run, "--json", "-")
    assert r.returncode == 0, r.stderr
    t = headroom("summary", run)
    assert t.returncode == 0, t.stderr
    return json.loads(r.stdout), t.stdout.splitlines()


def rows_by_step(run: Path) -> list[tuple[int, int]]:
    """(successful, failed) rows of every section of perfResults.csv, counted in plain Python."""
    return [
        (sum(1 for *_, c in sec if 200 <= c <= 299), sum(1 for *_, c in sec if not 200 <= c <= 299))
        for sec in sections(run / "perfResults.csv")
    ]


#: vegeta as headroom runs it, but the Nth ``vegeta attack`` (step N) first kills the server by its
#: PID and waits until its port refuses a connection: a death at the start of that step, exact
#: whatever the machine's load (vegeta falls a request or two short of rate x duration when starved,
#: which would move a death placed by request count into the step)
KILLER = """#!/bin/bash
if [ "$1" = attack ]; then
  n=$(( $(cat "{count}" 2>/dev/null || echo 0) + 1 )); echo "$n" > "{count}"
  if [ "$n" = "{step}" ]; then
    kill -9 {pid}
    while (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null; do sleep 0.01; done
  fi
fi
exec "{real}" "$@"
"""


def killing_vegeta(folder: Path, srv: GoServer, step: int) -> dict:
    """The environment of a ramp whose vegeta kills ``srv`` when step ``step`` starts."""
    folder.mkdir()
    shim = folder / "vegeta"
    shim.write_text(KILLER.format(count=folder / "attacks", step=step, pid=srv.pid, port=srv.port,
                                  real=need_tool("vegeta")))  # fmt: skip
    shim.chmod(0o755)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


@pytest.fixture(scope="module")
def deaths(binary, runs, tmp_path_factory):
    """hey and vegeta ramps whose server dies during step 1 or at the first request of step 3; the
    healthy hey run (hey-base) is ``runs``' baseline, whose 2 s steps are all long enough to trust."""
    need_tool("vegeta")
    d = tmp_path_factory.mktemp("deaths")
    (d / "hey-base").symlink_to(runs / "base")

    def rec(name, plan, code, kill_at_step=None, **faults):
        with GoServer(binary=binary, work=2000, delay=0.002, cpu=1, **faults) as srv:
            env = killing_vegeta(d / f"bin-{name}", srv, kill_at_step) if kill_at_step else None
            r = subprocess.run(
                [sys.executable, "-m", "headroom", "ramp", srv.url, "-o", str(d / name), *plan,
                 "--cpu-pid", str(srv.pid)], capture_output=True, text=True, timeout=180, env=env,
            )  # fmt: skip
        assert r.returncode == code, r.stderr

    rec("hey-first", HEY_PLAN, 1, crash_after=1 + 300)  # 300 answered at concurrency 1, then dead
    rec("hey-step3", HEY_PLAN, 1, crash_after=1 + 2 * R)  # hey -n sends exactly n: dead at step 3's first
    rec("veg-base", VEG_PLAN, 0)
    rec("veg-first", VEG_PLAN, 1, crash_after=1 + 40)
    rec("veg-step3", VEG_PLAN, 1, kill_at_step=3)  # killed by PID as step 3 starts
    return d


def test_hey_death_in_step_1_is_a_run_with_its_failures(deaths):
    """Issue 38: a death in step 1 was exit 2, "only 1 time bucket(s) of load"."""
    run = deaths / "hey-first"
    st = meta(run)["stopped"]
    assert (st["step"], st["concurrency"], st["step_kept"]) == (1, 1, True)
    assert rows_by_step(run) == [(300, 0)]  # concurrency 1: exactly the 300 answers before the crash
    doc, text = summary_of(run)
    steps = [(s["concurrency"], s["requests"], s["errors"]) for s in doc["steps"]]
    assert steps == [(1, 300, R - 300)]  # hey sent R; the rest were refused (no row)
    assert doc["requests"] == {"total": R, "successful": 300, "errors": R - 300}
    assert doc["stopped"]["level"] == 1 and doc["stopped"]["errors"] == R - 300
    assert text[1].startswith(
        f"  STOPPED ANSWERING at concurrency 1 (step 1 of the ramp: {R - 300:,} of {R:,} requests failed"
    ), text[:3]
    r = headroom("compare", deaths / "hey-base", run)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "REGRESSED (exit 1): the candidate stopped answering at concurrency 1" in flat(r.stdout)
    want = served_rps(sections(deaths / "hey-base" / "perfResults.csv")[0])
    got = float(re.search(r"the baseline served ([\d,]+) req/s", flat(r.stdout))[1].replace(",", ""))
    assert abs(got - want) <= 0.5 + 1e-9 * want
    r = headroom("compare", run, deaths / "hey-base")
    assert r.returncode == 0 and "IMPROVED (exit 0): the baseline stopped answering at concurrency 1" in flat(
        r.stdout
    ), r.stdout + r.stderr


def test_hey_death_at_a_steps_first_request_keeps_that_step(deaths):
    """Issue 38: a dying step without a success was left out ("2 steps, 0 errors")."""
    run = deaths / "hey-step3"
    st = meta(run)["stopped"]
    assert (st["step"], st["concurrency"], st["step_kept"]) == (3, 9, False)
    assert rows_by_step(run) == [(R, 0), (R, 0)]  # no row of step 3: hey keeps none for a refused request
    doc, text = summary_of(run)
    steps = [(s["concurrency"], s["requests"], s["errors"]) for s in doc["steps"]]
    assert steps == [(1, R, 0), (5, R, 0), (9, 0, hey_sent(9))]
    assert doc["requests"]["errors"] == hey_sent(9) and doc["stopped"]["step"] == 3
    assert text[1].startswith(
        f"  STOPPED ANSWERING at concurrency 9 (step 3 of the ramp: all {hey_sent(9):,} requests failed"
    ), text[:3]
    assert "in 3 steps" in flat("\n".join(text[:6]))
    r = headroom("compare", deaths / "hey-base", run, "--json", deaths / "step3.json")
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads((deaths / "step3.json").read_text())
    assert doc["verdict"] == "regressed" and doc["stopped"][0]["level"] == 9
    assert doc["reason"].startswith(
        f"the candidate stopped answering at concurrency 9 (step 3: all {hey_sent(9):,}"
    )
    want = served_rps(sections(deaths / "hey-base" / "perfResults.csv")[2])
    got = float(re.search(r"the baseline served ([\d,]+) req/s", doc["reason"])[1].replace(",", ""))
    assert abs(got - want) <= 0.5 + 1e-9 * want


def test_vegeta_death_in_step_1_and_at_a_steps_first_request(deaths):
    """The same for an open loop: vegeta writes a row (code 0) for every failed request."""
    first, step3 = deaths / "veg-first", deaths / "veg-step3"
    ok, failed = rows_by_step(first)[0]
    # a request in flight at the crash gets no answer; a starved vegeta sends a few less than 100
    assert 0 < ok <= 40 and failed > 0 and 90 <= ok + failed <= VEG_N[0]
    doc, text = summary_of(first)
    assert [(s["intended_rps"], s["requests"], s["errors"]) for s in doc["steps"]] == [(100, ok, failed)]
    assert text[1].startswith(
        f"  STOPPED ANSWERING at 100 req/s (step 1 of the ramp: {failed:,} of {ok + failed:,} requests failed"
    ), text[:3]
    rows = rows_by_step(step3)  # killed as step 3 started: none of its requests answered
    assert len(rows) == 3 and [f for _, f in rows[:2]] == [0, 0] and rows[2][0] == 0 and rows[2][1] > 0
    assert all(0.9 * n <= sum(r) <= n for r, n in zip(rows, VEG_N)), rows
    doc, text = summary_of(step3)
    steps = [(s["intended_rps"], s["requests"], s["errors"]) for s in doc["steps"]]
    assert steps == [(n, ok, f) for n, (ok, f) in zip((100, 200, 300), rows)]
    assert text[1].startswith(
        f"  STOPPED ANSWERING at 300 req/s (step 3 of the ramp: all {rows[2][1]:,} requests failed"
    ), text[:3]
    for run, level in ((first, "100 req/s"), (step3, "300 req/s")):
        r = headroom("compare", deaths / "veg-base", run)
        assert r.returncode == 1, r.stdout + r.stderr
        assert f"the candidate stopped answering at {level}" in flat(r.stdout)


def test_report_and_history_say_where_it_stopped(deaths, tmp_path):
    """The report of a comparison whose candidate died in step 1 (one time bucket of load) says it
    first and shows the step's failures; the history of base, step-3 death, step-1 death says both
    stops first, judges the latest a regression and counts the dying steps' failures in the error rate."""
    need_tool("chromium")  # the report's figures are checked elsewhere; here its text, but a real one
    html_path = tmp_path / "r.html"
    r = headroom("report", deaths / "hey-base", deaths / "hey-first", "-o", html_path, timeout=300)
    assert r.returncode == 0, r.stderr
    page = html_path.read_text()
    heads = [m.start() for m in re.finditer("<h[12]", page)]
    said = page.find("The candidate (hey-first) stopped answering at concurrency 1")
    assert heads[0] < said < heads[1], "said under the title, before the first section"
    text = " ".join(re.sub(r"<[^>]+>", " ", page[said:]).split())
    assert text.startswith(
        f"The candidate (hey-first) stopped answering at concurrency 1 (step 1: {R - 300:,} of"
    )
    h = headroom("history", deaths / "hey-base", deaths / "hey-step3", deaths / "hey-first",
                 "--cache", "none", "--json", tmp_path / "h.json")  # fmt: skip
    assert h.returncode == 1, h.stdout + h.stderr
    lines = h.stdout.splitlines()
    said = flat("\n".join(lines[1:5]))
    assert (
        f"STOPPED ANSWERING: hey-step3 at concurrency 9 (step 3: all {hey_sent(9):,} requests failed" in said
    )
    assert (
        f"STOPPED ANSWERING: hey-first at concurrency 1 (step 1: {R - 300:,} of {R:,} requests failed" in said
    )
    doc = json.loads((tmp_path / "h.json").read_text())
    rel = {x["label"]: x for x in doc["runs"]}
    assert rel["hey-first"]["stopped"]["level"] == 1 and rel["hey-step3"]["stopped"]["level"] == 9
    assert "stopped" not in rel["base"]  # hey-base is runs/base
    # the error rate at the levels the healthy run has (1, 5, 9, 13): rows and hey's counts
    err = rel["hey-step3"]["metrics"]["error_rate"]["value"]
    assert err == pytest.approx(hey_sent(9) / (2 * R + hey_sent(9)), rel=1e-5)  # JSON: 6 digits
    assert rel["hey-first"]["metrics"]["error_rate"]["value"] == pytest.approx((R - 300) / R, rel=1e-5)


def test_oha_closed_and_open_loop_deaths(binary, deaths, tmp_path):
    """oha writes successful requests only: with -n (closed loop, --requests-per-step) its failures
    are the requests it did not answer, counted; with -z (open loop) they are unknown, and a server
    that no longer answers after a step stopped in that step (one GET after every such step)."""
    need_tool("oha")
    with GoServer(binary=binary, work=2000, delay=0.002, cpu=1, crash_after=1 + 2 * R) as srv:
        r = headroom(
            "ramp", srv.url, "-o", tmp_path / "oc", *HEY_PLAN, "--engine", "oha", "--cpu-pid", srv.pid
        )
    assert r.returncode == 1, r.stderr
    assert rows_by_step(tmp_path / "oc") == [(R, 0), (R, 0)]
    doc, text = summary_of(tmp_path / "oc")
    assert [(s["concurrency"], s["requests"], s["errors"]) for s in doc["steps"]] == [
        (1, R, 0),
        (5, R, 0),
        (9, 0, R),
    ]
    assert text[1].startswith(
        f"  STOPPED ANSWERING at concurrency 9 (step 3 of the ramp: all {R:,} requests failed"
    )
    r = headroom("compare", deaths / "hey-base", tmp_path / "oc")
    assert r.returncode == 1 and "the candidate stopped answering at concurrency 9" in flat(r.stdout), (
        r.stdout
    )
    with GoServer(binary=binary, work=2000, delay=0.002, cpu=1, crash_after=1 + 100 + 1 + 49) as srv:
        plan = [*VEG_PLAN[:-1], "oha"]
        r = headroom("ramp", srv.url, "-o", tmp_path / "oo", *plan, "--cpu-pid", srv.pid)
    assert r.returncode == 1, r.stderr
    st = meta(tmp_path / "oo")["stopped"]
    assert (st["step"], st["rate"], st["errors"], st["step_kept"]) == (2, 200, None, True)
    ok = rows_by_step(tmp_path / "oo")
    # the server answers 151 requests: the preflight, step 1's (oha sends about 100), the GET after
    # it, and what is left of them in step 2; oha's file keeps no failed request
    assert ok[0][1] == 0 and 90 <= ok[0][0] <= 101 and 0 < ok[1][0] <= 149 - ok[0][0] and ok[1][1] == 0, ok
    doc, text = summary_of(tmp_path / "oo")
    assert [(s["intended_rps"], s["requests"]) for s in doc["steps"]] == [(100, ok[0][0]), (200, ok[1][0])]
    assert doc["requests"]["errors"] is None  # unknown, never 0
    assert text[1].startswith(
        "  STOPPED ANSWERING at 200 req/s (step 2 of the ramp: its failed requests not counted"
    )
    r = headroom("compare", deaths / "veg-base", tmp_path / "oo")
    assert r.returncode == 1 and "the candidate stopped answering at 200 req/s" in flat(r.stdout), r.stdout


def test_open_loop_hang_is_a_stop_with_its_timeouts(binary, deaths, tmp_path):
    """vegeta against a server that hangs from the 51st request of step 2: every later request of
    that step times out (a row with code 0 each), the server does not answer after it."""
    with GoServer(binary=binary, work=2000, delay=0.002, cpu=1, hang_after=1 + 100 + 50) as srv:
        r = headroom(
            "ramp", srv.url, "-o", tmp_path / "vh", *VEG_PLAN, "--timeout", "1s", "--cpu-pid", srv.pid
        )
    assert r.returncode == 1, r.stderr
    st = meta(tmp_path / "vh")["stopped"]
    rows = rows_by_step(tmp_path / "vh")
    # vegeta sends (about: starved, a few less) 100 then 200; the server answers 50 of step 2 at most
    assert len(rows) == 2 and rows[0][1] == 0 and 90 <= rows[0][0] <= 100, rows
    assert rows[1][0] <= 50 and 0 < sum(rows[1]) <= VEG_N[1], rows
    assert (st["step"], st["rate"], st["errors"]) == (2, 200, rows[1][1])
    assert st["error_kinds"] == {"timeout": rows[1][1]}
    doc, text = summary_of(tmp_path / "vh")
    assert [(s["requests"], s["errors"]) for s in doc["steps"]] == rows
    assert text[1].startswith(
        f"  STOPPED ANSWERING at 200 req/s (step 2 of the ramp: {rows[1][1]:,} of {sum(rows[1]):,} requests"
    ), text[:3]
    r = headroom("compare", deaths / "veg-base", tmp_path / "vh")
    assert r.returncode == 1 and "the candidate stopped answering at 200 req/s" in flat(r.stdout), r.stdout


def test_server_shedding_load_with_503_is_judged_by_its_error_rate(binary, runs, tmp_path):
    """A server that answers 503 to a request that makes 6 or more in flight has not stopped
    answering: the ramp runs to its end (exit 0), every step keeps its 503 rows, nothing says it
    stopped, and compare judges the error rate (exit 1), recomputed here from the rows."""
    with GoServer(binary=binary, work=2000, delay=0.002, cpu=1, fail_at=6) as srv:
        r = ramp(srv, tmp_path / "f5")
    assert r.returncode == 0, r.stderr
    rows = rows_by_step(tmp_path / "f5")
    assert [f for _, f in rows[:2]] == [0, 0] and all(f > 0 and ok >= 50 for ok, f in rows[2:]), rows
    m = meta(tmp_path / "f5")
    assert "stopped" not in m and m["step_errors"] == [f for _, f in rows]
    doc, text = summary_of(tmp_path / "f5")
    assert [(s["requests"], s["errors"]) for s in doc["steps"]] == rows and "stopped" not in doc
    assert not any("STOPPED" in line for line in text)
    r = headroom("compare", runs / "base", tmp_path / "f5", "--json", tmp_path / "f5.json")
    assert r.returncode == 1, r.stdout + r.stderr
    c = json.loads((tmp_path / "f5.json").read_text())
    assert c["verdict"] == "regressed" and "stopped" not in c
    err = next(x for x in c["metrics"] if x["key"] == "error_rate")
    assert err["decision"] == "worse" and err["baseline"] == 0
    levels = [p["concurrency"] for p in c["pairs"]]  # the matched steps: failed / all over them
    k = [i for i, lvl in enumerate([1, 5, 9, 13]) if lvl in levels]
    fails, total = sum(rows[i][1] for i in k), sum(sum(rows[i]) for i in k)
    assert err["candidate"] == pytest.approx(fails / total, rel=1e-5)


def test_server_answering_only_503_from_a_step_on_is_judged_not_refused(binary, runs, tmp_path):
    """A server that answers 503 to everything from the middle of step 2 on: steps 3 and 4 have no
    success, the ramp runs to its end, and compare must judge that (exit 1), never exit 2: the error
    rate over every level both runs ran, its all-failed steps included."""
    with GoServer(binary=binary, work=2000, delay=0.002, cpu=1, fail_after=1 + R + R // 2) as srv:
        r = headroom("ramp", srv.url, "-o", tmp_path / "f5", *HEY_PLAN, "--cpu-pid", srv.pid)
    assert r.returncode == 0, r.stderr
    rows = rows_by_step(tmp_path / "f5")
    assert rows == [(R, 0), (R // 2, R // 2), (0, hey_sent(9)), (0, hey_sent(13))]
    doc, _ = summary_of(tmp_path / "f5")
    assert [(s["requests"], s["errors"]) for s in doc["steps"]] == rows
    r = headroom("compare", runs / "base", tmp_path / "f5", "--json", tmp_path / "c.json")
    assert r.returncode == 1, r.stdout + r.stderr
    c = json.loads((tmp_path / "c.json").read_text())
    err = next(x for x in c["metrics"] if x["key"] == "error_rate")
    fails, total = sum(f for _, f in rows), sum(ok + f for ok, f in rows)  # all four levels ran
    assert err["decision"] == "worse" and err["candidate"] == pytest.approx(fails / total, rel=1e-5)
    assert "at the levels where every run had successful requests" in flat(r.stdout)


def test_interleaved_b_dies_at_a_level_it_goes_first(binary, tmp_path):
    """--interleave steps with one pair a level runs BA at the second level: B dies at its first
    request there, so A does not run that level either; the recording ends, exit 1, and compare
    judges it (exit 1).  An A/B job sends each server two GETs before the ramp (the job's check and
    the recorder's)."""
    with (
        GoServer(binary=binary, work=2000, delay=0.002, cpu=1) as a,
        GoServer(binary=binary, work=2000, delay=0.002, cpu=1, crash_after=2 + R) as b,
    ):
        r = headroom(
            "ramp", "--ab", a.url, b.url, "-o", tmp_path / "ab", "--interleave", "steps", *HEY_PLAN,
            "--pairs-per-level", "1", "--cpu-pid-a", a.pid, "--cpu-pid-b", b.pid,
        )  # fmt: skip
    assert r.returncode == 1, r.stderr
    ma, mb = meta(tmp_path / "ab" / "a-01"), meta(tmp_path / "ab" / "b-01")
    assert ma["concurrency"] == [1] and "stopped" not in ma  # the recording stopped both at level 5
    assert (mb["stopped"]["concurrency"], mb["stopped"]["step"], mb["stopped"]["errors"]) == (5, 2, R)
    doc, text = summary_of(tmp_path / "ab" / "b-01")
    assert [(s["concurrency"], s["requests"], s["errors"]) for s in doc["steps"]] == [(1, R, 0), (5, 0, R)]
    r = headroom("compare", tmp_path / "ab" / "a-01", tmp_path / "ab" / "b-01")
    assert r.returncode == 1, r.stdout + r.stderr
    out = flat(r.stdout)
    assert "the candidate stopped answering at concurrency 5" in out
    assert "the baseline was not run at that level (the recording ended there); at concurrency 1" in out

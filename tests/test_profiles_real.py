"""Real ramps with real profiles: the Go test server in variants of known cause.

Each test records an interleaved A/B job (``headroom ramp --ab --interleave
steps --pprof-a --pprof-b``: A and B alternate within every level, so both
see the same machine) of 3 short levels, then reads the comparison's
``profile_diff``:

* a regexp compiled per request against once: a ``regexp`` function first;
* a fresh 256 KiB buffer per request against a sync.Pool: allocation / GC first;
* A/A (two identical servers): nothing beyond the sampling uncertainty.

perf is tested where this machine lets it sample a process, else skipped
with the reason.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import need_tool
from goserver import GoServer, built_or_skip

import headroom.profiles as hp

# levels that keep the server busy and 2 s profiles: beside a CPU hog (on the servers' own core) a
# 1 s profile at concurrency 1 holds a few dozen samples, too few to tell a 30 us regexp compile
# from 0 (the interval of a function's change is its samples' Poisson error)
LEVELS, STEP = "3:11:4", "3s"
PROFILE_STEP = "2s"  # the tests of a failed, late or missing profile: any step a profile fits in
ALLOC_GC = re.compile(
    r"^runtime\.(mallocgc\w*|memclr\w*|gc\w*|scanobject|markroot\w*|sweep\w*|bgsweep|"
    r"\(\*mheap\)\.\w+|\(\*mcache\)\.\w+|\(\*mcentral\)\.\w+|largeAlloc|makeslice|newobject)$"
)


@pytest.fixture(scope="module")
def binary():
    need_tool("hey")
    return built_or_skip()


def record_ab(tmp_path: Path, a: GoServer, b: GoServer, *extra: str) -> tuple[Path, Path]:
    out = tmp_path / "job"
    cmd = [
        sys.executable, "-m", "headroom", "ramp", "--ab", a.url, b.url, "--interleave", "steps",
        "--pairs-per-level", "1", "-o", str(out), "--concurrency", LEVELS, "--step-duration", STEP,
        "--cpu-pid-a", str(a.pid), "--cpu-pid-b", str(b.pid),
        "--pprof-a", a.base, "--pprof-b", b.base, *extra,
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    return out / "a-01", out / "b-01"


def compare_json(tmp_path: Path, base: Path, cand: Path) -> dict:
    target = tmp_path / "compare.json"
    cmd = [sys.executable, "-m", "headroom", "compare", str(base), str(cand), "--json", str(target)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1, 3), done.stderr
    assert "Traceback" not in done.stderr
    return json.loads(target.read_text())


def show(doc: dict, n: int = 5) -> str:
    return "\n".join(
        f"  {r['function']}: {r['baseline_cpu_s_per_request'] * 1e6:.2f} -> "
        f"{r['candidate_cpu_s_per_request'] * 1e6:.2f} us/req ({r['change'] * 1e6:+.2f}, "
        f"[{r['change_low'] * 1e6:+.2f}, {r['change_high'] * 1e6:+.2f}])"
        for r in doc["profile_diff"][:n]
    )


def on_request_path(function: str) -> bool:
    """A caller of everything a request to the test server does (Go's HTTP server, the handler), or
    the connection's own reads and writes, whose CPU is mostly the kernel's and moves with the
    machine's state like the whole request's (an A/A beside hogs and another recording: the raw
    syscall 8 -> 18 us a request while net/http's serve went 14 -> 32)."""
    return function.startswith(
        (
            "net/http.", "main.(*server).serveRoot", "main.(*server).matchRoute",
            "internal/runtime/syscall/", "syscall.", "internal/poll.", "net.(*conn).", "net.(*netFD).",
        )
    )  # fmt: skip


def test_regexp_compiled_per_request_is_named_first(binary, tmp_path):
    with (
        GoServer(binary=binary, cpu=1, max_lifetime="120s") as a,
        GoServer(binary=binary, cpu=1, regexp_per_request=True, max_lifetime="120s") as b,
    ):
        base, cand = record_ab(tmp_path, a, b, "--pprof-heap")
    for run in (base, cand):
        names = sorted(p.name for p in (run / "profiles").iterdir())
        assert [n for n in names if "allocs" not in n] == [
            "step-001-c3.pb.gz", "step-002-c7.pb.gz", "step-003-c11.pb.gz",
        ]  # fmt: skip
        assert [n for n in names if "allocs" in n] == [
            "step-001-c3.allocs.pb.gz", "step-002-c7.allocs.pb.gz", "step-003-c11.allocs.pb.gz",
        ]  # fmt: skip
    # a Run read by headroom gives the same profiles as its folder
    import headroom

    via_run = hp(headroom.load_run(cand))
    assert [s.requests for s in via_run.steps] == [s.requests for s in hp(cand).steps]
    doc = compare_json(tmp_path, base, cand)
    print("\nregexp per request vs once:\n" + show(doc))
    # the first row off the request's own path is a regexp function, beyond its uncertainty.  Idle,
    # it is the first row (its callers fold into it); beside a CPU hog the profiles hold fewer
    # samples, a caller's change not through regexp is no longer within the uncertainty, and
    # net/http's serve (the caller of everything a request does) can rank above it
    top = next(r for r in doc["profile_diff"] if not on_request_path(r["function"]))
    assert top["function"].startswith("regexp."), show(doc)
    assert not top["within_uncertainty"] and top["change"] > 0
    above = doc["profile_diff"][: doc["profile_diff"].index(top)]
    assert all(r["change"] >= top["change_low"] for r in above), show(doc)  # callers carry it too
    assert doc["profile_diff_info"]["levels"] == [3, 7, 11]


def test_fresh_buffer_per_request_names_allocation_or_gc(binary, tmp_path):
    alloc = 1024 * 1024  # 1 MiB: an effect a 2 s profile resolves beside a CPU hog (256 KiB: not always)
    with (
        GoServer(binary=binary, cpu=1, alloc=alloc, pool=True, max_lifetime="120s") as a,
        GoServer(binary=binary, cpu=1, alloc=alloc, max_lifetime="120s") as b,
    ):
        base, cand = record_ab(tmp_path, a, b)
    doc = compare_json(tmp_path, base, cand)
    print("\nfresh buffer vs sync.Pool:\n" + show(doc))
    # allocation or GC among the first rows off the request's own path (whose callers carry every
    # change: see the regexp test), beyond its uncertainty and up
    off_path = [r for r in doc["profile_diff"] if not on_request_path(r["function"])]
    named = [r for r in off_path[:3] if ALLOC_GC.match(r["function"])]
    assert named, show(doc)
    assert not named[0]["within_uncertainty"] and named[0]["change"] > 0, show(doc)


def test_a_a_shows_nothing_beyond_the_sampling_uncertainty(binary, tmp_path):
    with (
        GoServer(binary=binary, cpu=1, max_lifetime="120s") as a,
        GoServer(binary=binary, cpu=1, max_lifetime="120s") as b,
    ):
        base, cand = record_ab(tmp_path, a, b)
    doc = compare_json(tmp_path, base, cand)
    print("\nA/A:\n" + show(doc))
    # the request's own path (net/http's serve, the handler) carries the whole request's CPU, whose
    # run-to-run variation on a busy machine is more than its samples' error (profiles/diff.py: that
    # variation is compare's to judge, on the total CPU per request): not a sampling question
    beyond = [
        r["function"]
        for r in doc["profile_diff"]
        if not r["within_uncertainty"] and not on_request_path(r["function"])
    ]
    assert beyond == [], show(doc)
    d = hp.diff_runs(base, cand)
    assert [r.function for r in d.changed if not on_request_path(r.function)] == []


def test_perf_per_step_where_the_machine_allows(binary, tmp_path):
    from headroom.profiles.perf import why_perf_fails

    if "perf" in __import__("conftest").TOOL_INSTALL:
        need_tool("perf")
    elif shutil.which("perf") is None:
        pytest.skip("perf is not installed (apt-get install linux-perf)")
    with GoServer(binary=binary, cpu=1, regexp_per_request=True, max_lifetime="120s") as srv:
        why = why_perf_fails(srv.pid)
        if why:
            print(f"perf cannot sample here: {why}")
            pytest.skip(f"perf cannot sample here: {why}")
        out = tmp_path / "perf"
        cmd = [
            sys.executable, "-m", "headroom", "ramp", srv.url, "-o", str(out), "--concurrency", "2:4:2",
            "--step-duration", "3s", "--cpu-pid", str(srv.pid), "--perf-pid", str(srv.pid),
        ]  # fmt: skip
        # one more client all along: on a busy machine perf starts late and its window slips past
        # its step, where the server would be idle and perf catch no sample; with this load every
        # window that is taken holds the handler's stacks
        bg = subprocess.Popen([need_tool("hey"), "-z", "60s", "-c", "1", srv.url],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        finally:
            bg.terminate()
            bg.wait(10)
    assert done.returncode == 0, done.stderr
    files = sorted(p.name for p in (out / "profiles").iterdir())
    # a step's profile that came more than 3 s after its window (perf record and perf script slow
    # on a busy machine) is left out with a warning naming the step, never written half
    said = {k for k in (1, 2) if re.search(rf"step {k}: profile: ", done.stderr)}
    want = [f for k, f in ((1, "step-001-c2.perf.txt"), (2, "step-002-c4.perf.txt")) if k not in said]
    assert files == want and files, (files, done.stderr)
    ps = hp(out)
    assert len(ps.steps) == len(files)
    for st in ps.steps:
        assert st.profile.kind == "perf"
        top = [t["function"] for t in st.top(15)]
        assert any(f.startswith("regexp.") for f in top), top


class _FlakyPprof:
    """A stand-in pprof endpoint: the index answers; the first profile is a 500, later ones hang."""

    def __init__(self):
        import http.server
        import threading

        calls = self.calls = []
        release = self.release = threading.Event()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (the http.server API)
                calls.append(self.path)
                if self.path.startswith("/debug/pprof/profile"):
                    if len([c for c in calls if "/profile" in c]) == 1:
                        self.send_error(500, "profiling failed")
                        return
                    release.wait(20)  # never in time
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def test_a_failed_or_late_profile_is_a_warning_and_the_load_data_is_written(binary, tmp_path):
    import yaml

    out = tmp_path / "run"
    with GoServer(binary=binary, cpu=1, max_lifetime="120s") as srv, _FlakyPprof() as pprof:
        cmd = [
            sys.executable, "-m", "headroom", "ramp", srv.url, "-o", str(out), "--concurrency", "1:2:1",
            "--step-duration", PROFILE_STEP, "--cpu-pid", str(srv.pid), "--pprof", pprof.url,
        ]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "step 1: profile:" in done.stderr and "answered HTTP 500" in done.stderr
    assert "step 2: profile: no profile" in done.stderr and "(late)" in done.stderr
    meta = yaml.safe_load((out / "metadata.yml").read_text())
    assert meta["steps"] == 2 and all(n > 0 for n in meta["step_requests"])
    assert meta["profiles"]["taken"] == 0 and meta["profiles"]["failed"] == 2
    assert (out / "perfResults.csv").stat().st_size > 0
    assert list((out / "profiles").iterdir()) == []


def test_a_404_pprof_endpoint_exits_2_before_the_ramp(binary, tmp_path):
    out = tmp_path / "run"
    with GoServer(binary=binary, max_lifetime="60s") as srv:
        cmd = [
            sys.executable, "-m", "headroom", "ramp", srv.url, "-o", str(out), "--concurrency", "1",
            "--step-duration", PROFILE_STEP, "--pprof", srv.base + "/elsewhere",
        ]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "answered HTTP 404" in lines[0] and "Traceback" not in done.stderr
    assert not (out / "perfResults.csv").exists()


def test_perf_of_an_idle_process_is_said_not_written_empty():
    """A process off CPU for the whole window (a sleeping one) gives no stacks: one line says so,
    and no empty profile is written for the step."""
    from headroom.profiles.perf import record_collapsed, why_perf_fails

    if "perf" in __import__("conftest").TOOL_INSTALL:
        need_tool("perf")
    elif shutil.which("perf") is None:
        pytest.skip("perf is not installed (apt-get install linux-perf)")
    idle = subprocess.Popen(["sleep", "30"])
    try:
        why = why_perf_fails(idle.pid)
        if why:
            pytest.skip(f"perf cannot sample here: {why}")
        got = record_collapsed(idle.pid, 1)
    finally:
        idle.kill()
        idle.wait()
    assert isinstance(got, str) and "caught no sample in 1 s" in got, got

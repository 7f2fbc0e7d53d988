"""``headroom ramp`` against a real nginx with real hey, on loopback.

The nginx fixture starts nginx (Debian package) with a throwaway config in a
temporary folder and stops it by its PID.  Without nginx or hey these tests
are skipped, unless HEADROOM_REQUIRE_TOOLS=1 (set by .ci/run; the older
HEADROOM_REQUIRE_NGINX=1 too), which makes a missing binary a failure: vegeta
and oha as well as nginx and hey.  Every check reads the run folder with the csv
module and plain arithmetic, never with headroom's own reader, except the
last one, which checks that ``headroom summary`` reads what ramp wrote.
"""

from __future__ import annotations

import calendar
import csv
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest
import yaml
from conftest import need_tool

from headroom import cli
from headroom.model import HeadroomError
from headroom.ramp import Recorder, Step, parse_levels, rfc3339_ns
from headroom.ramp.engines import Hey, Oha, StepPlan, Vegeta, go_duration

ROOT = Path(__file__).resolve().parent.parent
# tools are looked up when a test runs, never at import: one installed while the suite runs (CI
# installs them in parallel) is then found by the test that needs it, not half found
HEY_MISSING = (
    "headroom: error: hey not found on PATH: install it with 'apt-get install hey' (Debian/Ubuntu) "
    "or 'go install github.com/rakyll/hey@latest'"
)
TS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{9})Z$")


def _need(what: str) -> str:
    """The path of ``what``; skip without it, or fail when the tools are required
    (HEADROOM_REQUIRE_TOOLS=1, .ci/run)."""
    return need_tool(what)


# --------------------------------------------------------------------------
# independent readers


def ns(text: str) -> int:
    """RFC 3339 UTC with exactly 9 fractional digits -> integer nanoseconds."""
    m = TS.match(text)
    assert m, f"not RFC 3339 with 9 fractional digits: {text!r}"
    return calendar.timegm(time.strptime(m[1], "%Y-%m-%dT%H:%M:%S")) * 10**9 + int(m[2])


def sections(folder: Path) -> list[list[tuple[int, float, int]]]:
    """perfResults.csv as sections of (start ns, response time s, status), read with csv."""
    out: list[list[tuple[int, float, int]]] = []
    with open(folder / "perfResults.csv", newline="") as f:
        for row in csv.reader(f):
            if row == ["start-time", "response-time", "status-code"]:
                out.append([])
                continue
            assert out, "rows before the first header"
            assert len(row) == 3, row
            assert re.fullmatch(r"\d+\.\d{4,}", row[1]), row[1]
            out[-1].append((ns(row[0]), float(row[1]), int(row[2])))
    return out


def meta(folder: Path) -> dict:
    return yaml.safe_load((folder / "metadata.yml").read_text())


def cpu_rows(folder: Path, name: str = "cpuStats.csv") -> list[tuple[int, float]]:
    with open(folder / name, newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0][0] == "timestamp" and set(rows[0][1:]) == {"percentage"}
    return [(ns(r[0]), sum(map(float, r[1:])) / (len(r) - 1)) for r in rows[1:]]


# --------------------------------------------------------------------------
# nginx


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 1.0) -> int:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=timeout) as r:
        r.read()
        return r.status


class Nginx:
    """A real nginx (master + 1 worker) on 127.0.0.1:<free port>, stopped by its PID."""

    def __init__(self, d: Path, location: str = "", extra_http: str = ""):
        (d / "www").mkdir(parents=True, exist_ok=True)
        (d / "www" / "index.html").write_text("x" * 1023 + "\n")
        self.port = _free_port()
        self.dir = d
        user = "user root;\n" if os.geteuid() == 0 else ""  # workers must read the 0700 tmp folder
        temp = "".join(
            f"    {k}_temp_path {d}/{k};\n" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        (d / "nginx.conf").write_text(
            f"{user}daemon off;\nmaster_process on;\nworker_processes 1;\n"
            f"pid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n"
            "events { worker_connections 1024; }\n"
            f"http {{\n    access_log {d}/access.log;\n{temp}{extra_http}"
            f"    server {{\n        listen 127.0.0.1:{self.port};\n        root {d}/www;\n"
            f"        location / {{ {location} }}\n    }}\n}}\n"
        )
        self.proc = subprocess.Popen(
            [_need("nginx"), "-p", str(d), "-c", str(d / "nginx.conf"), "-e", str(d / "error.log")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self.url = f"http://127.0.0.1:{self.port}/index.html"
        self.pid = self.proc.pid

    def wait(self) -> Nginx:
        deadline = time.monotonic() + 10
        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"nginx exited: {self.proc.stderr.read().decode(errors='replace')}")
            try:
                if _get(self.url, timeout=2) == 200:
                    return self
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("nginx did not answer within 10 s")
            time.sleep(0.05)

    def access_lines(self) -> int:
        return len((self.dir / "access.log").read_text().splitlines())

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGQUIT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc.stderr.close()


@pytest.fixture(scope="module")
def nginx_a(tmp_path_factory):
    """A real nginx on 127.0.0.1:<free port> serving a 1024-byte file, logging every request."""
    _need("nginx")
    _need("hey")
    server = Nginx(tmp_path_factory.mktemp("nginx"))
    try:
        yield server.wait()
    finally:
        server.stop()


@pytest.fixture(scope="module")
def nginx(nginx_a):
    """The same nginx as (url, master pid)."""
    return nginx_a.url, nginx_a.pid


def _worker_cpu(master: int) -> float:
    return sum(sum(c.cpu_times()[:2]) for c in psutil.Process(master).children(recursive=True))


# --------------------------------------------------------------------------
# a short ramp through the CLI


@pytest.fixture(scope="module")
def ramp_run(nginx, tmp_path_factory):
    url, master = nginx
    out = tmp_path_factory.mktemp("ramp") / "run"
    before = _worker_cpu(master)
    rc = cli.main(
        [
            "ramp",
            url,
            "-o",
            str(out),
            "--concurrency",
            "1:9:4",
            "--step-duration",
            "1s",
            "--cpu-pid",
            str(master),
            "--label",
            "nginx-test",
        ]
    )
    after = _worker_cpu(master)
    return out, rc, after - before


def test_ramp_metadata(ramp_run):
    out, rc, _ = ramp_run
    assert rc == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "cpuStats.csv",
        "generatorCpuStats.csv",
        "hostCpuStats.csv",
        "memStats.csv",  # the server's RSS (psutil, --cpu-pid tree): tests/test_telemetry_prometheus.py
        "metadata.yml",
        "perfResults.csv",
    ]
    m = meta(out)
    assert m["sha"] == m["label"] == "nginx-test"
    assert m["concurrency"] == [1, 5, 9]
    assert (m["lower_concurrency"], m["upper_concurrency"], m["concurrency_step"]) == (1, 9, 4)
    assert m["steps"] == 3 and m["step_duration_s"] == 1.0
    assert m["engine"] == "hey" and m["engine_version"]
    assert m["interrupted"] is False and m["stopped_early"] is None
    assert m["cpu_cores"] == os.cpu_count()  # 100 % = every core: a multi-process server fits
    # hey -z: its result count and error list (the template's trailer) say every request was answered
    assert m["step_errors"] == [0, 0, 0]
    assert m["step_non2xx"] == [0, 0, 0]
    assert m["host"]["cores"] == os.cpu_count()
    g = m["generator_cpu"]
    assert len(g["per_step_percent"]) == 3 and all(p > 0 for p in g["per_step_percent"])
    assert isinstance(g["saturated"], bool)


def test_ramp_steps_follow_each_other(ramp_run):
    out, _, _ = ramp_run
    secs = sections(out)
    m = meta(out)
    assert [len(s) for s in secs] == m["step_requests"]
    assert all(len(s) > 100 for s in secs)
    assert all(code == 200 for s in secs for _, _, code in s)
    tol = 1_000_000  # 1 ms: hey rounds to 0.1 ms
    for prev, cur in zip(secs, secs[1:]):
        assert min(r[0] for r in cur) >= max(r[0] for r in prev) - tol
        # stronger: a step starts after the previous one's last response
        assert min(r[0] for r in cur) >= max(r[0] + round(r[1] * 1e9) for r in prev) - tol
    for s, t0, t1 in zip(secs, m["step_start_times"], m["step_end_times"]):
        assert ns(t0) <= min(r[0] for r in s) and max(r[0] for r in s) <= ns(t1)
        span = (max(r[0] for r in s) - min(r[0] for r in s)) / 1e9
        assert 0.7 < span < 1.5  # a 1 s step (a loaded machine delays hey's stop a little)


def test_ramp_cpu_is_the_nginx_worker(ramp_run):
    out, _, worker_cpu_s = ramp_run
    starts = [r[0] for s in sections(out) for r in s]
    lo, hi = min(starts), max(starts)
    samples = cpu_rows(out)
    m = meta(out)
    # samples cover the load window
    assert samples[0][0] <= lo + 1_200_000_000 and samples[-1][0] >= hi
    inside = [p for t, p in samples if lo < t <= hi + 1_000_000_000]
    assert inside and max(inside) > 5
    # the CPU seconds in the file equal the worker's CPU time measured around the run
    # (the master is idle: the worker, a child of --cpu-pid, is what is counted)
    prev = ns(m["start_time"])
    file_cpu_s = 0.0
    for t, p in samples:
        file_cpu_s += p / 100 * m["cpu_cores"] * (t - prev) / 1e9  # 100 % = cpu_cores cores
        prev = t
    assert file_cpu_s == pytest.approx(worker_cpu_s, rel=0.15, abs=0.06)
    gen = cpu_rows(out, "generatorCpuStats.csv")
    assert len(gen) == len(samples) and max(p for _, p in gen) > 5


def test_ramp_summary_reads_it(ramp_run):
    out, _, _ = ramp_run
    n = sum(len(s) for s in sections(out))
    r = subprocess.run(
        [sys.executable, "-m", "headroom", "summary", str(out), "--json", "-"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["label"] == "nginx-test"
    assert doc["requests"]["total"] == n
    assert len(doc["steps"]) == 3


def test_ramp_request_count_equals_hey(nginx, tmp_path):
    """With -n, hey sends (n // c) * c requests: every one is a row (no errors on loopback)."""
    url, _ = nginx
    out = tmp_path / "n"
    rc = cli.main(
        ["ramp", url, "-o", str(out), "--concurrency", "1:9:4", "--requests-per-step", "200", "--gzip"]
    )
    assert rc == 0
    m = meta(out)
    assert m["step_requested"] == [200, 200, 198]
    assert m["step_requests"] == [200, 200, 198]
    assert m["step_errors"] == [0, 0, 0]
    assert not (out / "perfResults.csv").exists()
    import gzip

    text = gzip.decompress((out / "perfResults.csv.gz").read_bytes()).decode()
    (out / "perfResults.csv").write_text(text)
    assert [len(s) for s in sections(out)] == [200, 200, 198]
    # whole machine CPU: one percentage column per CPU
    header = (out / "cpuStats.csv").read_text().splitlines()[0]
    assert header == "timestamp," + ",".join(["percentage"] * os.cpu_count())
    assert m["cpu_cores"] == os.cpu_count()
    # the server is not known: it is inside the foreign share, said so, and no foreign-load warning
    assert "inside the foreign share" in m["foreign_cpu"]["note"]
    assert not any("other processes used" in w for w in m.get("warnings") or [])


# --------------------------------------------------------------------------
# Ctrl-C


def _ramp_proc(url: str, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "headroom", "ramp", url, "-o", str(out), "--progress", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )


def _wait_for_line(proc: subprocess.Popen, prefix: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        if line.startswith(prefix):
            return
    proc.kill()
    pytest.fail(f"no line starting with {prefix!r}")


def _wait_for_requests(server: Nginx, proc: subprocess.Popen, more: int = 20, timeout: float = 30) -> None:
    """Until the server has logged ``more`` requests beyond what it had: the next step is running."""
    start, deadline = server.access_lines(), time.monotonic() + timeout
    while server.access_lines() < start + more:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the server did not see {more} more requests")
        time.sleep(0.005)


@pytest.mark.parametrize("presses", [1, 2])
def test_ramp_ctrl_c(nginx_a, tmp_path, presses):
    """Ctrl-C in step 2: once, step 2 completes and the ramp stops; twice, step 2 is dropped."""
    url, master = nginx_a.url, nginx_a.pid
    out = tmp_path / "int"
    proc = _ramp_proc(url, out, "--concurrency", "1:9:4", "--step-duration", "2s", "--cpu-pid", str(master))
    try:
        _wait_for_line(proc, "step 1/3")  # step 1 is done (the line follows it) ...
        _wait_for_requests(nginx_a, proc)  # ... and step 2's requests reach nginx
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does: the whole foreground group
        if presses == 2:
            _wait_for_line(proc, "headroom ramp: stopping after this step")  # the first press was heard
            os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    m = meta(out)
    done = [1, 5] if presses == 1 else [1]
    assert m["interrupted"] is True
    assert m["concurrency"] == done and m["planned_concurrency"] == [1, 5, 9]
    assert m["steps"] == len(done)
    secs = sections(out)
    assert [len(s) for s in secs] == m["step_requests"]
    for s in secs:  # complete steps only: each ran its full 2 s
        assert (max(r[0] for r in s) - min(r[0] for r in s)) / 1e9 > 1.5
    assert (out / "cpuStats.csv").exists()


# --------------------------------------------------------------------------
# errors: one line, exit 2


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_missing_hey(tmp_path, monkeypatch, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert cli.main(["ramp", "http://127.0.0.1:1/", "-o", str(tmp_path / "x")]) == 2
    assert _one_line_error(capsys) == HEY_MISSING
    assert not (tmp_path / "x").exists()


def test_rate_without_vegeta_or_oha(tmp_path, monkeypatch, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert cli.main(["ramp", "http://127.0.0.1:1/", "-o", str(tmp_path / "x"), "--rate", "100:300:100"]) == 2
    line = _one_line_error(capsys)
    assert "go install github.com/tsenart/vegeta/v12@latest" in line and "cargo install oha" in line


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["ftp://127.0.0.1/"], "bad URL"),
        (["127.0.0.1:8080"], "bad URL"),
        (["http://127.0.0.1:1/", "--concurrency", "1:x"], "bad --concurrency"),
        (["http://127.0.0.1:1/", "--concurrency", "9:1:2"], "below LOW"),
        (["http://127.0.0.1:1/", "--concurrency", "0:4:1"], "at least 1"),
        (["http://127.0.0.1:1/", "--step-duration", "soon"], "--step-duration"),
        (["http://127.0.0.1:1/", "--engine", "hey", "--rate", "10:20:10"], "hey cannot hold"),
        (["http://127.0.0.1:1/", "--concurrency", "1:9:4", "--requests-per-step", "5"], "below the highest"),
        (["http://127.0.0.1:1/", "--cpu-pid", "999999999"], "no such process"),
        (["http://127.0.0.1:1/", "--cpu-pid", "nginx"], "bad --cpu-pid"),
    ],
)
def test_bad_usage(tmp_path, capsys, args, fragment):
    if "--engine" not in args:
        _need("hey")
    assert cli.main(["ramp", *args, "-o", str(tmp_path / "x")]) == 2
    assert fragment in _one_line_error(capsys)


def test_output_not_empty(tmp_path, capsys):
    _need("hey")
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "keep.txt").write_text("mine")
    assert cli.main(["ramp", "http://127.0.0.1:1/", "-o", str(tmp_path / "x")]) == 2
    assert "not empty" in _one_line_error(capsys)
    assert (tmp_path / "x" / "keep.txt").read_text() == "mine"


def test_server_down(tmp_path, capsys):
    _need("hey")
    port = _free_port()
    assert cli.main(["ramp", f"http://127.0.0.1:{port}/", "-o", str(tmp_path / "x")]) == 2
    assert "cannot reach" in _one_line_error(capsys)


def test_generator_overrun_is_killed(nginx, tmp_path, monkeypatch, capsys):
    """A generator that never ends is stopped at --step-timeout; the completed steps stay."""
    url, _ = nginx
    fake = tmp_path / "bin"
    fake.mkdir()
    counter = tmp_path / "calls"
    (fake / "hey").write_text(
        "#!/bin/sh\n"
        f"n=$(cat {counter} 2>/dev/null || echo 0); echo $((n+1)) > {counter}\n"
        f'if [ "$n" = 0 ]; then exec {_need("hey")} "$@"; fi\n'
        "exec sleep 60\n"
    )
    (fake / "hey").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    out = tmp_path / "o"
    t0 = time.monotonic()
    rc = cli.main(
        [
            "ramp",
            url,
            "-o",
            str(out),
            "--concurrency",
            "1:3:1",
            "--step-duration",
            "0.5s",
            "--step-timeout",
            "2s",
        ]
    )
    # killed at the step limit, not after the fake's 60 s: a bound far below 60 s that a busy machine
    # (hey's start, the ramp's own work beside CPU hogs) cannot reach
    assert time.monotonic() - t0 < 40
    assert rc == 1
    m = meta(out)
    assert m["concurrency"] == [1] and m["interrupted"] is False
    assert "step 2" in m["stopped_early"] and "step limit" in m["stopped_early"]
    assert [len(s) for s in sections(out)] == m["step_requests"]
    assert "stopped early" in capsys.readouterr().err


# --------------------------------------------------------------------------
# vegeta and oha: closed and open-loop (--rate) ramps, checked against the generators' own record


def _with_bin(monkeypatch, what: str) -> None:
    path = _need(what)
    monkeypatch.setenv("PATH", f"{Path(path).parent}{os.pathsep}{os.environ['PATH']}")


#: vegeta as headroom runs it, keeping each attack's binary results (vegeta's own record) in KEEP
VEGETA_KEEPER = """#!/bin/sh
if [ "$1" != attack ]; then exec "{real}" "$@"; fi
"{real}" "$@"; rc=$?
for a in "$@"; do case "$a" in -output=*) f="${{a#-output=}}";; esac; done
n=$(ls "{keep}" | wc -l)
cp "$f" "{keep}/$(printf %03d "$n").bin"
exit $rc
"""

#: oha as headroom runs it, also writing its own sqlite record of every request of the step
OHA_KEEPER = """#!/bin/sh
case " $* " in *" --no-tui "*) ;; *) exec "{real}" "$@";; esac
n=$(ls "{keep}" | wc -l)
exec "{real}" --db-url "{keep}/$(printf %03d "$n").db" "$@"
"""


def _keeper(tmp_path: Path, monkeypatch, engine: str) -> Path:
    real = _need(engine)
    keep, bindir = tmp_path / f"keep-{engine}", tmp_path / f"bin-{engine}"
    keep.mkdir()
    bindir.mkdir()
    script = bindir / engine
    script.write_text((VEGETA_KEEPER if engine == "vegeta" else OHA_KEEPER).format(real=real, keep=keep))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return keep


def _rfc3339_any_ns(text: str) -> int:
    """vegeta's RFC 3339 times (any fraction, Z or an offset) -> integer ns."""
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", text)
    assert m, text
    t = calendar.timegm(time.strptime(m[1], "%Y-%m-%dT%H:%M:%S")) * 10**9 + int(
        (m[2] or "0").ljust(9, "0")[:9]
    )
    if m[3] != "Z":
        sign = 1 if m[3][0] == "+" else -1
        t -= sign * (int(m[3][1:3]) * 3600 + int(m[3][4:6]) * 60) * 10**9
    return t


def _check_vegeta_steps(out: Path, keep: Path) -> None:
    """Each step of perfResults.csv against ``vegeta report`` of the same attack's results."""
    secs = sections(out)
    kept = sorted(keep.glob("*.bin"))
    assert len(kept) == len(secs)
    for sec, binfile in zip(secs, kept):
        r = subprocess.run(
            [_need("vegeta"), "report", "-type=json", str(binfile)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0, r.stderr
        rep = json.loads(r.stdout)
        assert rep["requests"] == len(sec)
        assert rep["status_codes"] == {"200": len(sec)}
        lat_ns = [round(x * 1e9) for _, x, _ in sec]  # the file keeps microseconds
        assert abs(sum(lat_ns) / len(sec) - rep["latencies"]["mean"]) <= 600
        assert abs(max(lat_ns) - rep["latencies"]["max"]) <= 600
        assert abs(min(lat_ns) - rep["latencies"]["min"]) <= 600
        assert min(t for t, _, _ in sec) == pytest.approx(_rfc3339_any_ns(rep["earliest"]), abs=1000)
        assert max(t for t, _, _ in sec) == pytest.approx(_rfc3339_any_ns(rep["latest"]), abs=1000)


def _check_oha_steps(out: Path, keep: Path) -> None:
    """Each step of perfResults.csv against oha's own sqlite record of the same step."""
    import sqlite3

    secs = sections(out)
    kept = sorted(keep.glob("*.db"))
    assert len(kept) == len(secs)
    for sec, db in zip(secs, kept):
        with sqlite3.connect(db) as c:
            rows = c.execute("SELECT start, duration, status FROM oha ORDER BY start").fetchall()
        assert len(rows) == len(sec)
        assert {st for _, _, st in rows} == {200}
        ours = sorted(x for _, x, _ in sec)
        theirs = sorted(d for _, d, _ in rows)
        assert all(abs(a - b) <= 1.5e-6 for a, b in zip(ours, theirs))  # microseconds in the file
        # the spacing of the starts is oha's: the file's starts less its first equal oha's less its first
        ours_t = sorted(t for t, _, _ in sec)
        theirs_t = [st for st, _, _ in rows]
        for k in (len(rows) // 2, len(rows) - 1):
            assert (ours_t[k] - ours_t[0]) / 1e9 == pytest.approx(theirs_t[k] - theirs_t[0], abs=2e-6)


@pytest.mark.parametrize("engine", ["vegeta", "oha"])
def test_other_engines(nginx_a, tmp_path, monkeypatch, engine):
    """Closed and open-loop ramps with vegeta and oha against nginx: every request is the generator's
    own record of it, the server logged them all, and a rate ramp holds its rates."""
    keep = _keeper(tmp_path, monkeypatch, engine)
    url, master = nginx_a.url, nginx_a.pid
    check = _check_vegeta_steps if engine == "vegeta" else _check_oha_steps
    args = ["--engine", engine, "--step-duration", "1s", "--cpu-pid", str(master)]
    for name, levels in (("closed", ["--concurrency", "1:5:4"]), ("open", ["--rate", "200:400:200"])):
        out = tmp_path / name
        for old in keep.iterdir():
            old.unlink()
        logged0 = nginx_a.access_lines()
        assert cli.main(["ramp", url, "-o", str(out), *levels, *args]) == 0
        logged = nginx_a.access_lines() - logged0
        secs = sections(out)
        m = meta(out)
        assert m["engine"] == engine
        assert [len(s) for s in secs] == m["step_requests"] and len(secs) == 2
        assert all(code == 200 for s in secs for _, _, code in s)
        for prev, cur in zip(secs, secs[1:]):
            assert min(r[0] for r in cur) >= max(r[0] for r in prev) - 1_000_000
        check(out, keep)
        # nginx's own count: every row, one check GET, and at most the requests cut at a step's end
        rows = sum(len(s) for s in secs)
        assert rows + 1 <= logged <= rows + 1 + 2 * 5, (rows, logged)
        if name == "open":
            assert m["rates"] == [200, 400] and "lower_concurrency" not in m
            # a fixed rate: about rate x 1 s requests per step, whatever the latency
            assert [len(s) for s in secs] == pytest.approx([200, 400], rel=0.1)
            for s, rate in zip(secs, (200, 400)):
                gaps = sorted(b[0] - a[0] for a, b in zip(sorted(s), sorted(s)[1:]))
                assert gaps[len(gaps) // 2] / 1e9 == pytest.approx(1 / rate, rel=0.2)  # paced, not bursts


# --------------------------------------------------------------------------
# pieces, without a server


def test_parse_levels():
    assert parse_levels("1:40:3", "--concurrency") == (1, 40, 3, list(range(1, 41, 3)))
    assert parse_levels("1:41:3", "--concurrency")[1] == 40  # the highest level reached
    assert parse_levels("4", "--concurrency")[3] == [4]
    assert parse_levels("2:5", "--concurrency")[3] == [2, 3, 4, 5]
    # a list, as summary --concurrency and ramp --help's Locust example give it (issue 49)
    assert parse_levels("1,2,4,8", "--concurrency") == (1, 8, None, [1, 2, 4, 8])
    for bad in ("1,x", "0,2", "1,,2"):
        with pytest.raises(HeadroomError, match="list of whole numbers"):
            parse_levels(bad, "--concurrency")


def test_time_format():
    assert rfc3339_ns(1_700_000_000_123_456_789) == "2023-11-14T22:13:20.123456789Z"
    assert rfc3339_ns(1_700_000_000_000_000_001) == "2023-11-14T22:13:20.000000001Z"
    assert ns(rfc3339_ns(1_700_000_000_000_000_001)) == 1_700_000_000_000_000_001
    assert go_duration(3) == "3s" and go_duration(1.5) == "1500ms"


def test_engine_parsers(tmp_path):
    base = 1_700_000_000 * 10**9
    (tmp_path / "out").write_text(
        "response-time,DNS+dialup,DNS,Request-write,Response-delay,Response-read,status-code,offset\n"
        "0.0021,0.0007,0.0000,0.0001,0.0006,0.0001,200,0.0003\n"
        "0.0100,0.0000,0.0000,0.0000,0.0002,0.0000,503,1.2500\n"
    )
    rows = Hey("/x/hey").parse(tmp_path, base, StepPlan(concurrency=2, requests=5))
    assert rows.start_ns == [base + 300_000, base + 1_250_000_000]
    assert rows.response_time == ["0.0021", "0.0100"] and rows.status == [200, 503]
    assert rows.transport_errors == 2  # hey -n 5 -c 2 sends 4; 2 rows
    (tmp_path / "out").write_text(
        f'{base + 5},200,1500000,0,1024,,,,0,GET,http://x/,\n{base + 9},0,30000000000,0,0,"dial tcp: refused, really",,,1,GET,http://x/,\n'
    )
    rows = Vegeta("/x/vegeta").parse(tmp_path, 0, StepPlan(rate=10, duration_s=1))
    assert rows.start_ns == [base + 5, base + 9] and rows.status == [200, 0]
    assert rows.response_time == ["0.001500", "30.000000"] and rows.transport_errors == 1
    (tmp_path / "out").write_text(
        "request-start,DNS,DNS+dialup,Response-delay,request-duration,bytes,status\n"
        "0.001,0.0,0.0001,0.0002,0.00051,1024,200\n"
    )
    rows = Oha("/x/oha").parse(tmp_path, base, StepPlan(concurrency=1, duration_s=1))
    assert rows.start_ns == [base + 1_000_000] and rows.response_time == ["0.000510"]
    assert rows.transport_errors is None


def test_hey_output_read_by_the_hey_format(tmp_path):
    """hey's output through headroom.formats.hey: refused connections only, a damaged line, a wrong header."""
    head = "response-time,DNS+dialup,DNS,Request-write,Response-delay,Response-read,status-code,offset\n"
    out = tmp_path / "out"
    out.write_text(head)
    rows = Hey("/x/hey").parse(tmp_path, 0, StepPlan(concurrency=2, requests=4))
    assert len(rows) == 0 and rows.transport_errors == 4
    out.write_text(head + "0.0021,0.0007,0.0000,0.0001,0.0006,0.0001,200,0.0003\n0.0030,0,0,0,0,0,2x0,0.1\n")
    with pytest.raises(HeadroomError, match=rf"^{out}:3: "):
        Hey("/x/hey").parse(tmp_path, 0, StepPlan(concurrency=2, requests=4))
    out.write_text("response-time,offset\n0.0021,0.0003\n")
    with pytest.raises(HeadroomError, match="hey wrote an unexpected CSV header 'response-time,offset'"):
        Hey("/x/hey").parse(tmp_path, 0, StepPlan(concurrency=2, requests=4))


def _step(k: int, rps: float, gen: float) -> Step:
    t = 10**18 + k * 3 * 10**9
    return Step(k, 1 + 3 * k, None, t, t + 2 * 10**9, 2.0, int(rps * 2), None, None, 0, t, t + 2 * 10**9, gen)


def test_generator_saturation_warnings():
    """The client as the ceiling: pegged CPU, or a flat top while the generator is busy."""
    from types import SimpleNamespace

    def warn(steps, cores=1):
        fake = SimpleNamespace(
            steps=steps, affinity=list(range(cores)), engine=Hey("/x/hey"), pids=[1], sampler=None
        )
        return Recorder._saturation(fake)

    rising = [_step(k, 1000 * (k + 1), 50) for k in range(6)]
    assert warn(rising) == []
    pegged = [_step(k, 1000 * (k + 1), 95 if k > 3 else 50) for k in range(6)]
    (w,) = warn(pegged)
    assert "saturated" in w and "step 5" in w
    assert warn(pegged, cores=2) == []  # 95 % of one core is half of two
    flat = [_step(k, min(1000 * (k + 1), 3000), 80) for k in range(6)]
    (w,) = warn(flat)
    assert "flat" in w and "may have set the ceiling" in w
    assert warn([_step(k, min(1000 * (k + 1), 3000), 30) for k in range(6)]) == []  # server-bound


# --------------------------------------------------------------------------
# foreign load: a real CPU hog beside a recording


def _machine_busy_s() -> float:
    """Busy CPU seconds of all CPUs from /proc/stat (user nice system irq softirq; not idle, iowait, steal)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (v[0] + v[1] + v[2] + v[5] + v[6]) / os.sysconf("SC_CLK_TCK")


def _tree_cpu_s(pid: int) -> float:
    root = psutil.Process(pid)
    return sum(sum(p.cpu_times()[:2]) for p in [root, *root.children(recursive=True)])


def _host_rows(folder: Path) -> list[tuple[int, float, str]]:
    with open(folder / "hostCpuStats.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["timestamp", "foreign_pct", "steal_pct"]
    return [(ns(r[0]), float(r[1]), r[2]) for r in rows[1:]]


def test_foreign_cpu_sees_a_real_hog(nginx, tmp_path, capsys):
    """A process spinning on one core beside the ramp is foreign load, and the file says how much.

    Two independent checks of the CPU seconds in hostCpuStats.csv over the ramp:
    * at least the hog's own CPU time (psutil of the hog) in the sampled window: the hog is one
      thread, so outside that window it used at most the window's slack; 10 % + 0.1 s for the
      1 s samples cut at the step edges and 10 ms clock ticks;
    * the machine's busy time (/proc/stat, read here) minus nginx (psutil), this process and its
      waited children (os.times: headroom and hey), over the test's window: the other engineers'
      jobs on this machine are in both; the slack outside the sampled window can hold at most
      slack x cores of it, plus 10 % + 0.2 s for sampling and ticks.
    """
    url, master = nginx
    out = tmp_path / "hog"
    hog = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "cpu_hog.py"), "--seed", "5", "--duration", "60"]
        + ["--min-duty", "1", "--max-duty", "1", "--min-burst", "60", "--max-burst", "60", "--quiet"],
        stdin=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        hog_p = psutil.Process(hog.pid)
        deadline = time.monotonic() + 30
        while sum(hog_p.cpu_times()[:2]) < 0.2:  # until it spins (Python started, the loop running)
            assert hog.poll() is None and time.monotonic() < deadline, "the CPU hog did not start"
            time.sleep(0.01)
        t0, busy0, nginx0, me0 = time.time_ns(), _machine_busy_s(), _tree_cpu_s(master), os.times()
        hog0 = sum(hog_p.cpu_times()[:2])
        rc = cli.main(
            [
                "ramp",
                url,
                "-o",
                str(out),
                "--concurrency",
                "1:9:4",
                "--step-duration",
                "1s",
                "--cpu-pid",
                str(master),
            ]
        )
        hog1 = sum(hog_p.cpu_times()[:2])
        t1, busy1, nginx1, me1 = time.time_ns(), _machine_busy_s(), _tree_cpu_s(master), os.times()
    finally:
        hog.terminate()
        hog.wait(timeout=10)
    assert rc == 0
    m = meta(out)
    f = m["foreign_cpu"]
    assert f["unit"] == "percent of the whole machine (all cores = 100)"
    assert f["samples_file"] == "hostCpuStats.csv" and len(f["per_step_percent"]) == 3
    rows = _host_rows(out)
    cores = m["cpu_cores"]
    prev, file_s, weights = ns(m["start_time"]), 0.0, []
    for t, pct, _ in rows:
        file_s += pct / 100 * cores * (t - prev) / 1e9
        weights.append((prev, t, pct))
        prev = t
    sampled_s = (rows[-1][0] - ns(m["start_time"])) / 1e9
    slack_s = (t1 - t0) / 1e9 - sampled_s
    assert 0 <= slack_s < 5
    hog_s = hog1 - hog0
    assert hog_s > 0.5  # it really ran
    assert file_s >= 0.9 * (hog_s - slack_s) - 0.1
    me = (me1.user + me1.system + me1.children_user + me1.children_system) - (
        me0.user + me0.system + me0.children_user + me0.children_system
    )
    expected_s = (busy1 - busy0) - (nginx1 - nginx0) - me
    assert abs(file_s - expected_s) <= slack_s * cores + 0.1 * expected_s + 0.2
    # the step means are the time-weighted means of the file's samples over each step
    for k, (a, b) in enumerate(zip(m["step_start_times"], m["step_end_times"])):
        lo, hi = ns(a), ns(b)
        w = [(min(e, hi) - max(s, lo), p) for s, e, p in weights if min(e, hi) > max(s, lo)]
        mean = sum(x * p for x, p in w) / sum(x for x, _ in w)
        assert f["per_step_percent"][k] == pytest.approx(mean, abs=0.051)
    assert f["mean_percent"] > 10 and f["max_percent"] >= f["mean_percent"]
    assert "other processes used" in capsys.readouterr().err
    steal = [r[2] for r in rows]
    if f["steal_per_step_percent"] is None:
        assert all(s == "" for s in steal)
    else:
        assert all(float(s) >= 0 for s in steal) and f["steal_mean_percent"] >= 0


# --------------------------------------------------------------------------
# interleaved A/B


@pytest.fixture(scope="module")
def nginx_b(tmp_path_factory, nginx):
    """A second, identical nginx (the B side of an A/A job)."""
    server = Nginx(tmp_path_factory.mktemp("nginx_b"))
    try:
        yield server.wait()
    finally:
        server.stop()


def test_ab_abba_order_and_folders(nginx_a, nginx_b, tmp_path, capsys):
    """--repeats 3: A B B A A B, one folder per run, each run against its own server."""
    url_a, pid_a = nginx_a.url, nginx_a.pid
    before = (nginx_a.access_lines(), nginx_b.access_lines())
    out = tmp_path / "ab"
    rc = cli.main(
        ["ramp", "--ab", url_a, nginx_b.url, "--repeats", "3", "-o", str(out), "--pause", "0s"]
        + ["--concurrency", "2:4:2", "--step-duration", "0.5s", "--cpu-pid-a", str(pid_a)]
        + ["--cpu-pid-b", str(nginx_b.pid)]
    )
    after = (nginx_a.access_lines(), nginx_b.access_lines())
    assert rc == 0
    stdout = capsys.readouterr().out
    assert stdout.strip() == f"headroom compare --baseline {out}/a-* --candidate {out}/b-*"
    names = ["a-01", "b-01", "b-02", "a-02", "a-03", "b-03"]
    assert sorted(p.name for p in out.iterdir()) == sorted([*names, "ab.yml"])
    job = yaml.safe_load((out / "ab.yml").read_text())
    assert job["order"] == "ABBAAB" and job["status"] == "done"
    assert [r["folder"] for r in job["runs"]] == names
    assert [r["foreign_cpu_mean_percent"] for r in job["runs"]] == [
        meta(out / n)["foreign_cpu"]["mean_percent"] for n in names
    ]
    starts = [ns(meta(out / n)["start_time"]) for n in names]
    ends = [ns(meta(out / n)["end_time"]) for n in names]
    assert all(e <= s for e, s in zip(ends, starts[1:]))  # recorded one after the other, in that order
    served = {"a": 0, "b": 0}
    for pos, n in enumerate(names, start=1):
        m = meta(out / n)
        side = n[0]
        assert m["label"] == n and m["ab"]["side"] == side and m["ab"]["position"] == pos
        assert m["url"] == (url_a if side == "a" else nginx_b.url)
        assert m["cpu_pids"] == [pid_a if side == "a" else nginx_b.pid]
        assert m["ab"]["other_cpu_pids"] == [nginx_b.pid if side == "a" else pid_a]
        assert [len(s) for s in sections(out / n)] == m["step_requests"]
        served[side] += sum(m["step_requests"])
    # each server's own access log: the rows of its side's runs, plus one check GET per run and
    # one before the job, plus at most the requests in flight when hey stopped (concurrency)
    for k, side in enumerate("ab"):
        logged = after[k] - before[k]
        assert served[side] + 4 <= logged <= served[side] + 4 + 3 * (2 + 4)


def test_ab_ctrl_c_keeps_completed_runs(nginx, nginx_b, tmp_path):
    url_a, pid_a = nginx
    out = tmp_path / "abint"
    proc = subprocess.Popen(
        [sys.executable, "-m", "headroom", "ramp", "--ab", url_a, nginx_b.url, "-o", str(out), "--progress"]
        + ["--concurrency", "1:9:4", "--step-duration", "1s", "--pause", "0s", "--cpu-pid-a", str(pid_a)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True,
    )
    try:
        _wait_for_line(proc, "headroom ramp --ab: run 2/4")
        _wait_for_line(proc, "b-01  step 1/3")  # b-01's first step is done (A/B lines name the run) ...
        _wait_for_requests(nginx_b, proc)  # ... and its second step's requests reach server b
        os.killpg(proc.pid, signal.SIGINT)
        stdout, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert sorted(p.name for p in out.iterdir()) == ["a-01", "ab.yml", "b-01"]
    assert meta(out / "a-01")["interrupted"] is False and meta(out / "a-01")["steps"] == 3
    b = meta(out / "b-01")
    assert b["interrupted"] is True and b["steps"] == 2
    assert yaml.safe_load((out / "ab.yml").read_text())["status"] == "interrupted"
    assert f"--baseline {out}/a-* --candidate {out}/b-*" in stdout


SLOW_SERVER = """
import http.server, sys, threading, time
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        time.sleep(0.01)
        body = b"y" * 1024
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(srv.server_address[1], flush=True)
threading.Timer(float(sys.argv[1]), srv.shutdown).start()
srv.serve_forever()
"""


@pytest.fixture(scope="module")
def slow_nginx(tmp_path_factory, nginx):
    """nginx proxying to an upstream that sleeps 10 ms per request (at most 300 s)."""
    up = subprocess.Popen(
        [sys.executable, "-c", SLOW_SERVER, "300"], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    server = None
    try:
        port = int(up.stdout.readline())
        server = Nginx(tmp_path_factory.mktemp("slow"), location=f"proxy_pass http://127.0.0.1:{port};")
        yield server.wait()
    finally:
        if server is not None:
            server.stop()
        up.terminate()
        up.wait(timeout=10)
        up.stdout.close()


def _compare_rc(out: Path, confidence: str, a: str = "a", b: str = "b") -> int:
    r = subprocess.run(
        [sys.executable, "-m", "headroom", "compare", "--baseline", *sorted(map(str, out.glob(f"{a}-*")))]
        + ["--candidate", *sorted(map(str, out.glob(f"{b}-*"))), "--confidence", confidence],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return r.returncode


def test_until_decided_stops_at_max_repeats(nginx, nginx_b, tmp_path, capsys):
    """A/A, --max-repeats 2: one ABBA block, one look at 95 %, its exit code is compare's.

    The steps (0.8 s) are well above compare's 0.5 s minimum, so the look compares all four
    levels of every run.  (With 0.5 s steps each step's span came out just under or just over
    0.5 s at random: the look compared nothing, or compare refused runs whose usable steps
    differed and the job exited 2 with nothing on stdout.)
    """
    url_a, pid_a = nginx
    out = tmp_path / "seq"
    rc = cli.main(
        ["ramp", "--ab", url_a, nginx_b.url, "--until-decided", "--max-repeats", "2", "-o", str(out)]
        + ["--concurrency", "1:7:2", "--step-duration", "0.8s", "--pause", "0s"]
        + ["--cpu-pid-a", str(pid_a), "--cpu-pid-b", str(nginx_b.pid), "--label-a", "v1", "--label-b", "v2"]
    )
    captured = capsys.readouterr()
    assert rc in (0, 3), captured.err  # A/A: a "regressed" (1) is a false alarm, never accepted
    job = yaml.safe_load((out / "ab.yml").read_text())
    assert [r["folder"] for r in job["runs"]] == ["v1-01", "v2-01", "v2-02", "v1-02"]
    assert meta(out / "v2-01")["label"] == "v2-01" and meta(out / "v2-01")["ab"]["side"] == "b"
    assert captured.out.strip() == f"headroom compare --baseline {out}/v1-* --candidate {out}/v2-*"
    for name in ("v1-01", "v2-01", "v2-02", "v1-02"):  # independent: every step is long enough to use
        spans = [
            (max(t + r * 1e9 for t, r, _ in s) - min(t for t, _, _ in s)) / 1e9 for s in sections(out / name)
        ]
        assert len(spans) == 4 and min(spans) > 0.6, (name, spans)
    (look,) = job["looks"]
    assert look["runs_per_side"] == [2, 2] and look["confidence"] == 0.95
    assert job["sequential"]["max_looks"] == 1 and job["sequential"]["per_look_confidence"] == 0.95
    assert rc == look["exit_code"] in (0, 3)
    assert rc == _compare_rc(out, "0.95", "v1", "v2")
    assert job["status"] == ("undecided" if rc == 3 else "decided")
    assert meta(out / "v2-02")["ab"]["sequential"]["per_look_confidence"] == 0.95


def test_until_decided_decides_a_slow_server(nginx, slow_nginx, tmp_path, capsys):
    """A 1 KB file against a 10 ms upstream: regressed at the first look, no more runs recorded."""
    url_a, pid_a = nginx
    out = tmp_path / "slow"
    rc = cli.main(
        ["ramp", "--ab", url_a, slow_nginx.url, "--until-decided", "--max-repeats", "4", "-o", str(out)]
        + ["--concurrency", "2:8:2", "--step-duration", "1s", "--pause", "0s"]
        + ["--cpu-pid-a", str(pid_a), "--cpu-pid-b", str(slow_nginx.pid)]
    )
    err = capsys.readouterr().err
    job = yaml.safe_load((out / "ab.yml").read_text())
    assert rc == 1, err
    assert [r["folder"] for r in job["runs"]] == ["a-01", "b-01", "b-02", "a-02"]  # stopped at look 1 of 2
    (look,) = job["looks"]
    assert look["verdict"] == "regressed" and look["confidence"] == pytest.approx(0.975)
    assert job["status"] == "decided" and "look 1/2" in err
    assert _compare_rc(out, "0.975") == 1
    # independent: the slow side's median latency is far above the fast side's
    fast = sorted(r[1] for s in sections(out / "a-01") for r in s)
    slow = sorted(r[1] for s in sections(out / "b-01") for r in s)
    assert slow[len(slow) // 2] > 0.0095 > 5 * fast[len(fast) // 2]


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--ab", "http://127.0.0.1:1/", "ftp://x/"], "bad URL"),
        (
            ["http://127.0.0.1:1/", "--ab", "http://127.0.0.1:1/", "http://127.0.0.1:2/"],
            "URL is not for --ab",
        ),
        (["--ab", "http://127.0.0.1:1/", "http://127.0.0.1:2/", "--cpu-pid", "1"], "--cpu-pid-a/--cpu-pid-b"),
        (["--ab", "http://127.0.0.1:1/", "http://127.0.0.1:2/", "--label-a", "x", "--label-b", "x"], "clash"),
        (["--ab", "http://127.0.0.1:1/", "http://127.0.0.1:2/", "--label-a", "a/b"], "bad --label-a"),
        (["--ab", "http://127.0.0.1:1/", "http://127.0.0.1:2/", "--repeats", "0"], "bad --repeats"),
        (["--ab", "http://127.0.0.1:1/", "http://127.0.0.1:2/", "--repeats", "101"], "at most 100"),
        (
            ["--ab", "http://127.0.0.1:1/", "http://127.0.0.1:2/", "--max-repeats", "4"],
            "is for --until-decided",
        ),
        (
            ["--ab", "http://127.0.0.1:1/", "http://127.0.0.1:2/", "--until-decided", "--repeats", "2"],
            "--max-repeats",
        ),
        (
            ["--ab", "http://127.0.0.1:1/", "http://127.0.0.1:2/", "--until-decided", "--max-repeats", "1"],
            "at least 2",
        ),
        (
            ["--ab", "http://127.0.0.1:1/", "http://127.0.0.1:2/", "--until-decided", "--confidence", "1.5"],
            "bad --confidence",
        ),
        (["--ab", "http://127.0.0.1:1/", "http://127.0.0.1:2/", "--pause", "soon"], "--pause"),
        (
            [
                "--ab",
                "http://127.0.0.1:1/",
                "http://127.0.0.1:2/",
                "--until-decided",
                "--step-duration",
                "0.5s",
            ],
            "--step-duration 0.5s: compare leaves steps shorter than 0.5 s out",
        ),
        (
            ["--ab", "http://127.0.0.1:1/", "http://127.0.0.1:2/", "--cpu-pid-b", "999999999"],
            "--cpu-pid-b 999999999: no such process",
        ),
        (
            ["--ab", "http://127.0.0.1:1/", "http://127.0.0.1:2/", "--cpu-pid-a", "x"],
            "bad --cpu-pid-a 'x'",
        ),
        (["--ab", "http://127.0.0.1:1/", "http://127.0.0.1:2/"], "cannot reach"),
        (["http://127.0.0.1:1/", "--repeats", "2"], "--repeats is for an A/B job"),
        (["http://127.0.0.1:1/", "--cpu-pid-a", "1"], "--cpu-pid-a is for an A/B job"),
        ([], "give the URL"),
    ],
)
def test_ab_bad_usage(tmp_path, capsys, args, fragment):
    _need("hey")
    assert cli.main(["ramp", *args, "-o", str(tmp_path / "x")]) == 2
    assert fragment in _one_line_error(capsys)
    assert not (tmp_path / "x").exists()


def test_ab_server_b_down_writes_nothing(nginx, tmp_path, capsys):
    url_a, _ = nginx
    port = _free_port()
    assert cli.main(["ramp", "--ab", url_a, f"http://127.0.0.1:{port}/", "-o", str(tmp_path / "x")]) == 2
    assert f"cannot reach http://127.0.0.1:{port}/" in _one_line_error(capsys)
    assert not (tmp_path / "x").exists()


def test_abba_order_and_look_confidence():
    from headroom.ramp.ab import abba_order, per_look_confidence

    assert "".join(abba_order(4)) == "abbaabba"
    assert "".join(abba_order(3)) == "abbaab"
    assert per_look_confidence(0.95, 3) == pytest.approx(1 - 0.05 / 3)

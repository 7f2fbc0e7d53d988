"""``headroom ramp`` against a real nginx with real hey, on loopback.

The nginx fixture starts nginx (Debian package) with a throwaway config in a
temporary folder and stops it by its PID.  Without nginx or hey these tests
are skipped, unless HEADROOM_REQUIRE_NGINX=1 (set by .ci/run), which makes a
missing binary a failure.  Every check reads the run folder with the csv
module and plain arithmetic, never with headroom's own reader, except the
last one, which checks that ``headroom summary`` reads what ramp wrote.
"""

from __future__ import annotations

import calendar
import csv
import json
import os
import re
import shutil
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

from headroom import cli
from headroom.ramp import Recorder, Step, parse_levels, rfc3339_ns
from headroom.ramp.engines import Hey, Oha, StepPlan, Vegeta, go_duration

ROOT = Path(__file__).resolve().parent.parent
REQUIRE = os.environ.get("HEADROOM_REQUIRE_NGINX") == "1"
NGINX = shutil.which("nginx") or next(
    (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(p, os.X_OK)), None
)
HEY = shutil.which("hey")
GOBIN = Path(os.environ.get("GOPATH", Path.home() / "go")) / "bin"
VEGETA = shutil.which("vegeta") or shutil.which("vegeta", path=str(GOBIN))
OHA = shutil.which("oha") or shutil.which("oha", path=str(Path.home() / ".cargo" / "bin"))
HEY_MISSING = (
    "headroom: error: hey not found on PATH: install it with 'apt-get install hey' (Debian/Ubuntu) "
    "or 'go install github.com/rakyll/hey@latest'"
)
TS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{9})Z$")


def _need(path: str | None, what: str) -> None:
    if path is None:
        msg = f"{what} is not installed (apt-get install {what}); .ci/run installs it"
        if REQUIRE:
            pytest.fail(msg + " and HEADROOM_REQUIRE_NGINX=1")
        pytest.skip(msg)


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


@pytest.fixture(scope="module")
def nginx(tmp_path_factory):
    """A real nginx on 127.0.0.1:<free port> serving a 1024-byte file: yields (url, master pid)."""
    _need(NGINX, "nginx")
    _need(HEY, "hey")
    d = tmp_path_factory.mktemp("nginx")
    (d / "www").mkdir()
    (d / "www" / "index.html").write_text("x" * 1023 + "\n")
    port = _free_port()
    user = "user root;\n" if os.geteuid() == 0 else ""  # workers must read the 0700 tmp folder
    temp = "".join(
        f"    {k}_temp_path {d}/{k};\n" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    (d / "nginx.conf").write_text(
        f"{user}daemon off;\nmaster_process on;\nworker_processes 1;\n"
        f"pid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n"
        "events { worker_connections 1024; }\n"
        f"http {{\n    access_log {d}/access.log;\n{temp}"
        f"    server {{\n        listen 127.0.0.1:{port};\n        root {d}/www;\n    }}\n}}\n"
    )
    proc = subprocess.Popen(
        [NGINX, "-p", str(d), "-c", str(d / "nginx.conf"), "-e", str(d / "error.log")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/index.html"
    try:
        deadline = time.monotonic() + 10
        while True:
            if proc.poll() is not None:
                pytest.fail(f"nginx exited: {proc.stderr.read().decode(errors='replace')}")
            try:
                if _get(url) == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("nginx did not answer within 10 s")
            time.sleep(0.05)
        yield url, proc.pid
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGQUIT)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
        proc.stderr.close()


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
    assert m["step_errors"] == [None, None, None]  # hey -z: transport errors are unknown
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


@pytest.mark.parametrize("presses", [1, 2])
def test_ramp_ctrl_c(nginx, tmp_path, presses):
    """Ctrl-C in step 2: once, step 2 completes and the ramp stops; twice, step 2 is dropped."""
    url, master = nginx
    out = tmp_path / "int"
    proc = _ramp_proc(url, out, "--concurrency", "1:9:4", "--step-duration", "2s", "--cpu-pid", str(master))
    try:
        _wait_for_line(proc, "step 1/3")
        time.sleep(0.5)  # well inside step 2
        for _ in range(presses):
            os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does: the whole foreground group
            time.sleep(0.2)
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
    if HEY is None and "--engine" not in args:
        _need(HEY, "hey")
    assert cli.main(["ramp", *args, "-o", str(tmp_path / "x")]) == 2
    assert fragment in _one_line_error(capsys)


def test_output_not_empty(tmp_path, capsys):
    _need(HEY, "hey")
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "keep.txt").write_text("mine")
    assert cli.main(["ramp", "http://127.0.0.1:1/", "-o", str(tmp_path / "x")]) == 2
    assert "not empty" in _one_line_error(capsys)
    assert (tmp_path / "x" / "keep.txt").read_text() == "mine"


def test_server_down(tmp_path, capsys):
    _need(HEY, "hey")
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
        f'if [ "$n" = 0 ]; then exec {HEY} "$@"; fi\n'
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
    assert time.monotonic() - t0 < 15
    assert rc == 1
    m = meta(out)
    assert m["concurrency"] == [1] and m["interrupted"] is False
    assert "step 2" in m["stopped_early"] and "step limit" in m["stopped_early"]
    assert [len(s) for s in sections(out)] == m["step_requests"]
    assert "stopped early" in capsys.readouterr().err


# --------------------------------------------------------------------------
# vegeta and oha, when installed (not in CI)


def _with_bin(monkeypatch, path: str | None, what: str) -> None:
    if path is None:
        pytest.skip(f"{what} is not installed")
    monkeypatch.setenv("PATH", f"{Path(path).parent}{os.pathsep}{os.environ['PATH']}")


@pytest.mark.parametrize("engine", ["vegeta", "oha"])
def test_other_engines(nginx, tmp_path, monkeypatch, engine):
    _with_bin(monkeypatch, VEGETA if engine == "vegeta" else OHA, engine)
    url, master = nginx
    closed, opened = tmp_path / "closed", tmp_path / "open"
    args = ["--engine", engine, "--step-duration", "1s", "--cpu-pid", str(master)]
    assert cli.main(["ramp", url, "-o", str(closed), "--concurrency", "1:5:4", *args]) == 0
    assert cli.main(["ramp", url, "-o", str(opened), "--rate", "200:400:200", *args]) == 0
    for out in (closed, opened):
        secs = sections(out)
        m = meta(out)
        assert [len(s) for s in secs] == m["step_requests"] and len(secs) == 2
        assert all(code == 200 for s in secs for _, _, code in s)
        for prev, cur in zip(secs, secs[1:]):
            assert min(r[0] for r in cur) >= max(r[0] for r in prev) - 1_000_000
    m = meta(opened)
    assert m["rates"] == [200, 400] and "lower_concurrency" not in m
    # a fixed rate: about rate x 1 s requests per step
    assert [len(s) for s in sections(opened)] == pytest.approx([200, 400], rel=0.1)


# --------------------------------------------------------------------------
# pieces, without a server


def test_parse_levels():
    assert parse_levels("1:40:3", "--concurrency") == (1, 40, 3, list(range(1, 41, 3)))
    assert parse_levels("1:41:3", "--concurrency")[1] == 40  # the highest level reached
    assert parse_levels("4", "--concurrency")[3] == [4]
    assert parse_levels("2:5", "--concurrency")[3] == [2, 3, 4, 5]


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

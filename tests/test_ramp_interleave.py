"""``headroom ramp --ab --interleave steps`` against two real nginx servers with a real hey.

A and B alternate within every concurrency level; each side is a normal run
folder with the design in metadata, the server's CPU seconds read at every
step's edges (``step_cpu_s``), and ``headroom compare`` judges the level
pairs.  Checked independently: the step order from the recorded launch
times, the CPU seconds against psutil's reading of the servers over the
whole job, the compare design and its exit code.  Skipped without nginx or
hey unless HEADROOM_REQUIRE_NGINX=1 or HEADROOM_REQUIRE_TOOLS=1 (set by .ci/run).
"""

from __future__ import annotations

import calendar
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
import yaml
from conftest import need_tool

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def servers():
    need_tool("nginx")  # looked up now, not at import: a tool installed meanwhile is found
    need_tool("hey")
    sys.path.insert(0, str(ROOT / "scripts"))
    import record_calibration as rc  # the calibration's nginx pairs: a proxy in front of a backend

    work = Path(tempfile.mkdtemp(prefix="headroom-il-test-"))
    pairs = []
    try:
        for _ in range(2):
            pairs.append(rc.Pair("keepalive", work).start())
        yield pairs
    finally:
        for p in pairs:
            p.stop()
        shutil.rmtree(work, ignore_errors=True)


def _ramp(args, timeout=120):
    return subprocess.run(
        [sys.executable, "-m", "headroom", "ramp", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


def _ns(text: str) -> int:
    whole, frac = text.rstrip("Z").split(".")
    return calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) * 10**9 + int(frac.ljust(9, "0"))


def _cpu(pids) -> float:
    total = 0.0
    for pid in pids:
        root = psutil.Process(pid)
        for p in [root, *root.children(recursive=True)]:
            t = p.cpu_times()
            total += t.user + t.system
    return total


def test_interleaved_recording(servers, tmp_path):
    a, b = servers
    out = tmp_path / "il"
    before = [_cpu(a.pids), _cpu(b.pids)]
    p = _ramp(
        ["--ab", a.url, b.url, "--interleave", "steps", "-o", out, "--concurrency", "1:7:3"]
        + ["--step-duration", "1s", "--progress"]
        + [f"--cpu-pid-a={x}" for x in a.pids]
        + [f"--cpu-pid-b={x}" for x in b.pids]
    )
    after = [_cpu(a.pids), _cpu(b.pids)]
    assert p.returncode == 0, p.stderr
    meta = {k: yaml.safe_load((out / f"{k}-01" / "metadata.yml").read_text()) for k in "ab"}
    job = yaml.safe_load((out / "ab.yml").read_text())
    assert job["design"] == "interleaved steps" and [r["folder"] for r in job["runs"]] == ["a-01", "b-01"]
    for k, other in (("a", "b-01"), ("b", "a-01")):
        ab = meta[k]["ab"]
        assert ab["design"] == "interleaved steps" and ab["recording"] == 1 and ab["pair"] == other
        # two pairs a level (the default): every level twice, ABBA at the first, BAAB at the next
        assert meta[k]["concurrency"] == [1, 1, 4, 4, 7, 7] and meta[k]["steps"] == 6
        assert ab["pairs_per_level"] == 2
        # history groups runs by sha: the job and side, so a-01 of two jobs are never one release
        assert meta[k]["label"] == f"{k}-01" and meta[k]["sha"] == f"il/{k}"
    # the recorded launch times follow the stated order: ABBA, BAAB, ABBA
    order = meta["a"]["ab"]["step_order"]
    assert order == ["AB", "BA", "BA", "AB", "AB", "BA"]
    la = [_ns(t) for t in meta["a"]["step_start_times"]]
    lb = [_ns(t) for t in meta["b"]["step_start_times"]]
    ea = [_ns(t) for t in meta["a"]["step_end_times"]]
    eb = [_ns(t) for t in meta["b"]["step_end_times"]]
    for k, o in enumerate(order):
        first_end, second_start = (ea[k], lb[k]) if o == "AB" else (eb[k], la[k])
        assert first_end <= second_start  # one side's step ends before the other's starts
    # exact CPU per step: the servers' CPU seconds read at every step's edges add up to what
    # psutil saw over the whole job, less the idle time between steps (nginx idles at ~0)
    for k, side in enumerate("ab"):
        steps = meta[side]["step_cpu_s"]
        total = after[k] - before[k]
        # a 1 s step at concurrency 1 on a busy machine may take under the kernel's 10 ms CPU tick
        assert len(steps) == 6 and all(s >= 0 for s in steps) and sum(s > 0 for s in steps) >= 4
        assert 0.8 * total - 0.03 <= sum(steps) <= total + 0.03, (steps, total)
    # compare recognises the recording and judges the level pairs (A/A: never an alarm)
    c = subprocess.run(
        [
            sys.executable,
            "-m",
            "headroom",
            "compare",
            out / "a-01",
            out / "b-01",
            "--json",
            tmp_path / "c.json",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    doc = json.loads((tmp_path / "c.json").read_text())
    assert c.returncode in (0, 3) and doc["settings"]["design"] == "interleaved steps", c.stdout
    assert "interleaved recording" in c.stdout
    cpu = next(m for m in doc["metrics"] if m["key"] == "cpu_s_per_req")
    # its per-side value is the geometric mean over the levels of step_cpu_s / requests
    import math

    both = [k for k in range(6) if meta["a"]["step_cpu_s"][k] > 0 and meta["b"]["step_cpu_s"][k] > 0]

    def geo(side):  # over the pairs with CPU on both sides (a step read as 0 s has no log)
        cpu_s, req = meta[side]["step_cpu_s"], meta[side]["step_requests"]
        return math.exp(sum(math.log(cpu_s[k] / req[k]) for k in both) / len(both))

    assert cpu["baseline"] == pytest.approx(geo("a"), rel=1e-3)
    assert cpu["candidate"] == pytest.approx(geo("b"), rel=1e-3)  # a bias in the change shows here
    assert cpu["candidate"] / cpu["baseline"] - 1 == pytest.approx(cpu["change"], rel=1e-4, abs=2e-5)


def test_interleaved_until_decided_looks_after_every_recording(servers, tmp_path):
    a, b = servers
    out = tmp_path / "seq"
    p = _ramp(
        ["--ab", a.url, b.url, "--interleave", "steps", "--until-decided", "--max-repeats", "2"]
        + ["-o", out, "--concurrency", "1:7:3", "--step-duration", "1s", "--pause", "0"]
        + [f"--cpu-pid-a={x}" for x in a.pids]
        + [f"--cpu-pid-b={x}" for x in b.pids],
        timeout=240,
    )
    job = yaml.safe_load((out / "ab.yml").read_text())
    looks = job["looks"]
    assert p.returncode == looks[-1]["exit_code"] and p.returncode in (0, 3), p.stderr
    assert [lk["runs_per_side"] for lk in looks] == [[k, k] for k in range(1, len(looks) + 1)]
    assert looks[0]["confidence"] == pytest.approx(1 - 0.05 / 2)  # two possible looks
    # stopped at the first decided look, or ran both recordings
    decided = [lk["verdict"] != "inconclusive" for lk in looks]
    assert decided[:-1] == [False] * (len(looks) - 1) and (decided[-1] or len(looks) == 2)


def test_interleave_is_for_ab_only(tmp_path):
    p = _ramp(["http://127.0.0.1:9/", "-o", tmp_path / "x", "--interleave", "steps"])
    assert p.returncode == 2 and "--interleave is for an A/B job" in p.stderr


def test_exclude_pid_is_not_foreign_load(servers, tmp_path):
    """A busy process named with --exclude-pid (part of the system under test) is not foreign load.

    Two foreign-load meters sampled over the same interval, one told to exclude a spinning
    process: they differ by that process's CPU time (psutil, read independently), and the
    CLI takes the option (a bad PID is one line and exit 2).
    """
    from headroom.ramp.cpu import HostLoad, ProcessTree

    a, _ = servers
    spin = subprocess.Popen(
        [sys.executable, "-c", "import time\nt = time.time() + 60\nwhile time.time() < t: pass"],
        stdin=subprocess.DEVNULL,
    )
    try:
        proc = psutil.Process(spin.pid)
        while proc.cpu_times().user < 0.2:  # it runs: wait on its CPU time
            time.sleep(0.02)
        plain, excluding = HostLoad(None), HostLoad(ProcessTree([spin.pid]))
        t0, c0 = psutil.cpu_times(), sum(proc.cpu_times()[:2])
        time.sleep(1.0)
        plain.sample(0.0)
        excluding.sample(0.0)
        t1, c1 = psutil.cpu_times(), sum(proc.cpu_times()[:2])
        total = sum(t1) - sum(t0) - (t1.guest - t0.guest) - (t1.guest_nice - t0.guest_nice)
        spun = 100.0 * (c1 - c0) / total
        diff = plain.rows[-1].foreign_pct - excluding.rows[-1].foreign_pct
        assert spun > 5 and diff == pytest.approx(spun, abs=3.0), (diff, spun)
        p = _ramp(
            [a.url, "-o", tmp_path / "x", "--concurrency", "1", "--step-duration", "1s"]
            + [f"--cpu-pid={x}" for x in a.pids]
            + [f"--exclude-pid={spin.pid}"]
        )
        assert p.returncode == 0, p.stderr
    finally:
        spin.kill()
        spin.wait()
    bad = _ramp([a.url, "-o", tmp_path / "y", "--exclude-pid", "0"])
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--exclude-pid" in bad.stderr

"""The server's run-queue waits per step (Linux schedstat), measured on real busy processes."""

import os
import subprocess
import sys
import time

import pytest

from headroom.ramp.cpu import ProcessTree, RunDelay

BUSY = "import time\nt = time.time() + {s}\nwhile time.time() < t: pass\n"

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="Linux /proc only")


def _busy(seconds: float, cpu: int) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", BUSY.format(s=seconds)])
    os.sched_setaffinity(p.pid, {cpu})
    return p


def test_a_busy_process_is_always_on_a_cpu_or_waiting_for_one():
    """An always-runnable thread: time on a CPU plus time waiting adds up to the wall time."""
    cpu = sorted(os.sched_getaffinity(0))[-1]
    server = _busy(3.0, cpu)
    try:
        time.sleep(0.3)
        meter = RunDelay(ProcessTree([server.pid]))
        assert meter.available
        meter.start()
        t0 = time.monotonic()
        time.sleep(1.5)
        run, wait = meter.stop()
        wall = time.monotonic() - t0
    finally:
        server.kill()
        server.wait()
    assert run + wait == pytest.approx(wall, rel=0.15)


def test_a_competitor_on_the_same_cpu_shows_as_waiting():
    """Two busy processes on one CPU: each waits about half the time (more if the machine is busy)."""
    cpu = sorted(os.sched_getaffinity(0))[-1]
    server, hog = _busy(3.0, cpu), _busy(3.0, cpu)
    try:
        time.sleep(0.3)
        meter = RunDelay(ProcessTree([server.pid]))
        meter.start()
        time.sleep(1.5)
        run, wait = meter.stop()
    finally:
        for p in (server, hog):
            p.kill()
            p.wait()
    assert wait / (run + wait) > 0.3  # a fair share leaves it waiting ~50 %
    assert run / (run + wait) < 0.7


def test_without_pids_nothing_is_measured():
    meter = RunDelay(None)
    meter.start()
    assert meter.stop() is None

#!/usr/bin/env python3
"""A CPU hog that holds the machine's foreign load near a target: the other jobs of a busy CI runner.

``cpu_hog.py`` spins at a seeded duty whatever else runs, so the foreign load a recording sees
depends on what else the machine does.  This one measures, every cycle, the CPU that processes
other than itself, the servers (``--exclude-pid``, with their children) and the load generator
(``--exclude-name``, e.g. hey and headroom) used, as a share of the whole machine, and spins
``--workers`` processes just enough to bring that share to ``--target`` percent.  The workers
alternate busy and idle slices of 100 ms; the cycle length is drawn per cycle from 1-10 s
(seeded) and the duty jittered by +-``--jitter``, so the load comes and goes in bursts as other
jobs do.  It stops after ``--duration`` seconds (at most 4 hours) or on SIGTERM/SIGINT and prints
one line per cycle and a last line with the foreign share it held.

    python3 scripts/load_hog.py --target 70 --duration 900 --seed 5 --exclude-pid 1234 \\
        --exclude-name hey --exclude-name headroom &
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import signal
import sys
import time

import psutil

MAX_DURATION_S = 4 * 3600
SLICE_S = 0.1


def _args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", type=float, required=True, help="foreign CPU to hold, %% of the machine")
    p.add_argument("--duration", type=float, required=True, help="stop after this many seconds")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1, help="spinning processes (one per CPU)"
    )
    p.add_argument(
        "--exclude-pid", type=int, action="append", default=[], help="a server process (and children)"
    )
    p.add_argument(
        "--exclude-name", action="append", default=[], help="processes whose command line has this"
    )
    p.add_argument("--jitter", type=float, default=0.15, help="duty jitter per cycle (0.15)")
    a = p.parse_args(argv)
    if not 0 < a.duration <= MAX_DURATION_S:
        p.error(f"--duration must be in (0, {MAX_DURATION_S}]")
    if not 0 <= a.target <= 100:
        p.error("--target is a percentage of the machine, 0-100")
    return a


def _worker(duty, stop) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    x = 0
    while not stop.value:
        busy = SLICE_S * max(0.0, min(1.0, duty.value))
        end = time.monotonic() + busy
        while time.monotonic() < end:
            for _ in range(2000):
                x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        if SLICE_S - busy > 0:
            time.sleep(SLICE_S - busy)


def _excluded(a, own: set[int]) -> set[int]:
    pids = set(own)
    for pid in a.exclude_pid:
        try:
            root = psutil.Process(pid)
            pids |= {root.pid, *(c.pid for c in root.children(recursive=True))}
        except psutil.Error:
            pass
    if a.exclude_name:
        for p in psutil.process_iter(["cmdline"]):
            cmd = " ".join(p.info["cmdline"] or [])
            if any(n in cmd for n in a.exclude_name):
                pids.add(p.pid)
    return pids


def _cpu_s(pids: set[int]) -> float:
    """CPU seconds of the processes and of their children that have exited and been waited for: a
    generator started per step (hey under headroom) is gone by the end of a cycle, and its CPU is
    found only in its parent's children times (without them the hog took it for foreign load)."""
    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
        except psutil.Error:
            pass
    return total


def _machine_busy_s() -> float:
    t = psutil.cpu_times()
    return (
        t.user
        + t.nice
        + t.system
        + t.irq
        + t.softirq
        + getattr(t, "steal", 0.0)
        + getattr(t, "guest", 0.0) * 0
    )


def main(argv=None) -> int:
    a = _args(argv)
    rng = random.Random(a.seed)
    stop = mp.Value("b", 0)
    duties = [mp.Value("d", 0.0) for _ in range(a.workers)]
    procs = [mp.Process(target=_worker, args=(d, stop), daemon=True) for d in duties]
    for p in procs:
        p.start()
    own = {os.getpid(), *(p.pid for p in procs)}
    done = [False]
    signal.signal(signal.SIGTERM, lambda *_: done.__setitem__(0, True))
    signal.signal(signal.SIGINT, lambda *_: done.__setitem__(0, True))
    ncpu = psutil.cpu_count() or 1
    t0 = time.monotonic()
    held, cycles, want = 0.0, 0, a.target / 100.0
    duty = 0.5
    while not done[0] and time.monotonic() - t0 < a.duration:
        cycle = rng.uniform(1.0, 10.0)
        jit = rng.uniform(-a.jitter, a.jitter)
        for d in duties:
            d.value = max(0.0, min(0.95, duty + jit))
        ex = _excluded(a, own)
        b0, e0, h0, w0 = _machine_busy_s(), _cpu_s(ex - own), _cpu_s(own), time.monotonic()
        while not done[0] and time.monotonic() - w0 < cycle and time.monotonic() - t0 < a.duration:
            time.sleep(0.1)
        wall = time.monotonic() - w0
        busy = _machine_busy_s() - b0
        servers = _cpu_s(ex - own) - e0
        mine = _cpu_s(own) - h0
        others = max(0.0, busy - servers - mine) / (wall * ncpu)  # share of the machine, without me
        got = max(0.0, busy - servers) / (wall * ncpu)  # foreign share with me
        held += got * wall
        cycles += 1
        # the share my workers must add: spread over them (each can give 1/ncpu of the machine)
        duty = max(0.0, min(0.95, (want - others) * ncpu / a.workers))
        print(f"load_hog: t={time.monotonic() - t0:7.1f}s others {100 * others:5.1f}% foreign {100 * got:5.1f}% "
              f"next duty {duty:.2f}", file=sys.stderr, flush=True)  # fmt: skip
    stop.value = 1
    for p in procs:
        p.join(timeout=2)
    total = time.monotonic() - t0
    print(f"load_hog: seed {a.seed}: target {a.target:g}%, held {100 * held / max(total, 1e-9):.1f}% of the machine "
          f"as foreign load over {total:.0f} s ({cycles} cycles)", file=sys.stderr, flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""A seeded, time-varying CPU hog: the other jobs of a shared CI machine, on demand.

One process, one thread.  It alternates busy bursts (a spinning loop) and
idle gaps (sleep).  For every cycle it draws, from its own seeded random
generator, a duty d in [--min-duty, --max-duty] and a busy burst length in
[--min-burst, --max-burst] seconds; the idle gap is burst * (1 - d) / d,
clipped to the same range.  Over a cycle it uses about d of one core; the
load switches on and off every 1-10 s as other jobs do.  Pin it with
``taskset -c CPU`` to the core it should disturb.

It stops after --duration seconds (required, at most 4 hours), or on
SIGTERM/SIGINT, and prints to stderr one line per burst and, at the end,
its own CPU time (psutil-free: os.times) and the realised duty.

    taskset -c 1 python3 scripts/cpu_hog.py --seed 17 --duration 600 &
    hog=$!; ...; kill "$hog"
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import time

MAX_DURATION_S = 4 * 3600


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, required=True, help="seed of the burst schedule")
    p.add_argument("--duration", type=float, required=True, help="stop after this many seconds")
    p.add_argument("--min-duty", type=float, default=0.3, help="lowest busy share of a cycle (0.3)")
    p.add_argument("--max-duty", type=float, default=0.7, help="highest busy share of a cycle (0.7)")
    p.add_argument("--min-burst", type=float, default=1.0, help="shortest burst or gap, s (1)")
    p.add_argument("--max-burst", type=float, default=10.0, help="longest burst or gap, s (10)")
    p.add_argument("--quiet", action="store_true", help="no line per burst")
    a = p.parse_args(argv)
    if not 0 < a.duration <= MAX_DURATION_S:
        p.error(f"--duration must be in (0, {MAX_DURATION_S}] seconds")
    if not 0 < a.min_duty <= a.max_duty <= 1:
        p.error("need 0 < --min-duty <= --max-duty <= 1")
    if not 0 < a.min_burst <= a.max_burst:
        p.error("need 0 < --min-burst <= --max-burst")
    return a


def _spin(until: float, stop: list[bool]) -> None:
    x = 0
    while not stop[0] and time.monotonic() < until:
        for _ in range(2000):  # check the clock every ~0.1 ms, not every operation
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF


def main(argv: list[str] | None = None) -> int:
    a = _args(argv)
    stop = [False]

    def _stop(signum, frame):
        stop[0] = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    rng = random.Random(a.seed)
    t0 = time.monotonic()
    end = t0 + a.duration
    busy_s = 0.0
    while not stop[0] and time.monotonic() < end:
        duty = rng.uniform(a.min_duty, a.max_duty)
        on = rng.uniform(a.min_burst, a.max_burst)
        off = min(a.max_burst, max(a.min_burst, on * (1 - duty) / duty))
        if not a.quiet:
            print(
                f"cpu_hog: t={time.monotonic() - t0:7.1f}s duty {duty:.2f} busy {on:4.1f}s idle {off:4.1f}s",
                file=sys.stderr,
                flush=True,
            )
        s = time.monotonic()
        _spin(min(end, s + on), stop)
        busy_s += time.monotonic() - s
        gap_end = min(end, time.monotonic() + off)
        while not stop[0] and time.monotonic() < gap_end:
            time.sleep(min(0.1, max(0.0, gap_end - time.monotonic())))
    wall = time.monotonic() - t0
    t = os.times()
    print(
        f"cpu_hog: seed {a.seed}: {wall:.1f}s wall, busy {busy_s:.1f}s, CPU {t.user + t.system:.1f}s "
        f"({100 * (t.user + t.system) / wall:.0f}% of one core)",
        file=sys.stderr,
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

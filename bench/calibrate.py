"""Calibration of `headroom compare` on seeded synthetic ramps with host noise.

Each comparison is a baseline and a candidate from tests/synthetic.py (USL
server, 14 steps of 1-5 s at concurrency 1, 4, ... 40; lognormal noise per
run 5 %, per step 12 %, per second 10 %, per request 30 %), the candidate's
server `slowdown` times slower.  Prints, per true change and runs per side,
how many comparisons said each verdict: false alarms on no change, power on
a known change.

Usage: python3 bench/calibrate.py [--seeds 100]
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import synthetic  # noqa: E402

from headroom import analyze  # noqa: E402
from headroom.compare import compare_runs  # noqa: E402

VERDICTS = ("regressed", "improved", "no change", "inconclusive")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=100)
    args = ap.parse_args()
    t0 = time.perf_counter()
    print("| true change | runs per side | " + " | ".join(VERDICTS) + " |")
    print("|---|---|" + "---|" * len(VERDICTS))
    for slow in (1.0, 1.1, 1.25, 1.5):
        for runs in (1, 3):
            count = collections.Counter()
            for seed in range(args.seeds):
                base = [analyze(synthetic.ramp(2 * runs * seed + i)) for i in range(runs)]
                cand = [
                    analyze(synthetic.ramp(2 * runs * seed + runs + i, slowdown=slow)) for i in range(runs)
                ]
                count[compare_runs(base, cand).verdict] += 1
            what = "none" if slow == 1.0 else f"{slow:g}x slower"
            cells = " | ".join(f"{count[v]}" for v in VERDICTS)
            print(f"| {what} | {runs} | {cells} |", flush=True)
    print(f"\n{args.seeds} seeds per row, {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

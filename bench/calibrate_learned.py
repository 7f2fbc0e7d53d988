"""Calibration of `headroom compare --noise-from` on a quiet machine: noise learned from 6 A/A runs.

The issue's case: runs recorded apart (no interleaving), one run per side,
the between-run noise learned from six earlier runs of an unchanged build,
on a machine where a run differs from the next by 5-8 % (tests/synthetic.py
with ``run`` and ``cpu_run`` set to 5 % and 8 %; the other noise terms as
measured on real runs).  For each comparison a baseline run, a candidate
run (unchanged, or a server 1.5x slower in latency and CPU per request) and
six learning runs are drawn without overlap from seeded pools.  Two changes: the
server 1.5x slower in latency and CPU per request, and 1.5x slower in
throughput and latency at unchanged CPU per request (issue 37: a latency-led
change the error budget must not starve).  Judged with
the server's CPU and without it (as a k6, JMeter, Gatling, vegeta, oha or
hey run has none).

Prints one row per (noise, change, CPU): the verdicts' counts, the false
alarm or catch rate and its Clopper-Pearson 95 % bounds.

Usage: python3 bench/calibrate_learned.py [--comparisons 200]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import synthetic  # noqa: E402
from calibrate import Pool  # noqa: E402

from headroom import analyze  # noqa: E402
from headroom.compare import compare_runs  # noqa: E402

VERDICTS = ("regressed", "improved", "no regression", "no change", "inconclusive")
LEARN = 6


def bounds(k: int, n: int) -> tuple[float, float]:
    from scipy.stats import beta

    lo = 0.0 if k == 0 else float(beta.ppf(0.025, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(0.975, k + 1, n - k))
    return lo, hi


def pools(noise: float, seed0: int):
    nz = {"run": noise, "cpu_run": noise}
    runs = lambda s, slow, k: [  # noqa: E731
        synthetic.ramp(s + i, noise=nz, slowdown=slow) for i in range(k)
    ]
    a = runs(seed0, 1.0, 160)
    b = runs(seed0 + 50_000, 1.5, 60)
    c = [synthetic.ramp(seed0 + 90_000 + i, noise=nz, slowdown=1.5, cpu_slowdown=1.0) for i in range(60)]
    strip = lambda r: dataclasses.replace(r, cpu=None)  # noqa: E731
    pool = lambda rs, f: Pool([analyze(f(r)) for r in rs])  # noqa: E731
    keep = lambda r: r  # noqa: E731
    return {
        cpu: (pool(a, f), {"1.5x slower": pool(b, f), "1.5x slower, same CPU": pool(c, f)})
        for cpu, f in (("with", keep), ("without", strip))
    }


def row(noise: float, change: str, cpu: str, verdicts: list[str]) -> str:
    c = collections.Counter(verdicts)
    n = len(verdicts)
    k = c["regressed"] + c["improved"] if change == "none" else c["regressed"]
    lo, hi = bounds(k, n)
    what = "false alarms" if change == "none" else "caught"
    cells = " | ".join(str(c[v]) for v in VERDICTS)
    return (
        f"| {noise:.0%} | {change} | {cpu} | {n} | {cells} | {k / n:.1%} {what} (95 %: {lo:.1%}-{hi:.1%}) |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--comparisons", type=int, default=200, help="comparisons per row (200)")
    ap.add_argument("--noise", type=float, nargs="+", default=[0.05, 0.08], help="run noise (0.05 0.08)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    head = "| run noise | change | server CPU | comparisons | " + " | ".join(VERDICTS) + " | rate |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for j, noise in enumerate(args.noise):
        for cpu, (a, bs) in pools(noise, 70_000 + 1_000 * j).items():
            rng = random.Random(j)
            for change in ("none", "1.5x slower", "1.5x slower, same CPU"):
                got = []
                for _ in range(args.comparisons):
                    x = a.draw(rng, 1)
                    y = a.draw(rng, 1, exclude=x) if change == "none" else bs[change].draw(rng, 1)
                    learn = a.draw(rng, LEARN, exclude=x + y)
                    got.append(compare_runs(x, y, noise_from=learn).verdict)
                print(row(noise, change, cpu, got), flush=True)
    print(f"\n({time.perf_counter() - t0:.0f} s; {LEARN} learning runs drawn apart from the compared pair)")


if __name__ == "__main__":
    main()

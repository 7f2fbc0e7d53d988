"""Benchmark: the per-endpoint summary of a 5-name run against the summary of the same run with one name.

Generates (once, cached under bench/_data/) two headroom.locust request files of the same rows
(default 1,000,000 requests in 10 stages of 1..10 users, latencies from a gamma, 1 % failures):
``names5`` spreads the requests over five names (/api/v1/items 40 %, /api/v2/cart 25 %,
/api/v1/search 20 %, /login 10 %, /static/app.js 5 %), ``names1`` gives every request the one
name /api/v1/items.  Then, interleaved and repeated, it runs as separate processes

  one name      : headroom summary names1.csv --json /dev/null
  five, per end : headroom summary names5.csv --endpoints --json /dev/null

and prints each one's best CPU time (user + system of the process) and wall time, and the CPU
ratio.  Target (issue 51): the per-endpoint summary of the five-name run at most 1.3x the
one-name summary's CPU.

Usage: python3 bench/bench_endpoints.py [--requests 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gzip
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DATA = HERE / "_data"
NAMES = ("/api/v1/items", "/api/v2/cart", "/api/v1/search", "/login", "/static/app.js")
SHARES = (0.40, 0.25, 0.20, 0.10, 0.05)


def generate(path: Path, n: int, names: tuple[str, ...], seed: int = 7) -> None:
    """A headroom.locust file: the run row, 10 stages (stage and users rows), n request rows, stop."""
    rng = np.random.default_rng(seed)
    stages = 10
    per = n // stages
    t0 = 1_795_826_135_888_649
    lines = ["event,time_us,stage,users,latency_us,status,ok,method,name,error",
             f"run,{t0},0,0,,,,local,headroom.locust 1; bench,"]  # fmt: skip
    t = t0
    tmp = path.with_suffix(".tmp")
    with gzip.open(tmp, "wt", compresslevel=1) as out:
        out.write("\n".join(lines) + "\n")
        for s in range(stages):
            users = s + 1
            out.write(f"stage,{t},{s},{users},,,,,,\nusers,{t + 1},{s},{users},,,,,,\n")
            lat = np.maximum(rng.gamma(3.0, 300.0 * (1 + s / 3), per).astype(np.int64), 50)
            start = t + 10 + np.sort(rng.integers(0, 6_000_000, per))
            pick = rng.choice(len(names), per, p=SHARES[: len(names)] / np.sum(SHARES[: len(names)]))
            failed = rng.random(per) < 0.01
            status = np.where(failed, 503, 200)
            ok = (~failed).astype(int)
            name = np.asarray(names, object)[pick]
            err = np.where(failed, "HTTPError(503)", "")
            rows = [
                f"request,{a},{s},{users},{b},{c},{d},GET,{e},{f}"
                for a, b, c, d, e, f in zip(
                    start.tolist(), lat.tolist(), status.tolist(), ok.tolist(), name, err
                )
            ]
            out.write("\n".join(rows) + "\n")
            t += 6_000_100
        out.write(f"stop,{t},{stages - 1},0,,,,,,\n")
    os.replace(tmp, path)


def cpu_of(cmd: list[str]) -> tuple[float, float]:
    """CPU seconds (user + system) and wall seconds of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - w0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    DATA.mkdir(exist_ok=True)
    files = {}
    for k, names in (("names1", NAMES[:1]), ("names5", NAMES)):
        p = DATA / f"endpoints-{k}-{a.requests}.csv.gz"
        if not p.exists():
            print(f"generating {p.name} ...", file=sys.stderr, flush=True)
            generate(p, a.requests, names)
        files[k] = p
    py = [sys.executable, "-m", "headroom", "summary"]
    runs = {"one name": py + [str(files["names1"]), "--json", os.devnull],
            "five, per endpoint": py + [str(files["names5"]), "--endpoints", "--json", os.devnull]}  # fmt: skip
    best = {k: (float("inf"), float("inf")) for k in runs}
    for _ in range(a.repeat):
        for k, cmd in runs.items():  # interleaved: the machine's load falls on both alike
            c, w = cpu_of(cmd)
            best[k] = (min(best[k][0], c), min(best[k][1], w))
    for k, (c, w) in best.items():
        print(f"{k:20s} CPU {c:6.2f} s   wall {w:6.2f} s")
    ratio = best["five, per endpoint"][0] / best["one name"][0]
    print(f"per-endpoint summary of 5 names / one-name summary, CPU: {ratio:.2f}x (target <= 1.3x)")
    return 0 if ratio <= 1.3 else 1


if __name__ == "__main__":
    sys.exit(main())

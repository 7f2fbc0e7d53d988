"""Benchmark: `headroom history` over many releases, cold and warm cache, 1 and 2 jobs.

Builds (once, under bench/_data/history/) N run folders of a realistic
1M-request ramp (bench_summary's generator): the perfResults.csv is one
file hard-linked into every folder, and each folder's metadata.yml names
its own release, so every run has its own content hash (no cache hit
between runs) while the disk holds one copy.  Then it times, as separate
processes, `headroom history` with:

  cold, 1 job   (empty cache: every run read and reduced)
  cold, 2 jobs
  warm          (every run from the cache)
  one new run   (cache holds N-1 runs: the added release is the only one read)

and prints the times and their ratios to the cold 1-job run (measured in
the same run of this script).

Usage: python3 bench/bench_history.py [--runs 100] [--requests 1000000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench_summary import generate

HERE = Path(__file__).resolve().parent


def build(runs: int, n_requests: int) -> list[Path]:
    root = HERE / "_data" / f"history-{n_requests}"
    src = root / "source" / "perfResults.csv"
    if not src.exists():
        src.parent.mkdir(parents=True, exist_ok=True)
        print(f"generating {n_requests:,} requests ...", flush=True)
        generate(src, n_requests)
    out = []
    for i in range(runs):
        d = root / f"r{i:03d}"
        d.mkdir(exist_ok=True)
        if not (d / "perfResults.csv").exists():
            os.link(src, d / "perfResults.csv")
            if (src.parent / "cpuStats.csv").exists():
                shutil.copy(src.parent / "cpuStats.csv", d / "cpuStats.csv")
        (d / "metadata.yml").write_text(f"sha: release-{i:03d}\nlower_concurrency: 1\nconcurrency_step: 1\n")
        out.append(d)
    return out


def timed(args: list[str]) -> float:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "headroom", "history", *args], capture_output=True, text=True)
    if p.returncode not in (0, 1):
        raise SystemExit(p.stderr)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--requests", type=int, default=1_000_000)
    args = ap.parse_args()
    runs = [str(p) for p in build(args.runs, args.requests)]
    cache = HERE / "_data" / "history-cache"
    rows = []
    for name, jobs in (("cold, 1 job", 1), ("cold, 2 jobs", 2)):
        shutil.rmtree(cache, ignore_errors=True)
        rows.append((name, timed([*runs, "--cache", str(cache), "--jobs", str(jobs)])))
    rows.append(("warm (all cached)", timed([*runs, "--cache", str(cache)])))
    (cache / next(p.name for p in cache.glob("*.json"))).unlink()  # forget one run
    rows.append(("one run not cached", timed([*runs, "--cache", str(cache)])))
    base = rows[0][1]
    print(f"\n{args.runs} runs of {args.requests:,} requests")
    print("| case | time | ratio to cold, 1 job |\n|---|---|---|")
    for name, t in rows:
        print(f"| {name} | {t:.1f} s | {t / base:.3f}x |")


if __name__ == "__main__":
    main()

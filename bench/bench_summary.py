"""Benchmark: `headroom summary` against a plain pyarrow parse of the same file.

Generates (once, cached under bench/_data/) a realistic throughputramp
perfResults.csv: 60 concurrency steps, ~5M requests, ~185 MB, Go-style
timestamps with trimmed trailing zeros, rows in completion order, latencies
with 4 decimals following a queueing curve, plus a 1 s cpuStats.csv.

Then, interleaved and repeated, it runs as separate processes:
  floor   : python -c "mmap the file, one pyarrow.csv.read_csv per section
             (zero-copy slices of pa.memory_map), start-time straight to
             timestamp[ns, UTC]"
  summary : headroom summary FILE --json /dev/null
and prints each one's best wall time, CPU time (user + system, all threads)
and peak RSS, and their ratios.  On a shared machine the wall ratio moves
with the load (both use more than one core when one is free); the CPU ratio
moves less.  Targets (issue 2): summary <= 1.3x the floor, peak RSS <= 2.5x
the file size; with --scale 10, the peak RSS of a 10x larger run <= 1.5x.
--steps 2 makes every step's section (92 MB at 5M rows) larger than the
64 MB chunk.

Usage: python3 bench/bench_summary.py [--requests 5000000] [--repeat 3] [--scale 10] [--steps 60]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DATA = HERE / "_data"

FLOOR = r"""
import mmap, sys
import pyarrow as pa, pyarrow.csv as pc
path = sys.argv[1]
f = open(path, "rb"); m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ); mv = memoryview(m)
header = bytes(m[: m.find(b"\n") + 1]); marker = b"\n" + header
starts = [0]; pos = 0
while True:
    i = m.find(marker, pos)
    if i < 0: break
    starts.append(i + 1); pos = i + 1
starts.append(len(m))
opts = pc.ConvertOptions(column_types={"start-time": pa.timestamp("ns", tz="UTC"), "response-time": pa.float64()})
whole = pa.memory_map(path).read_buffer()  # Arrow-owned: pa.py_buffer(mv) can abort at exit
n = 0
for a, b in zip(starts[:-1], starts[1:]):
    n += pc.read_csv(pa.BufferReader(whole.slice(a, b - a)), convert_options=opts).num_rows
print(n)
"""


def generate(path: Path, n_requests: int, steps: int = 60, seed: int = 1) -> None:
    """Write a realistic ramp: closed-loop steps 1..steps, ~equal requests per step."""
    rng = np.random.default_rng(seed)
    per_step = n_requests // steps
    xmax, l0, k = 95_000.0, 0.0004, 3.0
    t = np.int64(1_700_000_000 * 10**9)
    cpu_t, cpu_v = [], []
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as out:
        for c in range(1, steps + 1):
            # closed loop (Little's law): throughput x solves x = c / L(x), with
            # L(x) = l0 / (1 - (x/xmax)^k); x - c/L(x) rises from -c/l0 at 0 to xmax
            # at xmax, so bisection finds the one root
            lo, hi = 0.0, xmax
            for _ in range(100):
                x = (lo + hi) / 2
                if x - c * (1 - (x / xmax) ** k) / l0 < 0:
                    lo = x
                else:
                    hi = x
            mean_lat = c / x
            lat = np.maximum(np.round(rng.gamma(4.0, mean_lat / 4.0, per_step), 4), 0.0001)
            gaps = rng.exponential(1.0 / x, per_step)
            start = t + np.cumsum(np.rint(gaps * 1e9).astype(np.int64))
            done = start + np.rint(lat * 1e9).astype(np.int64)
            order = np.argsort(done, kind="stable")  # completion order
            out.write(b"start-time,response-time\n")
            for a in range(0, per_step, 1 << 20):  # formatted a slice at a time: a large step fits
                o = order[a : a + (1 << 20)]
                ts = np.datetime_as_string(start[o].astype("datetime64[ns]"), unit="ns")
                ts = np.char.rstrip(np.char.rstrip(ts, "0"), ".")
                lat_s = np.char.mod("%.4f", lat[o])
                lines = np.char.add(np.char.add(np.char.add(ts, "Z,"), lat_s), "\n")
                out.write("".join(lines.tolist()).encode())
            span_end = int(done.max())
            for s in range(int(t // 10**9) + 1, span_end // 10**9 + 1):
                cpu_t.append(s * 10**9)
                cpu_v.append(min(100.0, 3 + 90 * x / xmax + rng.normal(0, 1)))
            t = np.int64(span_end + 20_000_000)
    tmp.rename(path)
    with open(path.parent / "cpuStats.csv", "w") as f:
        f.write("timestamp,percentage\n")
        for a, v in zip(cpu_t, cpu_v):
            s = np.datetime_as_string(np.datetime64(a, "ns"), unit="ns")
            f.write(f"{s}Z,{v:.6f}\n")
    (path.parent / "metadata.yml").write_text(
        f'sha: "bench-{n_requests}"\nlower_concurrency: 1\nconcurrency_step: 1\nupper_concurrency: {steps}\n'
    )


def ensure_ramp(n_requests: int, steps: int = 60) -> Path:
    """The cached ramp folder of ``n_requests`` requests in ``steps`` steps, generated on first use."""
    folder = DATA / (f"ramp-{n_requests}" if steps == 60 else f"ramp-{n_requests}-{steps}steps")
    folder.mkdir(parents=True, exist_ok=True)
    perf = folder / "perfResults.csv"
    if not perf.exists():
        print(f"generating {n_requests:,} requests into {perf} ...", flush=True)
        t0 = time.perf_counter()
        generate(perf, n_requests, steps)
        print(f"  done in {time.perf_counter() - t0:.1f} s", flush=True)
    return folder


def measure(cmd: list[str]) -> tuple[float, float, float]:
    """Wall seconds, peak RSS (MB) and CPU seconds (user + system) of one child process."""
    # bytecode caches as an installed package has them (this environment may set PYTHONDONTWRITEBYTECODE,
    # which makes every run compile headroom's modules again: about 0.2 s)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"benchmark command failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr.read().decode()}")
    p.stderr.close()
    return wall, ru.ru_maxrss / 1024.0, ru.ru_utime + ru.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=5_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--scale", type=int, default=0, help="also the peak RSS of a run this many times larger")
    ap.add_argument(
        "--steps",
        type=int,
        default=60,
        help="concurrency steps (2 makes sections larger than the 64 MB chunk)",
    )
    args = ap.parse_args()
    folder = ensure_ramp(args.requests, args.steps)
    perf = folder / "perfResults.csv"
    size_mb = perf.stat().st_size / 2**20
    floor_cmd = [sys.executable, "-c", FLOOR, str(perf)]
    summary_cmd = [sys.executable, "-m", "headroom", "summary", str(folder), "--json", os.devnull]
    measure(floor_cmd)  # warm the page cache
    measure(summary_cmd)  # and the bytecode cache
    results: dict[str, list[tuple[float, float, float]]] = {"floor": [], "summary": []}
    for _ in range(args.repeat):
        results["floor"].append(measure(floor_cmd))
        results["summary"].append(measure(summary_cmd))
    fw = min(w for w, _, _ in results["floor"])
    sw = min(w for w, _, _ in results["summary"])
    fc = min(c for _, _, c in results["floor"])
    sc = min(c for _, _, c in results["summary"])
    frss = max(r for _, r, _ in results["floor"])
    srss = max(r for _, r, _ in results["summary"])
    print(
        f"file: {perf.name}, {size_mb:.0f} MB, {args.requests:,} requests in {args.steps} steps; best of {args.repeat}"
    )
    print(f"floor   (pyarrow read_csv per section): {fw:6.2f} s  CPU {fc:5.2f} s  peak RSS {frss:6.0f} MB")
    print(f"summary (headroom summary)           : {sw:6.2f} s  CPU {sc:5.2f} s  peak RSS {srss:6.0f} MB")
    print(f"ratio summary/floor time : {sw / fw:.2f}x  (target <= 1.3x); CPU time {sc / fc:.2f}x")
    print(f"ratio summary RSS / file : {srss / size_mb:.2f}x  (target <= 2.5x)")
    if args.scale:
        big = ensure_ramp(args.requests * args.scale, args.steps)
        _, brss, _ = measure([sys.executable, "-m", "headroom", "summary", str(big), "--json", os.devnull])
        print(f"peak RSS at {args.scale}x the rows: {brss:6.0f} MB = {brss / srss:.2f}x  (target <= 1.5x)")


if __name__ == "__main__":
    main()

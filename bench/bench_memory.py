"""Peak memory of ``headroom summary`` per input format: 10x the requests should not mean 10x the memory.

    python3 bench/bench_memory.py                 # 300k and 3M requests per format (a few minutes)
    HEADROOM_BENCH_N=5000000 python3 bench/bench_memory.py   # 5M and 50M (long; ~30 GB of files)
    python3 bench/bench_memory.py jmeter-csv k6-csv           # some formats only

For every format the same synthetic ramp (bench_formats.py's writers: 3
steps, 1 % errors) is written at N and 10 N requests and read by
``headroom summary`` in a child process; printed: peak RSS (MB) of both,
their ratio (target: at most 1.5, memory bounded by the histograms, not
the rows) and the peak RSS over the file's size at 10 N.  The files are
written to a temporary folder and removed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_formats as BF  # noqa: E402

#: The child reports its own peak (VmHWM of its own memory map): ru_maxrss of a forked child also
#: counts the parent's pages from before exec, and this parent holds the writers' arrays.
CHILD = """
import os, sys
from headroom.cli import main
sys.stdout = open(os.devnull, "w")
rc = main(sys.argv[1:])
hwm = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:"))
sys.stderr.write(f"\\nHWM {int(hwm.split()[1]) / 1024:.1f} {rc}\\n")
"""


def peak_mb(args: list[str]) -> float:
    """Peak RSS (MB) of ``headroom ARGS`` in a fresh process."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    r = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True, env=env)
    last = r.stderr.strip().splitlines()[-1].split() if r.stderr.strip() else []
    if r.returncode != 0 or len(last) != 3 or last[0] != "HWM" or last[2] != "0":
        sys.exit(f"headroom {' '.join(args)} failed:\n{r.stderr[-2000:]}")
    return float(last[1])


N = int(os.environ.get("HEADROOM_BENCH_N", 300_000))

WRITERS = {
    "hey": (BF.write_hey, ".csv"),
    "vegeta-csv": (BF.write_vegeta_csv, ".csv"),
    "vegeta-json": (BF.write_vegeta_json, ".json"),
    "k6-csv": (BF.write_k6_csv, ".csv"),
    "k6-json": (BF.write_k6_json, ".json"),
    "jmeter-csv": (BF.write_jmeter_csv, ".jtl"),
    "jmeter-xml": (BF.write_jmeter_xml, ".xml"),
    "gatling": (BF.write_gatling, ".log"),
    "gatling-binary": (BF.write_gatling_binary, ".log"),
    "ab": (BF.write_ab, ".tsv"),
    "oha-csv": (BF.write_oha, ".csv"),
    "hlog": (BF.write_hlog, ".hlog"),
}


def main() -> None:
    names = sys.argv[1:] or list(WRITERS)
    print(f"peak RSS of headroom summary at {N:,} and {10 * N:,} requests (MB); target ratio <= 1.5")
    print(f"{'format':<12} {'RSS N':>8} {'RSS 10N':>8} {'ratio':>6} {'file 10N':>9} {'RSS/file':>9}")
    with tempfile.TemporaryDirectory(prefix="headroom-bench-mem-") as tmp:
        for name in names:
            write, ext = WRITERS[name]
            rss = []
            for n in (N, 10 * N):
                p = Path(tmp) / f"{name}-{n}{ext}"
                write(p, n)
                mb = peak_mb(["summary", str(p)])
                size = p.stat().st_size / 1e6
                p.unlink()
                rss.append(mb)
            print(f"{name:<12} {rss[0]:8.0f} {rss[1]:8.0f} {rss[1] / rss[0]:6.2f} {size:8.0f}M "
                  f"{rss[1] / size:9.2f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()

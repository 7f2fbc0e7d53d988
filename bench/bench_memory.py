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
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_formats as BF  # noqa: E402
from bench_summary import measure  # noqa: E402

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
    "oha-csv": (BF.write_oha, ".csv"),
}


def main() -> None:
    names = sys.argv[1:] or list(WRITERS)
    cmd = [sys.executable, "-m", "headroom", "summary"]
    print(f"peak RSS of headroom summary at {N:,} and {10 * N:,} requests (MB); target ratio <= 1.5")
    print(f"{'format':<12} {'RSS N':>8} {'RSS 10N':>8} {'ratio':>6} {'file 10N':>9} {'RSS/file':>9}")
    with tempfile.TemporaryDirectory(prefix="headroom-bench-mem-") as tmp:
        for name in names:
            write, ext = WRITERS[name]
            rss = []
            for n in (N, 10 * N):
                p = Path(tmp) / f"{name}-{n}{ext}"
                write(p, n)
                _, mb = measure([*cmd, str(p)])
                size = p.stat().st_size / 1e6
                p.unlink()
                rss.append(mb)
            print(f"{name:<12} {rss[0]:8.0f} {rss[1]:8.0f} {rss[1] / rss[0]:6.2f} {size:8.0f}M "
                  f"{rss[1] / size:9.2f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()

"""Stress: many `headroom summary` processes beside a CPU hog; count aborts at exit.

A rare SIGABRT ("terminate called without an active exception") was seen at
interpreter exit under heavy CPU load.  A core dump showed its cause: an
Arrow worker thread dropped the last reference to a ``pa.py_buffer`` over
Python memory while the interpreter was finalizing; the buffer's destructor
took the GIL, the finalizing interpreter ended the thread inside a noexcept
destructor, and C++ called std::terminate.  The readers now give pyarrow
Arrow-owned buffers only (``formats._scan.Buffer.arrow_slice``).  This runs
N summaries of good and bad inputs (hey-ramp.csv reproduced it about once
in 30-120 runs beside 4 hogs before the fix) while ``--hogs`` processes
spin, and reports every exit code other than 0 and 2.

Usage: python3 bench/stress_exit.py [-n 500] [--hogs 4]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _hog() -> None:
    x = 0
    while True:
        x = (x * 1103515245 + 12345) % 2**31


def _inputs(tmp: Path) -> list[Path]:
    data = ROOT / "tests" / "data" / "formats"
    bad = tmp / "perfResults.csv"
    rows = "".join(f"2024-01-02T03:04:{i % 60:02d}.{i:06d}Z,0.0010\n" for i in range(200_000))
    bad.write_text("start-time,response-time\n" + rows + "2024-01-02T03:05:00Z,x\n" + rows)
    return [
        data / "hey-ramp.csv",
        ROOT / "data" / "runs" / "nginx-keepalive",
        bad,
        data / "k6.json",
        data / "jmeter.csv",
    ]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=500)
    ap.add_argument("--hogs", type=int, default=4)
    args = ap.parse_args()
    hogs = [mp.Process(target=_hog, daemon=True) for _ in range(args.hogs)]
    for h in hogs:
        h.start()
    odd: dict[int, int] = {}
    try:
        with tempfile.TemporaryDirectory() as t:
            inputs = _inputs(Path(t))
            for i in range(args.n):
                p = subprocess.run([sys.executable, "-m", "headroom", "summary", str(inputs[i % len(inputs)]),
                                    "--json", "/dev/null"], capture_output=True, text=True)  # fmt: skip
                if p.returncode not in (0, 2):
                    odd[p.returncode] = odd.get(p.returncode, 0) + 1
                    print(f"#{i} {inputs[i % len(inputs)].name}: exit {p.returncode}: {p.stderr[-300:]!r}")
    finally:
        for h in hogs:
            h.terminate()
    print(f"{args.n} summaries beside {args.hogs} CPU hogs: unexpected exits {odd or 'none'}")
    return 1 if odd else 0


if __name__ == "__main__":
    sys.exit(main())

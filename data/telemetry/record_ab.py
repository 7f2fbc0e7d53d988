#!/usr/bin/env python3
"""Record interleaved A/A and A/B ramps of the Go test server with Prometheus scraping both
servers, and compare every recording twice: CPU from psutil (the recorder's --cpu-pid) and
CPU from Prometheus (``--prometheus``).  Prints the verdicts and writes them as JSON.

    python3 data/telemetry/record_ab.py OUT_DIR [SET ...]     # sets: aa, x2 (default: both)

Each recording is compared on its own (a-NN against b-NN), then all of a set's recordings
together (``--baseline a-* --candidate b-*``).

Environment: REPEATS (3), CONC (1:31:3), STEP (4s), GEN_CPU (0), SERVER_CPU (1).
Every process is started here, bounded in time and stopped by its PID.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from goserver import GoServer  # noqa: E402
from prometheus import Prometheus  # noqa: E402

REPEATS = os.environ.get("REPEATS", "3")
CONC = os.environ.get("CONC", "1:31:3")
STEP = os.environ.get("STEP", "4s")
GEN_CPU = os.environ.get("GEN_CPU", "0")
SERVER_CPU = int(os.environ.get("SERVER_CPU", "1"))
#: the Go variants of scripts/record_interleaved.py: x2 doubles CPU per request
SETS = {"aa": ({"work": 3000}, {"work": 3000}), "x2": ({"work": 3000}, {"work": 6430})}


def compare(a, b, extra: list[str]) -> dict:
    """``headroom compare`` of runs ``a`` against ``b`` (paths, or lists of paths)."""
    if isinstance(a, list):
        runs = ["--baseline", *map(str, a), "--candidate", *map(str, b)]
    else:
        runs = [str(a), str(b)]
    cmd = [sys.executable, "-m", "headroom", "compare", *runs, "--json", "-", *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    doc = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}
    return {
        "exit": r.returncode,
        "verdict": doc.get("verdict"),
        "error": r.stderr.strip()[-300:] if r.returncode == 2 else "",
    }


def record(out: Path, name: str) -> list[dict]:
    va, vb = SETS[name]
    dest = out / name
    with (
        GoServer(**va, cpu=SERVER_CPU, max_lifetime="20m") as a,
        GoServer(**vb, cpu=SERVER_CPU, max_lifetime="20m") as b,
    ):
        with Prometheus(
            {"a": f"127.0.0.1:{a.port}", "b": f"127.0.0.1:{b.port}"}, out / f"prom-{name}"
        ) as prom:
            prom.wait_for_target()
            cmd = ["taskset", "-c", GEN_CPU, sys.executable, "-m", "headroom", "ramp", "--ab", a.url, b.url,
                   "--interleave", "steps", "--repeats", REPEATS, "-o", str(dest), "--concurrency", CONC,
                   "--step-duration", STEP, "--pause", "2s", f"--cpu-pid-a={a.pid}", f"--cpu-pid-b={b.pid}"]  # fmt: skip
            subprocess.run(cmd, timeout=1200, check=True, stderr=subprocess.DEVNULL)
            time.sleep(3)  # the last scrapes
            rows = []
            prom_args = [
                "--prometheus",
                prom.url,
                "--prometheus-match",
                'job="a"',
                "--prometheus-match",
                'job="b"',
            ]
            side_a = sorted(dest.glob("a-*"))
            side_b = [dest / ("b-" + ra.name[2:]) for ra in side_a]
            for ra, rb in [*zip(side_a, side_b), (side_a, side_b)]:
                rec = "all" if isinstance(ra, list) else ra.name[2:]
                row = {"set": name, "recording": rec, "psutil": compare(ra, rb, []),
                       "prometheus": compare(ra, rb, prom_args)}  # fmt: skip
                print(json.dumps(row), flush=True)
                rows.append(row)
            return rows


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in sys.argv[2:] or list(SETS):
        rows += record(out, name)
    (out / "verdicts.json").write_text(json.dumps(rows, indent=1) + "\n")
    same = sum(
        r["psutil"]["verdict"] == r["prometheus"]["verdict"]
        and r["psutil"]["exit"] == r["prometheus"]["exit"]
        for r in rows
    )
    print(f"same verdict and exit code with psutil and Prometheus CPU: {same} of {len(rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

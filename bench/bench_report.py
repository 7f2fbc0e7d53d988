"""Benchmark: the CPU of ``headroom report`` against ``headroom compare`` of the same pair.

Both commands run as subprocesses of this script on the bundled pair
(data/runs/nginx-no-keepalive against nginx-keepalive, objective p99<=5ms),
alternating report, compare, report, compare...  Each is started through a
small wrapper that calls ``headroom.cli.main`` and prints its own process's
CPU (user + system) and that of the processes it waited for: for the report,
the notebook's kernel.  The interpreter's start is in both, and so is
Python's bytecode cache (an installed package has one): the commands run with
PYTHONPYCACHEPREFIX in a temporary folder (PYTHONDONTWRITEBYTECODE unset),
after one unmeasured run of each that fills it.  Printed: per
command the median CPU (and the report's split into parent and kernel), the
median wall time, and the report's CPU as a ratio to compare's, measured in
this one run.  Target (issue 40): report CPU <= 5x compare's.

Usage: python3 bench/bench_report.py [--repeat 5] [--figure-format png|svg]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAIR = [str(ROOT / "data" / "runs" / "nginx-no-keepalive"), str(ROOT / "data" / "runs" / "nginx-keepalive")]

WRAPPER = """
import json, resource, sys
from headroom.cli import main
code = main(sys.argv[1:])
me = resource.getrusage(resource.RUSAGE_SELF)
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"code": code, "self": me.ru_utime + me.ru_stime, "children": kids.ru_utime + kids.ru_stime}),
      file=sys.stderr)
"""


def measured(argv: list[str], env: dict) -> dict:
    """One command's exit code, its own CPU, its children's CPU and the wall time, in seconds."""
    t0 = time.perf_counter()
    p = subprocess.run(
        [sys.executable, "-c", WRAPPER, *argv], capture_output=True, text=True, cwd=ROOT, check=False, env=env
    )
    wall = time.perf_counter() - t0
    last = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ""
    try:
        doc = json.loads(last)
    except json.JSONDecodeError:
        sys.exit(f"bench_report: {' '.join(argv[:1])} failed (exit {p.returncode}): {p.stderr[-2000:]}")
    return {**doc, "wall": wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5, help="runs of each command (default: 5)")
    ap.add_argument("--figure-format", choices=("png", "svg"), default="png")
    args = ap.parse_args()
    reports, compares = [], []
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        out = str(Path(tmp) / "report.html")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        report = [
            "report",
            *PAIR,
            "--objective",
            "p99<=5ms",
            "-o",
            out,
            "--figure-format",
            args.figure_format,
        ]
        compare = ["compare", *PAIR, "--objective", "p99<=5ms"]
        measured(report, env), measured(compare, env)  # fill the bytecode cache
        for i in range(args.repeat):
            reports.append(measured(report, env))
            compares.append(measured(compare, env))
            print(
                f"  run {i + 1}/{args.repeat}: report {reports[-1]['self'] + reports[-1]['children']:.2f} s CPU, "
                f"compare {compares[-1]['self']:.2f} s CPU",
                file=sys.stderr,
                flush=True,
            )
    med = statistics.median
    r_parent, r_kernel = med(r["self"] for r in reports), med(r["children"] for r in reports)
    r_cpu = med(r["self"] + r["children"] for r in reports)
    c_cpu = med(c["self"] + c["children"] for c in compares)
    print(f"headroom report  ({args.figure_format}): CPU {r_cpu:.2f} s (parent {r_parent:.2f} s, kernel "
          f"{r_kernel:.2f} s), wall {med(r['wall'] for r in reports):.2f} s")  # fmt: skip
    print(f"headroom compare       : CPU {c_cpu:.2f} s, wall {med(c['wall'] for c in compares):.2f} s")
    print(f"report / compare CPU   : {r_cpu / c_cpu:.2f}x (median of {args.repeat} runs each; target <= 5x)")


if __name__ == "__main__":
    main()

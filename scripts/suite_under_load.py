#!/usr/bin/env python3
"""Run the test suite (or part of it) beside CPU hogs: the shared CI machine, on demand.

Starts ``--hogs`` copies of scripts/cpu_hog.py (seeded, one per core with
``taskset`` when it is there), runs ``python3 -m pytest`` with the arguments
after ``--`` (default: the whole suite, as CI runs it), stops every hog by its
PID, and prints one line: the time, pytest's own last line, the machine's load
average and the CPU each hog used.  The exit code is pytest's.

    scripts/suite_under_load.py                               # the full suite beside two hogs
    scripts/suite_under_load.py -- tests/test_stop.py -q      # one file
    scripts/suite_under_load.py --repeat 2 -- -m "not slow"   # the fast tier, twice
    scripts/suite_under_load.py --min-duty 0.9 --max-duty 1.0 -- tests/test_profiles_real.py

docs/testing.md quotes what it printed.  ``--log FILE`` keeps pytest's whole output.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOG = ROOT / "scripts" / "cpu_hog.py"
MAX_S = 4 * 3600


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="Everything after -- goes to pytest (default: the whole suite, -q).",
    )
    p.add_argument("--hogs", type=int, default=2, help="CPU hogs beside the suite (default: 2)")
    p.add_argument("--min-duty", type=float, default=0.5, help="a hog's lowest busy share (default: 0.5)")
    p.add_argument("--max-duty", type=float, default=1.0, help="a hog's highest busy share (default: 1.0)")
    p.add_argument(
        "--seed", type=int, default=38, help="seed of the first hog; the others +1, +2 (default: 38)"
    )
    p.add_argument("--repeat", type=int, default=1, help="run the suite this many times (default: 1)")
    p.add_argument("--log", type=Path, help="write pytest's whole output here (appended per repeat)")
    argv = sys.argv[1:] if argv is None else argv
    rest: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, rest = argv[:i], argv[i + 1 :]
    a = p.parse_args(argv)
    if a.hogs < 0 or a.repeat < 1:
        p.error("--hogs must be >= 0 and --repeat >= 1")
    a.pytest = rest or ["-q"]
    return a


def start_hogs(a: argparse.Namespace) -> list[subprocess.Popen]:
    cores = sorted(os.sched_getaffinity(0))
    taskset = shutil.which("taskset")
    hogs = []
    for i in range(a.hogs):
        cmd = [sys.executable, str(HOG), "--seed", str(a.seed + i), "--duration", str(MAX_S), "--quiet",
               "--min-duty", str(a.min_duty), "--max-duty", str(a.max_duty)]  # fmt: skip
        if taskset:
            cmd = [taskset, "-c", str(cores[i % len(cores)]), *cmd]
        hogs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    return hogs


def stop_hogs(hogs: list[subprocess.Popen]) -> list[str]:
    """SIGTERM every hog by its PID; each one's last line (its CPU and duty)."""
    said = []
    for h in hogs:
        if h.poll() is None:
            os.kill(h.pid, signal.SIGTERM)
    for h in hogs:
        try:
            _, err = h.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(h.pid, signal.SIGKILL)
            _, err = h.communicate()
        last = [x for x in err.splitlines() if x.strip()]
        said.append(last[-1].replace("cpu_hog: ", "") if last else f"hog {h.pid}: no report")
    return said


def run_once(a: argparse.Namespace, k: int) -> int:
    env = {**os.environ}
    env["PATH"] = os.pathsep.join([env.get("PATH", ""), "/usr/local/go/bin", str(Path.home() / "go" / "bin"),
                                   str(Path.home() / ".cargo" / "bin")])  # fmt: skip
    hogs = start_hogs(a)
    t0 = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", *a.pytest], cwd=ROOT, env=env,
                              capture_output=True, text=True)  # fmt: skip
    finally:
        wall = time.monotonic() - t0
        load = os.getloadavg()
        said = stop_hogs(hogs)
    out = done.stdout + done.stderr
    if a.log:
        with open(a.log, "a", encoding="utf-8") as f:
            f.write(f"===== run {k} of {a.repeat}: pytest {' '.join(a.pytest)}\n{out}\n")
    last = next((x for x in reversed(out.splitlines()) if re.search(r"passed|failed|error", x)), "?")
    print(
        f"run {k}/{a.repeat}: {wall / 60:.1f} min ({wall:.0f} s) beside {a.hogs} CPU hog(s) "
        f"(duty {a.min_duty:g}-{a.max_duty:g}); load average at the end {load[0]:.1f} {load[1]:.1f} "
        f"{load[2]:.1f}; pytest: {last.strip('= ')}",
        flush=True,
    )
    for s in said:
        print(f"  hog {s}", flush=True)
    failed = [x for x in out.splitlines() if x.startswith(("FAILED ", "ERROR "))]
    for x in failed:
        print(f"  {x}", flush=True)
    return done.returncode


def _terminate(signum, frame):
    raise SystemExit(128 + signum)  # unwinds run_once: pytest killed, every hog stopped by its PID


def main(argv: list[str] | None = None) -> int:
    a = _args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    if not HOG.is_file():
        print(f"suite_under_load: {HOG} is missing", file=sys.stderr)
        return 2
    codes = [run_once(a, k + 1) for k in range(a.repeat)]
    return next((c for c in codes if c != 0), 0)


if __name__ == "__main__":
    sys.exit(main())

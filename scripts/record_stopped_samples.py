#!/usr/bin/env python3
"""Record tests/data/stopped/: real hey ramps whose server dies at a chosen request.

The Go test server (testserver/, built by tests/goserver.py) is started with
``-crash-after-requests N``: it answers N requests to / and exits (code 3) when
request N + 1 arrives.  ``headroom ramp`` sends one GET before the ramp, so the
ramp's own request N is the server's N + 1.  Every server is pinned to CPU 1,
stopped by its PID; each ramp is bounded by its request counts.

    python3 scripts/record_stopped_samples.py tests/data/stopped

writes ``base`` (healthy, 1.5 s steps), ``died-in-step-1`` (100 of step 1's 300
requests answered, then dead) and ``died-at-step-3`` (dead at step 3's first
request: no response in that step), each with ``--gzip``; and two files of
another tool, vegeta run directly (three 1 s attacks at 50, 100 and 200 req/s,
``vegeta encode -to csv``): ``vegeta-base.csv`` and ``vegeta-died.csv`` (the
server answers 110 requests, so the second attack fails in part and the
third all along), and ``vegeta-503.csv`` (the server answers 503 from request
111 on: it fails, it does not stop answering).  The folder's README.md says what was recorded, with which
versions.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from goserver import GoServer  # noqa: E402

PLAN = ["--concurrency", "1:9:4"]
RUNS = {
    # name: (extra ramp options, server faults, expected exit code)
    "base": (["--step-duration", "1.5s"], {}, 0),
    "died-in-step-1": (["--requests-per-step", "300"], {"crash_after": 1 + 100}, 1),
    "died-at-step-3": (["--requests-per-step", "300"], {"crash_after": 1 + 600}, 1),
}


def vegeta_file(target: Path, **faults) -> None:
    """Three vegeta attacks (50, 100, 200 req/s for 1 s each) in one CSV, as a user would record them."""
    import os
    import tempfile

    vegeta = shutil.which("vegeta") or str(Path.home() / "go" / "bin" / "vegeta")
    with tempfile.TemporaryDirectory() as tmp, GoServer(work=2000, delay=0.002, cpu=1, **faults) as srv:
        bins = []
        for rate in (50, 100, 200):
            b = Path(tmp) / f"r{rate}.bin"
            with open(b, "wb") as f:
                subprocess.run([vegeta, "attack", f"-rate={rate}", "-duration=1s", f"-name=rate{rate}",
                                "-max-body=0"], input=f"GET {srv.url}\n".encode(), stdout=f, check=True,
                               timeout=60, env={**os.environ, "TZ": "UTC"})  # fmt: skip
            bins.append(str(b))
        with open(target, "wb") as f:
            subprocess.run([vegeta, "encode", "-to", "csv", *bins], stdout=f, check=True, timeout=60)
    print(f"{target.name}: {sum(1 for _ in open(target))} results", flush=True)


def main(out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    for name, (extra, faults, code) in RUNS.items():
        target = out / name
        shutil.rmtree(target, ignore_errors=True)
        with GoServer(work=2000, delay=0.002, cpu=1, **faults) as srv:
            cmd = [sys.executable, "-m", "headroom", "ramp", srv.url, "-o", str(target), *PLAN, *extra,
                   "--cpu-pid", str(srv.pid), "--gzip", "--label", name]  # fmt: skip
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        print(f"{name}: exit {done.returncode}\n{done.stderr.strip()}\n", flush=True)
        if done.returncode != code:
            print(f"record_stopped_samples: {name}: exit {done.returncode}, expected {code}", file=sys.stderr)
            return 1
    vegeta_file(out / "vegeta-base.csv")
    vegeta_file(out / "vegeta-died.csv", crash_after=110)
    vegeta_file(out / "vegeta-503.csv", fail_after=110)  # answers, with 503, from request 111 on
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "tests" / "data" / "stopped"))

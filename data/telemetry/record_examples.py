#!/usr/bin/env python3
"""Record the example runs in data/telemetry/ (see README.md there).

    python3 data/telemetry/record_examples.py [OUT_DIR]     # default: data/telemetry

Two releases of the Go test server that differ as GOGC does: ``go-gogc100`` (the default)
and ``go-gogc400`` (GOGC=400: fewer collections, more memory), both allocating 256 KiB per
request.  Each is recorded with ``headroom ramp --cpu-pid`` while a Prometheus started here
scrapes it every second; then ``headroom telemetry RUN --prometheus URL --force`` saves what
Prometheus had into the run folder (cpuStats.csv, memStats.csv, telemetry.json), so the runs
read offline; perfResults.csv is gzipped.  Every process is bounded in time and stopped by its PID.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from goserver import GoServer  # noqa: E402
from prometheus import Prometheus  # noqa: E402

VARIANTS = {"go-gogc100": {}, "go-gogc400": {"GOGC": "400"}}


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "data" / "telemetry"
    out.mkdir(parents=True, exist_ok=True)
    for name, env in VARIANTS.items():
        dest = out / name
        if dest.exists():
            shutil.rmtree(dest)
        with GoServer(work=3000, alloc=256 << 10, cpu=1, env=env, max_lifetime="5m") as srv:
            with Prometheus({"goserver": f"127.0.0.1:{srv.port}"}, out / f".prom-{name}") as prom:
                prom.wait_for_target()
                run = [sys.executable, "-m", "headroom", "ramp", srv.url, "-o", str(dest), "--concurrency", "1:16:3",
                       "--step-duration", "4s", "--cpu-pid", str(srv.pid), "--label", name]  # fmt: skip
                subprocess.run(run, check=True, timeout=300)
                time.sleep(3)
                tel = [sys.executable, "-m", "headroom", "telemetry", str(dest), "--prometheus", prom.url,
                       "--prometheus-match", 'job="goserver"', "--force"]  # fmt: skip
                subprocess.run(tel, check=True, timeout=120)
        shutil.rmtree(out / f".prom-{name}", ignore_errors=True)
        for f in ("hostCpuStats.csv", "generatorCpuStats.csv"):
            (dest / f).unlink(missing_ok=True)
        subprocess.run(["gzip", "-9", str(dest / "perfResults.csv")], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

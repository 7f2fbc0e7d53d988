#!/usr/bin/env python3
"""Record issue 51's endpoint sets in data/endpoints/ (see its README.md).

    python3 scripts/record_endpoints.py record SET    # ep-go-aa-45, ep-go-cart2x-45, ...
    python3 scripts/record_endpoints.py list

``record`` starts two Go test servers (testserver/, built by tests/goserver.py) pinned to CPU
$SERVER_CPU (1), every /api/ path doing -work 3000; in a "cart" set B's /api/v2/* paths do
-slow-work more rounds (one endpoint made slower).  Beside them scripts/load_hog.py holds the
foreign load near the set's target (everything but the servers, Locust and headroom).  Then
``headroom ramp --engine locust --locustfile scripts/locust/endpoints.py --ab A B --interleave
steps --pairs-per-level 2 --repeats N``, pinned to CPU $GEN_CPU (0): every step a Locust process
of three endpoints (/api/v1/items, /api/v2/cart, /api/v1/search), A and B alternating within every
level.  The hog and the servers are stopped by their PIDs; every run is bounded in time.  It
refuses to overwrite a set folder.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from goserver import GoServer  # noqa: E402

OUT = ROOT / "data" / "endpoints"
GEN_CPU = os.environ.get("GEN_CPU", "0")
SERVER_CPU = int(os.environ.get("SERVER_CPU", "1"))
CONC = "1:21:2"  # 11 levels
STEP = "2s"
WORK = 3000
#: set -> (extra rounds of B's /api/v2/ paths, recordings, foreign load target %, hog seed)
SETS = {
    "ep-go-aa-45": (0, 4, 45.0, 5101),
    "ep-go-cart2x-45": (WORK, 3, 45.0, 5102),
    "ep-go-aa-95": (0, 3, 95.0, 5111),
    "ep-go-cart2x-95": (WORK, 2, 95.0, 5112),
    # held out: recorded after the per-endpoint method was final (f49c8b6); not read by the tests
    "h1-go-aa-95": (0, 2, 95.0, 5121),
    "h1-go-cart2x-95": (WORK, 2, 95.0, 5122),
}


def record(name: str) -> int:
    slow, n, target, seed = SETS[name]
    dest = OUT / name
    if dest.exists():
        sys.exit(f"record_endpoints: {dest} exists; remove it to re-record")
    work = Path(tempfile.mkdtemp(prefix="headroom-ep-"))
    budget = n * 600 + 120
    b_args = ["-slow-prefix", "/api/v2/", "-slow-work", str(slow)] if slow else []
    with GoServer(work=WORK, cpu=SERVER_CPU) as a, GoServer(work=WORK, cpu=SERVER_CPU, extra_args=b_args) as b:
        hog_cmd = [sys.executable, str(ROOT / "scripts" / "load_hog.py"), "--target", f"{target:g}",
                   "--duration", str(budget), "--seed", str(seed), "--exclude-name", "locust",
                   "--exclude-name", "-m headroom ramp", f"--exclude-pid={a.pid}", f"--exclude-pid={b.pid}"]  # fmt: skip
        with open(work / "hog.log", "w") as log:
            hog = subprocess.Popen(hog_cmd, stdin=subprocess.DEVNULL, stderr=log, start_new_session=True)
        try:
            cmd = ["taskset", "-c", GEN_CPU, sys.executable, "-m", "headroom", "ramp", "--ab", a.url, b.url,
                   "--interleave", "steps", "--pairs-per-level", "2", "--repeats", str(n), "-o", str(dest),
                   "--engine", "locust", "--locustfile", str(ROOT / "scripts" / "locust" / "endpoints.py"),
                   "--concurrency", CONC, "--step-duration", STEP, "--pause", "1s", "--progress",
                   f"--cpu-pid-a={a.pid}", f"--cpu-pid-b={b.pid}",
                   "--description", f"endpoint set {name}: Go test server -work {WORK}, B's /api/v2/ "
                   f"+{slow} rounds; load_hog.py --target {target:g} --seed {seed}"]  # fmt: skip
            print("record_endpoints:", " ".join(cmd), file=sys.stderr, flush=True)
            env = {**os.environ, "PYTHONPATH": str(ROOT)}
            code = subprocess.run(cmd, cwd=ROOT, env=env, timeout=budget).returncode
        finally:
            if hog.poll() is None:
                hog.send_signal(signal.SIGTERM)
                hog.wait(timeout=10)
    (dest / "hog.log").write_text((work / "hog.log").read_text())
    for f in sorted(dest.glob("*/perfResults.csv")):
        subprocess.run(["gzip", "-9", str(f)], check=True)
    return code


def main(argv: list[str]) -> int:
    if argv == ["list"]:
        for k, (slow, n, target, seed) in SETS.items():
            print(f"{k:18s} B /api/v2/ +{slow} rounds, {n} recordings, foreign load {target:g} %, seed {seed}")
        return 0
    if len(argv) == 2 and argv[0] == "record" and argv[1] in SETS:
        return record(argv[1])
    sys.exit(f"usage: record_endpoints.py list | record SET (SET: {', '.join(SETS)})")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Record the interleaved calibration sets in data/calibration/interleaved/ (see its README.md).

    python3 scripts/record_interleaved.py record SET     # one set, e.g. aa, cpu25, x2, go-aa
    python3 scripts/record_interleaved.py list           # the sets and what they change

``record`` starts two servers on loopback (A and B: two nginx proxy+backend
pairs from scripts/record_calibration.py, or two Go test servers from
testserver/ built by tests/goserver.py), pinned to CPU $SERVER_CPU with a
seeded CPU hog (scripts/cpu_hog.py) beside them, and runs
``headroom ramp --ab --interleave steps --repeats N`` pinned to CPU $GEN_CPU
(hey inherits it): N recordings, A and B alternating within every
concurrency level.  Then it stops the hog and the servers by their PIDs and
gzips every perfResults.csv (-9).  Every process is bounded in time.  It
refuses to overwrite an existing set folder.

Environment: GEN_CPU (0), SERVER_CPU (1), CONC (1:31:3), STEP (2s), PAUSE (2s).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests"))

import record_calibration as rc  # noqa: E402

OUT = ROOT / "data" / "calibration" / "interleaved"
GEN_CPU = os.environ.get("GEN_CPU", "0")
SERVER_CPU = os.environ.get("SERVER_CPU", "1")
CONC = os.environ.get("CONC", "1:31:3")
STEP = os.environ.get("STEP", "2s")
PAUSE = os.environ.get("PAUSE", "2s")

CPU25 = "gzip1-access-log-headers-sub-filter"
#: Go test server variants: keyword arguments of tests/goserver.GoServer
GO = {
    "base": {"work": 20},
    "cpu20": {"work": 24},
    "x2": {"work": 40},
    "latency": {"work": 20, "delay": "1ms"},
}
#: set -> (server kind, A variant, B variant, recordings, hog seed)
SETS = {
    "aa": ("nginx", "keepalive", "keepalive", 16, 2601),
    "cpu25": ("nginx", "keepalive", CPU25, 8, 2602),
    "x2": ("nginx", "keepalive", "no-keepalive", 8, 2603),
    "go-aa": ("go", "base", "base", 16, 2611),
    "go-cpu20": ("go", "base", "cpu20", 8, 2612),
    "go-x2": ("go", "base", "x2", 8, 2613),
    "go-latency": ("go", "base", "latency", 8, 2614),
    "aa-2": ("nginx", "keepalive", "keepalive", 12, 2621),
}


class GoPair:
    """A Go test server standing in for one side (same interface as record_calibration.Pair)."""

    def __init__(self, variant: str, work: Path):
        self.variant = variant
        self.server = None

    def start(self) -> GoPair:
        from goserver import GoServer

        self.server = GoServer(**GO[self.variant], cpu=int(SERVER_CPU)).start()
        return self

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def pids(self) -> list[int]:
        return [self.server.pid]

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


def describe(name: str) -> str:
    kind, va, vb, n, seed = SETS[name]
    if kind == "nginx":
        what = (
            f"nginx {rc.nginx_version()} reverse proxy (1 worker) in front of a backend nginx (1 worker) "
            f"serving a 1024-byte file; A = proxy variant {va}, B = {vb}"
        )
    else:
        what = f"Go test server (testserver/, GOMAXPROCS=1); A = {GO[va]}, B = {GO[vb]}"
    return (
        f"interleaved calibration set {name}: {what}; servers and a seeded CPU hog "
        f"(scripts/cpu_hog.py --seed {seed}) on CPU {SERVER_CPU}, headroom and hey on CPU {GEN_CPU}; "
        "machine shared with other work"
    )


def record(name: str) -> int:
    kind, va, vb, n, seed = SETS[name]
    dest = OUT / name
    if dest.exists():
        sys.exit(f"record_interleaved: {dest} exists; remove it to re-record")
    work = Path(tempfile.mkdtemp(prefix="headroom-il-"))
    make = rc.Pair if kind == "nginx" else GoPair
    pairs: list = []
    hog = None
    budget = n * 90 + 120  # s: an 11-level recording of both sides takes about 55 s
    try:
        a = make(va, work).start()
        pairs.append(a)
        b = make(vb, work).start()
        pairs.append(b)
        hog = subprocess.Popen(
            ["taskset", "-c", SERVER_CPU, sys.executable, str(ROOT / "scripts" / "cpu_hog.py")]
            + ["--seed", str(seed), "--duration", str(budget)],
            stdin=subprocess.DEVNULL,
            stderr=open(work / "hog.log", "w"),
            start_new_session=True,
        )
        cmd = ["taskset", "-c", GEN_CPU, sys.executable, "-m", "headroom", "ramp", "--ab", a.url, b.url]
        cmd += ["--interleave", "steps", "--repeats", str(n), "-o", str(dest)]
        cmd += ["--concurrency", CONC, "--step-duration", STEP, "--pause", PAUSE]
        cmd += ["--description", describe(name), "--progress"]
        cmd += [f"--cpu-pid-a={p}" for p in a.pids] + [f"--cpu-pid-b={p}" for p in b.pids]
        print("record_interleaved:", " ".join(cmd), file=sys.stderr, flush=True)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with open(work / "record.log", "w") as log:
            log.write(" ".join(cmd) + "\n")
            log.flush()
            code = subprocess.run(cmd, cwd=ROOT, env=env, stderr=log, timeout=budget + 300).returncode
    finally:
        if hog is not None and hog.poll() is None:
            hog.send_signal(signal.SIGTERM)
            hog.wait(timeout=10)
        for p in pairs:
            p.stop()
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(work / "record.log", dest / "record.log")
    if kind == "nginx":
        rc.keep_configs(work, dest, pairs)
    elif (work / "hog.log").exists():
        shutil.copy(work / "hog.log", dest / "hog.log")
    for f in sorted(dest.glob("*/perfResults.csv")):
        subprocess.run(["gzip", "-9", str(f)], check=True)
    shutil.rmtree(work, ignore_errors=True)
    return code


def main(argv: list[str]) -> int:
    if argv[:1] == ["list"]:
        for name, (kind, va, vb, n, seed) in SETS.items():
            print(f"{name:12} {kind:6} A={va} B={vb} recordings={n} hog seed={seed}")
        return 0
    if len(argv) == 2 and argv[0] == "record" and argv[1] in SETS:
        return record(argv[1])
    sys.exit(f"usage: record_interleaved.py list | record {{{','.join(SETS)}}}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

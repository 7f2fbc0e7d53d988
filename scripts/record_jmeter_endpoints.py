#!/usr/bin/env python3
"""Record issue 51's JMeter endpoint sets in data/endpoints/ (see its README.md).

    python3 scripts/record_jmeter_endpoints.py record SET    # jm-go-aa-45, jm-go-cart10x-45
    python3 scripts/record_jmeter_endpoints.py list

``record`` starts two Go test servers (testserver/, built by tests/goserver.py) pinned to CPU
$SERVER_CPU (1), every /api/ path doing -work 3000; in the "cart" set B's /api/v2/* paths do -slow-work
27000 more rounds (one endpoint made slower: ten times the work).  Beside them scripts/load_hog.py holds the foreign load
near the set's target (everything but the servers and JMeter's JVM).  Then JMeter 5.6.3 (the jars of
scripts/jmeter/pom.xml from Maven Central, as scripts/make_real_samples.sh fetches them into
$TOOLS/jmeter-5.6.3) runs scripts/jmeter/endpoints.jmx.in, pinned to CPU $GEN_CPU (0), against A and
B in the order A B B A of every round (ABBA, so that a drift of the machine falls on both sides
alike): ``SET/RR-a1``, ``RR-b1``, ``RR-b2``, ``RR-a2``, each with its CSV JTL (``-l``, JMeter's
default columns), JMeter's own statistics per label (``statistics.json`` of its dashboard, ``-e -o``)
and its log.  The hog and the servers are stopped by their PIDs; every JMeter run is bounded in time.
It refuses to overwrite a set folder.

Environment: GEN_CPU (0), SERVER_CPU (1), TOOLS (~/.cache/headroom-tools).
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
sys.path.insert(0, str(ROOT / "tests"))

from goserver import GoServer  # noqa: E402

OUT = ROOT / "data" / "endpoints"
GEN_CPU = os.environ.get("GEN_CPU", "0")
SERVER_CPU = int(os.environ.get("SERVER_CPU", "1"))
TOOLS = Path(os.environ.get("TOOLS", Path.home() / ".cache" / "headroom-tools"))
JMETER = TOOLS / "jmeter-5.6.3" / "bin" / "ApacheJMeter.jar"
WORK = 3000
#: the stepping plan: 1, 2, ..., 12 threads, 3 s a step.  Runs recorded apart are judged per endpoint on
#: matched levels (headroom.compare.endpoints): 12 levels let a sign flip reach p = 2/4096, below what
#: Holm asks of the first of three endpoints' six metrics (6 levels could not: 2/64 > 0.05/6)
PLAN = {"LEVEL": 12, "STEPS": 12, "RAMP": 36, "HOLD": 3}
#: set -> (extra rounds of B's /api/v2/ paths, ABBA rounds, foreign load target %, hog seed)
SETS = {
    "jm-go-aa-45": (0, 3, 45.0, 5201),
    # the cart at twice the work (+0.23 ms, the Locust sets' change) is below JMeter's whole
    # milliseconds and its own ~3 ms a request here: one round of it (recorded, then stopped) showed the
    # cart's p50 +22 % [+0.1 %, +49 %] and called nothing; ten times the work (+2 ms) is a change JMeter
    # can time
    "jm-go-cart10x-45": (9 * WORK, 2, 45.0, 5203),
}


def jmx(port: int) -> str:
    text = (ROOT / "scripts" / "jmeter" / "endpoints.jmx.in").read_text()
    for k, v in {"PORT": port, **PLAN}.items():
        text = text.replace(f"@{k}@", str(v))
    return text


def run_jmeter(url: str, dest: Path, work: Path) -> int:
    """One JMeter run against ``url`` into ``dest``: results.csv (gzipped), statistics.json, jmeter.log."""
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    plan = work / "endpoints.jmx"
    plan.write_text(jmx(port))
    dest.mkdir(parents=True)
    report = work / "report"
    shutil.rmtree(report, ignore_errors=True)
    cmd = ["taskset", "-c", GEN_CPU, "java", "-jar", str(JMETER), "-n", "-t", str(plan),
           "-l", str(dest / "results.csv"), "-j", str(dest / "jmeter.log"), "-e", "-o", str(report)]  # fmt: skip
    bound = PLAN["RAMP"] + PLAN["HOLD"] + 120
    code = subprocess.run(cmd, cwd=work, timeout=bound, stdout=subprocess.DEVNULL).returncode
    shutil.copy(report / "statistics.json", dest / "statistics.json")
    (dest / "endpoints.jmx").write_text(plan.read_text())
    subprocess.run(["gzip", "-9", str(dest / "results.csv")], check=True)
    return code


def record(name: str) -> int:
    slow, rounds, target, seed = SETS[name]
    dest = OUT / name
    if dest.exists():
        sys.exit(f"record_jmeter_endpoints: {dest} exists; remove it to re-record")
    if not JMETER.exists():
        sys.exit(f"record_jmeter_endpoints: no {JMETER} (scripts/make_real_samples.sh jmeter fetches it)")
    work = Path(tempfile.mkdtemp(prefix="headroom-jm-"))
    b_args = ["-slow-prefix", "/api/v2/", "-slow-work", str(slow)] if slow else []
    budget = rounds * 4 * 180 + 60
    servers = {"work": WORK, "cpu": SERVER_CPU, "max_lifetime": "40m"}
    with GoServer(**servers) as a, GoServer(**servers, extra_args=b_args) as b:
        hog_cmd = [sys.executable, str(ROOT / "scripts" / "load_hog.py"), "--target", f"{target:g}",
                   "--duration", str(budget), "--seed", str(seed), "--exclude-name", "ApacheJMeter",
                   f"--exclude-pid={a.pid}", f"--exclude-pid={b.pid}"]  # fmt: skip
        with open(work / "hog.log", "w") as log:
            hog = subprocess.Popen(hog_cmd, stdin=subprocess.DEVNULL, stderr=log, start_new_session=True)
        try:
            for r in range(1, rounds + 1):
                for side, k in (("a", 1), ("b", 1), ("b", 2), ("a", 2)):
                    run = dest / f"{r:02d}-{side}{k}"
                    code = run_jmeter(a.url if side == "a" else b.url, run, work)
                    print(f"record_jmeter_endpoints: {run.relative_to(ROOT)}: exit {code}", flush=True)
                    if code:
                        return code
        finally:
            if hog.poll() is None:
                hog.send_signal(signal.SIGTERM)
                hog.wait(timeout=10)
    (dest / "hog.log").write_text((work / "hog.log").read_text())
    (dest / "servers.txt").write_text(
        f"A: Go test server -work {WORK}; B: the same{' with ' + ' '.join(b_args) if b_args else ''}; "
        f"both pinned to CPU {SERVER_CPU}; JMeter on CPU {GEN_CPU}; load_hog.py --target {target:g} --seed {seed}\n"
    )
    shutil.rmtree(work, ignore_errors=True)
    return 0


def main(argv: list[str]) -> int:
    if argv == ["list"]:
        for k, (slow, n, target, seed) in SETS.items():
            print(
                f"{k:18s} B /api/v2/ +{slow} rounds, {n} ABBA rounds, foreign load {target:g} %, seed {seed}"
            )
        return 0
    if len(argv) == 2 and argv[0] == "record" and argv[1] in SETS:
        return record(argv[1])
    sys.exit(f"usage: record_jmeter_endpoints.py list | record SET (SET: {', '.join(SETS)})")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

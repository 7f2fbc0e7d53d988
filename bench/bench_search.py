"""The search's time to a given precision against a fixed ramp's, measured in one run.

    python3 bench/bench_search.py                   # p99<=20ms, precision 10 %, about 4 minutes
    HEADROOM_BENCH_PRECISION=0.05 HEADROOM_BENCH_BUDGET=5m python3 bench/bench_search.py

One Go test server (testserver/, -work 3000, pinned to CPU $SERVER_CPU, default 1) is loaded by
two recordings made one after the other, headroom and its generator pinned to CPU $GEN_CPU (0):

* **fixed**: ``headroom ramp --concurrency 1:N:1`` (``HEADROOM_BENCH_RAMP``, default 1:32:1),
  3 s steps.  Its time to the precision is the end of the first step after which the steps so
  far give an interval of the throughput at the objective within +-P of the estimate (the same
  fit, :mod:`headroom.crossing`, on every prefix of the ramp; the requests' dispersion phi of
  the whole ramp);
* **search**: ``headroom ramp --find OBJECTIVE --precision P --budget B``; its time to the
  precision is its ``search.elapsed_s`` when it stopped for precision.

Printed: each one's time to the precision (or "not reached" and the half-width it ended with),
the ratio search / fixed, and, at the search's elapsed time, the fixed ramp's half-width then,
with the foreign CPU (other processes, percent of the machine) of each recording: on a shared
machine the ratio moves with the other work.
"""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

OBJ = os.environ.get("HEADROOM_BENCH_OBJECTIVE", "p99<=20ms")
PRECISION = float(os.environ.get("HEADROOM_BENCH_PRECISION", "0.10"))
BUDGET = os.environ.get("HEADROOM_BENCH_BUDGET", "150s")
RAMP = os.environ.get("HEADROOM_BENCH_RAMP", "1:32:1")
GEN_CPU = os.environ.get("GEN_CPU", "0")
SERVER_CPU = int(os.environ.get("SERVER_CPU", "1"))


def _ramp(args: list[str]) -> None:
    cmd = ["taskset", "-c", GEN_CPU, sys.executable, "-m", "headroom", "ramp", *args]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        sys.exit(f"bench_search: {' '.join(cmd)} exited {p.returncode}:\n{p.stderr[-2000:]}")


def _t(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def fixed_times(folder: Path) -> list[tuple[float, float | None]]:
    """(seconds since the ramp's start at the end of step k, half-width of the steps 0..k's interval)."""
    from headroom import analyze
    from headroom.crossing import crossing, curve, probes_of, run_dispersion
    from headroom.io import reduce_run
    from headroom.model import parse_objective

    obj = parse_objective(OBJ)
    s = analyze(reduce_run(str(folder)), objective=obj)
    meta = yaml.safe_load((folder / "metadata.yml").read_text())
    t0 = _t(meta["start_time"])
    phi, _ = run_dispersion(s.hist, s.buckets, s.table, obj)
    p = probes_of(s.table, obj, phi=phi)
    out = []
    for k, end in enumerate(meta["step_end_times"]):
        use = p.step <= k
        hw = None
        if use.sum() >= 2:
            part = type(p)(p.load[use], p.log_pct[use], p.var[use], p.log_rps[use], p.step[use])
            hw = crossing(curve(part, obj.bound_s), obj.bound_s).half_width
        out.append((_t(end) - t0, hw))
    return out


def main() -> int:
    from goserver import GoServer

    work = Path(tempfile.mkdtemp(prefix="headroom-bench-search-"))
    with GoServer(work=3000, cpu=SERVER_CPU, max_lifetime="40m") as srv:
        common = [srv.url, "--step-duration", "3s", f"--cpu-pid={srv.pid}"]
        _ramp([*common, "-o", str(work / "fixed"), "--concurrency", RAMP])
        _ramp(
            [
                *common,
                "-o",
                str(work / "search"),
                "--find",
                OBJ,
                "--precision",
                str(PRECISION),
                "--budget",
                BUDGET,
            ]
        )
    fixed = fixed_times(work / "fixed")
    ms = yaml.safe_load((work / "search" / "metadata.yml").read_text())
    mf = yaml.safe_load((work / "fixed" / "metadata.yml").read_text())
    s = ms["search"]
    reached_f = next((t for t, hw in fixed if hw is not None and hw <= PRECISION), None)
    t_s = s["elapsed_s"] if s["stopped"] == "precision" else None
    print(f"bench_search: {OBJ}, precision +-{100 * PRECISION:g} %, Go test server -work 3000")
    final_f = fixed[-1][1]
    print(
        f"  fixed ramp {RAMP} (3 s steps): "
        + (f"{reached_f:.1f} s to the precision" if reached_f is not None else "not reached")
        + f"; {len(fixed)} steps in {fixed[-1][0]:.1f} s, half-width at the end "
        + ("open" if final_f is None else f"{100 * final_f:.1f} %")
        + f"; foreign CPU {mf['foreign_cpu']['mean_percent']} % of the machine"
    )
    hw = s["estimate"]["half_width"] if s["estimate"] else None
    print(
        f"  search --find (budget {BUDGET}): "
        + (f"{t_s:.1f} s to the precision" if t_s is not None else f"not reached (stopped: {s['stopped']})")
        + f"; {len(s['probes'])} probes in {s['elapsed_s']:.1f} s, half-width at the end "
        + ("open" if hw is None else f"{100 * hw:.1f} %")
        + f"; foreign CPU {ms['foreign_cpu']['mean_percent']} % of the machine"
    )
    if reached_f is not None and t_s is not None:
        print(f"  ratio search / fixed (time to the precision): {t_s / reached_f:.2f}x")
    at = [hw for t, hw in fixed if t <= s["elapsed_s"]]
    then = at[-1] if at else None
    print(
        f"  the fixed ramp after the search's {s['elapsed_s']:.0f} s: half-width "
        + ("open" if then is None else f"{100 * then:.1f} %")
        + " (the search's: "
        + ("open" if hw is None else f"{100 * hw:.1f} %")
        + ")"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

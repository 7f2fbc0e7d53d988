"""The search's time to a given precision against a fixed ramp's, measured in one run.

    python3 bench/bench_search.py                   # p99<=20ms, precision 10 %, about 4 minutes
    HEADROOM_BENCH_PRECISION=0.05 HEADROOM_BENCH_BUDGET=5m python3 bench/bench_search.py
    python3 bench/bench_search.py --defaults        # issue 50: the search at its defaults, idle and
                                                    # beside a hog, against a dense 2 s ramp (4 minutes)

``--defaults`` (issue 50): on the Go test server, idle and then beside one seeded
``scripts/cpu_hog.py`` per CPU (duty 0.3-0.7), a dense reference ramp (1:32:1, 2 s steps) and right
after it ``headroom ramp --find OBJ`` with nothing else given.  Printed per load: the search's wall time
against the dense ramp's to its first step past its own crossing (their ratio), the precision reached
and why it stopped, both capacities and whether the search's interval covers the reference; the
foreign CPU of each.

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
sys.path.insert(0, str(ROOT / "scripts"))

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


def defaults() -> int:
    """Issue 50's comparison, idle and beside a hog, in one run (module docstring)."""
    import record_search as rs
    from goserver import GoServer

    from headroom import analyze
    from headroom.io import reduce_run

    objectives = {"idle": "p99<=10ms", "hog": "p99<=30ms"}
    print(
        "bench_search --defaults: Go test server -work 3000; dense 1:32:1 of 2 s steps, then --find at its defaults"
    )
    for load, obj in objectives.items():
        work = Path(tempfile.mkdtemp(prefix=f"headroom-bench-search-{load}-"))
        hogs = rs._hogs("ref6-go-hog", 99, work / "hog.log") if load == "hog" else []
        try:
            with GoServer(work=3000, cpu=SERVER_CPU, max_lifetime="20m") as srv:
                pid = f"--cpu-pid={srv.pid}"
                _ramp(
                    [
                        srv.url,
                        pid,
                        "--step-duration",
                        "2s",
                        "--concurrency",
                        "1:32:1",
                        "-o",
                        str(work / "dense"),
                    ]
                )
                _ramp([srv.url, pid, "--find", obj, "-o", str(work / "search")])
        finally:
            for h in hogs:
                h.terminate()
                h.wait(timeout=10)
        md, ms = (yaml.safe_load((work / k / "metadata.yml").read_text()) for k in ("dense", "search"))
        ref = analyze(reduce_run(str(work / "dense")), objective=obj).capacity.at_objective
        got = analyze(reduce_run(str(work / "search")), objective=obj).capacity.at_objective
        t_ref, t_s = rs._to_past(md, ref.load), rs._span_s(ms)
        s = ms["search"]
        covers = (
            ref.rps is not None
            and got.rps is not None
            and (got.low or 0) <= ref.rps <= (got.high or float("inf"))
        )
        reached = s.get("precision_reached")
        print(
            f"  {load:4} {obj}: search {t_s:.1f} s / dense to past its crossing {t_ref:.1f} s = {t_s / t_ref:.2f}; "
            f"{len(s['probes'])} probes, stopped: {s['stopped']}, precision reached "
            + ("open" if reached is None else f"±{100 * reached:.1f} %")
            + f"; capacity {got.rps or float('nan'):,.0f} req/s against the dense ramp's {ref.rps or float('nan'):,.0f} "
            + f"({'covered' if covers else 'not covered'}); foreign CPU {md['foreign_cpu']['mean_percent']} / "
            + f"{ms['foreign_cpu']['mean_percent']} %"
        )
    return 0


if __name__ == "__main__":
    sys.exit(defaults() if sys.argv[1:] == ["--defaults"] else main())

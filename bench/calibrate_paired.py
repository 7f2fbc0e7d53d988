"""Calibration of `headroom compare` on interleaved recordings (`ramp --ab --interleave steps`).

Two sources:

* **synthetic** (tests/synthetic.py ``interleaved``: both sides share the
  host's run and step factors, each level pair has its own noise, set so
  that the model matches the real A/A recordings of ``aa``: throughput 46 %,
  p99 75 %, CPU per request 6.7 % a pair): seeded recordings with no change,
  CPU per request +20 % (the server's work 1.2x: latency and CPU),
  2x slower, latency +30 % without more CPU, each with and without the
  server's CPU;
* **real** (``--real DIR``): DIR/<set>/{a,b}-NN of
  ``scripts/record_interleaved.py`` (data/calibration/interleaved): every
  recording compared 1 vs 1 (a-NN with b-NN), with the server's CPU and
  without it (as a k6, JMeter, Gatling, vegeta, oha or hey run has none).
  A/A sets are named ``aa...`` / ``go-aa...``.

Prints one row per (source, change, CPU): how many comparisons said each
verdict; "false alarms" are regressed + improved with no change, "exit 0"
is improved, no change or no regression, "caught" is regressed.

Usage: python3 bench/calibrate_paired.py [--seeds 200] [--real data/calibration/interleaved]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import synthetic  # noqa: E402

from headroom import reduce_run  # noqa: E402
from headroom.compare import compare_runs  # noqa: E402

VERDICTS = ("regressed", "improved", "no regression", "no change", "inconclusive")
SEQUENTIAL = False


def varies(c: float) -> float:
    """A change that varies with load: x0.2 of the throughput at c=1 rising to x0.9 at c=40 (linear in
    log concurrency), CPU unchanged: the server 5x slower at light load, 1.1x at the top."""
    import math

    f = 0.2 + 0.7 * math.log(c) / math.log(40)
    return 1.0 / f


#: synthetic changes: name -> (latency/work factor, CPU per request factor)
CHANGES = {
    "none": (1.0, 1.0),
    "CPU/request +20 %": (1.2, 1.2),
    "2x slower": (2.0, 2.0),
    "latency +30 %, same CPU": (1.3, 1.0),
    "x0.2 at c=1 to x0.9 at c=40, same CPU": (varies, 1.0),
}


#: what only a recorder that follows the server's processes writes: CPU and run-queue waits per step
SERVER_FIELDS = ("step_cpu_s", "step_sched_run_s", "step_sched_wait_s")


def no_cpu(run):
    """The run as a load generator alone records it (k6, JMeter, ...): no CPU, no schedstat."""
    if run.meta is None:
        return dataclasses.replace(run, cpu=None)
    fields = {k: v for k, v in run.meta.fields.items() if k not in SERVER_FIELDS}
    return dataclasses.replace(run, cpu=None, meta=dataclasses.replace(run.meta, fields=fields))


def upper95(k: int, n: int) -> float:
    """One-sided 95 % upper bound of a binomial rate (Clopper-Pearson), for 'k of n'."""
    from scipy.stats import beta

    return 1.0 if k >= n else float(beta.ppf(0.95, k + 1, n - k))


def row(source: str, what: str, cpu: str, verdicts: list[str]) -> str:
    c = collections.Counter(verdicts)
    n = len(verdicts)
    alarms = c["regressed"] + c["improved"]
    exit0 = c["improved"] + c["no regression"] + c["no change"]
    if what.startswith("none") or "aa" in what.split("-"):
        key = f"{alarms / n:.1%} false alarms (95 % upper {upper95(alarms, n):.1%}), exit 0 {exit0 / n:.0%}"
    else:
        key = f"{c['regressed'] / n:.1%} caught, wrong direction {c['improved']}"
    cells = " | ".join(str(c[v]) for v in VERDICTS)
    return f"| {source} | {what} | {cpu} | {n} | {cells} | {key} |"


def synthetic_rows(seeds: int, pairs: int) -> list[str]:
    out = []
    for what, (slow, cslow) in CHANGES.items():
        with_cpu, without = [], []
        for s in range(seeds):
            a, b = synthetic.interleaved(5000 + s, slowdown=slow, cpu_slowdown=cslow, pairs=pairs)
            with_cpu.append(compare_runs(a, b).verdict)
            without.append(compare_runs(no_cpu(a), no_cpu(b)).verdict)
        out += [row("synthetic", what, "with", with_cpu), row("synthetic", what, "without", without)]
    return out


#: --until-decided as headroom ramp runs it with --max-repeats 6: a look after every recording
MAX_LOOKS = 6


def sequential(recordings, cpu: bool) -> list[tuple[int, str]]:
    """Replay --until-decided --max-repeats 6 on the recorded order: consecutive sequences (the next
    starts where the last stopped), each looking after every recording at 1 - 0.05 / 6 and stopping
    at the first decided look.  Returns (recordings used, verdict) of each sequence."""
    out, start = [], 0
    runs = [(ra if cpu else no_cpu(ra), rb if cpu else no_cpu(rb)) for ra, rb in recordings]
    while start < len(runs):
        for n in range(1, MAX_LOOKS + 1):
            if start + n > len(runs):
                return out
            got = runs[start : start + n]
            c = compare_runs([a for a, _ in got], [b for _, b in got], confidence=1 - 0.05 / MAX_LOOKS)
            if c.verdict != "inconclusive" or n == MAX_LOOKS:
                out.append((n, c.verdict))
                break
        start += n
    return out


def real_rows(root: Path, only: str | None = None):
    for d in sorted(p for p in root.iterdir() if p.is_dir() and (only is None or only in p.name)):
        a = sorted(d.glob("a-*"))
        pairs = [(x, d / ("b" + x.name[1:])) for x in a if (d / ("b" + x.name[1:])).is_dir()]
        if not pairs:
            continue
        with_cpu, without, runs = [], [], []
        for x, y in pairs:
            ra, rb = reduce_run(str(x)), reduce_run(str(y))
            runs.append((ra, rb))
            with_cpu.append(compare_runs(ra, rb).verdict)
            without.append(compare_runs(no_cpu(ra), no_cpu(rb)).verdict)
        fc = [r.meta.fields.get("foreign_cpu", {}).get("mean_percent") for pair in runs for r in pair]
        fc = [v for v in fc if isinstance(v, (int, float))]
        load = f" (foreign {min(fc):.0f}-{max(fc):.0f} %, mean {sum(fc) / len(fc):.0f})" if fc else ""
        for cpu, verdicts in (("with", with_cpu), ("without", without)):
            seq = sequential(runs, cpu == "with") if SEQUENTIAL else []
            extra = ""
            if seq:
                ns = sorted(n for n, _ in seq)
                extra = f"; until-decided: median {ns[len(ns) // 2]} recording(s), " + ", ".join(
                    f"{n}:{v}" for n, v in seq
                )
            yield row("real", d.name + load, cpu, verdicts)[:-2] + extra + " |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=200, help="synthetic recordings per change (200)")
    ap.add_argument("--real", type=Path, help="folder of interleaved sets (data/calibration/interleaved)")
    ap.add_argument("--no-synthetic", action="store_true", help="only the real sets")
    ap.add_argument("--pairs", type=int, default=2, help="synthetic pairs per level (2)")
    ap.add_argument("--only", help="real sets whose name contains this")
    ap.add_argument("--sequential", action="store_true", help="replay --until-decided on each real set")
    args = ap.parse_args()
    t0 = time.perf_counter()
    global SEQUENTIAL
    SEQUENTIAL = args.sequential
    head = "| source | change | server CPU | comparisons | " + " | ".join(VERDICTS) + " | rate |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    rows = [] if args.no_synthetic else synthetic_rows(args.seeds, args.pairs)
    for r in rows:
        print(r, flush=True)
    if args.real:
        for r in real_rows(args.real, args.only):
            print(r, flush=True)
    seeds = "" if args.no_synthetic else "; synthetic seeds from 5000"
    print(f"\n({time.perf_counter() - t0:.0f} s; binomial bounds: Clopper-Pearson{seeds})")


if __name__ == "__main__":
    main()

"""Calibration of the CI recipe of docs/ci.md on real interleaved recordings.

Every recording a-NN / b-NN of a set is judged four ways, as the docs tell
users to judge it:

* ``plain``: ``headroom compare a-NN b-NN``;
* ``recipe``: ``--noise-from`` two earlier A/A recordings of the same server
  at the same foreign load (the A/A set named by ``--aa``, or the set itself
  for an A/A set: the two recordings before this one, cyclically, never this
  one), ``--objective 'p99<=20ms' --threshold 10%``;

each with the server's CPU and without it (as a k6, JMeter, Gatling, vegeta,
oha or hey run has none).  Prints one row per (set, way, CPU): the count of
each verdict, false alarms (regressed + improved) for A/A sets or caught
(regressed) and wrong direction (improved) for the others; ``-v`` prints
every verdict's sentence.

Usage::

    python3 bench/calibrate_recipe.py SET_DIR[=AA_DIR] ... [--objective 'p99<=20ms'] [-v]

A set whose name holds ``aa`` is an A/A set (its own recordings give the
noise); any other names its A/A set after ``=``.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibrate_paired import no_cpu, upper95  # noqa: E402

from headroom import reduce_run  # noqa: E402
from headroom.compare import compare_runs  # noqa: E402

VERDICTS = ("regressed", "improved", "no regression", "no change", "inconclusive")


def foreign(d: Path) -> str:
    """headroom's foreign CPU over the set's runs (min-max, mean), and the hog's own measure."""
    import re

    vals = []
    for meta in sorted(d.glob("[ab]-*/metadata.yml")):
        m = re.search(r"^foreign_cpu:\n(?:  .*\n)*?  mean_percent: ([\d.]+)", meta.read_text(), re.M)
        if m:
            vals.append(float(m.group(1)))
    out = f"{min(vals):.0f}-{max(vals):.0f} % (mean {sum(vals) / len(vals):.0f})" if vals else "unknown"
    hog = d / "hog.log"
    if hog.exists():
        m = re.search(r"held ([\d.]+)% of the machine", hog.read_text())
        out += f"; the hog's own measure {m.group(1)} %" if m else ""
    return out


def recordings(d: Path) -> list[tuple[Path, Path]]:
    out = []
    for a in sorted(d.glob("a-*")):
        b = d / ("b" + a.name[1:])
        if b.is_dir():
            out.append((a, b))
    return out


def noise_for(k: int, own: list, aa: list, same: bool) -> list:
    """Two earlier A/A recordings: the two before recording k (cyclically) of the A/A set, never k."""
    n = len(aa)
    picks = [(k - 1) % n, (k - 2) % n] if same else [k % n, (k + 1) % n]
    return [p for i in picks for p in aa[i]]


_READ: dict[str, object] = {}  # this process's reductions, by folder: a recording is read once, not six times


def _reduced(p) -> object:
    key = str(p)
    if key not in _READ:
        _READ[key] = reduce_run(key)
    return _READ[key]


def judge(job):
    """One recording, one way: (set, way, cpu, k, verdict, reason)."""
    name, way, cpu, k, pair, noise, objective = job
    load = lambda p: _reduced(p) if cpu else no_cpu(_reduced(p))  # noqa: E731
    a, b = load(pair[0]), load(pair[1])
    if way == "plain":
        c = compare_runs(a, b)
    else:
        c = compare_runs(a, b, noise_from=[load(p) for p in noise], objective=objective, threshold=0.10)
    return name, way, "with" if cpu else "without", k, c.verdict, c.reason


def jobs_for(spec: str, objective: str):
    set_dir, _, aa_dir = spec.partition("=")
    d = Path(set_dir)
    own = recordings(d)
    same = not aa_dir
    aa = own if same else recordings(Path(aa_dir))
    for k, pair in enumerate(own):
        noise = noise_for(k, own, aa, same)
        for way in ("plain", "recipe"):
            for cpu in (True, False):
                yield d.name, way, cpu, k + 1, pair, noise, objective


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sets", nargs="+", help="SET_DIR, or SET_DIR=AA_DIR for a set with a change")
    ap.add_argument("--objective", default="p99<=20ms", help="the recipe's objective (p99<=20ms)")
    ap.add_argument("--workers", type=int, default=2, help="processes (2)")
    ap.add_argument("-v", "--verbose", action="store_true", help="every verdict with its sentence")
    args = ap.parse_args()
    t0 = time.perf_counter()
    jobs = [j for s in args.sets for j in jobs_for(s, args.objective)]
    with ProcessPoolExecutor(args.workers) as pool:
        got = list(pool.map(judge, jobs))
    rows = collections.defaultdict(list)
    for name, way, cpu, k, v, reason in got:
        rows[(name, way, cpu)].append(v)
        if args.verbose:
            print(f"{name} {k:02d} {way:6s} {cpu:7s} {v.upper()}: {reason}")
    print("| set | way | server CPU | n | " + " | ".join(VERDICTS) + " | rate |")
    print("|---|---|---|---:|" + "---:|" * len(VERDICTS) + "---|")
    for (name, way, cpu), vs in rows.items():
        c, n = collections.Counter(vs), len(vs)
        alarms = c["regressed"] + c["improved"]
        exit0 = c["improved"] + c["no regression"] + c["no change"]
        if "aa" in name.split("-"):
            rate = f"{alarms} false alarms (95 % upper {upper95(alarms, n):.0%}), exit 0 in {exit0}"
        else:
            rate = f"{c['regressed']} caught, {c['improved']} wrong direction"
        print(f"| {name} | {way} | {cpu} | {n} | " + " | ".join(str(c[v]) for v in VERDICTS) + f" | {rate} |")
    print("\nforeign CPU by headroom's measure (each run's mean, % of the machine):")
    for s in args.sets:
        d = Path(s.partition("=")[0])
        print(f"  {d.name}: {foreign(d)}")
    print(f"\n({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()

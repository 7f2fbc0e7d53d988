"""Benchmark: reading 50 step profiles of a Go server, against the protobuf library's bare parse.

The files are the 50 real CPU profiles under data/profiles/ (two 25-step runs of
testserver, gzip as served; see data/profiles/README.md).  Timed in this one
process, best of --repeat (15), taken in turn, each on the same files:

  bare parse   read the bytes, gunzip, ``Profile.FromString`` (protobuf, upb)
  read, cold   headroom.profiles.read_profile on every file, symbol cache emptied first
  read, warm   the same with the symbol cache of an earlier pass (what a second run costs)
  load runs    headroom.profiles(run) of both runs (metadata, per-request normalisation)

and prints each time with its ratio to the bare parse.  Exit 1 when reading
(cold) costs 1 s or more.

Usage: python3 bench/bench_profiles.py [--repeat 15] [--dir data/profiles]
"""

from __future__ import annotations

import argparse
import gzip
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def best(fns: dict, repeat: int) -> dict[str, float]:
    """Best time of each (function, setup) in ``fns``, taken in turn so that the shared
    machine's load falls on all of them alike."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, (fn, before) in fns.items():
            if before is not None:
                before()
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    return {name: min(v) for name, v in times.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--dir", default=str(ROOT / "data" / "profiles"))
    a = ap.parse_args()

    import headroom.profiles as hp
    from headroom.profiles import read as rd
    from headroom.profiles.proto import Profile

    files = sorted(Path(a.dir).glob("*/profiles/*.pb.gz"))
    runs = sorted({f.parent.parent for f in files})
    if not files:
        print(f"no profiles under {a.dir}", file=sys.stderr)
        return 2

    def bare():
        for f in files:
            Profile.FromString(gzip.decompress(f.read_bytes()))

    def read():
        for f in files:
            rd.read_profile(f)

    def cold_cache():
        rd._SYMBOLS.clear()

    def load():
        for r in runs:
            hp(r)

    t = best(
        {
            "bare": (bare, None),
            "cold": (read, cold_cache),
            "warm": (read, None),
            "load": (load, None),
        },
        a.repeat,
    )
    t_bare, t_cold, t_warm, t_load = t["bare"], t["cold"], t["warm"], t["load"]
    size = sum(f.stat().st_size for f in files)
    print(f"{len(files)} profiles, {size / 1e3:.0f} kB gzip, best of {a.repeat}:")
    for name, t in (
        ("bare parse (gunzip + protobuf)", t_bare),
        ("read, cold symbol cache", t_cold),
        ("read, warm symbol cache", t_warm),
        ("load both runs (per request)", t_load),
    ):
        print(f"  {name:32s} {t * 1e3:8.1f} ms   {t / t_bare:5.2f}x bare")
    return 0 if t_cold < 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())

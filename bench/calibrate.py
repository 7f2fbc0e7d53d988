"""Calibration of `headroom compare`: false alarms with no change, power with a known change.

Two sources:

* **synthetic** (tests/synthetic.py, noise measured on real runs: 27 % per
  run for throughput and latency, 6 % for CPU per request, correlated
  steps, a noisier tail): pools of seeded A runs and of B runs whose server
  is 1.25x and 2x slower; comparisons drawn from the pools;
* **real** (``--real DIR``): interleaved sets recorded with
  ``headroom ramp --ab`` on a loaded machine, DIR/<set>/{a,b}-NN
  (data/calibration): A/A sets ("aa...", both sides unchanged) and changed
  sets; every 1 vs 1 pair within a set, every 3 vs 3 combination, the
  unchanged runs in recording order 3 against the next 3 (no interleaving),
  the sequential design per set (looks after 2 and 4 runs per side); learned noise from the project's archive
  of unchanged runs (every unchanged run of the other sets, 26-34 runs), and
  from a single A/A set recorded in another half hour (10-12 runs).

Modes: 1 vs 1 with the default noise; 1 vs 1 with noise learned from 8
other A runs; 3 vs 3 interleaved (repeats measure the noise); 3 vs 3 with
learned noise; 3 vs 3 with all baseline runs first (synthetic: a drift of
3 % per run in the host's speed); the sequential `--until-decided` design
as `headroom ramp --ab` runs it (a look after each ABBA block: 2, then 4
runs per side, each at 1 - 0.05/2).

Prints one row per (change, mode): how many comparisons said each verdict.
"A/A false alarms" are regressed + improved on no change; "wrong direction"
is improved on a slower candidate.

Usage: python3 bench/calibrate.py [--seeds 200] [--real data/calibration]
"""

from __future__ import annotations

import argparse
import collections
import itertools
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import synthetic  # noqa: E402

from headroom import analyze, reduce_run  # noqa: E402
from headroom.compare import compare_runs  # noqa: E402
from headroom.ramp.ab import per_look_confidence  # noqa: E402

VERDICTS = ("regressed", "improved", "no regression", "no change", "inconclusive")
LOOKS = 4


def _row(what: str, mode: str, verdicts: list[str]) -> str:
    c = collections.Counter(verdicts)
    n = len(verdicts)
    cells = " | ".join(f"{c[v]}" for v in VERDICTS)
    alarm = (c["regressed"] + c["improved"]) / n if n else 0
    gate0 = (c["improved"] + c["no regression"] + c["no change"]) / n if n else 0
    key = f"{alarm:.1%} false alarms" if what == "none" else f"{c['regressed'] / n:.1%} caught"
    return f"| {what} | {mode} | {n} | {cells} | {key}; exit 0 {gate0:.0%} |"


def sequential(a_runs, b_runs, noise_from=None) -> str:
    """The --until-decided design as `headroom ramp --ab` runs it: a look after every ABBA block
    (2, 4, ... runs per side, up to LOOKS), each at ab.per_look_confidence over the possible looks."""
    looks = range(2, LOOKS + 1, 2)
    conf = per_look_confidence(0.95, len(looks))
    for k in looks:
        c = compare_runs(a_runs[:k], b_runs[:k], confidence=conf, noise_from=noise_from)
        if c.verdict != "inconclusive":
            return c.verdict
    return c.verdict


def modes(a_pool, b_pool, noise_pool, rng, n, drifting=None):
    """Yield (mode, verdict): n draws of each mode; b_pool None means A/A (B drawn from the A pool)."""
    names = ["1v1 default", "1v1 learned", "3v3 repeats", "3v3 learned", "sequential"]
    if drifting is not None:
        names.append("3v3 baseline first")
    for mode in names:
        for _ in range(n):
            k = 1 if mode.startswith("1v1") else (LOOKS if mode == "sequential" else 3)
            if mode == "3v3 baseline first":  # one recording sequence: 3 A runs, then 3 more later
                seq = rng.randrange(len(drifting) // 6)
                a, b = drifting[6 * seq : 6 * seq + 3], drifting[6 * seq + 3 : 6 * seq + 6]
            else:
                a = a_pool.draw(rng, k)
                b = a_pool.draw(rng, k, exclude=a) if b_pool is None else b_pool.draw(rng, k)
            learned = noise_pool.draw(rng, 8, exclude=a + b) if "learned" in mode else None
            if mode == "sequential":
                yield mode, sequential(a, b)
            else:
                yield mode, compare_runs(a, b, noise_from=learned).verdict


class Pool:
    """Analysed runs in recording order; draws without replacement."""

    def __init__(self, runs):
        self.runs = runs

    def draw(self, rng, k, exclude=()):
        ids = {id(x) for x in exclude}
        rest = [r for r in self.runs if id(r) not in ids]
        return rng.sample(rest, k)


def synthetic_rows(seeds: int) -> list[str]:
    rng = random.Random(1)
    a = Pool([analyze(synthetic.ramp(10_000 + i)) for i in range(120)])
    # 10 recording sequences of 6 runs whose host gets 3 % slower per run
    drifting = [analyze(synthetic.ramp(30_000 + i, drift=0.03 * (i % 6))) for i in range(60)]
    rows = []
    for slow in (1.0, 1.25, 2.0):
        b = (
            None
            if slow == 1.0
            else Pool([analyze(synthetic.ramp(20_000 + i, slowdown=slow)) for i in range(60)])
        )
        got = collections.defaultdict(list)
        for mode, v in modes(a, b, a, rng, seeds, drifting if slow == 1.0 else None):
            got[mode].append(v)
        what = "none" if slow == 1.0 else f"{slow:g}x slower"
        rows += [_row(what, mode, v) for mode, v in got.items()]
    return rows


def _start(s) -> str:
    return str(s.run.meta.fields.get("start_time", ""))


def _sets(root: Path) -> dict[str, tuple[list, list]]:
    """{set name: (A runs, B runs)}, each in recording order; an A/A set ("aa...") has no B runs."""
    load = lambda paths: [analyze(reduce_run(p)) for p in paths]  # noqa: E731
    out = {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        if not any(
            folder.glob("a-*")
        ):  # not a set of runs (data/calibration/interleaved: calibrate_paired.py)
            continue
        a, b = load(sorted(folder.glob("a-*"))), load(sorted(folder.glob("b-*")))
        if folder.name.startswith("aa"):
            a, b = a + b, []
        out[folder.name] = (sorted(a, key=_start), sorted(b, key=_start))
    return out


def _learned_for(sets, name):
    """The project's archive of earlier unchanged runs: every unchanged run of the other sets."""
    return [r for n, (a, _b) in sets.items() if n != name for r in a]


def _one_aa_set(sets, name):
    """A single A/A set recorded apart from the compared runs (10-12 runs in one half hour)."""
    other = next((n for n, (_a, b) in sorted(sets.items()) if not b and n != name), None)
    return sets[other][0] if other else None


def real_rows(root: Path) -> list[str]:
    """Real sets: every 1 vs 1 pair, 3 vs 3 combinations, all-baseline-first windows, sequential."""
    sets = _sets(root)
    got = collections.defaultdict(list)
    for name, (a, b) in sets.items():
        what = "none" if not b else name.split("-")[0]
        learned = _learned_for(sets, name)
        pairs = itertools.combinations(a, 2) if not b else itertools.product(a, b)
        one_set = _one_aa_set(sets, name)
        for x, y in pairs:
            got[(what, "1v1 default")].append(compare_runs(x, y).verdict)
            got[(what, "1v1 learned")].append(compare_runs(x, y, noise_from=learned).verdict)
            got[(what, "1v1 learned, one A/A set")].append(compare_runs(x, y, noise_from=one_set).verdict)
        sa, sb = (a[0::2], a[1::2]) if not b else (a, b)
        for x in itertools.combinations(sa, 3):
            for y in itertools.combinations(sb, 3):
                got[(what, "3v3 repeats")].append(compare_runs(list(x), list(y)).verdict)
                got[(what, "3v3 learned")].append(compare_runs(list(x), list(y), noise_from=learned).verdict)
        got[(what, "sequential")].append(sequential(sa, sb))
    unchanged = sorted([r for a, b in sets.values() for r in (a if b else a)], key=_start)
    for i in range(len(unchanged) - 5):  # 3 baseline runs, then the next 3: no interleaving
        got[("none", "3v3 baseline first")].append(
            compare_runs(unchanged[i : i + 3], unchanged[i + 3 : i + 6]).verdict
        )
    return [
        _row(w, f"real: {m}", v)
        for (w, m), v in sorted(got.items(), key=lambda kv: (kv[0][0] != "none", kv[0]))
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=200, help="synthetic comparisons per row (default 200)")
    ap.add_argument("--real", type=Path, help="folder of real interleaved sets (data/calibration)")
    ap.add_argument("--no-synthetic", action="store_true")
    args = ap.parse_args()
    t0 = time.perf_counter()
    print("| true change | mode | n | " + " | ".join(VERDICTS) + " | rate |")
    print("|---|---|---:|" + "---:|" * len(VERDICTS) + "---|")
    rows = [] if args.no_synthetic else synthetic_rows(args.seeds)
    if args.real:
        rows += real_rows(args.real)
    for r in rows:
        print(r, flush=True)
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

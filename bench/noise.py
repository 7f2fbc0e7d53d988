"""Between-run noise of runs of one unchanged build, per metric, as `headroom compare` sees it.

Prints, per decision metric, the sd of a run's log value between runs (what
`headroom.noise.DEFAULTS` holds), its degrees of freedom, and the lag-1
correlation of step residuals within a run; for real runs (folders) and for
the synthetic model (tests/synthetic.py) with the same number of runs, so
the model can be checked against the machine.

Usage: python3 bench/noise.py data/calibration/aa/a-*    # real runs
       python3 bench/noise.py --synthetic 12              # the synthetic model
       python3 bench/noise.py --paired data/calibration/interleaved/aa/[ab]-*   # level pairs
       python3 bench/noise.py --paired --synthetic 12     # ... of the synthetic interleaved model
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from headroom import reduce_run  # noqa: E402
from headroom.compare import measure_noise  # noqa: E402


def paired(args) -> None:
    from headroom.compare import measure_paired_noise

    if args.synthetic:
        import synthetic

        runs = [r for i in range(args.synthetic) for r in synthetic.interleaved(2000 + i, pairs=2)]
        what = f"{args.synthetic} synthetic interleaved recordings, two pairs a level (tests/synthetic.py)"
    else:
        runs = [reduce_run(p) for p in args.runs]
        what = f"{len(runs) // 2} interleaved recordings"
    print(f"noise of the pairs (log B/A) of {what}: within a level (pure error), and the levels' own")
    print("(successive differences of level means, per pair); neighbouring levels' correlation from them")
    print("| metric | pure sd | df | levels' own sd | df | correlation (measured) | recordings |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    pct = lambda v: "-" if v is None else f"{v:.1%}"  # noqa: E731
    for key, v in measure_paired_noise(runs).items():
        lag = "-" if v["rho_measured"] is None else f"{v['rho_measured']:+.2f}"
        print(
            f"| {key} | {pct(v['pure_sd'])} | {v['pure_df']:g} | {pct(v['levels_sd'])} | {v['levels_df']:.0f} "
            f"| {lag} | {v['recordings']} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="*", help="run folders of one unchanged build")
    ap.add_argument("--synthetic", type=int, default=0, metavar="N", help="N seeded synthetic runs instead")
    ap.add_argument(
        "--paired", action="store_true", help="interleaved A/A recordings: noise of the level pairs"
    )
    args = ap.parse_args()
    if args.paired:
        return paired(args)
    if args.synthetic:
        import synthetic

        runs = [synthetic.ramp(1000 + i) for i in range(args.synthetic)]
        what = f"{args.synthetic} synthetic runs (tests/synthetic.py)"
    else:
        runs = [reduce_run(p) for p in args.runs]
        what = f"{len(runs)} runs"
    print(f"between-run noise of {what}")
    print("| metric | sd per run | df | lag-1 step residual correlation | levels |")
    print("|---|---:|---:|---:|---:|")
    for key, v in measure_noise(runs).items():
        sd = "-" if v["sd"] is None else f"{v['sd']:.1%}"
        lag = "-" if v["lag1"] is None else f"{v['lag1']:+.2f}"
        print(f"| {key} | {sd} | {v['df']:g} | {lag} | {v['levels']} |")


if __name__ == "__main__":
    main()

"""Benchmark: `headroom summary` of several git revisions against the pyarrow floor, interleaved.

    python3 bench/bench_revisions.py HEAD e9f91be 4ac530c --requests 10000000 --steps 2 --repeat 3

Each revision is exported with ``git archive`` into a temporary folder and run from there
(``PYTHONPATH``), in turn with the floor of bench_summary.py (one pyarrow ``read_csv`` per section),
on the same cached ramp: so that a change of the ratio between revisions is told apart from a
change of the machine's load (on a shared machine the wall ratio of one revision moves by 2x from run
to run; revisions measured in the same rounds move together).  Prints, per revision, the best wall
and CPU time, their ratios to the floor's best, every round's wall ratio, and the peak RSS.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_summary as B  # noqa: E402


def export(rev: str, into: Path) -> Path:
    """The tree of ``rev`` (git archive) in a folder of ``into``."""
    out = into / rev.replace("/", "_")
    out.mkdir()
    archive = subprocess.run(["git", "archive", rev], cwd=HERE.parent, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    return out


def run(tree: Path, folder: Path) -> tuple[float, float, float]:
    """Wall s, peak RSS MB and CPU s of ``headroom summary`` from ``tree``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(tree)
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "headroom", "summary", str(folder), "--json", os.devnull],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=tempfile.gettempdir())  # fmt: skip
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{tree.name}: headroom summary failed: {p.stderr.read().decode()[-400:]}")
    p.stderr.close()
    return wall, ru.ru_maxrss / 1024.0, ru.ru_utime + ru.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("revisions", nargs="+", help="git revisions (HEAD, a commit, a branch)")
    ap.add_argument("--requests", type=int, default=10_000_000)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    folder = B.ensure_ramp(a.requests, a.steps)
    floor = [sys.executable, "-c", B.FLOOR, str(folder / "perfResults.csv")]
    with tempfile.TemporaryDirectory() as tmp:
        trees = {rev: export(rev, Path(tmp)) for rev in a.revisions}
        B.measure(floor)  # the page cache, and each tree's bytecode
        for t in trees.values():
            run(t, folder)
        res: dict[str, list] = {"floor": []} | {rev: [] for rev in trees}
        for _ in range(a.repeat):
            res["floor"].append(B.measure(floor))
            for rev, t in trees.items():
                res[rev].append(run(t, folder))
    fw = min(w for w, _, _ in res["floor"])
    fc = min(c for _, _, c in res["floor"])
    print(f"{a.requests:,} requests in {a.steps} steps, best of {a.repeat}, interleaved")
    print(f"floor: wall {fw:.2f} s, CPU {fc:.2f} s, peak RSS {max(r for _, r, _ in res['floor']):.0f} MB")
    for rev in trees:
        w, c = min(x[0] for x in res[rev]), min(x[2] for x in res[rev])
        rounds = [round(x[0] / f[0], 2) for x, f in zip(res[rev], res["floor"])]
        print(f"{rev}: wall {w:.2f} s ({w / fw:.2f}x; rounds {rounds}), CPU {c:.2f} s ({c / fc:.2f}x), "
              f"peak RSS {max(x[1] for x in res[rev]):.0f} MB")  # fmt: skip


if __name__ == "__main__":
    main()

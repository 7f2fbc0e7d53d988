#!/usr/bin/env python3
"""Per-run and per-side figures of the calibration sets (data/calibration/README.md).

    python3 scripts/summarize_calibration.py [data/calibration]

For every run: requests, CPU per request straight from the files (the
server's CPU seconds integrated from cpuStats.csv over the whole run, divided
by the requests in perfResults.csv.gz), headroom's plateau throughput
(``headroom.reduce_run`` + ``analyze``), the median over the steps of the
step p50 latency, and the mean foreign CPU from metadata.yml.  Per side: the
mean and the between-run SD of the log of each figure (the noise of a run's
mean), in percent.  Markdown on stdout.
"""

from __future__ import annotations

import calendar
import gzip
import math
import re
import statistics
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{9})Z$")


def ns(text: str) -> int:
    m = TS.match(text)
    return calendar.timegm(time.strptime(m[1], "%Y-%m-%dT%H:%M:%S")) * 10**9 + int(m[2])


def file_figures(run: Path) -> dict:
    m = yaml.safe_load((run / "metadata.yml").read_text())
    with gzip.open(run / "perfResults.csv.gz", "rt") as f:
        n = sum(1 for line in f if line[:1].isdigit())
    prev, cpu_s = ns(m["start_time"]), 0.0
    for line in (run / "cpuStats.csv").read_text().splitlines()[1:]:
        t, pct = line.split(",")
        t = ns(t)
        cpu_s += float(pct) / 100 * m["cpu_cores"] * (t - prev) / 1e9
        prev = t
    return {
        "requests": n,
        "cpu_us_per_req": 1e6 * cpu_s / n,
        "foreign_pct": m["foreign_cpu"]["mean_percent"],
        "start": m["start_time"][:19],
    }


def headroom_figures(run: Path) -> dict:
    import numpy as np

    from headroom import analyze, reduce_run

    s = analyze(reduce_run(str(run)))
    p50 = np.asarray(s.table.latency.pct["p50"], dtype=float)
    return {"plateau_rps": s.capacity.plateau_rps, "p50_ms": 1e3 * float(np.nanmedian(p50))}


def log_sd_pct(values: list[float]) -> float | None:
    v = [math.log(x) for x in values if x and x > 0]
    return 100 * statistics.stdev(v) if len(v) >= 2 else None


KEYS = ("cpu_us_per_req", "plateau_rps", "p50_ms")


def pooled_sd(groups: list[list[dict]]) -> None:
    """Between-run SD of the unchanged config, pooled over groups (deviations from each group's mean)."""
    print("\n### Unchanged keep-alive config, pooled over the sets\n")
    print("| figure | runs | groups | df | pooled SD of log, % |")
    print("|---|---|---|---|---|")
    for k in KEYS:
        ss, df, n = 0.0, 0, 0
        for g in groups:
            v = [math.log(f[k]) for f in g if f[k]]
            if len(v) >= 2:
                m = statistics.fmean(v)
                ss += sum((x - m) ** 2 for x in v)
                df += len(v) - 1
                n += len(v)
        print(f"| {k} | {n} | {len(groups)} | {df} | {100 * math.sqrt(ss / df):.1f} |")


def main(base: Path) -> int:
    keys = KEYS
    unchanged: list[list[dict]] = []
    for set_dir in sorted(p for p in base.iterdir() if (p / "ab.yml").exists()):
        job = yaml.safe_load((set_dir / "ab.yml").read_text())
        if job["status"] == "recording":
            print(f"\n({set_dir.name}: still recording, skipped)")
            continue
        print(f"\n### {set_dir.name} ({job['order']})\n")
        print(
            "| run | start (UTC) | requests | CPU us/req | plateau req/s | median step p50 ms | foreign CPU % |"
        )
        print("|---|---|---|---|---|---|---|")
        sides: dict[str, list[dict]] = {"a": [], "b": []}
        for r in job["runs"]:
            run = set_dir / r["folder"]
            fig = {**file_figures(run), **headroom_figures(run)}
            sides[r["side"]].append(fig)
            print(
                f"| {r['folder']} | {fig['start']} | {fig['requests']:,} | {fig['cpu_us_per_req']:.1f} | "
                f"{fig['plateau_rps']:,.0f} | {fig['p50_ms']:.2f} | {fig['foreign_pct']:.0f} |"
            )
        print("\n| side | runs | " + " | ".join(f"mean {k} (SD of log, %)" for k in keys) + " |")
        print("|---|---|" + "---|" * len(keys))
        for side, figs in sides.items():
            cells = []
            for k in keys:
                vals = [f[k] for f in figs if f[k] is not None]
                sd = log_sd_pct(vals)
                cells.append(f"{statistics.fmean(vals):,.1f} ({sd:.1f})" if sd is not None else "-")
            print(f"| {side} | {len(figs)} | " + " | ".join(cells) + " |")
        a, b = sides["a"], sides["b"]
        unchanged.append(a)
        if set_dir.name.startswith("aa"):
            unchanged.append(b)  # a second, identical server pair: its own group
        for k in keys:
            ma, mb = (statistics.fmean([f[k] for f in s if f[k]]) for s in (a, b))
            print(f"\nB/A {k}: {100 * (mb / ma - 1):+.1f} %", end="")
        print()
    pooled_sd(unchanged)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "data" / "calibration"))

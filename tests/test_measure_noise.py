"""bench/noise.py's figures (headroom.compare.measure), recomputed here from the step tables.

The noise of a pair that docs/ci.md quotes and tests/synthetic.py uses was measured with
``measure_paired_noise`` on real interleaved A/A recordings; ``measure_noise`` measures the run-level
noise of unchanged runs.  Both are recomputed on committed real recordings with numpy directly from
each run's steps (pairs formed here by level and replicate, level means removed here).
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
from conftest import ROOT

from headroom import analyze, reduce_run
from headroom.compare.measure import measure_noise, measure_paired_noise

IL = ROOT / "data" / "calibration" / "interleaved" / "dev-go-aa-70"


def _by_level(table) -> dict[float, list[int]]:
    out = defaultdict(list)
    for i, c in enumerate(table.concurrency):
        if table.usable[i]:
            out[float(c)].append(i)
    return out


def test_the_pure_error_of_interleaved_pairs_is_the_spread_within_levels():
    """CPU per request of two A/A recordings with two pairs a level: the pure error is the pairs'
    log ratios' spread around their (recording, level) cell's mean, pooled over the cells."""
    names = ("01", "02")
    runs = [reduce_run(IL / f"{side}-{n}") for n in names for side in "ab"]
    got = measure_paired_noise(runs)["cpu_s_per_req"]
    ss, df = 0.0, 0
    for n in names:
        a, b = analyze(reduce_run(IL / f"a-{n}")).table, analyze(reduce_run(IL / f"b-{n}")).table
        la, lb = _by_level(a), _by_level(b)
        for level in sorted(set(la) & set(lb)):
            reps = min(len(la[level]), len(lb[level]))
            d = np.array(
                [math.log(b.cpu_s_per_req[lb[level][j]] / a.cpu_s_per_req[la[level][j]]) for j in range(reps)]
            )
            ss += float(((d - d.mean()) ** 2).sum())
            df += reps - 1
    assert got["pure_df"] == df == 22
    assert abs(got["pure_sd"] - math.sqrt(ss / df)) < 1e-12, (got, math.sqrt(ss / df))
    assert got["recordings"] == 2


def test_the_run_level_noise_is_the_spread_of_the_runs_means():
    """CPU per request of the A runs of the nginx A/A set (recorded apart): each run's mean log value
    over the levels every run has, their sample standard deviation."""
    runs = [reduce_run(p) for p in sorted((ROOT / "data" / "calibration" / "aa").glob("a-*"))][:6]
    got = measure_noise(runs)["cpu_s_per_req"]
    tables = [analyze(r).table for r in runs]
    levels = set.intersection(*(set(_by_level(t)) for t in tables))
    means = [np.mean([math.log(t.cpu_s_per_req[_by_level(t)[c][0]]) for c in sorted(levels)]) for t in tables]
    assert got["df"] == len(runs) - 1
    assert abs(got["sd"] - float(np.std(means, ddof=1))) < 1e-9, (got, means)

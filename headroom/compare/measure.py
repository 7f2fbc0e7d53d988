"""Noise of unchanged builds as a comparison sees it: what the defaults and the synthetic models are
set from (``bench/noise.py``)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..model import HeadroomError, Run
from ..noise import spread
from ..summary import Summary
from .across_load import own_noise
from .learned import aa_recordings, as_summaries
from .pairing import pair_steps, plateau_mask
from .specs import series, specs
from .tests import pair_cells


def measure_noise(runs: Sequence[Run | Summary], **kw) -> dict:
    """Noise between runs of one unchanged build, per metric, as the comparison sees it.

    Returns {metric key: {"sd", "df", "lag1", "levels"}}: the sd of a run's
    log value over the concurrency levels every run shares (saturated ones
    for throughput), and the mean lag-1 correlation of the step residuals
    within a run (after removing each run's and each level's mean).
    """
    summaries = as_summaries(runs, **kw)
    tables = [s.table for s in summaries]
    pairs, _how = pair_steps(tables[:1], tables[1:]) if len(summaries) > 1 else ([], "")
    if not pairs:
        raise HeadroomError("measuring noise needs at least 2 runs with 3 or more shared concurrency levels")
    mask = plateau_mask([summaries[:1], summaries[1:]], pairs)
    has_cpu = all(np.isfinite(s.table.cpu_s_per_req).any() for s in summaries)
    out = {}
    for spec in specs(None, has_cpu):
        sel = [p for p, m in zip(pairs, mask) if m or spec.pairs == "all"]
        idx = [[p[1][0], *p[2]] for p in sel]  # per pair: the step of each run
        y = np.array(
            [
                [np.log(max(series(s.table, spec.key)[i[r]], 1e-300)) for i in idx]
                for r, s in enumerate(summaries)
            ]
        )
        y = y[:, np.isfinite(y).all(axis=0)]
        ss, df = spread(y.mean(axis=1))
        resid = y - y.mean(axis=1, keepdims=True) - y.mean(axis=0, keepdims=True) + y.mean()
        lag = [np.corrcoef(r[:-1], r[1:])[0, 1] for r in resid if len(r) > 3 and np.std(r) > 0]
        out[spec.out] = {
            "sd": math.sqrt(ss / df) if df else None,
            "df": df,
            "lag1": float(np.mean(lag)) if lag else None,
            "levels": y.shape[1],
        }
    return out


def measure_paired_noise(runs: Sequence[Run | Summary], **kw) -> dict:
    """Noise of the pairs of interleaved A/A recordings, per metric, as the model across load sees it.

    ``runs``: the a-NN and b-NN folders of ``headroom ramp --ab --interleave
    steps`` jobs of an unchanged build.  Returns {metric key: {"pure_sd",
    "pure_df", "levels_sd", "levels_df", "rho_measured", "recordings"}}: the sd
    of a pair's log ratio around its level's mean (pure error), the levels' own
    noise per pair (successive differences of level means, the largest of each
    recording left out) and the neighbouring levels' correlation those
    differences show (what the bench reports; compare uses the design's).
    """
    recs = aa_recordings(as_summaries(runs, **kw))
    if not recs:
        raise HeadroomError(
            "no interleaved recordings among the runs (a-NN and b-NN of ramp --ab --interleave steps)"
        )
    out = {}
    for spec in specs(None, True):
        tot = dict(ss_pe=0.0, df_pe=0.0, ss_d=0.0, n_d=0.0, df_d=0.0, rho_sum=0.0, lag_pairs=0.0)
        for g in recs:
            pairs, _ = pair_steps([g["a"].table], [g["b"].table])
            cells = pair_cells([[g["a"]], [g["b"]]], pairs, spec.key, [(0, 0)])[0]
            if cells.pairs < 3 or len(cells.values) < 2:
                continue
            parts = own_noise(cells)
            for k in tot:
                tot[k] += parts[k]
        out[spec.out] = {
            "pure_sd": math.sqrt(tot["ss_pe"] / tot["df_pe"]) if tot["df_pe"] else None,
            "pure_df": tot["df_pe"],
            "levels_sd": math.sqrt(tot["ss_d"] / tot["n_d"]) if tot["n_d"] else None,
            "levels_df": tot["df_d"],
            "rho_measured": tot["rho_sum"] / tot["lag_pairs"] if tot["lag_pairs"] else None,
            "recordings": len(recs),
        }
    return out

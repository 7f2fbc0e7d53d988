"""Tests: each metric's change, its standard error and p-value, by the design in force.

* **Runs recorded apart** (separate ramps, or whole runs in ABBA order): the
  run is the unit.  Each run's value is the mean of its log values over the
  pairs every run has; the change is the difference of the sides' means;
  its standard error comes from the between-run noise (learned, repeats,
  default; :mod:`headroom.noise`) and is never below what the per-pair
  differences of this comparison show (widened for correlated steps).
* **Interleaved recordings**: the paired log ratios of every level are
  fitted across load (:mod:`headroom.compare.across_load`); the p-value is
  that of "no change at any level".
* **The error rate**: failed / all requests over the matched steps of each
  side, a difference of two binomial proportions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ..noise import LearnedNoise, NoiseEstimate, canonical, combine, pooled, spread, within_run_se
from ..stats import t_sf
from .across_load import AcrossLoad, Cells, fit
from .pairing import error_levels, load_of, ran_steps
from .specs import Spec, coarse, is_percentile, latency_quantum, log_ratio, series


@dataclass(frozen=True)
class Test:
    """A metric's change (log units) with its standard error, df and p-value; ``model`` the change
    across load of an interleaved comparison."""

    spec: Spec
    d: float
    se: float
    df: float
    noise: NoiseEstimate
    pairs: int
    pvalue: float
    baseline: float
    candidate: float
    model: AcrossLoad | None = None
    cells: Cells | None = None  # interleaved: the paired log ratios the model was fitted to
    learned: object | None = None  # interleaved: the PairNoise learned for this metric (--noise-from)


def run_level_test(yb: np.ndarray, yc: np.ndarray, spec: Spec, learned: LearnedNoise | None) -> Test | None:
    """The run-level test of one metric from (runs, pairs) log values of each side.

    Each run's value is the mean of its log values over the pairs every run
    has; the change is the difference of the sides' means.  Its standard
    error comes from the between-run noise (learned, repeats, default) and
    is never below what the per-pair differences of this comparison show
    (widened for correlated steps).  Fewer than 3 usable pairs: None.
    """
    ok = np.isfinite(yb).all(axis=0) & np.isfinite(yc).all(axis=0)
    n = int(ok.sum())
    if n < 3:
        return None
    mb, mc = yb[:, ok].mean(axis=1), yc[:, ok].mean(axis=1)
    reps = pooled([spread(mb), spread(mc)])
    nz, _how = combine(spec.out, learned, reps if reps[1] > 0 else None)
    se, df = nz.sd * math.sqrt(1.0 / len(mb) + 1.0 / len(mc)), nz.df
    se_w = within_run_se(yc[:, ok].mean(axis=0) - yb[:, ok].mean(axis=0))
    if se_w > se:
        se, df = se_w, n - 1
        # the noise the interval used, stated as such: a run's sd that gives this standard error,
        # with the steps' df (the JSON once kept the default's sd and df beside the wider interval)
        sd_w = se_w / math.sqrt(1.0 / len(mb) + 1.0 / len(mc))
        nz = NoiseEstimate(sd_w, df, nz.source + "; widened to the spread of this comparison's steps")
    d = float(mc.mean() - mb.mean())
    p = 2.0 * t_sf(abs(d) / se, df) if se > 0 else float(d == 0.0)
    gb, gc = float(np.exp(yb[:, ok].mean())), float(np.exp(yc[:, ok].mean()))
    return Test(spec, d, se, df, nz, n, min(1.0, p), gb, gc)


def pair_cells(sides, sel: list[tuple], key: str, recs) -> tuple[Cells, list[float]]:
    """The paired log ratios of metric ``key`` over the selected pairs of every interleaved
    recording, as cells of (recording, level); and the baseline's log values (for its level).
    A latency percentile recorded on a coarse grid names the levels whose every pair lies within a
    few quanta of zero on both sides (:func:`specs.coarse`): they count in the line across load, but
    cannot decide on their own (the cells' ``coarse``)."""
    rec, load, d, lb, fine, near = [], [], [], [], set(), set()
    q = _quantum(sides, sel, key, recs)
    for r, (i, j) in enumerate(recs):
        tb, tc = sides[0][i].table, sides[1][j].table
        ib, ic = [p[1][i] for p in sel], [p[2][j] for p in sel]
        b, c = series(tb, key)[ib], series(tc, key)[ic]
        lr = log_ratio(b, c)
        x = [load_of(tb, k) for k in ib]
        flags = coarse(b, c, q)
        for v, y, f in zip(x, lr, flags):
            if np.isfinite(y):
                (near if f else fine).add(v)
        rec += [r] * len(sel)
        load += x
        d += list(lr)
        lb += [math.log(v) for v, y in zip(b, lr) if np.isfinite(y)]
    t0 = sides[0][recs[0][0]].table
    kind = "concurrency" if t0.known_concurrency else ("rate" if t0.intended_rps is not None else "step")
    cells = Cells.build(rec, load, d, kind)
    only = tuple(sorted(near - fine))
    if only:
        cells = replace(cells, coarse=(q, only))
    return cells, lb


def _quantum(sides, sel: list[tuple], key: str, recs) -> float | None:
    """The grid a latency percentile's values lie on over every selected step of both sides (None:
    not a percentile, or finer than 10 us)."""
    if not is_percentile(key):
        return None
    vals = [series(sides[k][rc[k]].table, key)[[p[1 + k][rc[k]] for p in sel]] for rc in recs for k in (0, 1)]
    return latency_quantum(np.concatenate(vals)) if vals else None


def paired_test(sides, sel: list[tuple], spec: Spec, recs, learned: dict | None) -> Test | None:
    """The paired test of one metric over interleaved recordings: its change fitted across load."""
    cells, lb = pair_cells(sides, sel, spec.key, recs)
    prior = None if learned is None else learned.get(canonical(spec.out))
    model = fit(cells, spec.out, prior)
    if model is None:
        return None
    gb = float(np.exp(np.mean(lb)))
    nz = NoiseEstimate(model.noise.sd, model.df, model.how())
    d, se = model.average, model.se_average
    return Test(
        spec,
        d,
        se,
        model.df,
        nz,
        model.pairs,
        min(1.0, model.pvalue),
        gb,
        gb * math.exp(d),
        model,
        cells,
        prior,
    )


def errors_unknown(s) -> bool:
    """True when a run cannot say how many requests failed (no status column, or transport errors
    unknown: the summary's step table then has no error counts, see ``summary._with_rowless``)."""
    return s.table.errors is None


@dataclass(frozen=True)
class ErrorTest:
    rates: tuple[float, float]
    diff: float
    se: float
    pvalue: float
    pairs: int
    extra: int = 0  # steps counted beyond the matched pairs' (too short to pair, or all failed)


def error_test(sides, pairs) -> ErrorTest | str:
    """Failed / all requests of each side over the levels every run sent requests at (its matched
    steps, and steps too short to pair or failing every request at such a level); a reason string
    when unknown or when no level was run by every run."""
    unknown = [s.label for side in sides for s in side if errors_unknown(s)]
    if unknown:
        return "error counts unknown (no status column, or transport errors not recorded): " + ", ".join(
            dict.fromkeys(unknown)
        )
    common = error_levels(sides)
    rates, totals, extra = [], [], 0
    for k, side in enumerate(sides):
        err = req = 0
        for r, s in enumerate(side):
            paired = {p[1 + k][r] for p in pairs}
            idx = sorted(paired | set(ran_steps(s.table, common)))
            extra += len(idx) - len(paired)
            err += int(s.table.errors[idx].sum())
            req += int(s.table.requests[idx].sum()) + int(s.table.errors[idx].sum())
        rates.append(err / req if req else 0.0)
        totals.append((err, req))
    if not (totals[0][1] and totals[1][1]):
        return "not judged: no level that every run sent requests at"
    diff = rates[1] - rates[0]
    pool = (totals[0][0] + totals[1][0]) / max(1, totals[0][1] + totals[1][1])
    se = math.sqrt(pool * (1 - pool) * (1 / max(1, totals[0][1]) + 1 / max(1, totals[1][1])))
    p = 2.0 * t_sf(abs(diff) / se, math.inf) if se > 0 else float(diff == 0.0)
    return ErrorTest((rates[0], rates[1]), diff, se, min(1.0, p), len(pairs), extra)

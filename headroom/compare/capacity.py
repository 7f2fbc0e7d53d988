"""The change in capacity at the objective between baseline and candidate, with its interval.

The capacity at the objective of each run is :mod:`headroom.crossing`'s: the
throughput where the objective's percentile, fitted as a monotone function
of load, crosses the bound.  How its change is tested depends on the design:

* **Interleaved recordings** (A and B alternating at every load, as
  ``headroom ramp --ab --interleave steps``, with or without ``--find``):
  the two steps of a pair share the host's state, so the change is read
  from the pairs.  Near the crossings, the log percentile rises with log
  load with slope ``b`` and the log throughput with slope ``g`` (both from
  the pairs' means, a straight line in log load).  A candidate whose log
  percentile at the same load is higher by ``d`` crosses the bound
  ``d / b`` earlier in log load, where the throughput is ``g * d / b``
  lower, and its throughput at the same load differs by ``e``: each pair
  estimates the change in log capacity as ``e - (g / b) * d``.  The change
  is their mean over the pairs at loads where either side may cross
  (the union of the two sides' load intervals, and at least a factor
  :data:`NEAR` around each crossing; host noise that hits both halves of a pair cancels in
  ``d`` and ``e``), its standard error their spread over the square root of
  their number (Student's t, pairs - 1 df), widened by the uncertainty of
  ``g / b`` (delta method).  Where the percentile is not seen to rise with
  load near the crossings (``b`` under one standard error: a flat or noisy
  stretch, often beside a changing foreign load), the pairs cannot place the
  shift; the change is then read *unpaired*, from each side's own capacity
  interval as if the sides were independent (wider than a paired reading:
  the host's state moves both sides alike), and not judged only when a
  side's interval is open at an end.
* **Runs recorded apart**: each run's capacity is a value; the change is
  the difference of the sides' mean log capacities, its noise between runs
  that of the plateau throughput (:mod:`headroom.noise`: default, pooled
  with the spread of repeats), and never below what the runs' own
  intervals allow.

A run whose objective is not crossed inside its range (held at every load,
or broken at the lowest) gives no capacity: the change is then not judged,
and the note says why.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..noise import combine, pooled, spread
from ..stats import t_quantile, t_sf, z_quantile

#: pairs whose load lies within this factor of either side's crossing estimate the change
NEAR = 1.5
MIN_PAIRS = 3


@dataclass(frozen=True)
class CapacityChange:
    """The change in capacity at the objective: candidate / baseline - 1, its interval and p-value.

    ``d``/``se``/``df`` are in log units (the test's); ``change`` and ``ci`` relative.
    ``change`` is None when it cannot be judged (``note`` says why).
    """

    baseline_rps: float | None
    candidate_rps: float | None
    change: float | None
    ci: tuple[float, float] | None
    pvalue: float | None
    d: float | None
    se: float | None
    df: float | None
    confidence: float
    design: str  # "interleaved" or "runs"
    pairs: int = 0
    note: str = ""

    def __repr__(self) -> str:
        if self.change is None:
            return f"<CapacityChange not judged: {self.note}>"
        return (
            f"<CapacityChange {100 * self.change:+.1f}% [{100 * self.ci[0]:+.1f}%, {100 * self.ci[1]:+.1f}%], "
            f"p={self.pvalue:.3g}, {self.design}>"
        )


def _crossed(summaries) -> list:
    return [s.capacity.at_objective for s in summaries]


def _not_judged(b, c, confidence: float, design: str, note: str) -> CapacityChange:
    return CapacityChange(b, c, None, None, None, None, None, None, confidence, design, 0, note)


def _gmean(xs) -> float | None:
    xs = [x for x in xs if x is not None and x > 0]
    return float(np.exp(np.mean(np.log(xs)))) if xs else None


def capacity_change(
    baseline: Sequence,
    candidate: Sequence,
    *,
    recordings: Sequence[tuple[int, int]] | None = None,
    confidence: float = 0.95,
) -> CapacityChange:
    """The change in capacity at the objective (module docstring).

    Parameters
    ----------
    baseline, candidate
        Summaries (:func:`headroom.analyze` with the objective) of each side's runs.
    recordings
        (baseline run, candidate run) of every interleaved recording (compare's
        ``Design.recordings``): the pairs are then the steps at the same load of the two halves
        of each recording.  None: runs recorded apart.
    confidence
        Two-sided confidence of the interval.
    """
    cb, cc = _crossed(baseline), _crossed(candidate)
    b = _gmean([x.rps for x in cb if x is not None and x.status == "crossed"])
    c = _gmean([x.rps for x in cc if x is not None and x.status == "crossed"])
    design = "interleaved" if recordings is not None else "runs"
    missing = [x for x in cb + cc if x is None or x.status != "crossed"]
    if missing:
        why = {
            "held": "the objective held at every load",
            "at lowest step": "it broke already at the lowest load",
        }
        st = missing[0].status if missing[0] is not None else "no objective"
        return _not_judged(
            b,
            c,
            confidence,
            design,
            f"a run's capacity at the objective is not inside its range ({why.get(st, st)})",
        )
    if recordings is not None:
        return _paired(baseline, candidate, recordings, confidence, b, c)
    return _apart(cb, cc, confidence, b, c)


def _log_se(x) -> float | None:
    """Standard error of a run's log capacity from its interval (None when an end is open)."""
    if x.low is None or x.high is None or x.low <= 0:
        return None
    z = z_quantile(1 - (1 - x.interval.get("confidence", 0.95)) / 2) if x.interval else 1.959963984540054
    return (math.log(x.high) - math.log(x.low)) / (2 * z)


def _within_se(cb, cc) -> float | None:
    """Standard error of the difference of the sides' mean log capacities from the runs' own
    intervals (as if independent), or None when a run's interval is open at an end."""
    within = [_log_se(x) for x in cb + cc]
    if any(w is None for w in within):
        return None
    return math.sqrt(
        sum(w * w for w in within[: len(cb)]) / len(cb) ** 2
        + sum(w * w for w in within[len(cb) :]) / len(cc) ** 2
    )


def _unpaired(cb, cc, confidence: float, b: float, c: float, why: str, pairs: int) -> CapacityChange:
    """An interleaved recording whose pairs cannot give the change (``why``): the change of the sides'
    own capacities, its standard error from their intervals as if the sides were independent.  The
    host's state, shared by the two halves of a pair, moves both capacities alike, so this is wider
    than a paired reading could be."""
    se = _within_se(cb, cc)
    if se is None:
        return _not_judged(b, c, confidence, "interleaved", f"{why}; a side's own interval is open at an end")
    d = float(np.mean(np.log([x.rps for x in cc])) - np.mean(np.log([x.rps for x in cb])))
    note = f"unpaired: {why}; the change is read from each side's own capacity interval, as if independent"
    return _result(
        d, se, math.inf, confidence, baseline_rps=b, candidate_rps=c, design="interleaved", pairs=pairs, note=note
    )  # fmt: skip


def _apart(cb, cc, confidence: float, b: float, c: float) -> CapacityChange:
    lb, lc = np.log([x.rps for x in cb]), np.log([x.rps for x in cc])
    reps = pooled([spread(lb), spread(lc)])
    noise, _how = combine("plateau_rps", None, reps if reps[1] > 0 else None)
    se, df = noise.sd * math.sqrt(1 / len(lb) + 1 / len(lc)), noise.df
    se_w = _within_se(cb, cc)
    note = f"runs recorded apart: between-run noise {noise.source}"
    if se_w is None:
        note += "; a run's interval is open at one end"
    elif se_w > se:
        se, note = se_w, "runs recorded apart: the runs' own intervals (wider than the between-run noise)"
    d = float(lc.mean() - lb.mean())
    return _result(
        d,
        se,
        df,
        confidence,
        baseline_rps=b,
        candidate_rps=c,
        design="runs",
        pairs=len(lb) + len(lc),
        note=note,
    )


def _result(d: float, se: float, df: float, confidence: float, **about) -> CapacityChange:
    """The change from its log estimate, standard error and df; ``about``: the other fields
    (baseline_rps, candidate_rps, design, pairs, note)."""
    t = t_quantile(1 - (1 - confidence) / 2, df)
    p = 2.0 * t_sf(abs(d) / se, df) if se > 0 else float(d == 0.0)
    ci = (math.expm1(d - t * se), math.expm1(d + t * se))
    return CapacityChange(
        change=math.expm1(d), ci=ci, pvalue=min(1.0, p), d=d, se=se, df=df, confidence=confidence, **about
    )


def _pairs(baseline, candidate, recordings, key_of) -> list[tuple[float, float, float, float, float]]:
    """(load, baseline log pct, candidate log pct, baseline log rps, candidate log rps) of every pair."""
    from .pairing import load_of, pair_steps

    out = []
    for ib, ic in recordings:
        tb, tc = baseline[ib].table, candidate[ic].table
        pb, pc = key_of(tb), key_of(tc)
        for _lvl, sb, sc in pair_steps([tb], [tc])[0]:
            i, j = sb[0], sc[0]
            vals = (pb[i], pc[j], tb.goodput_rps[i], tc.goodput_rps[j])
            if all(np.isfinite(v) and v > 0 for v in vals):
                out.append((load_of(tb, i), *np.log(vals)))
    return out


def _slope(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares slope of y on x and its variance."""
    xc = x - x.mean()
    sxx = float(np.sum(xc * xc))
    slope = float(np.sum(xc * (y - y.mean())) / sxx)
    resid = y - y.mean() - slope * xc
    var = float(np.sum(resid * resid)) / max(len(x) - 2, 1) / sxx
    return slope, var


def _paired(baseline, candidate, recordings, confidence, b, c) -> CapacityChange:
    obj = baseline[0].capacity.objective
    rows = _pairs(baseline, candidate, recordings, lambda t: t.latency.pct[obj.name])
    xs = [x for x in _crossed(baseline) + _crossed(candidate) if x.load is not None]
    if not rows or not xs:
        return _not_judged(b, c, confidence, "interleaved", "no pairs of steps at the same load")
    # the loads where either side may cross: the union of their intervals, at least x/NEAR..x*NEAR
    lo = min([x.load / NEAR for x in xs] + [x.load_low for x in xs if x.load_low is not None])
    hi = max([x.load * NEAR for x in xs] + [x.load_high for x in xs if x.load_high is not None])
    a = np.array(rows)
    near = (a[:, 0] >= lo) & (a[:, 0] <= hi)
    a = a[near]
    x = np.log(a[:, 0])
    if len(a) < MIN_PAIRS or len(np.unique(x)) < 2:
        return _not_judged(
            b, c, confidence, "interleaved",
            f"{len(a)} pair(s) near the crossings, at {len(np.unique(x))} load(s): {MIN_PAIRS} pairs at 2 loads needed",
        )  # fmt: skip
    slope_p, var_p = _slope(x, (a[:, 1] + a[:, 2]) / 2)
    slope_g, var_g = _slope(x, (a[:, 3] + a[:, 4]) / 2)
    # the delta method below carries the slopes' uncertainty into the interval; only a curve not seen to
    # rise at all (slope under one standard error) leaves no crossing shift to read.  (It was two standard
    # errors until a recorded job, ab-go-cpu20/03, was refused at 1.48 +- 0.88 with a throughput slope
    # near 0, where the slope barely enters the change: data/search/README.md.)
    if slope_p <= math.sqrt(var_p):
        why = (
            f"the percentile does not clearly rise with load near the crossings (slope {slope_p:.2f} "
            f"+- {math.sqrt(var_p):.2f} in log-log): the crossing's shift cannot be read from the pairs"
        )
        return _unpaired(_crossed(baseline), _crossed(candidate), confidence, b, c, why, len(a))
    k = slope_g / slope_p
    dp, dg = a[:, 2] - a[:, 1], a[:, 4] - a[:, 3]
    each = dg - k * dp
    n = len(each)
    d = float(each.mean())
    se2 = float(np.var(each, ddof=1)) / n
    # the uncertainty of k = g / b, by the delta method, with the mean latency change it multiplies
    var_k = var_g / slope_p**2 + (slope_g**2) * var_p / slope_p**4
    se = math.sqrt(se2 + var_k * float(dp.mean()) ** 2)
    note = (
        f"paired: {n} step pairs at the loads where either side may cross ({lo:.3g}-{hi:.3g}); "
        "log-log slopes there: "
        f"{obj.name} {slope_p:.2f}, throughput {slope_g:.2f}"
    )
    return _result(
        d, se, n - 1, confidence, baseline_rps=b, candidate_rps=c, design="interleaved", pairs=n, note=note
    )


#: the judged metric's spec (compare's Test shape): key and output key, name, unit, direction, weight key
def capacity_spec():
    from .specs import Spec

    return Spec(
        "rps_at_objective", "rps_at_objective", "throughput at the objective", "req/s", "higher", "all",
        "rps_at_objective",
    )  # fmt: skip


def capacity_test(baseline: Sequence, candidate: Sequence, recordings=None, confidence: float = 0.95):
    """The change in capacity at the objective as compare's :class:`headroom.compare.tests.Test`
    (for its Holm procedure and :func:`headroom.compare.decision.ratio_metric`), or (None, why)."""
    from ..noise import NoiseEstimate
    from .tests import Test

    ch = capacity_change(baseline, candidate, recordings=recordings, confidence=confidence)
    if ch.change is None:
        return None, ch.note
    per = ch.se * math.sqrt(ch.pairs) if ch.design == "interleaved" else ch.se
    note, cand = ch.note, ch.candidate_rps
    if ch.baseline_rps and cand and abs(math.log(cand / ch.baseline_rps) - ch.d) > 0.005:
        # the paired change is not the ratio of the two sides' own crossings: show the candidate's value
        # the change implies, and name both crossings, so no figure points against the change
        cand = ch.baseline_rps * math.exp(ch.d)
        note += (
            f"; the candidate's value is the baseline's times the change (each side's own crossing: "
            f"{ch.baseline_rps:,.0f} and {ch.candidate_rps:,.0f} req/s)"
        )
    noise = NoiseEstimate(per, ch.df, note)
    t = Test(capacity_spec(), ch.d, ch.se, ch.df, noise, ch.pairs, ch.pvalue, ch.baseline_rps, cand)
    return t, note

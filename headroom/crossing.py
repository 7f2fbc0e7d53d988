"""Where a latency percentile's curve crosses the objective, and that load's interval.

The capacity at the objective is the load (concurrency, or an open loop's
rate) at which the objective's percentile, as a function of load, reaches
the objective's bound; in req/s it is the throughput the server carries
there.  Its interval comes from the steps' own order-statistic intervals:

1. **Each step's percentile** is the exact nearest-rank value of its
   requests.  Its interval is the order-statistic one (the ranks around
   ``q * n`` from the binomial), computed at an *effective* number of
   requests ``n / phi``: requests are not independent (queues make
   neighbours' latencies alike), and ``phi``, the dispersion of the count of
   requests above the step's percentile between the step's whole seconds
   (time buckets) relative to the binomial's, measures by how much.  It is
   pooled over the run's steps (:func:`dispersion`; 1 when the counts are no
   more spread than independent requests would make them).  This assumes
   the seconds of a step are independent of each other (DESIGN.md:
   resample whole seconds, not requests).
2. **Between steps** the host's state (other work, caches, the scheduler)
   moves a step's percentile by more than its own requests can show: a
   variance ``tau**2`` of the log percentile is added to every step.  It is
   estimated from how far the steps near the crossing (within a factor
   :data:`WINDOW` of it) lie from the monotone fit below: the median of the
   squared residuals over their variance (scaled by the steps over the
   residual degrees of freedom) is set to the chi-square median, so one
   step of a few seconds' p99 (a burst of other work) moves it by one rank,
   not by its size; pooled with a prior of :data:`TAU_PRIOR` worth
   :data:`TAU_PRIOR_DF` steps, so a ramp of few steps does not claim a
   precision it cannot have measured.  Repeated steps at one load are the
   cleanest measure of it (pure error).
3. **The curve** is a weighted monotone (isotonic, non-decreasing)
   regression of the loads' mean log percentiles (pool adjacent
   violators), steps far from it down-weighted (Huber, beyond
   :data:`HUBER` standard deviations); a fitted value's standard error is
   that of its pooled block, but a load borrows at most its own weight
   again (:data:`POOL_CAP`) from the loads pooled with it: a block is
   honest only when its loads share one true value, and a rising curve
   pooled by noise does not (in simulation, full pooling covered 90 % of
   dense ramps' true crossings, this 96 %).  The bands ``fit +- z * se``
   say where the curve surely lies.
4. **The crossing**: the estimate is where the fitted curve crosses the
   bound (interpolated between the two loads around it, in latency and
   throughput, as between steps before); the interval's lower end is where
   the *upper* band crosses the bound (below it every load surely holds the
   objective), its upper end where the *lower* band does (above it every
   load surely breaks it).  This inverts a test at every load: a load is
   outside the interval when the data reject "the percentile there equals
   the bound", so with each band one-sided at ``(1 - confidence) / 2`` the
   interval covers the true crossing with about ``confidence``.
5. **In req/s**: the throughput at a load is read off a straight line of
   log throughput against log load through the steps within a factor
   :data:`RPS_WINDOW` of it and the nearest load on each side (read
   between steps, never beyond them: a line through a search's cluster of
   probes on one side of the load has a slope from a narrow range, and its
   standard error there is several times the steps'), the three nearest
   loads when fewer lie there, weighted like the percentile's steps (Huber): one step's
   throughput moves with the host's state by 10-30 % on a shared machine,
   and a line through its neighbours is steadier than that step, without
   assuming a shape the throughput has far from the crossing (it rises,
   flattens, and on a busy host falls).  The line's noise ``tau_rps`` comes
   from the steps near the crossing (the median estimator below, residual
   degrees of freedom the steps less the lines' leverages, with a prior
   of :data:`TAU_RPS_PRIOR`); the interval in req/s is the lowest and
   highest of the line's band (``+- z * se``) over the load interval.

An end of the interval that the steps do not reach (every step below the
crossing is unsure, or none above it surely breaks) is *open*: ``None``.

The isotonic regression is written here (15 lines) rather than imported
from ``scipy.optimize``, whose import alone costs more than a whole
summary; tests check it against scipy's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .stats import z_quantile

CONFIDENCE = 0.95
#: prior standard deviation of a step's log percentile between steps at one load (host state), and
#: its weight in steps; measured on repeated steps of this project's shared machine (docs/ramp.md)
TAU_PRIOR = 0.10
TAU_PRIOR_DF = 4.0
#: the same for a step's log throughput
TAU_RPS_PRIOR = 0.05
TAU_RPS_PRIOR_DF = 4.0
#: the steps' noise is measured on loads within this factor of the crossing
WINDOW = 2.0
#: a load's band borrows at most this multiple of its own weight from the loads pooled with it
POOL_CAP = 2.0
#: the throughput at a load: a straight line in log-log through the steps within this factor of it
RPS_WINDOW = 1.3


def isotonic(y: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weighted non-decreasing least-squares fit (pool adjacent violators): (fit, block of each point)."""
    means: list[float] = []
    weights: list[float] = []
    sizes: list[int] = []
    for yi, wi in zip(np.asarray(y, float), np.asarray(w, float)):
        means.append(float(yi))
        weights.append(float(wi))
        sizes.append(1)
        while len(means) > 1 and means[-2] > means[-1]:
            m, wt, sz = means.pop(), weights.pop(), sizes.pop()
            total = weights[-1] + wt
            means[-1] = (means[-1] * weights[-1] + m * wt) / total
            weights[-1] = total
            sizes[-1] += sz
    block = np.repeat(np.arange(len(means)), sizes)
    return np.asarray(means)[block], block


def dispersion(
    bucket_step: np.ndarray,
    bucket: np.ndarray,
    value_s: np.ndarray,
    count: np.ndarray,
    step_pct_s: np.ndarray,
) -> tuple[float, int]:
    """(phi, degrees of freedom): spread of the per-second count of requests above each step's percentile.

    ``bucket``, ``value_s``, ``count``: a run's histogram entries (time bucket, latency, requests);
    ``bucket_step`` the step of every bucket; ``step_pct_s`` each step's percentile.  Pearson's
    X**2 of the buckets' counts above the percentile against the binomial with the step's own
    share, over its degrees of freedom (buckets - 1 per step).  phi = max(1, X**2 / df); 1
    with no degrees of freedom.
    """
    n_b = len(bucket_step)
    if n_b == 0 or len(bucket) == 0:
        return 1.0, 0
    st = np.asarray(bucket_step)[bucket]
    limit = np.asarray(step_pct_s, float)[st]
    above = np.where(np.isfinite(limit) & (value_s > limit), count, 0)
    n = np.bincount(bucket, weights=count, minlength=n_b)
    e = np.bincount(bucket, weights=above, minlength=n_b)
    steps = int(np.max(bucket_step)) + 1 if n_b else 0
    ok_b = (n > 0) & (np.asarray(bucket_step) >= 0)
    bs = np.asarray(bucket_step)[ok_b]
    ns = np.bincount(bs, weights=n[ok_b], minlength=steps)
    es = np.bincount(bs, weights=e[ok_b], minlength=steps)
    kb = np.bincount(bs, minlength=steps)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(ns > 0, es / np.maximum(ns, 1), np.nan)
    use_s = (kb >= 2) & (p > 0) & (p < 1)
    use_b = ok_b.copy()
    use_b[ok_b] = use_s[bs]
    if not use_b.any():
        return 1.0, 0
    pb = p[np.asarray(bucket_step)[use_b]]
    x2 = float(np.sum((e[use_b] - n[use_b] * pb) ** 2 / (n[use_b] * pb * (1 - pb))))
    df = int(np.sum(kb[use_s] - 1))
    return (max(1.0, x2 / df) if df > 0 else 1.0), df


@dataclass(frozen=True)
class Probes:
    """The steps as points of the curve: load, log percentile and its sampling variance, log throughput."""

    load: np.ndarray
    log_pct: np.ndarray  # log seconds
    var: np.ndarray  # sampling variance of log_pct (order statistics at the effective n)
    log_rps: np.ndarray
    step: np.ndarray  # the step index of each point


@dataclass(frozen=True)
class Throughput:
    """Log throughput against log load, a local straight line (module docstring, 5.)."""

    lx: np.ndarray  # log load of every step
    y: np.ndarray  # log throughput of every step
    h: np.ndarray  # the steps' Huber weights
    tau: float  # the steps' noise around the line
    width: float = RPS_WINDOW

    def at(self, load: float) -> tuple[float, float]:
        """(log throughput, its standard error) at ``load``: the weighted line through the steps
        within a factor ``width`` of it (the nearest three loads when fewer lie there)."""
        a, unit = self._line(load)
        return a, self.tau * math.sqrt(unit)

    def _line(self, load: float) -> tuple[float, float]:
        """(the line's value at ``load``, its variance per unit noise: a step there has leverage
        its weight times this)."""
        x0 = math.log(load)
        ux = np.unique(self.lx)
        near = np.abs(self.lx - x0) <= math.log(self.width) + 1e-12
        # the nearest load on each side too: a line read between steps, not beyond them
        below, above = ux[ux <= x0 + 1e-12], ux[ux >= x0 - 1e-12]
        near |= np.isin(self.lx, [*below[-1:], *above[:1]])
        if len(np.unique(self.lx[near])) < min(3, len(ux)):
            keep = ux[np.argsort(np.abs(ux - x0), kind="stable")[: min(3, len(ux))]]
            near = np.isin(self.lx, keep)
        x, y, w = self.lx[near] - x0, self.y[near], self.h[near]
        if len(np.unique(x)) < 2:
            return float(np.average(y, weights=w)), 1.0 / float(w.sum())
        sw, sx, sxx = w.sum(), (w * x).sum(), (w * x * x).sum()
        det = sw * sxx - sx * sx
        a = ((w * y).sum() * sxx - sx * (w * x * y).sum()) / det
        return float(a), float(sxx / det)  # the intercept: the line at x0


@dataclass(frozen=True)
class Curve:
    """The monotone fit at every distinct load (ascending) and its bands (log seconds); the throughput."""

    load: np.ndarray
    fit: np.ndarray
    se: np.ndarray
    throughput: Throughput
    steps: tuple[tuple[int, ...], ...]  # step indices at each load
    tau: float  # between-step noise of the log percentile used
    df: float  # degrees of freedom of tau (residuals near the crossing)

    @property
    def tau_rps(self) -> float:
        return self.throughput.tau

    def rps_at(self, load: float) -> tuple[float, float]:
        """(req/s, standard error of its log) at ``load``."""
        m, se = self.throughput.at(load)
        return math.exp(m), se


@dataclass(frozen=True)
class ObjectiveCrossing:
    """Where the curve crosses the bound: estimate and interval, in load and in req/s.

    ``status``: "crossed", "held" (the fit holds the bound at every load), "at lowest step"
    (broken already at the lowest load), or "no data".  ``low``/``high`` (and the load's) are
    None where the interval is open (the steps do not reach a sure answer there).
    """

    status: str
    rps: float | None = None
    low: float | None = None
    high: float | None = None
    load: float | None = None
    load_low: float | None = None
    load_high: float | None = None
    between: tuple[int, int] | None = None  # indices into Curve.load around the estimate
    fraction: float = 0.0
    confidence: float = CONFIDENCE
    curve: Curve | None = None

    @property
    def half_width(self) -> float | None:
        """The interval's larger distance from the estimate, relative to it (None when open)."""
        if self.rps is None or self.low is None or self.high is None or self.rps <= 0:
            return None
        return max(self.rps - self.low, self.high - self.rps) / self.rps


#: median of the chi-square distribution with one degree of freedom
_CHI2_MEDIAN = 0.454936423119572
#: Huber's constant: a step further than this many standard deviations from the fit is down-weighted
HUBER = 2.5


def _robust_tau(resid: np.ndarray, var: np.ndarray, df: float, prior: float, prior_df: float) -> float:
    """tau with median(resid**2 / (var + tau**2)) at the chi-square median, pooled with the prior.

    The median, not the mean, of the standardised squared residuals: a step of a few seconds' p99
    (a burst of other work) moves it by one rank, not by its size.  The residuals of a fit with B
    blocks to N steps are scaled by N / df.
    """
    n = len(resid)
    est = 0.0
    if df > 0 and n > 0:
        r2 = resid**2 * (n / df)
        if np.median(r2 / np.maximum(var, 1e-12)) > _CHI2_MEDIAN:
            lo, hi = 0.0, max(1e-6, float(np.max(r2)))
            for _ in range(60):
                mid = (lo + hi) / 2
                if np.median(r2 / (var + mid)) > _CHI2_MEDIAN:
                    lo = mid
                else:
                    hi = mid
            est = (lo + hi) / 2
    df = max(df, 0.0)
    return math.sqrt((prior_df * prior**2 + df * est) / (prior_df + df))


def _fit(y: np.ndarray, var: np.ndarray, h: np.ndarray, inv: np.ndarray, n_loads: int, tau: float):
    """Loads' weighted means (weights h / (var + tau**2)), their isotonic fit, its se and blocks."""
    w = h / (var + tau**2)
    wl = np.bincount(inv, weights=w, minlength=n_loads)
    yl = np.bincount(inv, weights=w * y, minlength=n_loads) / wl
    fit, block = isotonic(yl, wl)
    wb = np.bincount(block, weights=wl)
    # a pooled block's se is honest only if its loads share one true value; a rising curve pooled by
    # noise does not: each load borrows at most POOL_CAP - 1 times its own weight from its block
    return fit, 1.0 / np.sqrt(np.minimum(wb[block], POOL_CAP * wl)), block


def _near(loads: np.ndarray, fit: np.ndarray, bound_s: float | None) -> np.ndarray:
    """Loads within a factor :data:`WINDOW` of the fit's crossing (all loads without one)."""
    if bound_s is None:
        return np.ones(len(loads), bool)
    above = np.flatnonzero(fit > math.log(bound_s))
    if len(above) == 0 or above[0] == 0:
        return np.ones(len(loads), bool)
    x = float(loads[above[0]] + loads[above[0] - 1]) / 2
    near = (loads >= x / WINDOW) & (loads <= x * WINDOW)
    return near if near.sum() >= 2 else np.ones(len(loads), bool)


@dataclass(frozen=True)
class _Fitted:
    fit: np.ndarray  # per load
    se: np.ndarray
    tau: float
    df: float
    near: np.ndarray


def _robust_isotonic(y, var, inv, loads, prior: tuple[float, float], bound_s=None, near=None) -> _Fitted:
    """The isotonic fit of steps' values against load, with the steps' noise tau and Huber weights.

    ``prior``: tau's prior (sd, weight in steps).  ``near``: the loads whose steps measure tau
    (default: those near the fit's crossing of ``bound_s``).  A few rounds: the weights depend on
    tau and the residuals, tau on the fit.
    """
    h = np.ones(len(y))
    tau, df = prior[0], 0.0
    for _ in range(6):
        fit, se, block = _fit(y, var, h, inv, len(loads), tau)
        nr = near if near is not None else _near(loads, fit, bound_s)
        use = nr[inv]
        df = float(use.sum() - len(np.unique(block[nr])))
        resid = y - fit[inv]
        tau = _robust_tau(resid[use], var[use], df, *prior)
        u = np.abs(resid) / np.sqrt(var + tau**2)
        h = np.minimum(1.0, HUBER / np.maximum(u, 1e-12))
    fit, se, block = _fit(y, var, h, inv, len(loads), tau)
    nr = near if near is not None else _near(loads, fit, bound_s)
    return _Fitted(fit, se, tau, df, nr)


def curve(
    p: Probes, bound_s: float | None = None, *, prior: float = TAU_PRIOR, prior_df: float = TAU_PRIOR_DF
) -> Curve:
    """The monotone fits of the log percentile and the log throughput against load (module docstring).

    With ``bound_s``, the steps' noise (tau, tau_rps) is measured on the loads within a factor
    :data:`WINDOW` of the crossing: near it is where it matters, and an overloaded step far
    above it (a p99 of seconds) says nothing about the noise there.
    """
    loads, inv = np.unique(p.load, return_inverse=True)
    lat = _robust_isotonic(p.log_pct, p.var, inv, loads, (prior, prior_df), bound_s)
    steps = tuple(tuple(int(s) for s in p.step[inv == j]) for j in range(len(loads)))
    return Curve(loads, lat.fit, lat.se, _throughput(p, loads, inv, lat.near), steps, lat.tau, lat.df)


def _throughput(p: Probes, loads: np.ndarray, inv: np.ndarray, near: np.ndarray) -> Throughput:
    """The local lines of log throughput, their noise measured on the steps near the crossing."""
    lx = np.log(p.load)
    t = Throughput(lx, p.log_rps, np.ones(len(lx)), TAU_RPS_PRIOR)
    use = near[inv]
    for _ in range(4):
        lines = [t._line(float(x)) for x in loads]
        resid = p.log_rps - np.array([a for a, _ in lines])[inv]
        # residual df: the steps less the smoother's effective parameters (the sum of their leverages)
        df = max(0.0, float(use.sum() - np.sum((t.h * np.array([u for _, u in lines])[inv])[use])))
        tau = _robust_tau(resid[use], np.zeros(int(use.sum())), df, TAU_RPS_PRIOR, TAU_RPS_PRIOR_DF)
        h = np.minimum(1.0, HUBER * tau / np.maximum(np.abs(resid), 1e-12))
        t = Throughput(lx, p.log_rps, h, tau)
    return t


def _cross(x0: float, x1: float, v0: float, v1: float, bound: float) -> tuple[float, float]:
    """(x, fraction) where the straight line from (x0, v0) to (x1, v1) reaches ``bound``."""
    frac = (bound - v0) / (v1 - v0) if v1 != v0 else 0.0
    frac = min(1.0, max(0.0, frac))
    return x0 + frac * (x1 - x0), frac


def crossing(c: Curve, bound_s: float, confidence: float = CONFIDENCE) -> ObjectiveCrossing:
    """Estimate and interval of the crossing of the curve ``c`` with ``bound_s`` (module docstring)."""
    if len(c.load) == 0:
        return ObjectiveCrossing("no data", confidence=confidence, curve=c)
    z = z_quantile(1 - (1 - confidence) / 2)
    f, up, dn = np.exp(c.fit), np.exp(c.fit + z * c.se), np.exp(c.fit - z * c.se)
    broken = np.flatnonzero(f > bound_s)
    if len(broken) == 0:
        return ObjectiveCrossing("held", confidence=confidence, curve=c)
    j = int(broken[0])
    if j == 0:
        return ObjectiveCrossing("at lowest step", between=(0, 0), confidence=confidence, curve=c)
    x, frac = _cross(c.load[j - 1], c.load[j], f[j - 1], f[j], bound_s)
    rps = c.rps_at(x)[0]
    sure = np.flatnonzero(up[:j] <= bound_s)  # loads that surely hold it
    x_lo = None
    if len(sure):
        k = int(sure[-1])
        x_lo = _cross(c.load[k], c.load[k + 1], up[k], up[k + 1], bound_s)[0]
    over = np.flatnonzero(dn[j:] > bound_s)  # loads that surely break it
    x_hi = None
    if len(over):
        m = j + int(over[0])
        x_hi = _cross(c.load[m - 1], c.load[m], dn[m - 1], dn[m], bound_s)[0]
    lo = hi = None
    if x_lo is not None and x_hi is not None:
        lo, hi = _rps_band(c, x_lo, x_hi, z, x)
    elif x_lo is not None:
        lo = _rps_band(c, x_lo, float(c.load[-1]), z, x)[0]
    elif x_hi is not None:
        hi = _rps_band(c, float(c.load[0]), x_hi, z, x)[1]
    return ObjectiveCrossing(
        "crossed", rps, lo, hi, float(x), x_lo, x_hi, (j - 1, j), float(frac), confidence, c
    )


def _rps_band(c: Curve, x_lo: float, x_hi: float, z: float, x: float) -> tuple[float, float]:
    """Lowest and highest throughput of the band over loads ``x_lo``..``x_hi`` and at the estimate's
    load ``x`` (the line read there is not always between its values at the ends and the steps: the
    interval holds the estimate)."""
    xs = [x_lo, x_hi, x, *c.load[(c.load > x_lo) & (c.load < x_hi)]]
    band = [c.rps_at(float(x)) for x in xs]
    return min(r * math.exp(-z * se) for r, se in band), max(r * math.exp(z * se) for r, se in band)


def _entries(lat) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(group, value index, count) of a LatencyStats, sorted by group then value."""
    if isinstance(lat.entries, np.ndarray):
        g, v = np.nonzero(lat.entries)
        return g, v, lat.entries[g, v]
    return lat.entries


def percentile_interval(
    lat, num: int, den: int, *, phi: float = 1.0, confidence: float = CONFIDENCE
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each step's order-statistic interval of the num/den percentile at the effective n = n / phi.

    ``lat`` is a step table's :class:`headroom.binning.LatencyStats`.  The ranks come from the
    binomial at ``n / phi`` requests (:func:`headroom.steps.order_statistic_ranks`) and are
    scaled back to the step's ``n``.  Returns (low s, high s, open top) per step; NaN for
    empty steps; ``open top``: the upper rank lies beyond the slowest request.
    """
    from .steps import order_statistic_ranks

    g, v, c = _entries(lat)
    groups = len(lat.requests)
    lo, hi = np.full(groups, np.nan), np.full(groups, np.nan)
    open_top = np.zeros(groups, bool)
    cum = np.cumsum(c)
    first = np.searchsorted(g, np.arange(groups), side="left")
    for s in range(groups):
        n = int(lat.requests[s])
        if n == 0:
            continue
        n_eff = max(1, int(n / max(phi, 1.0)))
        r_lo, r_hi, top = order_statistic_ranks(n_eff, num, den, confidence)
        scale = n / n_eff
        ranks = np.array([max(1, math.floor(r_lo * scale)), min(n, math.ceil(r_hi * scale))])
        open_top[s] = top or math.ceil(r_hi * scale) > n
        before = cum[first[s] - 1] if first[s] > 0 else 0
        lo[s], hi[s] = lat.values[v[np.searchsorted(cum, before + ranks)]]
    return lo, hi, open_top


def probes_of(t, objective, *, phi: float = 1.0, confidence: float = CONFIDENCE) -> Probes | None:
    """The usable steps of a step table as curve points for ``objective`` (None for a mean objective).

    Load is the step's concurrency, or its intended rate for an open loop; when the run does not
    say (a format without concurrency), the step's position, as a walk of the steps in order.
    """
    if objective.q is None:
        return None
    if t.intended_rps is not None and np.isfinite(t.intended_rps).all():
        load = t.intended_rps
    elif t.known_concurrency:
        load = t.concurrency
    else:
        load = t.index + 1.0
    pct = t.latency.pct[objective.name]
    lo, hi, _ = percentile_interval(t.latency, *objective.q, phi=phi, confidence=confidence)
    ok = t.usable & np.isfinite(load) & (pct > 0) & (lo > 0) & np.isfinite(hi) & (t.goodput_rps > 0)
    z = z_quantile(1 - (1 - confidence) / 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        var = ((np.log(hi) - np.log(lo)) / (2 * z)) ** 2
    idx = np.flatnonzero(ok)
    return Probes(load[idx], np.log(pct[idx]), var[idx], np.log(t.goodput_rps[idx]), idx)


def run_dispersion(hist, buckets, t, objective) -> tuple[float, int]:
    """:func:`dispersion` of a run for ``objective``'s percentile: ``hist`` and ``buckets`` are a
    summary's bucket histograms and buckets, ``t`` its step table; (1, 0) for a mean objective."""
    if objective is None or objective.q is None or len(buckets) == 0:
        return 1.0, 0
    pct = t.latency.pct[objective.name]
    return dispersion(buckets.step, hist.bucket, hist.values[hist.value], hist.count, pct)

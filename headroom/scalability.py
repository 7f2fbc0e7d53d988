"""The Universal Scalability Law fitted to a ramp's steps.

Gunther's USL models the throughput of a closed system at concurrency N as

    X(N) = lambda * N / (1 + sigma * (N - 1) + kappa * N * (N - 1))

``lambda`` is the throughput of one client (req/s), ``sigma`` the share of
the work that serializes (contention), ``kappa`` the cost of keeping shared
state coherent (crosstalk), which makes throughput fall past the peak
concurrency ``N* = sqrt((1 - sigma) / kappa)``.  By Little's law the latency
of a client is ``R(N) = N / X(N)``, which gives the latency-throughput curve
drawn on the headroom plot.

Fit: ``N / X = a + b (N - 1) + c N (N - 1)`` is linear in ``a = 1/lambda``,
``b = sigma/lambda``, ``c = kappa/lambda``; it is solved by weighted least
squares on relative errors with ``a > 0, b >= 0, c >= 0`` (an exact
non-negative least squares: every subset of the free coefficients is solved
and the best feasible one kept).  Three coefficients on a dozen points need
no optimizer, so no scipy.

Figures read off the curve (each with a bootstrap interval over steps,
bias-corrected, see :func:`bc_interval`):

* ``capacity_rps``: the highest modelled throughput inside the measured
  concurrency range, i.e. ``X(min(N*, N_max))``.  When ``N*`` lies beyond
  the highest measured concurrency the ramp has not reached the peak and
  the figure is a lower bound (``peak_reached`` is False).
* ``knee``: the concurrency that maximizes Kleinrock's power, throughput
  over latency, ``X^2 / N`` on the curve: past it each extra client buys
  less throughput than it costs in latency.  It solves
  ``3 kappa N^2 + (sigma - kappa) N - (1 - sigma) = 0`` and is reported
  only inside the measured range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

USL_MODEL = "X(N) = λN / (1 + σ(N−1) + κN(N−1))"
#: Below this R² (of log throughput) the model fits too poorly to give a headline figure.
MIN_R2 = 0.5
_SUBSETS = ((0,), (0, 1), (0, 2), (0, 1, 2))


@dataclass(frozen=True)
class USLFit:
    """A fitted USL curve, the figures read off it, and their bootstrap intervals.

    ``ci`` maps a figure's name (``lambda_rps``, ``sigma``, ``kappa``,
    ``peak_concurrency``, ``capacity_rps``, ``knee_rps``) to its interval.
    """

    lambda_rps: float
    sigma: float
    kappa: float
    points: int
    r2_log: float  # R^2 of log throughput
    n_lo: float  # lowest measured concurrency
    n_hi: float  # highest measured concurrency
    ci: dict = field(default_factory=dict, compare=False)
    confidence: float = 0.95
    model: str = USL_MODEL

    def rps_at(self, n) -> np.ndarray:
        """Modelled throughput (req/s) at concurrency ``n``."""
        n = np.asarray(n, dtype=np.float64)
        return self.lambda_rps * n / (1.0 + self.sigma * (n - 1.0) + self.kappa * n * (n - 1.0))

    def latency_s_at(self, n) -> np.ndarray:
        """Modelled latency (seconds) at concurrency ``n``, by Little's law ``N / X(N)``."""
        n = np.asarray(n, dtype=np.float64)
        return n / self.rps_at(n)

    @property
    def trusted(self) -> bool:
        """Whether the fit is good enough (R² of log throughput >= ``MIN_R2``) to give headline figures."""
        return bool(self.r2_log >= MIN_R2)

    @property
    def peak_concurrency(self) -> float:
        """``N*``, where modelled throughput peaks (inf when it never falls)."""
        return _peak(self.sigma, self.kappa)

    @property
    def peak_reached(self) -> bool:
        """Whether the ramp went as far as the modelled peak."""
        return self.peak_concurrency <= self.n_hi

    @property
    def capacity_rps(self) -> float:
        """Highest modelled throughput inside the measured concurrency range (req/s)."""
        return float(self.rps_at(min(self.peak_concurrency, self.n_hi)))

    @property
    def knee_concurrency(self) -> float | None:
        """Concurrency of maximum power (X^2/N) on the curve; None outside the measured range."""
        n = _knee(self.sigma, self.kappa)
        return n if self.n_lo <= n <= self.n_hi else None

    @property
    def knee_rps(self) -> float | None:
        """Modelled throughput at the knee (req/s); None when the knee is outside the measured range."""
        n = self.knee_concurrency
        return None if n is None else float(self.rps_at(n))

    @property
    def knee_note(self) -> str:
        n = _knee(self.sigma, self.kappa)
        if not math.isfinite(n):
            return "throughput still rises in proportion to concurrency: no knee"
        if n > self.n_hi:
            return f"beyond the measured load (modelled at concurrency {n:.0f})"
        if n < self.n_lo:
            return "below the lowest measured concurrency"
        return f"at concurrency {n:.1f}"

    def n_at_fraction(self, fraction: float) -> float:
        """Lowest concurrency where the curve reaches ``fraction`` of ``capacity_rps``."""
        target = fraction * self.capacity_rps
        grid = np.linspace(self.n_lo, min(self.peak_concurrency, self.n_hi), 512)
        hit = np.flatnonzero(self.rps_at(grid) >= target)
        return float(grid[hit[0]]) if len(hit) else self.n_hi

    def __repr__(self) -> str:
        return (
            f"USLFit(λ={self.lambda_rps:,.0f} req/s, σ={self.sigma:.3g}, κ={self.kappa:.3g}, "
            f"capacity={self.capacity_rps:,.0f} req/s, R²={self.r2_log:.2f})"
        )


def _peak(sigma: float, kappa: float) -> float:
    if sigma >= 1:
        return 1.0
    if kappa <= 0:
        return math.inf
    return math.sqrt((1.0 - sigma) / kappa)


def _knee(sigma: float, kappa: float) -> float:
    """Root of 3κN² + (σ−κ)N − (1−σ) = 0: the maximum of X(N)²/N."""
    if sigma >= 1:
        return 1.0
    if kappa <= 0:
        return (1.0 - sigma) / sigma if sigma > 0 else math.inf
    b = sigma - kappa
    return (-b + math.sqrt(b * b + 12.0 * kappa * (1.0 - sigma))) / (6.0 * kappa)


def _design(n: np.ndarray) -> np.ndarray:
    return np.stack([np.ones_like(n), n - 1.0, n * (n - 1.0)], axis=-1)


def _nnls(a: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted non-negative least squares of y on the columns of ``a``, batched.

    ``a`` is (points, 3); ``y`` and ``w`` are (batch, points).  Returns
    (batch, 3) coefficients: the best of the subsets whose solution is
    feasible (the first coefficient positive, the others non-negative).
    """
    batch = w.shape[0]
    best = np.full((batch, 3), np.nan)
    best_sse = np.full(batch, np.inf)
    for cols in _SUBSETS:
        sub = a[:, cols]
        ata = np.einsum("bp,pi,pj->bij", w, sub, sub)
        aty = np.einsum("bp,pi,bp->bi", w, sub, y)
        ok = np.abs(np.linalg.det(ata)) > 1e-300
        coef = np.full((batch, len(cols)), np.nan)
        if ok.any():
            coef[ok] = np.linalg.solve(ata[ok], aty[ok][..., None])[..., 0]
        feasible = ok & (coef[:, 0] > 0) & np.all(coef[:, 1:] >= 0, axis=1)
        resid = y - coef @ sub.T
        sse = np.einsum("bp,bp->b", w, resid**2)
        better = feasible & (sse < best_sse)
        full = np.zeros((batch, 3))
        full[:, cols] = coef
        best[better] = full[better]
        best_sse[better] = sse[better]
    return best


def _solve(n: np.ndarray, x: np.ndarray) -> np.ndarray:
    """USL coefficients (a, b, c) of ``N/X = a + b(N-1) + cN(N-1)`` for each row of x (batch, points)."""
    y = n[None, :] / x
    return _nnls(_design(n), y, 1.0 / y**2)  # relative errors: every step counts alike


def fit_usl(
    concurrency: np.ndarray,
    rps: np.ndarray,
    *,
    n_boot: int = 400,
    confidence: float = 0.95,
    seed: int = 0,
) -> USLFit | None:
    """Fit the USL to per-step (concurrency, throughput) points.

    Parameters
    ----------
    concurrency, rps
        One point per usable step; non-finite or non-positive points are dropped.
    n_boot
        Bootstrap resamples of the steps for the intervals (0: none).
    confidence
        Level of the intervals.
    seed
        Seed of the resampling.

    Returns
    -------
    USLFit, or None with fewer than 3 distinct concurrency levels.
    """
    n = np.asarray(concurrency, dtype=np.float64)
    x = np.asarray(rps, dtype=np.float64)
    ok = np.isfinite(n) & np.isfinite(x) & (n > 0) & (x > 0)
    n, x = n[ok], x[ok]
    if len(np.unique(n)) < 3:
        return None
    coef = _solve(n, x[None, :])[0]
    lam, sig, kap = 1.0 / coef[0], coef[1] / coef[0], coef[2] / coef[0]
    pred = n * lam / (1.0 + sig * (n - 1.0) + kap * n * (n - 1.0))
    lx = np.log(x)
    ss_tot = float(np.sum((lx - lx.mean()) ** 2))
    resid = lx - np.log(pred)
    r2 = 1.0 - float(np.sum(resid**2)) / ss_tot if ss_tot > 0 else 0.0
    fit = USLFit(float(lam), float(sig), float(kap), int(len(n)), r2, float(n.min()), float(n.max()))
    if n_boot <= 0 or len(n) < 4:
        return fit
    # residual bootstrap: the design (the concurrency levels) stays, the steps'
    # relative deviations from the curve are resampled (inflated for the 3
    # fitted coefficients), so a resample never loses the low-load steps
    rng = np.random.default_rng(seed)
    e = (resid - resid.mean()) * np.sqrt(len(n) / (len(n) - 3))
    draws = e[rng.integers(0, len(n), size=(n_boot, len(n)))]
    boot = _solve(n, pred[None, :] * np.exp(draws))
    boot = boot[np.isfinite(boot).all(axis=1)]
    figures = {
        k: [] for k in ("lambda_rps", "sigma", "kappa", "peak_concurrency", "capacity_rps", "knee_rps")
    }
    for c0, c1, c2 in boot:
        f = USLFit(1.0 / c0, c1 / c0, c2 / c0, fit.points, 0.0, fit.n_lo, fit.n_hi)
        figures["lambda_rps"].append(f.lambda_rps)
        figures["sigma"].append(f.sigma)
        figures["kappa"].append(f.kappa)
        figures["peak_concurrency"].append(f.peak_concurrency)
        figures["capacity_rps"].append(f.capacity_rps)
        k = _knee(f.sigma, f.kappa)
        figures["knee_rps"].append(float(f.rps_at(k)) if math.isfinite(k) else math.inf)
    ci = {}
    for key, vals in figures.items():
        v = np.asarray(vals)
        est = getattr(fit, key)
        ci[key] = bc_interval(v, est, confidence) if len(v) >= 20 and est is not None else None
    return USLFit(fit.lambda_rps, fit.sigma, fit.kappa, fit.points, r2, fit.n_lo, fit.n_hi, ci, confidence)


def bc_interval(boot: np.ndarray, estimate: float, confidence: float = 0.95) -> tuple[float, float] | None:
    """Efron's bias-corrected percentile interval of ``estimate`` from its bootstrap values.

    A plain percentile interval can miss its own estimate when the resamples
    sit mostly on one side of it (a skewed figure such as the capacity of a
    noisy fit, or a coefficient on its bound, sigma = 0).  The correction
    ``z0 = Phi^-1(share of resamples below the estimate)`` moves both
    quantiles towards the estimate; when every resample lies on one side
    (``z0`` infinite) the interval is closed at the estimate.  The result
    always contains the estimate.
    """
    from statistics import NormalDist

    v = np.asarray(boot, dtype=np.float64)
    v = v[~np.isnan(v)]
    if len(v) == 0 or estimate is None or not math.isfinite(estimate):
        return None
    nd = NormalDist()
    below = (np.sum(v < estimate) + 0.5 * np.sum(v == estimate)) / len(v)
    alpha = (1.0 - confidence) / 2.0
    if 0.0 < below < 1.0:
        z0 = nd.inv_cdf(float(below))
        probs = [nd.cdf(2 * z0 + nd.inv_cdf(alpha)), nd.cdf(2 * z0 + nd.inv_cdf(1 - alpha))]
    else:
        probs = [alpha, 1 - alpha]
    lo, hi = (float(q) for q in np.quantile(v, probs, method="inverted_cdf"))
    return min(lo, float(estimate)), max(hi, float(estimate))

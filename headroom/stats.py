"""Small statistics helpers: quantiles and tails of the normal and Student t distributions.

The comparison tests run-level changes against a between-run noise
estimate with its degrees of freedom (Student's t), and orders the metrics
by p-value for its weighted Holm procedure; none of it needs scipy, whose
import would cost more than the whole comparison.
"""

from __future__ import annotations

import math
from statistics import NormalDist


def z_quantile(p: float) -> float:
    """The ``p`` quantile of the standard normal distribution."""
    return NormalDist().inv_cdf(p)


def norm_cdf(x: float) -> float:
    """The standard normal distribution function at ``x``."""
    return NormalDist().cdf(x)


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom.

    Exact formulas for 1 and 2 degrees of freedom; up to 10, bisection on
    the distribution function (integrated numerically); above, the
    Cornish-Fisher expansion around the normal quantile (Abramowitz and
    Stegun 26.7.5), within 0.02 % there.
    """
    if df <= 0:
        return math.inf
    if p < 0.5:
        return -t_quantile(1 - p, df)
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    if df < 10:
        lo, hi = 0.0, 1e3
        for _ in range(80):
            mid = (lo + hi) / 2
            if 0.5 + _t_mass(mid, df) < p:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2
    z = z_quantile(p)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def _t_mass(x: float, df: float, steps: int = 400) -> float:
    """P(0 < T < x) for Student's t: Simpson's rule on the density, substituting t = tan(u)."""
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)
    top = math.atan(x)
    h = top / steps

    def f(u: float) -> float:
        t = math.tan(u)
        return c * (1 + t * t / df) ** (-(df + 1) / 2) * (1 + t * t)

    total = f(0.0) + f(top)
    for i in range(1, steps):
        total += (4 if i % 2 else 2) * f(i * h)
    return total * h / 3


def t_sf(x: float, df: float) -> float:
    """P(T > x) for Student's t with ``df`` degrees of freedom (``df`` = inf: the normal)."""
    if not math.isfinite(df) or df > 1e6:
        return 1.0 - NormalDist().cdf(x)
    if x < 0:
        return 1.0 - t_sf(-x, df)
    if df == 1:
        return 0.5 - math.atan(x) / math.pi
    if df == 2:
        return 0.5 - x / (2.0 * math.sqrt(2.0 + x * x))
    return max(0.0, 0.5 - _t_mass(x, df))

"""Capacity numbers from a run's steps, buckets and throughput bins.

Models (also in the README):

* Latency curve: ``L(X) = L0 / (1 - (X / Xmax) ** k)``, fitted by least
  squares on log latency to the bins' percentile curve.  ``L0`` is the
  latency at no load, ``Xmax`` the throughput the curve tends to, ``k >= 1``
  how sharp the bend is (k = 1 is the M/M/1 queue).  The knee is the
  throughput that maximizes Kleinrock's power (throughput / latency) on that
  curve: ``Xmax * (k + 1) ** (-1 / k)``; it is reported only when it falls
  within the measured throughputs.
* CPU: a straight line ``cpu_pct = a + b * rps`` fitted by weighted least
  squares to the time buckets; the throughput at the CPU target (70 % by
  default) is read off it, marked as extrapolated when beyond the data.
* Headroom (Cockcroft): the unused proportion of the maximum useful
  throughput, ``1 - current_load / max_useful``, where the maximum useful
  throughput is the throughput at the latency objective (the knee when no
  objective is given).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .aggregate import Buckets, Steps
from .binning import Bins
from .model import Objective

KNEE_MODEL = "L(X) = L0 / (1 - (X/Xmax)^k)"


@dataclass(frozen=True)
class KneeFit:
    """The fitted latency curve and its knee."""

    metric: str
    l0_s: float
    xmax_rps: float
    k: float
    knee_rps: float | None
    r2_log: float
    points: int
    note: str
    model: str = KNEE_MODEL

    def latency_at(self, rps: np.ndarray | float) -> np.ndarray:
        x = np.asarray(rps, dtype=np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            y = self.l0_s / (1.0 - (x / self.xmax_rps) ** self.k)
        return np.where(x < self.xmax_rps, y, np.nan)


@dataclass(frozen=True)
class CpuFit:
    """``cpu_pct = intercept + slope * rps`` over the time buckets."""

    intercept_pct: float
    slope_pct_per_rps: float
    points: int

    def at(self, rps: float | None) -> float | None:
        if rps is None:
            return None
        return self.intercept_pct + self.slope_pct_per_rps * rps


@dataclass(frozen=True)
class Capacity:
    """What a run says about capacity (see the module docstring for the models)."""

    max_rps: float | None
    max_rps_step: int | None
    objective: Objective | None
    rps_at_objective: float | None
    objective_status: str
    knee: KneeFit | None
    cpu: CpuFit | None
    cpu_target_pct: float
    rps_at_cpu_target: float | None
    cpu_target_extrapolated: bool
    cpu_s_per_req: float | None
    max_useful_rps: float | None
    current_load_rps: float | None
    headroom_pct: float | None
    target_load_rps: float | None
    instances: int | None

    @property
    def knee_rps(self) -> float | None:
        return self.knee.knee_rps if self.knee else None

    @property
    def cpu_at_knee(self) -> float | None:
        return self.cpu.at(self.knee_rps) if self.cpu and self.knee_rps is not None else None

    @property
    def cpu_at_objective(self) -> float | None:
        if self.cpu is None or self.rps_at_objective is None:
            return None
        return self.cpu.at(self.rps_at_objective)


def _metric(bins: Bins, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(values, usable) of a bin metric: a percentile or the mean."""
    lat = bins.latency
    if name == "mean":
        return lat.mean_s, lat.requests > 0
    return lat.pct[name], (lat.requests > 0) & ~lat.thin[name]


def objective_crossing(bins: Bins, objective: Objective) -> tuple[float | None, str]:
    """Highest throughput at which the objective holds, interpolated between bins.

    Walks the bins from low to high throughput and stops at the first usable
    bin (enough requests above the percentile) that breaks the objective;
    the answer is interpolated linearly between that bin and the one before.
    """
    y, ok = _metric(bins, objective.name)
    ok = ok & np.isfinite(bins.rps)
    if not ok.any():
        return None, "not enough requests in any bin to judge " + objective.name
    x, y = bins.rps[ok], y[ok]
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    bad = np.nonzero(y > objective.bound_s)[0]
    if len(bad) == 0:
        return float(x[-1]), "held at every measured load (a lower bound)"
    i = int(bad[0])
    if i == 0:
        return None, "violated already at the lowest measured load"
    x0, y0, x1, y1 = x[i - 1], y[i - 1], x[i], y[i]
    xc = x0 + (objective.bound_s - y0) * (x1 - x0) / (y1 - y0) if y1 != y0 else x0
    return float(xc), "crossed"


def fit_knee(bins: Bins, metric: str = "p99") -> KneeFit | None:
    """Fit the latency model to a bin metric and locate the knee; None with < 4 usable bins."""
    y, ok = _metric(bins, metric)
    ok = ok & np.isfinite(bins.rps) & (bins.rps > 0) & (y > 0)
    return fit_knee_xy(bins.rps[ok], y[ok], metric=metric)


def fit_knee_xy(
    x: np.ndarray, y: np.ndarray, *, metric: str = "p99", start: KneeFit | None = None
) -> KneeFit | None:
    """Fit ``L(X) = L0 / (1 - (X/Xmax)^k)`` to points (x req/s, y seconds).

    Least squares on log latency with scipy, from several starting points
    (or from ``start`` alone, as the bootstrap does).  None with fewer than 4
    usable points.
    """
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if ok.sum() < 4:
        return None
    from scipy.optimize import least_squares

    x, ly = np.asarray(x)[ok], np.log(np.asarray(y)[ok])
    xm = float(x.max())

    def resid(p):
        l0, xmax, k = p
        return np.log(l0) - np.log1p(-((x / xmax) ** k)) - ly

    lo = [1e-12, xm * (1 + 1e-9), 1.0]
    hi = [np.inf, xm * 100, 50.0]
    if start is not None:
        starts = [[start.l0_s, float(np.clip(start.xmax_rps, lo[1] * 1.0001, hi[1] * 0.9999)), start.k]]
    else:
        starts = [[float(np.exp(ly.min())), xm * f, k0] for k0 in (1.0, 3.0, 10.0) for f in (1.01, 1.2, 3.0)]
    best = None
    for p0 in starts:
        p0 = [float(np.clip(v, a * 1.0000001 if a > 0 else a, b_)) for v, a, b_ in zip(p0, lo, hi)]
        r = least_squares(resid, p0, bounds=(lo, hi), method="trf")
        if best is None or r.cost < best.cost:
            best = r
    l0, xmax, k = (float(v) for v in best.x)
    ss_res = float(np.sum(best.fun**2))
    ss_tot = float(np.sum((ly - ly.mean()) ** 2))
    r2 = 1 - ss_res / ss_tot if ss_tot > 0 else 0.0
    knee = xmax * (k + 1) ** (-1.0 / k)
    note = "knee within the measured throughputs"
    knee_rps: float | None = float(knee)
    if knee > xm:
        note = "latency still flat: the knee lies beyond the highest measured throughput"
        knee_rps = None
    elif knee < float(x.min()):
        note = "the knee lies below the lowest measured throughput"
    return KneeFit(metric, l0, xmax, k, knee_rps, r2, int(ok.sum()), note)


def fit_cpu(buckets: Buckets) -> CpuFit | None:
    """Weighted straight-line fit of bucket CPU % against bucket throughput."""
    ok = np.isfinite(buckets.cpu_pct) & (buckets.count > 0)
    if ok.sum() < 3 or np.ptp(buckets.rps[ok]) == 0:
        return None
    x, y, w = buckets.rps[ok], buckets.cpu_pct[ok], buckets.length_s[ok]
    xm, ym = np.average(x, weights=w), np.average(y, weights=w)
    slope = float(np.sum(w * (x - xm) * (y - ym)) / np.sum(w * (x - xm) ** 2))
    return CpuFit(float(ym - slope * xm), slope, int(ok.sum()))


def cpu_seconds_per_request(buckets: Buckets, cores: float) -> float | None:
    """CPU seconds spent per request over the buckets that have CPU data."""
    ok = np.isfinite(buckets.cpu_pct)
    n = int(buckets.count[ok].sum())
    if n == 0:
        return None
    return float(np.sum(buckets.cpu_pct[ok] / 100.0 * cores * buckets.length_s[ok]) / n)


def capacity(
    steps: Steps,
    buckets: Buckets,
    bins: Bins,
    *,
    objective: Objective | None = None,
    cpu_target_pct: float = 70.0,
    cpu_cores: float = 1.0,
    current_load_rps: float | None = None,
    target_load_rps: float | None = None,
) -> Capacity:
    """Compute every capacity number (see the module docstring).

    Parameters
    ----------
    steps, buckets, bins
        The run's tables.
    objective
        Latency objective; without one the knee is the maximum useful throughput.
    cpu_target_pct
        CPU busy percentage at which an instance counts as full (Cloud
        Foundry advises adding instances at 70 %).
    cpu_cores
        How many cores 100 % CPU stands for (for CPU seconds per request).
    current_load_rps
        Load for the headroom figure.
    target_load_rps
        Load to size the number of instances for.
    """
    valid = np.isfinite(steps.rps)
    if valid.any():
        i = int(np.nanargmax(np.where(valid, steps.rps, -np.inf)))
        max_rps, max_step = float(steps.rps[i]), int(steps.index[i])
    else:
        max_rps, max_step = None, None

    if objective is not None:
        rps_obj, status = objective_crossing(bins, objective)
        knee = fit_knee(bins, objective.name)
    else:
        rps_obj, status = None, "no objective given"
        knee = fit_knee(bins, "p99")

    cpu = fit_cpu(buckets)
    rps_cpu, extrapolated = None, False
    if cpu is not None and cpu.slope_pct_per_rps > 0:
        rps_cpu = (cpu_target_pct - cpu.intercept_pct) / cpu.slope_pct_per_rps
        if rps_cpu <= 0:
            rps_cpu = None
        else:
            top = float(np.nanmax(np.where(np.isfinite(buckets.cpu_pct), buckets.rps, np.nan)))
            extrapolated = rps_cpu > top

    useful = rps_obj if objective is not None else (knee.knee_rps if knee else None)
    headroom = None
    if current_load_rps is not None and useful:
        headroom = 100.0 * (1.0 - current_load_rps / useful)
    instances = None
    if target_load_rps is not None:
        per_instance = [v for v in (useful, rps_cpu) if v]
        if per_instance:
            instances = max(1, math.ceil(target_load_rps / min(per_instance)))
    return Capacity(
        max_rps=max_rps,
        max_rps_step=max_step,
        objective=objective,
        rps_at_objective=rps_obj,
        objective_status=status,
        knee=knee,
        cpu=cpu,
        cpu_target_pct=cpu_target_pct,
        rps_at_cpu_target=rps_cpu,
        cpu_target_extrapolated=extrapolated,
        cpu_s_per_req=cpu_seconds_per_request(buckets, cpu_cores),
        max_useful_rps=useful,
        current_load_rps=current_load_rps,
        headroom_pct=headroom,
        target_load_rps=target_load_rps,
        instances=instances,
    )

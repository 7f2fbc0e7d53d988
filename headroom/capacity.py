"""Capacity figures of one run, all from its steps (also in the README).

Every figure in req/s comes from per-step throughput (requests over the
step's duration), so none depends on the time-bucket width.

* **Model** (``scalability.py``): the Universal Scalability Law fitted to the
  usable steps.  Its ``capacity_rps`` (highest modelled throughput inside the
  measured concurrency range) is *the* capacity figure; its ``knee`` (maximum
  of throughput over latency on the curve) is *the* knee.  There is no other
  definition of either.  A model that fits poorly (R² of log throughput
  below ``scalability.MIN_R2``) gives neither: the fit is still reported,
  with its R², but no headline figure (capacity, knee, plateau, max useful
  throughput) is read off it.
* **Plateau throughput**: the median throughput of the saturated steps, the
  steps at or above the concurrency where the model first reaches 90 % of
  its capacity (without a model, or with one that fits poorly: the three
  highest steps).  A robust
  measured figure, used to compare runs; the single highest step is shown
  as information only.
* **Throughput at the objective** (``crossing.py``): the objective's
  percentile is fitted as a monotone (non-decreasing) function of load over
  the steps (repeated loads pooled), and the throughput is interpolated
  between the two loads around the fit's crossing of the bound; with
  steps already in increasing order and no repeats that is the first step
  that breaks the objective and the step before.  Its 95 % interval comes
  from the steps' order-statistic intervals, the requests' dispersion
  between seconds and the steps' noise around the fit.  "held" when the
  fit holds the objective at every load (then the plateau throughput is a
  lower bound).  A mean objective has no order-statistic interval: its
  steps are walked by load, the first that breaks it ends the walk.
* **Throughput at the CPU target**: the same walk on the steps' CPU; past
  the highest CPU measured the answer is "not reached" (no number), never
  a straight-line extrapolation.
* **Headroom** (Cockcroft) at a current load: ``1 - load / max useful``,
  where max useful is the throughput at the objective (the knee without an
  objective).  **Instances** for a target load: ``ceil(load / per
  instance)``, per instance the lower of max useful and the CPU-target
  throughput.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .crossing import CONFIDENCE, curve, probes_of
from .crossing import crossing as fitted_crossing
from .model import Objective
from .scalability import USLFit, fit_usl
from .steps import StepTable

SATURATION = 0.9


@dataclass(frozen=True)
class Crossing:
    """Where a per-step series first crosses a bound, walking the steps by concurrency.

    ``status``: "crossed" (interpolated between ``steps``), "held" (the
    objective never broken: ``rps`` is the plateau throughput, a lower
    bound), "not reached" (the CPU target never reached: no ``rps``),
    "at lowest step" (crossed already at the first step), or "no data".
    The JSON and the terminal use these words.
    """

    rps: float | None
    status: str
    steps: tuple[int, int] | None = None  # the steps it lies between
    fraction: float = 0.0  # where between them (0: the first)
    #: the objective's crossing only: its interval in req/s (None: not computed, or open at that end)
    low: float | None = None
    high: float | None = None
    #: the load (concurrency, or an open loop's rate) at the crossing and its interval
    load: float | None = None
    load_low: float | None = None
    load_high: float | None = None
    #: how the interval was made: the confidence, the requests' dispersion between seconds (phi),
    #: the steps' noise of the log percentile and log throughput around the fit (tau, tau_rps)
    interval: dict | None = None

    @property
    def lower_bound(self) -> bool:
        return self.status == "held"


@dataclass(frozen=True)
class Capacity:
    """What a run says about capacity (see the module docstring)."""

    model: USLFit | None
    plateau_rps: float | None
    plateau_steps: tuple[int, ...]
    peak_step_rps: float | None
    peak_step: int | None
    objective: Objective | None
    at_objective: Crossing | None
    cpu_target_pct: float
    at_cpu_target: Crossing
    cpu_max_pct: float | None  # highest step CPU measured
    cpu_at_knee: float | None  # CPU busy % at the knee (100 % = the run's cpu_cores)
    cpu_at_objective: float | None  # CPU busy % where the objective breaks
    cpu_s_per_req: float | None  # CPU seconds per request, pooled over the steps with CPU data
    current_load_rps: float | None
    target_load_rps: float | None

    @property
    def trusted_model(self) -> USLFit | None:
        """The model when it fits well enough for headline figures, else None."""
        return self.model if self.model is not None and self.model.trusted else None

    @property
    def capacity_rps(self) -> float | None:
        m = self.trusted_model
        return m.capacity_rps if m else None

    @property
    def knee_rps(self) -> float | None:
        m = self.trusted_model
        return m.knee_rps if m else None

    @property
    def rps_at_objective(self) -> float | None:
        return self.at_objective.rps if self.at_objective else None

    @property
    def rps_at_cpu_target(self) -> float | None:
        return self.at_cpu_target.rps if self.at_cpu_target.status == "crossed" else None

    @property
    def max_useful_rps(self) -> float | None:
        return self.rps_at_objective if self.objective is not None else self.knee_rps

    @property
    def headroom_pct(self) -> float | None:
        useful = self.max_useful_rps
        if self.current_load_rps is None or not useful:
            return None
        return 100.0 * (1.0 - self.current_load_rps / useful)

    @property
    def instances(self) -> int | None:
        if self.target_load_rps is None:
            return None
        per = [v for v in (self.max_useful_rps, self.rps_at_cpu_target) if v]
        return max(1, math.ceil(self.target_load_rps / min(per))) if per else None


def crossing(t: StepTable, values: np.ndarray, bound: float) -> Crossing:
    """First step (by concurrency) whose value exceeds ``bound``, throughput interpolated."""
    order = [int(i) for i in t.order() if t.usable[i] and np.isfinite(values[i])]
    if not order:
        return Crossing(None, "no data")
    x, y = t.goodput_rps, values
    for pos, i in enumerate(order):
        if y[i] > bound:
            if pos == 0:
                return Crossing(None, "at lowest step", (i, i))
            j = order[pos - 1]
            frac = float((bound - y[j]) / (y[i] - y[j])) if y[i] != y[j] else 0.0
            return Crossing(float(x[j] + frac * (x[i] - x[j])), "crossed", (j, i), frac)
    return Crossing(float(np.max(x[order])), "held")


def objective_crossing(
    t: StepTable, objective: Objective, *, phi: float = 1.0, confidence: float = CONFIDENCE
) -> Crossing:
    """The throughput at a percentile objective and its interval, from the monotone fit (crossing.py).

    A mean objective has no order-statistic interval: the walk of :func:`crossing` instead.
    ``phi``: the requests' dispersion between seconds (:func:`headroom.crossing.dispersion`).
    """
    if objective.q is None:
        return crossing(t, t.latency.mean_s, objective.bound_s)
    p = probes_of(t, objective, phi=phi, confidence=confidence)
    if p is None or len(p.load) == 0:
        return Crossing(None, "no data")
    c = curve(p, objective.bound_s)
    x = fitted_crossing(c, objective.bound_s, confidence)
    kind = (
        "rate"
        if t.intended_rps is not None and np.isfinite(t.intended_rps).all()
        else ("concurrency" if t.known_concurrency else "step")
    )
    how = {
        "load": kind,  # what the load of ``load``, ``load_low``, ``load_high`` is
        "confidence": confidence,
        "phi": round(float(phi), 3),
        "tau": round(c.tau, 4),
        "tau_rps": round(c.tau_rps, 4),
        "loads": len(c.load),
        "steps": len(p.load),
    }
    if x.status == "held":
        return Crossing(float(np.max(t.goodput_rps[p.step])), "held", interval=how)
    if x.status == "at lowest step":
        s = c.steps[0][0]
        return Crossing(None, "at lowest step", (s, s), interval=how)
    j, i = x.between
    steps = (c.steps[j][-1], c.steps[i][0])
    return Crossing(x.rps, "crossed", steps, x.fraction, x.low, x.high, x.load, x.load_low, x.load_high, how)


def _at(c: Crossing, values: np.ndarray) -> float | None:
    """A per-step series read at a crossing (interpolated the same way)."""
    if c is None or c.status != "crossed":
        return None
    j, i = c.steps
    v = values[j] + c.fraction * (values[i] - values[j])
    return float(v) if np.isfinite(v) else None


def plateau(t: StepTable, model: USLFit | None) -> tuple[int, ...]:
    """The saturated steps: at or above the concurrency where the model reaches 90 % of capacity.

    Without a trusted model (none, or R² below ``MIN_R2``): the three highest steps.
    """
    use = np.flatnonzero(t.usable)
    if len(use) == 0:
        return ()
    if model is not None and model.trusted:
        n90 = model.n_at_fraction(SATURATION)
        sat = [int(i) for i in use if t.concurrency[i] >= n90 - 1e-9]
        if sat:
            return tuple(sat)
    top = use[np.argsort(-t.goodput_rps[use], kind="stable")[:3]]
    return tuple(sorted(int(i) for i in top))


def fit_model(t: StepTable, *, n_boot: int = 400, seed: int = 0) -> USLFit | None:
    """The USL fitted to the usable steps (None without known concurrency or with < 3 levels)."""
    if not t.known_concurrency:
        return None
    u = t.usable
    return fit_usl(t.concurrency[u], t.goodput_rps[u], n_boot=n_boot, seed=seed)


def capacity(
    t: StepTable,
    *,
    objective: Objective | None = None,
    cpu_target_pct: float = 70.0,
    current_load_rps: float | None = None,
    target_load_rps: float | None = None,
    n_boot: int = 400,
    phi: float = 1.0,
) -> Capacity:
    """Every capacity figure of a run from its per-step table (see the module docstring).

    Parameters
    ----------
    t
        The run's per-step table.
    objective
        Latency objective, e.g. ``parse_objective("p99<=20ms")``.
    cpu_target_pct
        CPU busy percentage at which an instance counts as full (Cloud
        Foundry advises adding instances at 70 %).
    current_load_rps, target_load_rps
        Load for the headroom figure; load to size the number of instances for.
    n_boot
        Bootstrap resamples of the steps for the model's intervals.
    phi
        The requests' dispersion between seconds for the objective's interval
        (:func:`headroom.crossing.dispersion`; 1: independent requests).
    """
    model = fit_model(t, n_boot=n_boot)
    sat = plateau(t, model)
    plateau_rps = float(np.median(t.goodput_rps[list(sat)])) if sat else None
    use = np.flatnonzero(t.usable)
    peak = int(use[np.argmax(t.goodput_rps[use])]) if len(use) else None
    at_obj = None
    if objective is not None:
        at_obj = objective_crossing(t, objective, phi=phi)
        if at_obj.status == "held" and plateau_rps is not None:
            # held at every step: the sustained (plateau) throughput is the lower bound to
            # state, not the single highest step
            at_obj = Crossing(plateau_rps, "held", interval=at_obj.interval)
    at_cpu = crossing(t, t.cpu_pct, cpu_target_pct)
    if at_cpu.status == "held":  # below the target at every step: no throughput to state
        at_cpu = Crossing(None, "not reached")
    has_cpu = np.isfinite(t.cpu_pct) & t.usable
    cpu_at_knee = None
    if model is not None and model.trusted and model.knee_concurrency is not None and has_cpu.sum() >= 2:
        o = np.argsort(t.concurrency[has_cpu])
        cpu_at_knee = float(
            np.interp(model.knee_concurrency, t.concurrency[has_cpu][o], t.cpu_pct[has_cpu][o])
        )
    n_cpu = t.goodput_rps * t.duration_s
    cpu_req = None
    if has_cpu.any():
        core_s = t.cpu_pct[has_cpu] / 100.0 * t.cpu_cores * t.duration_s[has_cpu]
        cpu_req = float(core_s.sum() / n_cpu[has_cpu].sum())
    return Capacity(
        model=model,
        plateau_rps=plateau_rps,
        plateau_steps=sat,
        peak_step_rps=float(t.goodput_rps[peak]) if peak is not None else None,
        peak_step=peak,
        objective=objective,
        at_objective=at_obj,
        cpu_target_pct=cpu_target_pct,
        at_cpu_target=at_cpu,
        cpu_max_pct=float(np.max(t.cpu_pct[has_cpu])) if has_cpu.any() else None,
        cpu_at_knee=cpu_at_knee,
        cpu_at_objective=_at(at_obj, t.cpu_pct),
        cpu_s_per_req=cpu_req,
        current_load_rps=current_load_rps,
        target_load_rps=target_load_rps,
    )

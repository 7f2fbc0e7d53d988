"""Metric specs: what a comparison judges, and each metric's value at a step.

A spec names a per-step series (``key``), its key in the output (``out``),
which pairs it is judged on (every matched pair, or the saturated ones for
plateau throughput) and its share of the error budget (``weight``: "" for a
metric shown, not tested).  Names, units and directions come from
:mod:`headroom.metrics`, declared once.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..model import Objective, percentile_label
from ..steps import StepTable


@dataclass(frozen=True)
class Spec:
    key: str  # the per-step series
    out: str  # the metric's key in the output
    name: str
    unit: str
    better: str
    pairs: str  # "all" or "plateau"
    weight: str  # its WEIGHTS entry; "" = shown, not tested


def specs(objective: Objective | None, has_cpu: bool) -> list[Spec]:
    """The judged metrics: plateau throughput, p50, the tail percentile (p99 or the objective's),
    CPU per request when every run has it; p90 shown."""
    plateau = "plateau throughput (paired)"
    out = [Spec("rps", "paired_plateau_rps", plateau, "req/s", "higher", "plateau", "paired_plateau_rps")]
    tail = objective.name if objective is not None and objective.name != "p50" else "p99"
    names = ["p50", "p90", "p99"] + ([tail] if tail not in ("p50", "p90", "p99") else [])
    for name in names:
        weight = "p50_s" if name == "p50" else ("tail" if name == tail else "")
        out.append(spec_of(f"{name}_s", weight, f"{percentile_label(name)} latency"))
    if has_cpu:
        out.append(spec_of("cpu_s_per_req", "cpu_s_per_req"))
    return out


def spec_of(key: str, weight: str, name: str | None = None) -> Spec:
    """A per-step metric judged at every matched step, as headroom/metrics.py declares it (a
    percentile it does not declare, e.g. an objective's p99.9: ``name``, in seconds, lower better)."""
    from ..metrics import BY_KEY

    m = BY_KEY.get(key)
    if m is None:
        return Spec(key, key, name or key, "s", "lower", "all", weight)
    return Spec(key, key, m.name.removesuffix(" at matched steps"), m.unit, m.better, "all", weight)


def all_levels(spec: Spec) -> Spec:
    """Throughput over every matched level: in an interleaved recording A and B of a level share the
    host, so the unsaturated levels (where throughput is concurrency / latency) are replicates too."""
    return dataclasses.replace(spec, pairs="all", name="throughput (paired levels)")


def series(t: StepTable, key: str) -> np.ndarray:
    """A per-step series by metric key; NaN where it cannot be used."""
    if key == "rps":
        return t.goodput_rps
    if key == "cpu_s_per_req":
        return t.cpu_s_per_req
    if key == "mean_s":
        return np.where(t.requests > 0, t.latency.mean_s, np.nan)
    name = key[: -len("_s")]
    v = t.latency.pct[name]
    return np.where(t.latency.thin[name] | (t.requests == 0), np.nan, v)


def logs(side, steps: list[tuple[int, ...]], key: str) -> np.ndarray:
    """(runs, pairs) log values of a metric; NaN where unusable."""
    out = np.full((len(side), len(steps)), np.nan)
    for r, s in enumerate(side):
        v = series(s.table, key)[[p[r] for p in steps]]
        with np.errstate(invalid="ignore", divide="ignore"):
            out[r] = np.where(v > 0, np.log(np.where(v > 0, v, 1.0)), np.nan)
    return out


#: latencies recorded on a coarse grid (hey writes seconds to 4 decimals: 0.1 ms): a level whose every
#: pair of steps has its percentile at most this many quanta on both sides does not decide alone (0.1 ms
#: against 0.2 ms is +100 % of rounding, and a level sitting on a rounding boundary keeps it in every
#: pair); its pairs still count in the line across load (leaving them out cost a 2x change at light load
#: its power: nginx's p50 0.2 ms against 0.3 ms is real there).  The rule looks at the larger of the two
#: values only, so it is the same whichever side is A (sign flips stay exact)
COARSE_QUANTA = 3
#: the grids looked for, coarsest first (1 us and finer: never coarse next to a request's latency)
QUANTA_S = (1e-3, 1e-4, 1e-5)


def is_percentile(key: str) -> bool:
    """A latency percentile's key (p50_s, p99.9_s), not the mean or CPU per request."""
    return key.startswith("p") and key.endswith("_s")


def latency_quantum(values: np.ndarray) -> float | None:
    """The coarsest grid (:data:`QUANTA_S`) every positive value lies on, or None (finer than 10 us,
    or fewer than 3 values).  Percentiles are nearest-rank values, so they lie on the tool's grid."""
    v = np.asarray(values, np.float64)
    v = v[np.isfinite(v) & (v > 0)]
    if len(v) < 3:
        return None
    for q in QUANTA_S:
        k = v / q
        if np.all(np.abs(k - np.rint(k)) < 1e-6):
            return q
    return None


def coarse(b: np.ndarray, c: np.ndarray, q: float | None) -> np.ndarray:
    """Pairs whose larger value is within :data:`COARSE_QUANTA` quanta of zero (rounding, not change)."""
    if q is None:
        return np.zeros(np.shape(b), bool)
    with np.errstate(invalid="ignore"):
        return np.fmax(b, c) <= COARSE_QUANTA * q * (1 + 1e-9)


def log_ratio(b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """log(c) - log(b) where both are positive, NaN elsewhere."""
    ok = (b > 0) & (c > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok, np.log(np.where(ok, c, 1.0)) - np.log(np.where(ok, b, 1.0)), np.nan)

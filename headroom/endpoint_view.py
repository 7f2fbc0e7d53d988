"""Every endpoint of a run, step by step: its requests, share, errors, exact percentiles, throughput.

A run whose generator names its requests (:mod:`headroom.endpoints`) is read into every
(step, name)'s exact latency histogram and failed requests; :func:`endpoint_table` turns those into
one :class:`Endpoint` per name (ordered by requests, the most first) with, per step, its kept
requests, failed requests, share of the step's requests, its own throughput (kept requests per
second of the step) and nearest-rank percentiles (as the whole run's: exact, from the histogram),
and where an objective is given, the endpoint's own throughput where its latency crosses it.

``headroom summary RUN --endpoints`` prints it; the JSON's ``endpoints`` holds it; the report draws
it (:func:`headroom.plot.endpoints.endpoint_grid`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .binning import LatencyStats, stats_from_entries
from .model import Objective, Run, extra_percentiles, render_html

NS = 1e9


@dataclass(frozen=True, eq=False)
class Endpoint:
    """One request name's steps (arrays over the run's steps; latencies in seconds).

    ``objective_rps``: the endpoint's own req/s where its objective percentile first passes the
    bound, interpolated between the last step within it and the first beyond (in order of
    concurrency); None when no step passed it or none was within it (``objective_state`` says which:
    "crossed", "never crossed", "beyond at the first step", "no successful request" or "no objective").
    """

    name: str
    concurrency: np.ndarray
    requests: np.ndarray
    errors: np.ndarray
    share: np.ndarray
    rps: np.ndarray
    latency: LatencyStats
    objective_rps: float | None
    objective_state: str

    @property
    def total(self) -> int:
        """Requests of every step, failed ones too."""
        return int(self.requests.sum() + self.errors.sum())


@dataclass(frozen=True, eq=False)
class Endpoints:
    """The endpoints of one run (:func:`endpoint_table`), the most requested first."""

    label: str
    endpoints: tuple[Endpoint, ...]
    objective: Objective | None

    def __len__(self) -> int:
        return len(self.endpoints)

    def __iter__(self):
        return iter(self.endpoints)

    def __getitem__(self, name: str) -> Endpoint:
        for e in self.endpoints:
            if e.name == name:
                return e
        raise KeyError(name)

    def __repr__(self) -> str:
        return f"<Endpoints {self.label!r}: " + ", ".join(f"{e.name} ({e.total:,})" for e in self) + ">"

    def _repr_html_(self) -> str:
        return render_html("Endpoints", self)


def endpoint_table(run: Run, objective: Objective | None = None, steps=None) -> Endpoints | None:
    """The run's endpoints step by step (None when its requests carry no names).

    ``steps`` (the analysed :class:`~headroom.model.Steps`, default the run's reduced steps) gives
    each step's span and concurrency.
    """
    ep = run.endpoints
    if ep is None or not ep.names:
        return None
    steps = steps if steps is not None else run.reduced.steps
    n, m = ep.n_steps, len(ep.names)
    extra = extra_percentiles(objective)
    sums = np.bincount(ep.group, weights=ep.values[ep.index] * ep.count, minlength=n * m)
    lat = stats_from_entries((ep.group, ep.index, ep.count), n * m, sums, ep.values, extra=extra)
    k = min(n, len(steps))
    duration = np.full(n, np.nan)
    duration[:k] = (steps.end_ns[:k] - steps.start_ns[:k]) / NS
    conc = np.full(n, np.nan)
    conc[:k] = [np.nan if c is None else float(c) for c in list(steps.concurrency)[:k]]
    req = ep.requests
    every = (req + ep.failed).sum(axis=1)
    out = []
    for j, name in enumerate(ep.names):
        own = _columns(lat, j, m)
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.where(every > 0, (req[:, j] + ep.failed[:, j]) / np.maximum(every, 1), np.nan)
            rps = np.where(duration > 0, req[:, j] / duration, np.nan)
        at, state = objective_rps(own, rps, conc, objective)
        out.append(Endpoint(name, conc, req[:, j].copy(), ep.failed[:, j].copy(), share, rps, own, at, state))
    out.sort(key=lambda e: (-e.total, e.name))
    return Endpoints(run.label, tuple(out), objective)


def _columns(lat: LatencyStats, j: int, m: int) -> LatencyStats:
    """Endpoint ``j``'s rows (every step) of statistics over groups ``step * m + name``."""
    pick = lambda a: np.asarray(a)[j::m]  # noqa: E731
    return LatencyStats(pick(lat.requests), pick(lat.mean_s), pick(lat.max_s),
                        {k: pick(v) for k, v in lat.pct.items()}, {k: pick(v) for k, v in lat.thin.items()},
                        np.zeros((len(pick(lat.requests)), 0)), None)  # fmt: skip


def objective_rps(lat: LatencyStats, rps: np.ndarray, conc: np.ndarray, objective: Objective | None):
    """The endpoint's req/s where its objective latency first passes the bound, and the state."""
    if objective is None:
        return None, "no objective"
    v = lat.mean_s if objective.q is None else lat.pct[objective.name]
    order = np.argsort(np.where(np.isfinite(conc), conc, np.inf), kind="stable")
    order = [i for i in order if np.isfinite(v[i]) and np.isfinite(rps[i])]
    if not order:
        return None, "no successful request"
    within = None
    for i in order:
        if v[i] > objective.bound_s:
            if within is None:
                return None, "beyond at the first step"
            v0, v1, r0, r1 = v[within], v[i], rps[within], rps[i]
            f = (objective.bound_s - v0) / (v1 - v0) if v1 > v0 else 0.0
            return float(r0 + f * (r1 - r0)), "crossed"
        within = i
    return None, "never crossed"


def endpoints_doc(e: Endpoints) -> list[dict]:
    """The JSON ``endpoints``: one object per name, its steps and totals (latencies in seconds)."""
    out = []
    for ep in e:
        steps = []
        for k in range(len(ep.requests)):
            steps.append({
                "step": k + 1,
                "concurrency": _num(ep.concurrency[k]),
                "requests": int(ep.requests[k]),
                "errors": int(ep.errors[k]),
                "share": _num(ep.share[k]),
                "rps": _num(ep.rps[k]),
                "mean_s": _num(ep.latency.mean_s[k]),
                **{f"{p}_s": _num(v[k]) for p, v in ep.latency.pct.items()},
                "max_s": _num(ep.latency.max_s[k]),
            })  # fmt: skip
        out.append({
            "name": ep.name,
            "requests": int(ep.requests.sum()),
            "errors": int(ep.errors.sum()),
            "share": ep.total / max(sum(x.total for x in e), 1),
            "objective_rps": ep.objective_rps,
            "objective_state": ep.objective_state,
            "steps": steps,
        })  # fmt: skip
    return out


def _num(v):
    v = float(v)
    return None if not np.isfinite(v) else v

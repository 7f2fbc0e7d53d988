"""Which endpoint changed: every request name's latency and error rate judged at matched load.

When both sides' requests carry two or more names (:mod:`headroom.endpoints`), each name is judged
on the same matched steps as the whole run (:mod:`headroom.compare.pairing`):

* **units**: in interleaved recordings (``ramp --ab --interleave steps``) every A/B step pair of
  a level, recorded seconds apart on the same host; otherwise every matched level, the steps of a
  side's runs at that level pooled;
* **latency** (p50, and the objective's percentile, else p99): per unit the log of the
  candidate's exact nearest-rank percentile over the baseline's (both from the endpoint's own
  requests of the unit's steps; a unit with fewer than :data:`MIN_REQUESTS` requests a side, or
  :data:`MIN_TAIL_REQUESTS` for a tail percentile, is left out); the test is the sign flip of the
  units' mean (every pattern up to 14 units, else 4,999 seeded draws): exact under "no change"
  whatever the noise's shape, each unit's two halves exchangeable;
* **error rate**: the endpoint's failed requests of the units, the candidate's share of them
  against its share of the requests (the exact conditional binomial test); with no failed request
  on either side there is nothing to test, and it takes no share of the family;
* the family-wise error over every endpoint and metric is held at ``1 - confidence`` by Holm's
  step-down; a metric is called **regressed** (or improved) when Holm rejects it, its interval is
  clear of no change *and* its change is
  beyond the threshold the worse (better) way: at least ``threshold`` for a latency, at least
  ``error_threshold`` points for the error rate.  An endpoint with too few units (fewer than
  :data:`MIN_UNITS`) is said, not judged.

CPU per request stays a whole-server metric: the server's CPU is not split by request name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .joint import patterns

#: requests a side a unit needs for its median, and for a tail percentile (p99: at least one request
#: above the percentile's rank on each side)
MIN_REQUESTS = 10
MIN_TAIL_REQUESTS = 100
#: units an endpoint's latency needs to be judged (6 units: the smallest two-sided flip p is 2/64)
MIN_UNITS = 6


@dataclass(frozen=True)
class EndpointMetric:
    """One metric of one endpoint: its change, interval, p-value and call.

    ``change``: the latency's relative change (geometric mean over the units, minus 1) or the error
    rate's difference in points (a fraction); ``interval`` at ``level`` two-sided (the Bonferroni
    share of the family); ``baseline``/``candidate``: the medians of the units' values (seconds) or
    the pooled error rates; ``call``: "regressed", "improved", "no change shown" or "not judged".
    """

    key: str
    label: str
    change: float | None
    interval: tuple[float, float] | None
    level: float
    p: float | None
    units: int
    baseline: float | None
    candidate: float | None
    call: str
    why: str = ""


@dataclass(frozen=True)
class EndpointVerdict:
    """One endpoint: its verdict ("regressed", "improved", "no change" or "not judged") and metrics."""

    name: str
    verdict: str
    metrics: tuple[EndpointMetric, ...]
    requests: tuple[int, int]  # every request of the matched steps, baseline and candidate
    share: float  # of the candidate's requests of the matched steps

    def worst(self) -> EndpointMetric | None:
        """The metric that made it regressed, else None: the surest change the worse way (the highest
        bottom of its interval; an error rate, which has none, by its change)."""
        bad = [m for m in self.metrics if m.call == "regressed"]
        return max(bad, key=_surest, default=None)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "verdict": self.verdict,
            "requests": {"baseline": self.requests[0], "candidate": self.requests[1]},
            "share": self.share,
            "metrics": [
                {
                    "metric": m.key,
                    "label": m.label,
                    "change": m.change,
                    "interval": list(m.interval) if m.interval else None,
                    "interval_confidence": m.level,
                    "p": m.p,
                    "units": m.units,
                    "baseline": m.baseline,
                    "candidate": m.candidate,
                    "call": m.call,
                    "why": m.why,
                }  # fmt: skip
                for m in self.metrics
            ],
        }


class _Steps:
    """One run's endpoint counts, split by (step, name) for quick histograms."""

    def __init__(self, ep):
        self.ep = ep
        self.m = len(ep.names)
        self.cut = np.searchsorted(ep.group, np.arange(ep.n_steps * self.m + 1))

    def hist(self, step: int, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(values s, counts) of the name's kept requests in the step (empty when none)."""
        ep = self.ep
        if name not in ep.names or step >= ep.n_steps:
            return np.zeros(0), np.zeros(0, np.int64)
        g = step * self.m + ep.names.index(name)
        a, b = self.cut[g], self.cut[g + 1]
        return ep.values[ep.index[a:b]], ep.count[a:b]

    def failed(self, step: int, name: str) -> int:
        ep = self.ep
        if name not in ep.names or step >= ep.n_steps:
            return 0
        return int(ep.failed[step, ep.names.index(name)])


def _pooled(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    vals = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0)
    cnts = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
    if not len(vals):
        return vals, cnts
    order = np.argsort(vals, kind="stable")
    return vals[order], cnts[order]


def _percentile(vals: np.ndarray, cnts: np.ndarray, q: tuple[int, int]) -> float:
    n = int(cnts.sum())
    rank = max(1, -((-n * q[0]) // q[1]))
    return float(vals[np.searchsorted(np.cumsum(cnts), rank)])


def units_of(sides, pairs: list[tuple], recordings) -> list[tuple[list, list]]:
    """Every unit's steps: ([(baseline run, step)], [(candidate run, step)]) (module docstring)."""
    out = []
    for _load, bsteps, csteps in pairs:
        if recordings is not None:
            out += [([(bi, bsteps[bi])], [(ci, csteps[ci])]) for bi, ci in recordings]
        else:
            out.append(([(i, s) for i, s in enumerate(bsteps)], [(i, s) for i, s in enumerate(csteps)]))
    return out


def names_of(sides) -> list[str] | None:
    """The request names both sides share (two or more), the most requested first; None otherwise."""
    eps = [s.run.endpoints for side in sides for s in side]
    if any(e is None for e in eps):
        return None
    shared = set(eps[0].names)
    for e in eps[1:]:
        shared &= set(e.names)
    if len(shared) < 2:
        return None
    total = {n: 0 for n in shared}
    for e in eps:
        req = e.requests.sum(axis=0) + e.failed.sum(axis=0)
        for j, n in enumerate(e.names):
            if n in total:
                total[n] += int(req[j])
    return sorted(shared, key=lambda n: (-total[n], n))


def _latency(name, key, q, units, split) -> tuple[dict, np.ndarray | None]:
    """A latency metric's units: the log ratios, and the medians of both sides' values."""
    need = MIN_TAIL_REQUESTS if q[0] / q[1] > 0.5 else MIN_REQUESTS
    d, vb, vc = [], [], []
    for ub, uc in units:
        hb = _pooled([split[0][r].hist(s, name) for r, s in ub])
        hc = _pooled([split[1][r].hist(s, name) for r, s in uc])
        if hb[1].sum() < need or hc[1].sum() < need:
            continue
        b, c = _percentile(*hb, q), _percentile(*hc, q)
        if b <= 0 or c <= 0:
            continue
        d.append(math.log(c / b))
        vb.append(b)
        vc.append(c)
    base = {"key": key, "units": len(d), "baseline": float(np.median(vb)) if vb else None,
            "candidate": float(np.median(vc)) if vc else None, "need": need}  # fmt: skip
    return base, np.asarray(d) if len(d) >= MIN_UNITS else None


def smallest_p(units: int) -> float:
    """The smallest two-sided flip p-value ``units`` can give: 2 of 2**units patterns, or one draw in
    DRAWS + 1 beyond :data:`~headroom.compare.joint.ENUMERATE` units."""
    from .joint import DRAWS, ENUMERATE

    return 2.0 / 2**units if units <= ENUMERATE else 1.0 / (DRAWS + 1)


def flip_p(d: np.ndarray) -> float:
    """Two-sided sign-flip p-value of the units' mean (every pattern up to 14 units, else seeded draws)."""
    s = patterns(len(d))
    stat = np.abs(s @ d)
    return float(np.mean(stat >= stat[0] - 1e-12 * (1 + abs(stat[0]))))


def _t_interval(d: np.ndarray, level: float) -> tuple[float, float]:
    from scipy.stats import t

    n = len(d)
    half = t.ppf(0.5 + level / 2, n - 1) * float(np.std(d, ddof=1)) / math.sqrt(n)
    return math.expm1(float(d.mean()) - half), math.expm1(float(d.mean()) + half)


def _errors(name, units, split) -> tuple[int, int, int, int]:
    """Failed and all requests of the endpoint in the units' steps: (baseline failed, all, candidate ...)."""
    fb = nb = fc = nc = 0
    for ub, uc in units:
        for r, s in ub:
            f = split[0][r].failed(s, name)
            fb, nb = fb + f, nb + f + int(split[0][r].hist(s, name)[1].sum())
        for r, s in uc:
            f = split[1][r].failed(s, name)
            fc, nc = fc + f, nc + f + int(split[1][r].hist(s, name)[1].sum())
    return fb, nb, fc, nc


def _error_p(fb: int, nb: int, fc: int, nc: int) -> float:
    """The exact conditional binomial test: the candidate's share of the failures against its share of
    the requests (two-sided)."""
    from scipy.stats import binomtest

    f = fb + fc
    if f == 0 or nb == 0 or nc == 0:
        return 1.0
    return float(binomtest(fc, f, nc / (nb + nc)).pvalue)


def _holm(ps: list[float], alpha: float) -> list[bool]:
    """Holm's step-down rejections of the family's p-values at ``alpha``."""
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    out = [False] * len(ps)
    for rank, i in enumerate(order):
        if ps[i] > alpha / (len(ps) - rank):
            break
        out[i] = True
    return out


@dataclass(frozen=True)
class EndpointSettings:
    """What the endpoints are judged with: the tail percentile and the thresholds of the compare."""

    tail: tuple[str, tuple[int, int]]  # ("p99", (99, 100)) or the objective's
    threshold: float
    error_threshold: float
    confidence: float


def judge_endpoints(
    sides, pairs: list[tuple], recordings, settings: EndpointSettings
) -> list[EndpointVerdict]:
    """Every shared request name judged (module docstring); [] when the sides do not both carry two or
    more names."""
    names = names_of(sides)
    if names is None or not pairs:
        return []
    split = [[_Steps(s.run.endpoints) for s in side] for side in sides]
    units = units_of(sides, pairs, recordings)
    lat = [
        ("p50", "p50 latency", (50, 100)),
        (settings.tail[0], f"{settings.tail[0]} latency", settings.tail[1]),
    ]
    rows = []  # (name, key, label, fields, d or None, error counts or None)
    for name in names:
        for key, label, q in lat:
            base, d = _latency(name, key, q, units, split)
            rows.append((name, key, label, base, d, None))
        rows.append(
            (name, "error_rate", "error rate", {"key": "error_rate"}, None, _errors(name, units, split))
        )
    # an error rate with no failed request on either side cannot be called changed: not in the family
    judged = [i for i, r in enumerate(rows) if r[4] is not None or (r[5] is not None and _testable(r[5]))]
    alpha = 1.0 - settings.confidence
    ps = [flip_p(rows[i][4]) if rows[i][4] is not None else _error_p(*rows[i][5]) for i in judged]
    rejected = dict(zip(judged, _holm(ps, alpha)))
    pvals = dict(zip(judged, ps))
    floor = alpha / max(
        len(judged), 1
    )  # the first Holm step: a latency test that cannot reach it is not judged
    for i in judged:
        if rows[i][4] is not None and smallest_p(len(rows[i][4])) > floor:
            del pvals[i]
            rows[i][3]["short"] = f"{len(rows[i][4])} units cannot reach the family's p {floor:.2g}"
    level = 1.0 - alpha / max(len(judged), 1)
    out = []
    for name in names:
        mine = [(i, r) for i, r in enumerate(rows) if r[0] == name]
        metrics = tuple(_metric(i, r, rejected, pvals, level, settings, len(units)) for i, r in mine)
        out.append(_verdict(name, metrics, units, split))
    return out


def _testable(errs: tuple[int, int, int, int]) -> bool:
    """Failed requests on some side, and requests on both: an error rate that a test can call changed."""
    fb, nb, fc, nc = errs
    return nb > 0 and nc > 0 and fb + fc > 0


def _metric(i, r, rejected, pvals, level, st: EndpointSettings, units: int) -> EndpointMetric:
    name, key, label, base, d, errs = r
    if errs is not None and i not in pvals and errs[1] and errs[3]:  # no failure on either side
        return EndpointMetric(key, label, 0.0, None, level, None, units, 0.0, 0.0, "no change shown",
                              "no failed request on either side")  # fmt: skip
    if i not in pvals:
        why = (base.get("short") or f"{base['units']} units with {base['need']}+ requests a side, needs {MIN_UNITS}"
               if errs is None else "no requests on a side")  # fmt: skip
        return EndpointMetric(key, label, None, None, level, None, base.get("units", 0), base.get("baseline"),
                              base.get("candidate"), "not judged", why)  # fmt: skip
    if errs is not None:
        fb, nb, fc, nc = errs
        rb, rc = fb / nb, fc / nc
        change = rc - rb
        beyond = abs(change) >= st.error_threshold
        call = (
            "no change shown" if not (rejected[i] and beyond) else ("regressed" if change > 0 else "improved")
        )
        return EndpointMetric(key, label, change, None, level, pvals[i], units, rb, rc, call,
                              f"{fb:,} of {nb:,} failed, {fc:,} of {nc:,}")  # fmt: skip
    change = math.expm1(float(d.mean()))
    lo, hi = _t_interval(d, level)
    # called when Holm rejects it, its change is beyond the threshold and the interval printed beside it
    # is clear of no change (a call never stands beside an interval that holds 0)
    beyond = abs(change) >= st.threshold and (lo > 0 or hi < 0)
    call = "no change shown" if not (rejected[i] and beyond) else ("regressed" if change > 0 else "improved")
    return EndpointMetric(key, label, change, _t_interval(d, level), level, pvals[i], len(d), base["baseline"],
                          base["candidate"], call)  # fmt: skip


def _verdict(name: str, metrics, units, split) -> EndpointVerdict:
    calls = {m.call for m in metrics}
    if "regressed" in calls:
        v = "regressed"
    elif "improved" in calls:
        v = "improved"
    elif all(m.call == "not judged" for m in metrics if m.key != "error_rate"):
        v = "not judged"  # no latency judged: an error rate alone (often 0 against 0) says little
    else:
        v = "no change"
    nb = nc = 0
    every_c = 0
    for ub, uc in units:
        for r, s in ub:
            nb += split[0][r].failed(s, name) + int(split[0][r].hist(s, name)[1].sum())
        for r, s in uc:
            nc += split[1][r].failed(s, name) + int(split[1][r].hist(s, name)[1].sum())
            sp = split[1][r]
            if s < sp.ep.n_steps:
                every_c += int(sp.ep.failed[s].sum()) + int(
                    sp.ep.count[sp.cut[s * sp.m] : sp.cut[(s + 1) * sp.m]].sum()
                )
    return EndpointVerdict(name, v, metrics, (nb, nc), nc / every_c if every_c else 0.0)


def sentence(e: EndpointVerdict) -> str:
    """What made an endpoint regressed, with its interval: "/api/v2/cart: p50 latency +61.2 % at matched
    load (interval +48.0 % to +75.5 %, 99.4 % two-sided)"."""
    m = e.worst()
    if m is None:
        return f"{e.name}: {e.verdict}"
    if m.key == "error_rate":
        return (f"{e.name}: error rate {m.baseline:.2%} to {m.candidate:.2%} ({m.change * 100:+.2f} points) at matched "
                f"load")  # fmt: skip
    lo, hi = m.interval
    return (f"{e.name}: {m.label} {m.change:+.1%} at matched load (interval {lo:+.1%} to {hi:+.1%}, "
            f"{m.level:.1%} two-sided)")  # fmt: skip


def _surest(m: EndpointMetric) -> float:
    return m.interval[0] if m.interval else m.change


def with_endpoints(verdict: str, reason: str, eps: list[EndpointVerdict]) -> tuple[str, str]:
    """The whole verdict with the endpoints': REGRESSED when an endpoint regressed, its sentence first."""
    bad = [e for e in eps if e.verdict == "regressed"]
    if not bad:
        return verdict, reason
    worst = sorted(bad, key=lambda e: -_surest(e.worst()))  # the surest regression first
    more = len(worst) - 1
    said = sentence(worst[0]) + (f"; {more} more endpoint{'s' if more > 1 else ''} regressed" if more else "")
    return "regressed", f"{said} (the whole run: {verdict.upper()}: {reason})"

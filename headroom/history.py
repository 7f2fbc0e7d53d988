"""Release history: capacity across many releases, and the changes in it.

A pairwise gate misses slow drift (five releases each 4 % slower pass every
comparison and lose 20 %).  ``history`` reads many runs, one or more per
release, and follows every figure as a series:

* **Per run**, its summary (per-step table and capacity, ``summary.py``),
  reduced in parallel (local processes, or a Dask cluster) and cached as a
  versioned JSON file keyed by the content of the run's files and the
  analysis settings, so adding a release reads one run, not all of them
  (``history_runs.py``).
* **Per release** (runs with the same label are repeats): plateau
  throughput, the USL capacity, the throughput at the objective, and the
  p50, p99 and CPU per request at the concurrency levels every run shares
  (geometric mean over those levels), the error rate.  The interval is the
  release-to-release noise: ``run_noise`` per run (default 5 %) or the
  spread measured between repeats if larger, over sqrt(repeats).
* **Change points** by binary segmentation of the log values (``ruptures``,
  l2 cost, a BIC-like penalty from the series' own noise) with a Welch t
  test significance check (p < 0.001), each judged like a comparison: kept
  only when the change between the segments around it is at least
  ``threshold``.  (Apache Otava's e-divisive means did this before; it pins
  numpy 2.2.0, which downgraded every install.)  Segments of at least two
  points cannot place a change at the newest point, so the latest release is also tested against
  the releases since the last change point: a change of at least the
  threshold and beyond z x the segment's noise x sqrt(1 + 1/n).  Exit code 1
  when a regression starts at the latest release.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ._json import SCHEMAS, number
from .history_runs import Settings, summaries
from .metrics import as_tuples, deciding, in_history
from .model import HeadroomError, Objective, render_html

HISTORY_SCHEMA = SCHEMAS["history"]
RUN_NOISE = 0.05
MAX_PVALUE = 0.001
Z_RELEASE = 2.576  # release intervals: two-sided 99 %
Z_LATEST = 3.29  # the latest-release check: two-sided 0.1 %, the change points' significance level
SHORT_SERIES = 5  # fewer releases: no change points; the latest is compared with the previous ones
#: the series whose release-to-release noise a history JSON stores for `compare --noise-from`
NOISE_KEYS = ("plateau_rps", "p50_s", "p99_s", "cpu_s_per_req")

#: (key, name, unit, which way is better) of the metrics that decide (headroom.metrics declares them)
METRICS = as_tuples(deciding(history=True))
#: every metric a release has a value for: the deciding ones and those only shown (memory)
ALL_METRICS = as_tuples(in_history())
#: the figures a generator-limited run gives only as lower bounds (its generator, not its server, set them)
GENERATOR_BOUND = frozenset({"plateau_rps", "capacity_rps", "rps_at_objective"})
_DECIDING_KEYS = frozenset(k for k, *_ in METRICS)


# --------------------------------------------------------------------------
# per release


@dataclass(frozen=True)
class Release:
    """One release: its runs and each metric's value and interval (None: unavailable)."""

    index: int
    label: str
    paths: tuple[str, ...]
    values: dict  # key -> float | None
    ci: dict  # key -> (lo, hi) | None
    bound: dict  # key -> True when the value is a lower bound (objective held everywhere)
    stopped: dict | None = None  # the lowest stop of its runs (headroom.stopped.Stop.to_dict)


def _usable_levels(doc: dict) -> dict[float, dict]:
    return {
        s["concurrency"]: s
        for s in doc["steps"]
        if s["concurrency"] is not None and "short" not in s["flags"] and s["goodput_rps"]
    }


def matched_levels(docs: list[dict]) -> list[float]:
    """Concurrency levels every run has a usable step at (a run that stopped answering is left out:
    its missing top is a stop, not a different plan)."""
    sets = [set(_usable_levels(d)) for d in docs if not d.get("stopped")] or [
        set(_usable_levels(d)) for d in docs
    ]
    return sorted(set.intersection(*sets)) if sets else []


def _geo(values) -> float | None:
    v = [x for x in values if x is not None]
    if not v or len(v) < len(list(values)) or min(v) <= 0:
        return None
    return float(np.exp(np.mean(np.log(v))))


def run_metrics(doc: dict, levels: list[float]) -> dict:
    """The history metrics of one run (a summary document) at the matched levels."""
    cap = doc["capacity"]
    at = cap.get("at_objective")
    steps = _usable_levels(doc)
    use = [steps[c] for c in levels if c in steps] if levels else list(steps.values())
    out = {
        "plateau_rps": cap["plateau_rps"],
        "capacity_rps": cap["capacity_rps"],
        "rps_at_objective": at["rps"] if at else None,
        "p50_s": _geo([s["p50_s"] for s in use]),
        "p99_s": _geo([s["p99_s"] for s in use]),
        "cpu_s_per_req": _geo([s["cpu_s_per_req"] for s in use]),
        "error_rate": None,
        "rss_bytes": _geo([s.get("rss_bytes") for s in use]),
    }
    # failed requests count at every matched level, the steps without a success included (the step in
    # which the server stopped answering is all failures: it is no usable step, yet the error rate's)
    every = [s for s in doc["steps"] if s["concurrency"] in levels] if levels else doc["steps"]
    if every and all(s["errors"] is not None for s in every):
        err = sum(s["errors"] for s in every)
        total = err + sum(s["requests"] for s in every)
        out["error_rate"] = err / total if total else None
    out["_bound"] = bool(at and at["status"] == "held")
    # the load generator set the ceiling (headroom.generator_limit): every throughput a lower bound
    out["_generator"] = doc.get("capacity", {}).get("status") == "generator_limited"
    return out


def releases(
    docs: list[dict], *, order: str = "given", run_noise: float = RUN_NOISE
) -> tuple[list[Release], str]:
    """Group runs into releases (same label = repeats) and compute each release's metrics."""
    if order == "time":
        docs = sorted(docs, key=lambda d: next((s["start"] for s in d["steps"] if s["start"]), ""))
    levels = matched_levels(docs)
    note = f"latency and CPU at the {len(levels)} concurrency levels every run shares"
    if len(levels) < 3:
        levels = []
        note = "the runs share fewer than 3 concurrency levels: latency and CPU over each run's own steps"
    groups: dict[str, list[dict]] = {}
    for d in docs:
        groups.setdefault(d["label"], []).append(d)
    out = []
    for i, (label, runs) in enumerate(groups.items()):
        per = [run_metrics(d, levels) for d in runs]
        values, ci, bound = {}, {}, {}
        for key, *_ in ALL_METRICS:
            vals = [p[key] for p in per]
            bound[key] = (key == "rps_at_objective" and any(p["_bound"] for p in per)) or (
                key in GENERATOR_BOUND and any(p["_generator"] for p in per)
            )
            if any(v is None for v in vals):
                values[key] = ci[key] = None
                continue
            if key == "error_rate":
                values[key], ci[key] = float(np.mean(vals)), None
                continue
            logs = np.log(np.maximum(vals, 1e-300))
            sigma = max(run_noise, float(np.std(logs, ddof=1)) if len(logs) > 1 else 0.0)
            half = Z_RELEASE * sigma / math.sqrt(len(logs))
            values[key] = float(np.exp(logs.mean()))
            ci[key] = (float(np.exp(logs.mean() - half)), float(np.exp(logs.mean() + half)))
        stop = min((d["stopped"] for d in runs if d.get("stopped")), key=lambda x: x["level"], default=None)
        out.append(Release(i, label, tuple(d["path"] for d in runs), values, ci, bound, stop))
    return out, note


# --------------------------------------------------------------------------
# change points


@dataclass(frozen=True)
class ChangePoint:
    """A change in one metric's series, starting at release ``index``."""

    index: int
    label: str
    metric: str
    change: float  # after / before - 1
    direction: str  # "regressed" or "improved"
    before: float
    after: float
    pvalue: float | None
    source: str  # "binary segmentation (ruptures)" or "latest release"


def _segments(n: int, cps: list[int]) -> list[tuple[int, int]]:
    edges = [0, *sorted(cps), n]
    return [(a, b) for a, b in zip(edges[:-1], edges[1:]) if b > a]


def _noise(y: np.ndarray, cps: list[int], floor: float) -> float:
    """Release-to-release noise: pooled sd of the log values around their segments' means."""
    resid, df = 0.0, 0
    for a, b in _segments(len(y), cps):
        if b - a >= 2:
            seg = y[a:b]
            resid += float(np.sum((seg - seg.mean()) ** 2))
            df += b - a - 1
    return max(floor, math.sqrt(resid / df)) if df else floor


def _candidates(ly: np.ndarray) -> list[int]:
    """Candidate change points: binary segmentation of the log series (ruptures, l2 cost).

    The penalty is BIC-like, 2 sigma^2 log n in the cost's units, with sigma
    estimated robustly from the differences of neighbouring points (a step
    moves one difference only), so the noise of the series sets it.
    """
    try:
        import ruptures as rpt
    except ImportError:
        raise HeadroomError(
            "history needs ruptures for change points: python3 -m pip install 'headroom-plot[history]'"
        ) from None
    n = len(ly)
    sigma = max(1.4826 * float(np.median(np.abs(np.diff(ly)))) / math.sqrt(2.0), 1e-6)
    algo = rpt.Binseg(model="l2", min_size=2, jump=1).fit(ly.reshape(-1, 1))
    return [int(b) for b in algo.predict(pen=2.0 * sigma * sigma * math.log(n)) if b < n]


def _welch_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided p-value of Welch's t test between two segments (1.0 when it cannot say)."""
    from .stats import t_sf

    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(va + vb)
    if se == 0:
        return 0.0 if a.mean() != b.mean() else 1.0
    den = va * va / (len(a) - 1) + vb * vb / (len(b) - 1)
    df = (va + vb) ** 2 / den if den > 0 else math.inf
    return 2.0 * t_sf(abs(a.mean() - b.mean()) / se, df)


def _significant(ly: np.ndarray, idx: list[int]) -> tuple[list[int], dict[int, float]]:
    """Keep the candidates whose neighbouring segments differ at p < MAX_PVALUE, least significant
    dropped first (the segments around the others then widen and are tested again)."""
    idx = sorted(idx)
    while True:
        edges = [0, *idx, len(ly)]
        pv = {i: _welch_p(ly[edges[k] : i], ly[i : edges[k + 2]]) for k, i in enumerate(idx)}
        if not idx or max(pv.values()) < MAX_PVALUE:
            return idx, pv
        idx.remove(max(pv, key=pv.get))


def change_points(
    y: Sequence[float], *, better: str, threshold: float, run_noise: float = RUN_NOISE
) -> list[tuple]:
    """Change points of one series (positive values): [(index, change, pvalue, source, before, after)].

    ``before`` and ``after`` are the geometric means of the segments around the change.

    binary segmentation (ruptures) on log values, each change kept when Welch's
    t test between its neighbouring segments gives p < MAX_PVALUE and the change between the
    segments around it is at least ``threshold``; then the latest point
    against the segment before it.
    """
    ly = np.log(np.asarray(y, dtype=np.float64))
    n = len(ly)
    found: list[tuple] = []
    if n >= 4:
        idx, pv = _significant(ly, _candidates(ly))
        # drop the smallest change below the threshold and judge the rest again on the
        # wider segments that leaves, until every remaining change is big enough
        sizes: list = []
        while idx:
            sizes = []
            for k, i in enumerate(idx):
                lo = idx[k - 1] if k else 0
                hi = idx[k + 1] if k + 1 < len(idx) else n
                before, after = math.exp(ly[lo:i].mean()), math.exp(ly[i:hi].mean())
                sizes.append((abs(after / before - 1), i, before, after))
            small = min(sizes)
            if small[0] >= threshold:
                break
            idx.remove(small[1])
        for _size, i, before, after in sizes if idx else []:
            found.append((i, after / before - 1, pv[i], "binary segmentation (ruptures)", before, after))
    last = n - 1
    start = max([f[0] for f in found if f[0] < last], default=0)
    prior = ly[start:last]
    y = np.exp(ly)
    if len(prior) >= 3 and not any(f[0] == last for f in found):
        sd = _noise(ly[:last], [f[0] for f in found], run_noise)
        delta = ly[last] - prior.mean()
        if abs(math.exp(delta) - 1) >= threshold and abs(delta) > Z_LATEST * sd * math.sqrt(
            1 + 1 / len(prior)
        ):
            found.append((last, math.exp(delta) - 1, None, "latest release", math.exp(prior.mean()), y[last]))
    return found


UNCONFIRMED_PVALUE = 0.05  # a proposed change this likely is listed as not confirmed


def unconfirmed(y: Sequence[float], kept: list[int], *, threshold: float) -> list[tuple]:
    """Changes binary segmentation proposed that were not kept, of at least ``threshold``:
    [(index, change, pvalue, releases after it)], so that a large step is never passed over in
    silence (e.g. a drop with only two releases after it, too few for Welch's test at MAX_PVALUE)."""
    ly = np.log(np.asarray(y, dtype=np.float64))
    n = len(ly)
    if n < 4:
        return []
    out = []
    for i in _candidates(ly):
        if i in kept:
            continue
        lo = max([k for k in kept if k < i], default=0)
        hi = min([k for k in kept if k > i], default=n)
        before, after = ly[lo:i], ly[i:hi]
        change = math.exp(after.mean() - before.mean()) - 1
        if abs(change) < threshold or min(len(before), len(after)) < 2:
            continue  # one release on a side: the latest-release check covers the last one
        p = _welch_p(before, after)
        if p < UNCONFIRMED_PVALUE:  # likely real, short of the strict level: said, not passed over
            out.append((i, change, p, hi - i))
    return out


def _unconfirmed_note(name: str, label: str, index: int, change: float, p: float, after: int) -> str:
    return (
        f"{name} {change:+.1%} from release {index} ({label}): not confirmed (Welch's p = {p:.2g}, "
        f"needs < {MAX_PVALUE:g}; {after} release(s) after it)"
    )


@dataclass(frozen=True)
class LatestCheck:
    """A short series' latest release against the previous ones, with the compare statistics."""

    verdict: str  # "regressed", "no regression", "not judged"
    reason: str


def _release_logs(rel: list[Release], key: str) -> np.ndarray:
    return np.array([math.log(r.values[key]) if r.values.get(key) else np.nan for r in rel])


def latest_check(rel: list[Release], threshold: float, confidence: float = 0.95) -> LatestCheck:
    """The latest release against the mean of the previous ones, metric by metric.

    For a series too short for change points.  The noise of each metric is
    the spread of the previous releases pooled with the shared-machine
    default (Student's t with the pooled degrees of freedom), as repeat runs
    are in a comparison; Bonferroni over the metrics.  "regressed" needs a change shown and
    at least the threshold; "no regression" needs the primary metric (CPU per
    request where measured, else plateau throughput) shown within the
    threshold (one-sided); anything else is not judged, and says so.
    """
    from .noise import combine, spread
    from .stats import t_quantile, t_sf

    n = len(rel)
    if n < 2:
        return LatestCheck("not judged", "one release: nothing to compare the latest release with")
    alpha, tests, bounded = 1.0 - confidence, {}, []
    for key in NOISE_KEYS:
        if any(r.bound.get(key) for r in rel):  # a lower bound (the objective held, or the generator's
            bounded.append(key)  # ceiling) shows no regression: the true value may lie anywhere above
            continue
        y = _release_logs(rel, key)
        prior, last = y[:-1][np.isfinite(y[:-1])], y[-1]
        if not len(prior) or not np.isfinite(last):
            continue
        # the previous releases' spread is pooled with the shared-machine default, as the spread
        # between repeat runs is in a comparison: two or three releases alone give 1-2 df
        nz, _how = combine(key, None, spread(prior))
        tests[key] = (last - prior.mean(), nz.sd * math.sqrt(1 + 1 / len(prior)), nz.df)
    better = {k: b for k, _n, _u, b in METRICS}
    names = {k: nm for k, nm, _u, _b in METRICS}
    for key, (d, se, df) in tests.items():
        bad = d if better[key] == "lower" else -d
        if bad >= math.log1p(threshold) and 2 * t_sf(abs(d) / se, df) < alpha / len(tests):
            return LatestCheck(
                "regressed", f"{names[key]} {math.expm1(d):+.1%} against the {n - 1} previous releases"
            )
    primary = "cpu_s_per_req" if "cpu_s_per_req" in tests else "plateau_rps"
    short = f"a short series ({n} releases, fewer than {SHORT_SERIES})"
    if primary not in tests and primary in bounded:
        return LatestCheck(
            "not judged",
            f"{short}: {names[primary]} is only a lower bound in some release (its load generator, not its "
            "server, set the ceiling): record it again with a generator that can drive the server",
        )
    if primary not in tests:
        return LatestCheck("not judged", f"{short}: the latest release has no {names[primary]} to compare")
    d, se, df = tests[primary]
    bad = (d if better[primary] == "lower" else -d) + t_quantile(1 - alpha, df) * se
    if bad < math.log1p(threshold):
        return LatestCheck(
            "no regression",
            f"{short}: {names[primary]} of the latest release is at worst {math.expm1(bad):+.1%} "
            f"against the previous ones (one-sided 95 %)",
        )
    return LatestCheck(
        "not judged",
        f"{short}: the latest release could still be {threshold:.0%} worse in {names[primary]} "
        f"(at worst {math.expm1(bad):+.1%}); more releases or repeat runs would decide",
    )


def series_noise(rel: list[Release], cps: list[ChangePoint]) -> dict:
    """Release-to-release noise per metric, pooled around the segments between its change points.

    A release with k repeat runs counts k times (its value is their mean), so
    the figure is the noise of one run, as ``compare --noise-from`` needs.
    """
    out = {}
    for key in NOISE_KEYS:
        y = _release_logs(rel, key)
        w = np.array([len(r.paths) for r in rel], dtype=np.float64)
        cuts = sorted(c.index for c in cps if c.metric == key)
        ss = df = 0.0
        for a, b in _segments(len(y), cuts):
            seg, ws = y[a:b], w[a:b]
            ok = np.isfinite(seg)
            if ok.sum() >= 2:
                m = np.average(seg[ok], weights=ws[ok])
                ss += float(np.sum(ws[ok] * (seg[ok] - m) ** 2))
                df += int(ok.sum()) - 1
        if df > 0:
            out[key] = {"sd": math.sqrt(ss / df), "df": df}
    return out


@dataclass(frozen=True)
class History:
    """The outcome of :func:`history`: releases, change points and the settings used."""

    releases: list[Release]
    change_points: list[ChangePoint]
    threshold: float
    run_noise: float
    objective: str
    order: str
    note: str
    runs_read: int
    warnings: list[str] = field(default_factory=list)
    latest: LatestCheck | None = None  # set for a series shorter than SHORT_SERIES
    noise: dict = field(default_factory=dict)  # metric -> {"sd", "df"}: release-to-release noise
    #: one line per large change binary segmentation proposed but the test did not confirm
    unconfirmed: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        last = len(self.releases) - 1
        if any(c.index == last and c.direction == "regressed" for c in self.change_points):
            return 1
        if self.latest is not None:
            return {"regressed": 1, "no regression": 0}.get(self.latest.verdict, 3)
        return 0

    @property
    def verdict(self) -> str:
        """One line: what the history says of the latest release."""
        last = len(self.releases) - 1
        stop = next(
            (
                c
                for c in self.change_points
                if c.index == last and c.metric == "stopped" and c.direction == "regressed"
            ),
            None,
        )
        if stop is not None:  # said first: a release that falls over under load
            return f"REGRESSED at the latest release: {stop.source}"
        if self.exit_code == 1:
            return "REGRESSED at the latest release" + (f": {self.latest.reason}" if self.latest else "")
        if self.latest is not None:
            return ("no regression at the latest release: " if self.exit_code == 0 else "NOT JUDGED: ") + (
                self.latest.reason
            )
        return "no regression at the latest release"

    def series(self, key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(values, ci low, ci high) of a metric over the releases (NaN where unavailable)."""
        v = np.array([r.values[key] if r.values[key] is not None else np.nan for r in self.releases])
        lo = np.array([r.ci[key][0] if r.ci.get(key) else np.nan for r in self.releases])
        hi = np.array([r.ci[key][1] if r.ci.get(key) else np.nan for r in self.releases])
        return v, lo, hi

    def __repr__(self) -> str:
        return (
            f"<History {len(self.releases)} releases, {len(self.change_points)} change point(s), "
            f"exit {self.exit_code}>"
        )

    def _repr_html_(self) -> str:
        return render_html("History", self)


def analyse(
    docs: list[dict],
    *,
    threshold: float = 0.10,
    run_noise: float = RUN_NOISE,
    objective: str = "",
    order: str = "given",
    runs_read: int = 0,
) -> History:
    """Releases and change points from summary documents (see the module docstring)."""
    rel, note = releases(docs, order=order, run_noise=run_noise)
    cps, doubts = [], []
    latest = latest_check(rel, threshold) if len(rel) < SHORT_SERIES else None
    for key, name, _unit, better in [] if latest is not None else METRICS:
        vals = [r.values[key] for r in rel]
        keep = [i for i, v in enumerate(vals) if v is not None and v > 0]
        if len(keep) < 2:
            continue
        series = [vals[i] for i in keep]
        found = change_points(series, better=better, threshold=threshold, run_noise=run_noise)
        for j, change, pvalue, source, before, after in found:
            i = keep[j]  # back to the release index (missing points were dropped, never filled)
            worse = change > 0 if better == "lower" else change < 0
            direction = "regressed" if worse else "improved"
            cps.append(ChangePoint(i, rel[i].label, key, change, direction, before, after, pvalue, source))
        for j, change, p, after in unconfirmed(series, [f[0] for f in found], threshold=threshold):
            doubts.append(_unconfirmed_note(name, rel[keep[j]].label, keep[j], change, p, after))
    cps += stop_points(rel)
    cps.sort(key=lambda c: (c.index, c.metric))
    warnings = [f"{d['label']}: {w}" for d in docs for w in d.get("warnings", [])]
    noise = series_noise(rel, cps)
    return History(
        rel, cps, threshold, run_noise, objective, order, note, runs_read, warnings, latest, noise, doubts
    )


def _stop_words(stop: dict, level: float, worse: bool) -> str:
    where = f"{level:g} req/s" if stop.get("unit") == "req/s" else f"concurrency {level:g}"
    if worse:
        return f"its ramp stopped answering at {where}; the release before did not"
    return f"the release before stopped answering at {where}; this one did not"


def stop_points(rel: list[Release]) -> list[ChangePoint]:
    """A release whose ramp stopped because its server stopped answering, where the release before
    it did not (or at a higher level), is a regression (metric ``stopped``: the level where it
    stopped, before: the highest level the previous release served); the reverse is an improvement."""
    out = []

    def reach(r: Release) -> float:
        return r.stopped["level"] if r.stopped else math.inf

    for i in range(1, len(rel)):
        a, b = reach(rel[i - 1]), reach(rel[i])
        if a == b:
            continue
        worse = b < a
        lvl = b if worse else a
        out.append(
            ChangePoint(
                i, rel[i].label, "stopped", math.nan, "regressed" if worse else "improved",
                a, b, None,
                _stop_words((rel[i] if worse else rel[i - 1]).stopped, lvl, worse),
            )
        )  # fmt: skip
    return out


def history(
    paths: Sequence[str | os.PathLike],
    *,
    objective: Objective | str | None = None,
    threshold: float = 0.10,
    run_noise: float = RUN_NOISE,
    order: str = "given",
    cache: str | os.PathLike | None = None,
    jobs: int = 1,
    dask=None,
    cpu_cores: float | None = None,
    telemetry=None,
    name: str | None = None,
) -> History:
    """Capacity across releases and its change points (of one endpoint's requests with ``name``).

    Parameters
    ----------
    paths
        Runs, oldest release first (``order="time"`` sorts by start time);
        runs with the same label are repeats of one release.
    objective
        Latency objective (adds the throughput at it).
    threshold
        Smallest change worth a change point.
    run_noise
        Release-to-release noise floor per run (a fraction).
    cache
        Folder of cached run summaries (None: no cache).
    jobs, dask
        Reduce runs in ``jobs`` local processes, or on a Dask cluster
        (a scheduler address or a ``distributed.Client``).
    cpu_cores
        Cores that 100 % in a single-column CPU file stands for.
    telemetry
        A :class:`headroom.telemetry.PromSource`: every run's CPU and memory from Prometheus
        over its load window (part of the cache key).
    """
    if not paths:
        raise HeadroomError("history needs at least one run")
    import dataclasses

    tel = tuple(dataclasses.asdict(telemetry).items()) if telemetry is not None else ()
    settings = Settings(str(objective) if objective else "", float(cpu_cores or 0.0), tel, name or "")
    docs, read = summaries(paths, settings, cache=cache, jobs=jobs, dask=dask)
    return analyse(
        docs,
        threshold=threshold,
        run_noise=run_noise,
        objective=settings.objective,
        order=order,
        runs_read=read,
    )


# --------------------------------------------------------------------------
# JSON


_n = number


def to_json(h: History) -> dict:
    """The versioned JSON document of a history (deterministic)."""
    return {
        "schema": HISTORY_SCHEMA,
        "kind": "history",
        "settings": {
            "threshold": h.threshold,
            "run_noise": h.run_noise,
            "objective": h.objective or None,
            "order": h.order,
            "max_pvalue": MAX_PVALUE,
        },
        "note": h.note,
        "runs": [
            {
                "index": r.index,
                "label": r.label,
                "paths": list(r.paths),
                "metrics": {
                    key: {
                        "value": _n(r.values[key]),
                        "ci": None if not r.ci.get(key) else [_n(r.ci[key][0]), _n(r.ci[key][1])],
                        "lower_bound": r.bound.get(key, False),
                    }
                    for key, *_ in ALL_METRICS
                    # a shown-only metric (memory) is written where a release has it
                    if key in _DECIDING_KEYS or r.values.get(key) is not None
                },
                # added within schema 2: where the release's server stopped answering (absent: it did not)
                **({"stopped": r.stopped} if r.stopped else {}),
            }
            for r in h.releases
        ],
        "change_points": [
            {
                "index": c.index,
                "label": c.label,
                "metric": c.metric,
                "change": _n(c.change),
                "direction": c.direction,
                "before": _n(c.before),
                "after": _n(c.after),
                "pvalue": _n(c.pvalue),
                "source": c.source,
            }
            for c in h.change_points
        ],
        "latest": None if h.latest is None else {"verdict": h.latest.verdict, "reason": h.latest.reason},
        "noise": {k: {"sd": _n(v["sd"]), "df": v["df"]} for k, v in h.noise.items()},
        # added within schema 2: large changes proposed but not confirmed (absent when none)
        **({"unconfirmed": list(h.unconfirmed)} if h.unconfirmed else {}),
        "exit_code": h.exit_code,
        "warnings": h.warnings,
    }

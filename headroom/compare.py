"""Baseline against candidate at matched concurrency: intervals and a verdict.

How a verdict is reached (also in the README and ``headroom compare --help``):

1. **Pairs.** Both runs were driven at the same concurrency levels: that is
   the matched condition.  Steps are paired by concurrency (exactly; runs
   with different plans by the nearest level within 15 %, or refused); a
   short step on either side drops its pair.  Without concurrency in the
   metadata, steps are paired by index.
2. **Per pair** the log ratio candidate/baseline of: goodput throughput,
   p50/p90/p99 latency (and the objective's percentile), CPU per request.
   A percentile with fewer than 10 requests above it on either side drops
   that pair for that metric.
3. **Decision metrics** combine the pairs as a geometric mean of the
   ratios: *plateau throughput* over the saturated pairs (concurrency at or
   above the lowest at which a run's model reaches 90 % of its capacity),
   latency and CPU per request over every pair; plus the *error rate*
   difference pooled over the pairs.  The peak step, the modelled capacity,
   the knee and the throughput at the objective are shown, not decisive.
4. **Interval.** The steps are replicates that each see the host's
   variation over seconds, so the spread of the per-pair log ratios gives a
   t interval over the pairs.  Part of any difference between two runs is
   the host's state during the whole run, which no within-run statistic can
   see: a between-run noise term is added, ``run_noise`` per run (default
   5 %, a documented floor), or, with repeat runs, the larger of that floor
   and the spread measured between the runs of a side.  The confidence
   level is Bonferroni-adjusted over the decision metrics.
5. **Decision**, as in asv: *worse*/*better* when the interval excludes no
   change AND the estimate is at least the threshold (default 10 %); *same*
   when the whole interval lies inside +-threshold; *unclear* otherwise.
   The error rate is *worse* when it is higher by more than
   ``error_threshold`` (default 0.1 percentage points) and clear of
   binomial noise.
6. **Verdict**: any worse -> "regressed" (exit 1); else any better ->
   "improved" (exit 0); else every judged metric the same -> "no change"
   (exit 0); else "inconclusive" (exit 3).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .model import SCHEMA_VERSION, HeadroomError, Objective, Run, percentile_label
from .stats import t_quantile, z_quantile
from .steps import StepTable
from .summary import Summary, analyze

EXIT_CODES = {"improved": 0, "no change": 0, "regressed": 1, "inconclusive": 3}
RUN_NOISE = 0.05
ERROR_THRESHOLD = 0.001
NEAREST = 0.15
LATENCY = ("p50", "p90", "p99")


@dataclass(frozen=True)
class Metric:
    """One compared quantity: both sides' values, the relative change and its interval."""

    key: str
    name: str
    unit: str
    better: str  # "lower" or "higher"
    decides: bool
    baseline: float | None
    candidate: float | None
    change: float | None  # candidate / baseline - 1 (for the error rate: the difference)
    ci: tuple[float, float] | None
    threshold: float
    decision: str  # worse, better, same, unclear, not judged, shown
    note: str = ""
    pairs: int = 0
    run_noise: float | None = None  # between-run noise used for this metric


@dataclass(frozen=True)
class StepPair:
    """A baseline step matched with a candidate step (one per run of each side)."""

    concurrency: float | None
    baseline_steps: tuple[int, ...]
    candidate_steps: tuple[int, ...]
    plateau: bool
    baseline: dict  # key -> value (geometric mean over the side's runs)
    candidate: dict

    def change(self, key: str) -> float | None:
        b, c = self.baseline.get(key), self.candidate.get(key)
        if b is None or c is None or not (b > 0):
            return None
        return c / b - 1.0


@dataclass(frozen=True)
class Noise:
    """How between-run noise entered the intervals."""

    floor: float  # the default or user-set floor, per run
    source: str  # "default floor" or "measured from repeats"
    runs: tuple[int, int]

    def describe(self) -> str:
        if self.source == "default floor":
            return (
                f"between-run noise: {self.floor:.1%} per run assumed (--run-noise); "
                "repeat runs would measure it"
            )
        return (
            f"between-run noise: measured from {self.runs[0]} + {self.runs[1]} repeat runs "
            f"(never below the {self.floor:.1%} floor)"
        )


@dataclass(frozen=True)
class Comparison:
    """The outcome of :func:`compare_runs`."""

    verdict: str
    reason: str
    metrics: list[Metric]
    pairs: list[StepPair]
    pairing: str
    baseline_labels: list[str]
    candidate_labels: list[str]
    threshold: float
    error_threshold: float
    confidence: float
    metric_confidence: float
    noise: Noise
    objective: Objective | None
    notes: list[str]
    warnings: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    def metric(self, key: str) -> Metric:
        return next(m for m in self.metrics if m.key == key)

    def __repr__(self) -> str:
        return f"<Comparison {self.verdict}: {self.reason}>"

    def _repr_html_(self) -> str:
        from .html import verdict

        return verdict(self)._repr_html_()


# --------------------------------------------------------------------------
# pairing


def _levels(t: StepTable) -> dict[float, int]:
    """Usable steps by concurrency (by index when unknown)."""
    keys = t.concurrency if t.known_concurrency else t.index.astype(np.float64)
    return {float(keys[i]): int(i) for i in np.flatnonzero(t.usable)}


def pair_steps(base: list[StepTable], cand: list[StepTable]) -> tuple[list[tuple], str]:
    """Match steps across every run: [(concurrency, baseline steps, candidate steps)], and how.

    Raises HeadroomError when the concurrency plans cannot be matched.
    """
    tables = base + cand
    known = all(t.known_concurrency for t in tables)
    how = "by concurrency" if known else "by step index (concurrency unknown: no ramp parameters in metadata)"
    levels = [_levels(t) for t in tables]
    common = sorted(set.intersection(*(set(lv) for lv in levels)))
    wanted = max(3, (min(len(lv) for lv in levels) + 1) // 2)
    same_plan = all(set(lv) == set(levels[0]) for lv in levels)
    if len(common) >= wanted or not known or same_plan:
        nb = len(base)
        out = [
            (c if known else None, tuple(lv[c] for lv in levels[:nb]), tuple(lv[c] for lv in levels[nb:]))
            for c in common
        ]
        return out, how
    if len(tables) == 2:
        pairs = _nearest(levels[0], levels[1])
        if len(pairs) >= wanted:
            return pairs, "by nearest concurrency (the runs used different concurrency plans)"
    plans = [", ".join(f"{c:g}" for c in sorted(lv)[:8]) + (" ..." if len(lv) > 8 else "") for lv in levels]
    raise HeadroomError(
        "the runs' concurrency plans do not match ("
        + "; ".join(plans)
        + "): record baseline and candidate with the same concurrency steps"
    )


def _nearest(lb: dict[float, int], lc: dict[float, int]) -> list[tuple]:
    out, used = [], set()
    for c in sorted(lb):
        best = min((abs(k - c), k) for k in lc if k not in used) if len(used) < len(lc) else None
        if best is not None and best[0] <= NEAREST * c:
            used.add(best[1])
            out.append((c, (lb[c],), (lc[best[1]],)))
    return out


def _plateau_mask(sides: list[list[Summary]], pairs: list[tuple]) -> np.ndarray:
    """Pairs at or above the lowest saturation concurrency of any run (top third without models)."""
    n90 = []
    for side in sides:
        for s in side:
            m = s.capacity.model
            if m is None:
                n90 = None
                break
            n90.append(m.n_at_fraction(0.9))
        if n90 is None:
            break
    if n90 is not None and pairs and pairs[0][0] is not None:
        mask = np.array([p[0] >= min(n90) - 1e-9 for p in pairs])
        if mask.sum() >= 3:
            return mask
    mask = np.zeros(len(pairs), bool)
    mask[-max(3, len(pairs) // 3) :] = True
    return mask


# --------------------------------------------------------------------------
# per-pair values


def _series(t: StepTable, key: str) -> np.ndarray:
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


def _logs(side: list[Summary], steps: list[tuple[int, ...]], key: str) -> np.ndarray:
    """(runs, pairs) log values of a metric; NaN where unusable."""
    out = np.full((len(side), len(steps)), np.nan)
    for r, s in enumerate(side):
        v = _series(s.table, key)[[p[r] for p in steps]]
        with np.errstate(invalid="ignore", divide="ignore"):
            out[r] = np.where(v > 0, np.log(np.where(v > 0, v, 1.0)), np.nan)
    return out


@dataclass(frozen=True)
class _Estimate:
    log_change: float
    half: float  # half-width of the interval in log units
    pairs: int
    run_noise: float


def estimate(yb: np.ndarray, yc: np.ndarray, *, run_noise: float, level: float) -> _Estimate | None:
    """Geometric-mean change over the pairs and its interval half-width (log units).

    ``yb``, ``yc``: (runs, pairs) log values.  Pairs with a missing value on
    any run are dropped; fewer than 3 left gives None.
    """
    ok = np.isfinite(yb).all(axis=0) & np.isfinite(yc).all(axis=0)
    n = int(ok.sum())
    if n < 3:
        return None
    yb, yc = yb[:, ok], yc[:, ok]
    d = yc.mean(axis=0) - yb.mean(axis=0)
    se_w = float(np.std(d, ddof=1)) / math.sqrt(n)
    noise = run_noise
    df_runs = (len(yb) - 1) + (len(yc) - 1)
    if df_runs > 0:
        m = [y.mean(axis=1) for y in (yb, yc)]
        ss = sum(float(np.sum((mk - mk.mean()) ** 2)) for mk in m)
        noise = max(run_noise, math.sqrt(ss / df_runs))
    p = 1.0 - (1.0 - level) / 2.0
    between = noise * math.sqrt(1.0 / len(yb) + 1.0 / len(yc))
    half = math.hypot(t_quantile(p, n - 1) * se_w, z_quantile(p) * between)
    return _Estimate(float(d.mean()), half, n, noise)


def _judge(change: float, lo: float, hi: float, better: str, threshold: float) -> str:
    bad, bad_lo, bad_hi = (change, lo, hi) if better == "lower" else (-change, -hi, -lo)
    if bad_lo > 0 and bad >= threshold:
        return "worse"
    if bad_hi < 0 and -bad >= threshold:
        return "better"
    if lo > -threshold and hi < threshold:
        return "same"
    return "unclear"


@dataclass(frozen=True)
class _Spec:
    key: str  # the per-step series
    name: str
    unit: str
    better: str
    pairs: str  # "all" or "plateau"


def _specs(objective: Objective | None, has_cpu: bool) -> list[_Spec]:
    specs = [_Spec("rps", "plateau throughput", "req/s", "higher", "plateau")]
    names = list(LATENCY)
    if objective is not None and objective.name not in names:
        names.append(objective.name)
    for name in names:
        label = percentile_label(name)
        specs.append(_Spec(f"{name}_s", f"{label} latency", "s", "lower", "all"))
    if has_cpu:
        specs.append(_Spec("cpu_s_per_req", "CPU per request", "s", "lower", "all"))
    return specs


def _not_judged(base: dict, note: str) -> Metric:
    return Metric(
        **base, baseline=None, candidate=None, change=None, ci=None, decision="not judged", note=note
    )


def _ratio_metric(spec, sides, pairs, mask, *, run_noise, level, threshold) -> Metric:
    sel = [p for p, m in zip(pairs, mask) if m or spec.pairs == "all"]
    yb = _logs(sides[0], [p[1] for p in sel], spec.key)
    yc = _logs(sides[1], [p[2] for p in sel], spec.key)
    est = estimate(yb, yc, run_noise=run_noise, level=level)
    base = dict(key=spec.key if spec.key != "rps" else "plateau_rps", name=spec.name, unit=spec.unit)
    base.update(better=spec.better, decides=True, threshold=threshold)
    if est is None:
        return _not_judged(base, "fewer than 3 matched steps with enough requests on both sides")
    ok = np.isfinite(yb).all(axis=0) & np.isfinite(yc).all(axis=0)
    gb = float(np.exp(yb[:, ok].mean()))
    gc = float(np.exp(yc[:, ok].mean()))
    change = math.exp(est.log_change) - 1.0
    ci = (math.exp(est.log_change - est.half) - 1.0, math.exp(est.log_change + est.half) - 1.0)
    what = "saturated" if spec.pairs == "plateau" else "matched"
    return Metric(
        **base,
        baseline=gb,
        candidate=gc,
        change=change,
        ci=ci,
        decision=_judge(change, ci[0], ci[1], spec.better, threshold),
        note=f"geometric mean over {est.pairs} {what} step pairs",
        pairs=est.pairs,
        run_noise=est.run_noise,
    )


def _error_metric(sides, pairs, *, level, threshold) -> Metric:
    base = dict(
        key="error_rate", name="error rate", unit="%", better="lower", decides=True, threshold=threshold
    )
    unknown = [s.label for side in sides for s in side if s.table.errors is None]
    if unknown:
        return _not_judged(
            base, "error counts unknown (the file has no status column): " + ", ".join(unknown)
        )
    rates, totals = [], []
    for k, side in enumerate(sides):
        err = req = 0
        for r, s in enumerate(side):
            idx = [p[1 + k][r] for p in pairs]
            err += int(s.table.errors[idx].sum())
            req += int(s.table.requests[idx].sum()) + int(s.table.errors[idx].sum())
        rates.append(err / req if req else 0.0)
        totals.append((err, req))
    diff = rates[1] - rates[0]
    pooled = (totals[0][0] + totals[1][0]) / max(1, totals[0][1] + totals[1][1])
    se = math.sqrt(pooled * (1 - pooled) * (1 / max(1, totals[0][1]) + 1 / max(1, totals[1][1])))
    z = z_quantile(1.0 - (1.0 - level) / 2.0)
    ci = (diff - z * se, diff + z * se)
    return Metric(
        **base,
        baseline=rates[0],
        candidate=rates[1],
        change=diff,
        ci=ci,
        decision=_judge(diff, ci[0], ci[1], "lower", threshold),
        note=f"failed / completed requests over {len(pairs)} matched steps (difference in points)",
        pairs=len(pairs),
    )


def _shown(sides: list[list[Summary]]) -> list[Metric]:
    """Run-level figures shown beside the verdict (means over a side's runs), not decisive."""
    rows = [
        ("peak_step_rps", "peak step throughput", "highest single step: the noisiest figure there is"),
        ("capacity_rps", "modelled capacity (USL)", "highest modelled throughput in the measured range"),
        ("knee_rps", "knee (USL, max power)", "where latency starts to cost more than throughput gains"),
        ("rps_at_objective", "throughput at the objective", "interpolated between steps"),
    ]
    out = []
    for key, name, note in rows:
        vals = [[getattr(s.capacity, key) for s in side] for side in sides]
        if key == "rps_at_objective" and sides[0][0].capacity.objective is None:
            continue
        if any(v is None for side in vals for v in side):
            b = c = ch = None
            note = "not available for every run"
        else:
            b, c = float(np.mean(vals[0])), float(np.mean(vals[1]))
            ch = c / b - 1.0 if b > 0 else None
        if key == "capacity_rps" and any(
            s.capacity.model is not None and not s.capacity.model.peak_reached for side in sides for s in side
        ):
            note += "; a run still rose at its last step (its capacity is a lower bound)"
        if key == "rps_at_objective":
            held = [
                s.capacity.at_objective.lower_bound for side in sides for s in side if s.capacity.at_objective
            ]
            if any(held):
                note += "; a run held the objective at every step (a lower bound)"
        out.append(Metric(key, name, "req/s", "higher", False, b, c, ch, None, 0.0, "shown", note))
    return out


# --------------------------------------------------------------------------


def _as_summaries(side, **kw) -> list[Summary]:
    items = [side] if isinstance(side, (Run, Summary)) else list(side)
    if not items:
        raise ValueError("each side needs at least one run")
    return [it if isinstance(it, Summary) else analyze(it, **kw) for it in items]


def compare_runs(
    baseline: Run | Summary | Sequence[Run | Summary],
    candidate: Run | Summary | Sequence[Run | Summary],
    *,
    objective: Objective | None = None,
    threshold: float = 0.10,
    error_threshold: float = ERROR_THRESHOLD,
    run_noise: float = RUN_NOISE,
    confidence: float = 0.95,
    bucket_s: float = 1.0,
) -> Comparison:
    """Compare a baseline with a candidate at matched concurrency (see the module docstring).

    Parameters
    ----------
    baseline, candidate
        A run or summary, or several repeat runs of the same build.
    objective
        Latency objective: its percentile is compared too, and the
        throughput at it is shown.
    threshold
        Practical threshold: a smaller relative change is never called.
    error_threshold
        Smallest rise of the error rate (a fraction: 0.001 is 0.1 points) called a regression.
    run_noise
        Between-run noise per run (a fraction), a floor under what repeat runs measure.
    confidence
        Family-wide confidence of the decision metrics' intervals.
    bucket_s
        Time bucket width for runs not yet analysed (does not change the decision).
    """
    sides = [_as_summaries(s, objective=objective, bucket_s=bucket_s) for s in (baseline, candidate)]
    pairs, how = pair_steps([s.table for s in sides[0]], [s.table for s in sides[1]])
    mask = _plateau_mask(sides, pairs)
    has_cpu = all(np.isfinite(s.table.cpu_s_per_req).any() for side in sides for s in side)
    specs = _specs(objective, has_cpu)
    k = len(specs) + 1  # and the error rate
    level = 1.0 - (1.0 - confidence) / k
    metrics = [
        _ratio_metric(sp, sides, pairs, mask, run_noise=run_noise, level=level, threshold=threshold)
        for sp in specs
    ]
    metrics.append(_error_metric(sides, pairs, level=level, threshold=error_threshold))
    metrics += _shown(sides)
    verdict, reason = _verdict(metrics)
    runs = (len(sides[0]), len(sides[1]))
    noise = Noise(run_noise, "default floor" if runs == (1, 1) else "measured from repeats", runs)
    notes = [noise.describe(), f"steps paired {how}"]
    return Comparison(
        verdict=verdict,
        reason=reason,
        metrics=metrics,
        pairs=_pair_rows(sides, pairs, mask),
        pairing=how,
        baseline_labels=[s.label for s in sides[0]],
        candidate_labels=[s.label for s in sides[1]],
        threshold=threshold,
        error_threshold=error_threshold,
        confidence=confidence,
        metric_confidence=level,
        noise=noise,
        objective=objective,
        notes=notes,
        warnings=[w for side in sides for s in side for w in s.warnings],
    )


_PAIR_KEYS = ("rps", "p50_s", "p99_s", "cpu_s_per_req")


def _pair_rows(sides, pairs, mask) -> list[StepPair]:
    out = []
    for p, plateau in zip(pairs, mask):
        vals = []
        for k, side in enumerate(sides):
            row = {}
            for key in _PAIR_KEYS:
                v = np.array([_series(s.table, key)[p[1 + k][r]] for r, s in enumerate(side)])
                row[key] = float(np.exp(np.mean(np.log(v)))) if np.all(v > 0) else None
            if all(s.table.errors is not None for s in side):
                e = sum(int(s.table.errors[p[1 + k][r]]) for r, s in enumerate(side))
                n = sum(int(s.table.requests[p[1 + k][r]]) for r, s in enumerate(side)) + e
                row["errors"], row["error_rate"] = e, e / n if n else None
            else:
                row["errors"] = row["error_rate"] = None
            vals.append(row)
        out.append(StepPair(p[0], tuple(p[1]), tuple(p[2]), bool(plateau), vals[0], vals[1]))
    return out


def _pct(v: float) -> str:
    return f"{v * 100:+.1f}%"


def describe(m: Metric) -> str:
    """A short phrase: the metric, its change and interval."""
    if m.change is None:
        return f"{m.name}: not judged ({m.note})"
    if m.key == "error_rate":
        s = f"{m.name} {m.change * 100:+.2f} points"
        return s + (f" ({m.ci[0] * 100:+.2f} to {m.ci[1] * 100:+.2f})" if m.ci else "")
    s = f"{m.name} {_pct(m.change)}"
    return s + (f" (interval {_pct(m.ci[0])} to {_pct(m.ci[1])})" if m.ci else "")


def _verdict(metrics: list[Metric]) -> tuple[str, str]:
    """The verdict and one short sentence naming the metric that decided it."""
    dec = [m for m in metrics if m.decides]
    size = lambda m: abs(m.change or 0.0) / (m.threshold or 1.0)  # noqa: E731
    worse = sorted((m for m in dec if m.decision == "worse"), key=size, reverse=True)
    better = sorted((m for m in dec if m.decision == "better"), key=size, reverse=True)
    judged = [m for m in dec if m.decision in ("worse", "better", "same", "unclear")]
    more = lambda ms: f", and {len(ms) - 1} more metric(s)" if len(ms) > 1 else ""  # noqa: E731
    if worse:
        return "regressed", f"{describe(worse[0])}{more(worse)}"
    if better:
        return "improved", f"{describe(better[0])}{more(better)}"
    if judged and all(m.decision == "same" for m in judged):
        return "no change", f"all {len(judged)} judged metrics within their thresholds"
    unclear = sorted((m for m in judged if m.decision == "unclear"), key=size, reverse=True)
    if unclear:
        return (
            "inconclusive",
            f"{describe(unclear[0])} could be inside or beyond +-{unclear[0].threshold:.0%}",
        )
    return "inconclusive", "nothing could be judged (no matched steps with enough data)"


# --------------------------------------------------------------------------
# JSON


def _n(v, digits: int = 6):
    if v is None:
        return None
    v = float(v)
    if not math.isfinite(v):
        return None
    return float(f"{v:.{digits}g}") if v != 0 else 0.0


def _metric_doc(m: Metric) -> dict:
    return {
        "key": m.key,
        "name": m.name,
        "unit": m.unit,
        "better": m.better,
        "decides": m.decides,
        "baseline": _n(m.baseline),
        "candidate": _n(m.candidate),
        "change": _n(m.change),
        "ci": None if m.ci is None else [_n(m.ci[0]), _n(m.ci[1])],
        "threshold": _n(m.threshold),
        "decision": m.decision,
        "pairs": m.pairs,
        "run_noise": _n(m.run_noise),
        "note": m.note,
    }


def _pair_doc(p: StepPair) -> dict:
    side = lambda d: {k: (_n(v) if not isinstance(v, int) else v) for k, v in d.items()}  # noqa: E731
    return {
        "concurrency": _n(p.concurrency),
        "baseline_steps": list(p.baseline_steps),
        "candidate_steps": list(p.candidate_steps),
        "plateau": p.plateau,
        "baseline": side(p.baseline),
        "candidate": side(p.candidate),
    }


def to_json(c: Comparison) -> dict:
    """The versioned JSON document of a comparison (deterministic)."""
    return {
        "schema": SCHEMA_VERSION,
        "kind": "comparison",
        "verdict": c.verdict,
        "exit_code": c.exit_code,
        "reason": c.reason,
        "baseline": c.baseline_labels,
        "candidate": c.candidate_labels,
        "settings": {
            "threshold": c.threshold,
            "error_threshold": c.error_threshold,
            "run_noise": c.noise.floor,
            "confidence": c.confidence,
            "metric_confidence": _n(c.metric_confidence),
            "objective": None if c.objective is None else str(c.objective),
        },
        "noise": {"source": c.noise.source, "floor": c.noise.floor, "runs": list(c.noise.runs)},
        "pairing": c.pairing,
        "metrics": [_metric_doc(m) for m in c.metrics],
        "pairs": [_pair_doc(p) for p in c.pairs],
        "notes": c.notes,
        "warnings": c.warnings,
    }

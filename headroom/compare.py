"""Baseline against candidate at matched concurrency: run-level tests and a gate's verdict.

How a verdict is reached (also in the README and ``headroom compare --help``):

1. **Pairs.** Both runs were driven at the same concurrency levels: that is
   the matched condition.  Steps are paired by concurrency (exactly; runs
   with different plans by the nearest level within 15 %, or refused); a
   short step on either side drops its pair.
2. **Run-level values.** For each run and metric, the mean of the log
   values over the matched pairs it uses: goodput throughput over the
   saturated pairs (*plateau throughput, paired*), p50 and the tail
   percentile (p99, or the objective's) and CPU per request over every
   pair.  The change is the difference of the sides' means (a ratio of
   geometric means).  Steps are not independent replicates (their
   residuals are correlated within a run), so the run, not the step, is
   the unit.
3. **Noise per metric** (``headroom.noise``): learned from earlier runs of
   an unchanged build (``noise_from``), pooled with the spread between
   repeat runs, or a per-metric default measured on a loaded shared
   machine; never below what the steps of this comparison show.  The
   interval uses Student's t with the noise estimate's degrees of freedom.
4. **Family error: weighted Holm.**  The decision metrics are tested for
   "changed at all" with a weighted Holm procedure over CPU per request
   (weight 0.4: the cost of a request, the least noisy on a shared
   machine), plateau throughput (0.2), p50 and tail latency (0.15 each)
   and the error rate (0.1); the weight of a metric that cannot be judged
   goes to the others.  p90 and the other figures are shown, not tested:
   in a closed loop throughput and latency are one measurement seen twice
   (Little's law), and spending the error budget on both buys nothing.
5. **Decision per metric**, as in asv: *worse*/*better* when Holm finds a
   change AND the estimate is at least the threshold (default 10 %);
   *same* when the 90 % interval lies inside +-threshold (two one-sided
   tests); *unclear* otherwise.
6. **Verdict**: any worse -> "regressed" (exit 1); else any better ->
   "improved" (exit 0); else every judged metric the same -> "no change"
   (exit 0); else, when the primary metric (CPU per request where measured,
   otherwise plateau throughput) is shown not to be worse by the
   threshold or more (one-sided 95 % bound) -> "no regression" (exit 0);
   else "inconclusive" (exit 3), with how many more runs per side would
   most likely decide it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ._json import SCHEMAS, number
from .model import HeadroomError, Objective, Run, percentile_label, render_html
from .noise import LearnedNoise, NoiseEstimate, canonical, combine, pooled, spread, within_run_se
from .stats import t_quantile, t_sf, z_quantile
from .steps import StepTable
from .stopped import stop_note, stop_verdict, stops
from .summary import Summary, analyze

COMPARE_SCHEMA = SCHEMAS["comparison"]
EXIT_CODES = {"improved": 0, "no change": 0, "no regression": 0, "regressed": 1, "inconclusive": 3}
ERROR_THRESHOLD = 0.001
NEAREST = 0.15
FEW_PAIRS = 5  # fewer saturated pairs than this: said in the reason line
#: weighted Holm: the share of the error budget each decision metric starts with
WEIGHTS = {"cpu_s_per_req": 0.8, "paired_plateau_rps": 0.08, "p50_s": 0.05, "tail": 0.05, "error_rate": 0.02}
POWER = 0.8  # for the smallest detectable change


@dataclass(frozen=True)
class Metric:
    """One compared quantity: both sides' values, the relative change and its interval.

    ``ci`` is the interval at ``level``, the confidence at which the
    weighted Holm procedure tested this metric (so it excludes no change
    exactly when the test found a change); ``bound`` is the one-sided 95 %
    bound of the change in the worse direction (the non-inferiority check);
    ``mdc`` the smallest change this design detects with 80 % power.
    """

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
    noise: NoiseEstimate | None = None  # between-run noise used for this metric
    level: float | None = None
    bound: float | None = None
    mdc: float | None = None
    pvalue: float | None = None
    se: float | None = None  # standard error of the log change
    weight: float | None = None  # share of the family's error budget it started the Holm procedure with

    @property
    def run_noise(self) -> float | None:
        return None if self.noise is None else self.noise.sd


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
    """How between-run noise entered the intervals: the source of each metric's noise."""

    source: str  # "default", "learned", "repeats"
    runs: tuple[int, int]

    def describe(self) -> str:
        if self.source.startswith("interleaved"):
            n = self.runs[0]
            learned = " pooled with earlier interleaved A/A recordings" if "learned" in self.source else ""
            return (
                f"between-run noise: none to account for: A and B alternated within every load level of "
                f"{n} interleaved recording{'s' if n > 1 else ''}, so the levels' paired ratios are the "
                f"replicates (their spread and correlation measured here{learned})"
            )
        if self.source not in ("default", "learned", "repeats"):  # read from an older schema
            return f"between-run noise: {self.source} (a comparison of an older schema)"
        if self.source == "default":
            return (
                "between-run noise: per-metric defaults for a shared CI machine (docs/ci.md); "
                "--noise-from A/A runs or repeat runs would measure it"
            )
        if self.source == "learned":
            extra = f" and the {self.runs[0]} + {self.runs[1]} repeat runs" if max(self.runs) > 1 else ""
            return f"between-run noise: learned from earlier runs of an unchanged build{extra}"
        return (
            f"between-run noise: measured from the {self.runs[0]} + {self.runs[1]} repeat runs, pooled with "
            "the per-metric defaults (--noise-from A/A runs replaces the defaults)"
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
    noise: Noise
    objective: Objective | None
    notes: list[str]
    warnings: list[str] = field(default_factory=list)
    runs_needed: int | None = None  # runs per side that would most likely decide an inconclusive verdict
    primary: str = ""
    holm_weights: dict = field(default_factory=dict)
    design: str = "runs"  # "runs" (run-level test) or "interleaved steps" (paired levels)
    stopped: list = field(default_factory=list)  # headroom.stopped.Stop of every run that stopped answering
    # where the CPU went: headroom.profiles.diff.ProfileDiff when both sides have step profiles
    profile_diff: object = None

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    @property
    def weights(self) -> dict:
        """The weighted Holm procedure's starting weights (shares of the family's error budget)."""
        return dict(self.holm_weights) if self.holm_weights else dict(WEIGHTS)

    def metric(self, key: str) -> Metric:
        return next(m for m in self.metrics if m.key == key)

    def __repr__(self) -> str:
        return f"<Comparison {self.verdict}: {self.reason}>"

    def _repr_html_(self) -> str:
        return render_html("Comparison", self)


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
    how = "by concurrency" if known else _index_pairing(tables)
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
    raise HeadroomError(_unmatched(tables, len(base), len(common), wanted))


def _index_pairing(tables: list[StepTable]) -> str:
    """How steps without a concurrency are paired: a rate ramp's by its planned rates."""
    if not all(t.kind == "rate" for t in tables):
        return "by step index (concurrency unknown: no ramp parameters in metadata)"
    n = min(len(t.intended_rps) for t in tables)
    rates = [np.round(np.asarray(t.intended_rps[:n], float), 3) for t in tables]
    if all(np.array_equal(r, rates[0], equal_nan=True) for r in rates):
        return "by step index: open-loop rate ramps with the same planned rates"
    return "by step index: open-loop rate ramps whose planned rates differ (step k against step k)"


def _level_list(levels) -> str:
    lv = sorted(levels)
    return ", ".join(f"{c:g}" for c in lv[:8]) + (" ..." if len(lv) > 8 else "")


def _unmatched(tables: list[StepTable], nb: int, shared: int, wanted: int) -> str:
    """Why the runs' steps cannot be paired, in one line: for every run, the levels another run
    compares on that it lacks, and why (its step there was too short to trust, had no throughput,
    or it ran no step at that level: a different plan)."""
    from .steps import MIN_STEP_REQUESTS, MIN_STEP_S

    names = [_side_name("baseline", i, nb) for i in range(nb)]
    names += [_side_name("candidate", i, len(tables) - nb) for i in range(len(tables) - nb)]
    usable = [set(_levels(t)) for t in tables]
    anyone = set().union(*usable)
    said, short_any, absent_any = [], False, False
    for name, t, lv in zip(names, tables, usable):
        ran = {float(c): i for i, c in enumerate(t.concurrency)}
        missing = anyone - lv
        short = {c for c in missing if c in ran and t.short[ran[c]]}
        idle = {c for c in missing if c in ran} - short
        absent = missing - set(ran)
        if absent:
            said.append(f"{name} has no step at concurrency {_level_list(absent)}")
        if short:
            note = "" if short_any else f" (under {MIN_STEP_S:g} s or {MIN_STEP_REQUESTS} requests)"
            said.append(f"{name} steps at concurrency {_level_list(short)} were dropped as too short{note}")
        if idle:
            said.append(f"{name} steps at concurrency {_level_list(idle)} had no throughput")
        short_any, absent_any = short_any or bool(short), absent_any or bool(absent)
    why = "; ".join(said)
    usable_in_all = f"only {shared} level(s) usable in every run, {wanted} needed"
    if absent_any:
        return (
            f"the runs' concurrency plans do not match ({usable_in_all}): {why}: "
            "record baseline and candidate with the same concurrency steps"
        )
    return (
        f"the runs ran the same concurrency levels, but {usable_in_all}: {why}: "
        "give those steps more time or requests"
    )


def _side_name(side: str, i: int, n: int) -> str:
    return side if n == 1 else f"{side} {i + 1}"


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
class _Spec:
    key: str  # the per-step series
    out: str  # the metric's key in the output
    name: str
    unit: str
    better: str
    pairs: str  # "all" or "plateau"
    weight: str  # its WEIGHTS entry; "" = shown, not tested


def _specs(objective: Objective | None, has_cpu: bool) -> list[_Spec]:
    plateau = "plateau throughput (paired)"
    specs = [_Spec("rps", "paired_plateau_rps", plateau, "req/s", "higher", "plateau", "paired_plateau_rps")]
    tail = objective.name if objective is not None and objective.name != "p50" else "p99"
    names = ["p50", "p90", "p99"] + ([tail] if tail not in ("p50", "p90", "p99") else [])
    for name in names:
        weight = "p50_s" if name == "p50" else ("tail" if name == tail else "")
        specs.append(_spec_of(f"{name}_s", weight, f"{percentile_label(name)} latency"))
    if has_cpu:
        specs.append(_spec_of("cpu_s_per_req", "cpu_s_per_req"))
    return specs


def _spec_of(key: str, weight: str, name: str | None = None) -> _Spec:
    """A per-step metric judged at every matched step, as headroom/metrics.py declares it (a
    percentile it does not declare, e.g. an objective's p99.9: ``name``, in seconds, lower better)."""
    from .metrics import BY_KEY

    m = BY_KEY.get(key)
    if m is None:
        return _Spec(key, key, name or key, "s", "lower", "all", weight)
    return _Spec(key, key, m.name.removesuffix(" at matched steps"), m.unit, m.better, "all", weight)


@dataclass(frozen=True)
class _Test:
    """A metric's run-level change (log units) with its standard error, df and p-value."""

    spec: _Spec
    d: float
    se: float
    df: float
    noise: NoiseEstimate
    pairs: int
    pvalue: float
    baseline: float
    candidate: float


def run_level_test(yb: np.ndarray, yc: np.ndarray, spec: _Spec, learned: LearnedNoise | None) -> _Test | None:
    """The run-level test of one metric from (runs, pairs) log values of each side.

    Each run's value is the mean of its log values over the pairs every run
    has; the change is the difference of the sides' means.  Its standard
    error comes from the between-run noise (learned, repeats, default) and
    is never below what the per-pair differences of this comparison show
    (widened for correlated steps).  Fewer than 3 usable pairs: None.
    """
    ok = np.isfinite(yb).all(axis=0) & np.isfinite(yc).all(axis=0)
    n = int(ok.sum())
    if n < 3:
        return None
    mb, mc = yb[:, ok].mean(axis=1), yc[:, ok].mean(axis=1)
    reps = pooled([spread(mb), spread(mc)])
    nz, _how = combine(spec.out, learned, reps if reps[1] > 0 else None)
    se, df = nz.sd * math.sqrt(1.0 / len(mb) + 1.0 / len(mc)), nz.df
    se_w = within_run_se(yc[:, ok].mean(axis=0) - yb[:, ok].mean(axis=0))
    if se_w > se:
        se, df = se_w, n - 1
        # the noise the interval used, stated as such: a run's sd that gives this standard error,
        # with the steps' df (the JSON once kept the default's sd and df beside the wider interval)
        sd_w = se_w / math.sqrt(1.0 / len(mb) + 1.0 / len(mc))
        nz = NoiseEstimate(sd_w, df, nz.source + "; widened to the spread of this comparison's steps")
    d = float(mc.mean() - mb.mean())
    p = 2.0 * t_sf(abs(d) / se, df) if se > 0 else float(d == 0.0)
    gb, gc = float(np.exp(yb[:, ok].mean())), float(np.exp(yc[:, ok].mean()))
    return _Test(spec, d, se, df, nz, n, min(1.0, p), gb, gc)


def paired_test(sides, sel: list[tuple], spec: _Spec, recs, learned: dict | None) -> _Test | None:
    """The paired test of one metric over interleaved recordings (see :mod:`headroom.paired`)."""
    from .paired import estimate

    ds, lb = [], []
    for i, j in recs:
        b = _series(sides[0][i].table, spec.key)[[p[1][i] for p in sel]]
        c = _series(sides[1][j].table, spec.key)[[p[2][j] for p in sel]]
        ok = (b > 0) & (c > 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            ds.append(np.where(ok, np.log(np.where(ok, c, 1.0)) - np.log(np.where(ok, b, 1.0)), np.nan))
            lb.append(np.log(b[ok]))
    est = estimate(ds, None if learned is None else learned.get(canonical(spec.out)))
    if est is None:
        return None
    p = 2.0 * t_sf(abs(est.d) / est.se, est.df) if est.se > 0 else float(est.d == 0.0)
    gb = float(np.exp(np.concatenate(lb).mean()))
    nz = NoiseEstimate(est.noise.sd, est.df, est.how)
    return _Test(spec, est.d, est.se, est.df, nz, est.pairs, min(1.0, p), gb, gb * math.exp(est.d))


#: the change each metric's power is judged at when the error budget is shared: twice the threshold
POWER_AT = 2.0
#: every decision metric keeps at least this much of the power-based share (a huge change in a
#: noisy metric must still be able to show)
POWER_FLOOR = 0.05


#: decision metrics that measure the same thing in a closed loop: only the stronger leads
REDUNDANT = ("paired_plateau_rps", "p50_s")


def planned_se(key: str, t: _Test, design: _Design, runs: tuple[int, int]) -> tuple[float, float]:
    """(standard error, df) of a metric's change planned from the design and the reference noise:
    the level pairs of interleaved recordings at the measured pair noise, or the run-level
    defaults for a shared machine with the runs per side (and their repeats' df)."""
    if design.paired:
        from .paired import planned_se as paired_se

        return paired_se(key, t.pairs, len(design.recordings))
    from .noise import default

    d = default(key)
    return d.sd * math.sqrt(1.0 / runs[0] + 1.0 / runs[1]), d.df + runs[0] + runs[1] - 2


def power_weights(
    planned: dict[str, tuple[float, float]], has_error: bool, threshold: float, alpha: float
) -> dict[str, float]:
    """Starting weights of the Holm procedure, each metric's share following its expected power.

    ``planned``: per ratio metric the (standard error, df) its change would have
    under the design in force (interleaved level pairs, runs per side and their
    repeats) at the reference noise of a shared machine (:func:`planned_se`).
    The power to show a change of ``POWER_AT`` times the threshold at an equal
    split of ``alpha`` sets the shares; of throughput and p50 (redundant in a
    closed loop) only the stronger counts; every metric keeps ``POWER_FLOOR`` of
    the strongest one's share.  The weights never depend on this comparison's
    data nor on learned noise: weights that follow an estimated noise give a
    low estimate both more weight and a smaller p-value, which broke the
    family's error rate (11 % of synthetic A/A comparisons with noise learned
    from 6 runs, against 6 % with fixed weights).  The error rate keeps its fixed share.
    """
    from .stats import norm_cdf

    keys = list(planned)
    err = WEIGHTS["error_rate"] if has_error else 0.0
    if not keys:
        return {"error_rate": 1.0} if has_error else {}
    ref = math.log1p(POWER_AT * threshold)
    a_eq = alpha / (len(keys) + (1 if has_error else 0))
    power = {}
    for k in keys:
        se, df = planned[k]
        q = t_quantile(1.0 - a_eq / 2.0, df)
        power[k] = norm_cdf(ref / se - q) if se > 0 else 1.0
    # in a closed loop throughput and p50 are one measurement seen twice (Little's law: r = -0.99
    # between runs): splitting the budget between them halves both; the weaker keeps the floor
    pair = [k for k in REDUNDANT if k in power]
    if len(pair) == 2:
        power[min(pair, key=lambda k: power[k])] = 0.0
    top = max(power.values())
    raw = {k: max(v, POWER_FLOOR * top, 1e-3) for k, v in power.items()}
    total = sum(raw.values())
    out = {k: (1.0 - err) * v / total for k, v in raw.items()}
    if has_error:
        out["error_rate"] = err
    return out


def weighted_holm(pvalues: dict[str, float], weights: dict[str, float], alpha: float) -> dict[str, tuple]:
    """Weighted Holm: {key: (rejected, local alpha)}; a rejected metric's weight passes to the rest.

    At each step the metric with the smallest p / weight is rejected when
    p <= alpha x weight / (sum of the remaining weights); the first that is
    not stops the procedure.  This is a closed test of weighted Bonferroni
    tests, so the chance of any false "changed" stays below ``alpha``.
    """
    active = {k: weights[k] for k in pvalues if weights.get(k, 0) > 0}
    out: dict[str, tuple] = {}
    while active:
        total = sum(active.values())
        k = min(active, key=lambda j: pvalues[j] / active[j])
        a = alpha * active[k] / total
        if pvalues[k] > a:
            break
        out[k] = (True, a)
        del active[k]
    total = sum(active.values())
    for k, w in active.items():
        out[k] = (False, alpha * w / total)
    return out


def _interval(t: _Test, q: float) -> tuple[float, float]:
    return math.exp(t.d - q * t.se) - 1.0, math.exp(t.d + q * t.se) - 1.0


def _decide(t: _Test, rejected: bool, threshold: float, alpha: float) -> tuple[str, float]:
    """(decision, one-sided bound of the change in the worse direction)."""
    sign = 1.0 if t.spec.better == "lower" else -1.0
    change = math.exp(t.d) - 1.0
    q1 = t_quantile(1.0 - alpha, t.df)
    lo, hi = _interval(t, q1)
    bound = hi if sign > 0 else lo
    bad = sign * change
    if rejected and bad >= threshold:
        return "worse", bound
    if rejected and -bad >= threshold:
        return "better", bound
    if lo > -threshold and hi < threshold:
        return "same", bound
    return "unclear", bound


def _mdc(t: _Test, alpha_local: float) -> float:
    q = t_quantile(1.0 - alpha_local / 2.0, t.df) + t_quantile(POWER, t.df)
    return math.exp(q * t.se) - 1.0


def _not_judged(base: dict, note: str) -> Metric:
    return Metric(
        **base, baseline=None, candidate=None, change=None, ci=None, decision="not judged", note=note
    )


def _base(spec: _Spec, threshold: float) -> dict:
    return dict(
        key=spec.out,
        name=spec.name,
        unit=spec.unit,
        better=spec.better,
        decides=bool(spec.weight),
        threshold=threshold,
    )


def _ratio_metric(t: _Test, holm: dict, weights: dict, *, threshold: float, alpha: float) -> Metric:
    spec = t.spec
    what = "saturated" if spec.pairs == "plateau" else "matched"
    note = f"geometric mean over {t.pairs} {what} step pairs"
    if spec.out == "paired_plateau_rps":
        note += " (the summary's plateau is the median of one run's saturated steps)"
    common = dict(
        **_base(spec, threshold),
        baseline=t.baseline,
        candidate=t.candidate,
        change=math.exp(t.d) - 1.0,
        note=note,
        pairs=t.pairs,
        noise=t.noise,
        se=t.se,
    )
    if not spec.weight:  # shown with a plain two-sided interval, not tested
        q = t_quantile(1.0 - alpha / 2.0, t.df)
        return Metric(**common, ci=_interval(t, q), decision="shown", level=1.0 - alpha)
    rejected, a_local = holm[spec.out]
    decision, bound = _decide(t, rejected, threshold, alpha)
    q = t_quantile(1.0 - a_local / 2.0, t.df)
    return Metric(
        **common,
        ci=_interval(t, q),
        decision=decision,
        level=1.0 - a_local,
        bound=bound,
        mdc=_mdc(t, alpha * weights[spec.out]),
        pvalue=t.pvalue,
        weight=weights[spec.out],
    )


def _wkey(key: str) -> str:
    return key if key in WEIGHTS else "tail"


def errors_unknown(s: Summary) -> bool:
    """True when a run cannot say how many requests failed (no status column, or transport errors
    unknown: the summary's step table then has no error counts, see ``summary._with_rowless``)."""
    return s.table.errors is None


@dataclass(frozen=True)
class _ErrorTest:
    rates: tuple[float, float]
    diff: float
    se: float
    pvalue: float
    pairs: int


def error_test(sides, pairs) -> _ErrorTest | str:
    """Failed / all requests over the matched steps of each side; a reason string when unknown."""
    unknown = [s.label for side in sides for s in side if errors_unknown(s)]
    if unknown:
        return "error counts unknown (no status column, or transport errors not recorded): " + ", ".join(
            dict.fromkeys(unknown)
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
    p = 2.0 * t_sf(abs(diff) / se, math.inf) if se > 0 else float(diff == 0.0)
    return _ErrorTest((rates[0], rates[1]), diff, se, min(1.0, p), len(pairs))


def _error_metric(
    e: _ErrorTest | str, holm: dict, weights: dict, *, threshold: float, alpha: float
) -> Metric:
    base = dict(
        key="error_rate", name="error rate", unit="%", better="lower", decides=True, threshold=threshold
    )
    if isinstance(e, str):
        return _not_judged(base, e)
    rejected, a_local = holm["error_rate"]
    z = z_quantile(1.0 - a_local / 2.0)
    ci = (e.diff - z * e.se, e.diff + z * e.se)
    z1 = z_quantile(1.0 - alpha)
    lo, hi = e.diff - z1 * e.se, e.diff + z1 * e.se
    if rejected and abs(e.diff) >= threshold:
        decision = "worse" if e.diff > 0 else "better"
    elif lo > -threshold and hi < threshold:
        decision = "same"
    else:
        decision = "unclear"
    return Metric(
        **base,
        baseline=e.rates[0],
        candidate=e.rates[1],
        change=e.diff,
        ci=ci,
        decision=decision,
        note=f"failed / all requests over {e.pairs} matched steps (difference in points)",
        pairs=e.pairs,
        level=1.0 - a_local,
        bound=hi,
        pvalue=e.pvalue,
        weight=weights.get("error_rate"),
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
            poor = any(
                s.capacity.model is not None and not s.capacity.model.trusted for side in sides for s in side
            )
            note = (
                "a run's model fits poorly (R2 of log throughput below 0.5)"
                if poor
                else "not available for every run"
            )
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
# learned noise


def _run_matrix(summaries: list[Summary], levels: list[float], key: str) -> np.ndarray:
    """(runs, levels) log values of a metric; levels missing or unusable in any run dropped."""
    cols = []
    for c in levels:
        col = []
        for s in summaries:
            idx = _levels(s.table)
            v = _series(s.table, key)[idx[c]] if c in idx else np.nan
            col.append(math.log(v) if v > 0 else np.nan)
        if np.all(np.isfinite(col)):
            cols.append(col)
    return np.array(cols, dtype=np.float64).T.reshape(len(summaries), len(cols))


def learn_noise(
    runs: Sequence[Run | Summary], specs: list[_Spec], pairs, mask, **kw
) -> tuple[LearnedNoise, list[str]]:
    """Between-run noise of each metric from earlier runs of one unchanged build.

    Each run's value is the mean log value over the concurrency levels this
    comparison uses for the metric that every earlier run has; with fewer
    than 3 such levels, over the levels the earlier runs share (the notes
    say so).
    """
    summaries = _as_summaries(runs, **kw)
    if len(summaries) < 2:
        raise HeadroomError("--noise-from needs at least 2 runs of one unchanged build")
    common = sorted(set.intersection(*(set(_levels(s.table)) for s in summaries)))
    ss, df, notes = {}, {}, []
    for spec in specs:
        want = [p[0] for p, m in zip(pairs, mask) if (m or spec.pairs == "all") and p[0] is not None]
        y = _run_matrix(summaries, [c for c in want if c in common], spec.key)
        if y.shape[1] < 3:
            own = common[-max(3, len(common) // 3) :] if spec.pairs == "plateau" else common
            y = _run_matrix(summaries, own, spec.key)
            notes.append(f"noise of {spec.name} learned at the earlier runs' own levels (the plans differ)")
        key = canonical(spec.out)
        ss[key], df[key] = spread(y.mean(axis=1)) if y.shape[1] >= 3 else (0.0, 0.0)
    src = f"learned from {len(summaries)} earlier runs of an unchanged build (--noise-from)"
    return LearnedNoise(ss, df, src), sorted(set(notes))


# --------------------------------------------------------------------------


def _as_summaries(side, **kw) -> list[Summary]:
    items = [side] if isinstance(side, (Run, Summary)) else list(side)
    if not items:
        raise ValueError("each side needs at least one run")
    return [it if isinstance(it, Summary) else analyze(it, **kw) for it in items]


def _learned(noise_from, specs, pairs, mask, kw) -> tuple[LearnedNoise | None, list[str]]:
    if noise_from is None or isinstance(noise_from, LearnedNoise):
        return noise_from, []
    return learn_noise(noise_from, specs, pairs, mask, **kw)


def compare_runs(
    baseline: Run | Summary | Sequence[Run | Summary],
    candidate: Run | Summary | Sequence[Run | Summary],
    *,
    objective: Objective | str | None = None,
    threshold: float = 0.10,
    error_threshold: float = ERROR_THRESHOLD,
    noise_from: Sequence[Run | Summary] | LearnedNoise | None = None,
    confidence: float = 0.95,
    bucket_s: float = 1.0,
) -> Comparison:
    """Compare a baseline with a candidate at matched concurrency (see the module docstring).

    Parameters
    ----------
    baseline, candidate
        A run or summary, or several repeat runs of the same build.
    objective
        Latency objective (``"p99<=20ms"`` or an Objective): its percentile
        is the tail metric, and the throughput at it is shown.
    threshold
        Practical threshold: a smaller relative change is never called.
    error_threshold
        Smallest rise of the error rate (a fraction: 0.001 is 0.1 points) called a regression.
    noise_from
        Earlier runs of one unchanged build, or a :class:`headroom.noise.LearnedNoise`
        (e.g. from :func:`headroom.noise.load_history_noise`): the between-run
        noise of each metric.  Without it, repeat runs measure it, else per-metric defaults.
    confidence
        Family-wide confidence: the chance that no metric is called changed when none changed.
    bucket_s
        Time bucket width for runs not yet analysed (does not change the decision).
    """
    if isinstance(objective, str):
        from .model import parse_objective

        objective = parse_objective(objective) if objective else None
    kw = dict(objective=objective, bucket_s=bucket_s)
    sides = [_as_summaries(s, **kw) for s in (baseline, candidate)]
    labels = _distinct_labels(sides[0] + sides[1])
    side_stops = stops(sides, labels)
    pairs, how = _pairs(sides, side_stops)
    mask = _plateau_mask(sides, pairs)
    specs, design, learned, notes, few = _plan(sides, pairs, mask, objective, noise_from, kw)
    alpha = 1.0 - confidence
    metrics, weights = _decision_metrics(
        sides, pairs, mask, specs, learned, threshold, error_threshold, alpha, design
    )
    metrics += _shown(sides)
    primary = "cpu_s_per_req" if _judged(metrics, "cpu_s_per_req") else "paired_plateau_rps"
    runs = (len(sides[0]), len(sides[1]))
    verdict, reason, needed = _decision(
        metrics, primary, threshold, runs, alpha, int(np.sum(mask)), design.paired
    )
    verdict, reason, needed = _with_stops(sides, side_stops, verdict, reason, needed)
    noise = _noise_of(design, learned, runs)
    how, notes = _how_and_notes(how, notes, noise, design, sides, side_stops)
    c = Comparison(
        verdict=verdict,
        reason=reason,
        metrics=metrics,
        pairs=_pair_rows(sides, pairs, mask),
        pairing=how,
        baseline_labels=labels[: len(sides[0])],
        candidate_labels=labels[len(sides[0]) :],
        threshold=threshold,
        error_threshold=error_threshold,
        confidence=confidence,
        noise=noise,
        objective=objective,
        notes=notes,
        warnings=_warnings(sides, design, few, metrics, runs),
        runs_needed=needed,
        primary=primary,
        holm_weights=weights,
        design="interleaved steps" if design.paired else "runs",
        stopped=[x for row in side_stops for x in row if x is not None],
    )
    return _with_profiles(c, sides)


def _how_and_notes(how: str, notes: list[str], noise, design: _Design, sides, side_stops):
    """The pairing line (with the design) and the notes: noise, pairing, plan, load, stops."""
    how += "; A and B of each level recorded seconds apart (interleaved steps)" if design.paired else ""
    notes = [noise.describe(), f"steps paired {how}", *notes, *_load_notes(sides, design.paired)]
    return how, notes + [n for n in (stop_note(side_stops),) if n]


def _with_profiles(c: Comparison, sides) -> Comparison:
    """Where the CPU went, when both sides have step profiles (``RUN/profiles/``)."""
    from dataclasses import replace

    from .profiles.compare import side_diff

    d, warnings = side_diff(sides, c.confidence)
    return replace(c, profile_diff=d, warnings=c.warnings + warnings) if (d or warnings) else c


def _common_pairs(sides) -> tuple[list[tuple], str]:
    """Steps paired at the levels every run has usable (a run stopped answering, so the plans
    end at different levels); none when the runs share no level."""
    tables = [s.table for side in sides for s in side]
    known = all(t.known_concurrency for t in tables)
    levels = [_levels(t) for t in tables]
    common = sorted(set.intersection(*(set(lv) for lv in levels)))
    nb = len(sides[0])
    out = [
        (c if known else None, tuple(lv[c] for lv in levels[:nb]), tuple(lv[c] for lv in levels[nb:]))
        for c in common
    ]
    how = "by concurrency" if known else "by step index (concurrency unknown: no ramp parameters in metadata)"
    return out, how + ", up to the level where a run stopped answering"


def _with_stops(sides, side_stops, verdict: str, reason: str, needed):
    """The verdict when a side stopped answering: said first; the matched steps can only add to it."""
    got = stop_verdict(sides, side_stops)
    if got is None:
        return verdict, reason, needed
    sv, sr = got
    if sv == "regressed":
        extra = f"; the matched steps also say: {reason}" if verdict == "regressed" else ""
        return "regressed", sr + extra, None
    if verdict == "regressed":  # the candidate took the load the baseline could not, but costs more
        return "regressed", f"{reason}; although {sr[0].lower()}{sr[1:]}", None
    return "improved", sr, None


def _all_levels(spec: _Spec) -> _Spec:
    """Throughput over every matched level: in an interleaved recording A and B of a level share the
    host, so the unsaturated levels (where throughput is concurrency / latency) are replicates too."""
    import dataclasses

    return dataclasses.replace(spec, pairs="all", name="throughput (paired levels)")


def _plan(sides, pairs, mask, objective, noise_from, kw):
    """(metric specs, design, learned noise, notes, warnings): what is judged and against what noise."""
    has_cpu = all(np.isfinite(s.table.cpu_s_per_req).any() for side in sides for s in side)
    specs = _specs(objective, has_cpu)
    design, dnotes = _design(sides, noise_from, specs, pairs, mask, kw)
    if design.paired:  # every level's pair shares the host: throughput is judged at every level
        specs = [_all_levels(s) if s.out == "paired_plateau_rps" else s for s in specs]
    learned, notes = (None, []) if design.paired else _learned(noise_from, specs, pairs, mask, kw)
    learned, few = _few_df(learned)
    return specs, design, learned, notes + dnotes, few


def _warnings(sides, design: _Design, few: list[str], metrics: list[Metric], runs) -> list[str]:
    """The runs' own warnings, foreign load, too few learned df and what this design cannot see."""
    own = [w for side in sides for s in side for w in s.warnings]
    same = _same_files(sides)
    out = (
        same + own + _load_warnings(sides, design.paired) + few + _mdc_warnings(metrics, runs, design.paired)
    )
    return list(dict.fromkeys(out))  # a run given twice, or two runs of one file: each warning once


def _same_files(sides) -> list[str]:
    """A warning when the candidate is the baseline itself (the same files): nothing can change."""
    import os

    given = [[str(s.run.meta.source) for s in side] for side in sides]
    if sorted(map(os.path.realpath, given[0])) != sorted(map(os.path.realpath, given[1])):
        return []
    return [f"the baseline and the candidate are the same run(s) ({', '.join(given[0])}): every change is 0"]


def _pairs(sides, side_stops) -> tuple[list[tuple], str]:
    """The step pairs; a run that stopped answering pairs the levels every run reached."""
    try:
        return pair_steps([s.table for s in sides[0]], [s.table for s in sides[1]])
    except HeadroomError:
        if not any(x is not None for row in side_stops for x in row):
            raise  # plans that truly differ (recorded with other flags)
        return _common_pairs(sides)


def _noise_of(design: _Design, learned: LearnedNoise | None, runs: tuple[int, int]) -> Noise:
    """Where the comparison's noise came from: the level pairs, learned, repeats or the defaults."""
    if design.paired:
        return Noise("interleaved" + (", learned" if design.learned else ""), runs)
    return Noise("learned" if learned is not None else ("repeats" if max(runs) > 1 else "default"), runs)


#: learned noise with fewer degrees of freedom than this is pooled with the default, with a warning
MIN_LEARNED_DF = 4


def _few_df(learned: LearnedNoise | None) -> tuple[LearnedNoise | None, list[str]]:
    """Learned noise whose metrics rest on too few df: those metrics pooled with the default, said."""
    from .noise import default

    if learned is None:
        return None, []
    few = {k: d for k, d in learned.df.items() if 0 < d < MIN_LEARNED_DF}
    if not few:
        return learned, []
    ss, df = dict(learned.ss), dict(learned.df)
    for k in few:
        dflt = default(k)
        ss[k] += dflt.sd * dflt.sd * dflt.df
        df[k] += dflt.df
    names = ", ".join(f"{k} ({d:g} df)" for k, d in sorted(few.items()))
    warn = (
        f"--noise-from: the noise of {names} rests on fewer than {MIN_LEARNED_DF} degrees of freedom "
        "(too few runs of one build, or a history whose releases had no repeats): pooled with the "
        "defaults for a shared machine instead of trusted alone"
    )
    return LearnedNoise(ss, df, learned.source + " + the default (too few df)"), [warn]


def _design(sides, noise_from, specs, pairs, mask, kw) -> tuple[_Design, list[str]]:
    """Interleaved recordings (every run with its partner on the other side) or runs."""
    from .paired import partners

    meta = [[s.run.meta.fields if s.run.meta is not None else {} for s in side] for side in sides]
    recs = partners(meta[0], meta[1])
    if recs is None:
        return _Design(), []
    notes = []
    learned = None
    if noise_from is not None:
        learned, why = _learn_paired(noise_from, specs, kw)
        notes.append(why)
    return _Design(recs, learned), notes


def _learn_paired(noise_from, specs, kw) -> tuple[dict | None, str]:
    """Residual noise of the level pairs of earlier interleaved A/A recordings (``--noise-from``)."""
    from .paired import DESIGN, residual_noise

    if isinstance(noise_from, LearnedNoise):
        return None, (
            "--noise-from: a history's between-run noise does not apply to interleaved recordings "
            "(their replicates are the level pairs); not used"
        )
    summaries = _as_summaries(noise_from, **kw)
    groups: dict = {}
    for s in summaries:
        ab = (s.run.meta.fields if s.run.meta is not None else {}).get("ab") or {}
        if ab.get("design") == DESIGN and ab.get("side") in ("a", "b"):
            groups.setdefault((ab.get("job"), ab.get("recording")), {})[ab["side"]] = s
    recs = [g for g in groups.values() if len(g) == 2]
    if not recs:
        return None, (
            "--noise-from: no interleaved A/A recordings among the runs (a-NN and b-NN of "
            "'headroom ramp --ab --interleave steps'); only this comparison's pairs are used"
        )
    out = {}
    for spec in specs:
        ds = []
        for g in recs:
            try:
                pairs, _ = pair_steps([g["a"].table], [g["b"].table])
            except HeadroomError:  # a recording stopped early on one side: nothing to learn from it
                continue
            b = _series(g["a"].table, spec.key)[[p[1][0] for p in pairs]]
            c = _series(g["b"].table, spec.key)[[p[2][0] for p in pairs]]
            with np.errstate(invalid="ignore", divide="ignore"):
                ds.append(np.where((b > 0) & (c > 0), np.log(c) - np.log(b), np.nan))
        rn = residual_noise(ds, f"{len(recs)} earlier interleaved A/A recording(s) (--noise-from)")
        if rn is not None:
            out[canonical(spec.out)] = rn
    return (
        out or None,
        f"--noise-from: residual noise of the level pairs pooled from {len(recs)} earlier interleaved A/A recording(s)",
    )


def _decision(metrics, primary, threshold, runs, alpha, saturated, paired) -> tuple[str, str, int | None]:
    """The verdict, its reason (with the runs that would decide and too few saturated pairs), runs needed."""
    verdict, reason = _verdict(metrics, primary, threshold)
    needed = (
        runs_needed(metrics, primary, threshold, runs, alpha, paired) if verdict == "inconclusive" else None
    )
    if needed:
        what = "interleaved recordings" if paired else "interleaved runs per side"
        reason += f"; about {needed} {what} would most likely decide"
    if saturated < FEW_PAIRS and verdict in ("inconclusive", "no regression", "no change"):
        reason += f" (only {saturated} saturated step pairs: too few to judge throughput well)"
    return verdict, reason, needed


def _distinct_labels(summaries: list[Summary]) -> list[str]:
    from .text import run_labels  # one rule for every table, legend and header

    return run_labels(summaries)


def _judged(metrics: list[Metric], key: str) -> bool:
    return any(m.key == key and m.decides and m.decision != "not judged" for m in metrics)


@dataclass(frozen=True)
class _Design:
    """How the comparison's replicates are formed: runs, or the level pairs of interleaved recordings."""

    recordings: list[tuple[int, int]] | None = None  # (baseline run, candidate run) of each recording
    learned: dict | None = None  # metric -> PairedNoise of earlier interleaved A/A recordings

    @property
    def paired(self) -> bool:
        return self.recordings is not None


def _decision_metrics(sides, pairs, mask, specs, learned, threshold, error_threshold, alpha, design=None):
    design = design or _Design()
    tests, out = {}, {}
    for spec in specs:
        sel = [p for p, m in zip(pairs, mask) if m or spec.pairs == "all"]
        if design.paired:
            t = paired_test(sides, sel, spec, design.recordings, design.learned)
        else:
            yb = _logs(sides[0], [p[1] for p in sel], spec.key)
            yc = _logs(sides[1], [p[2] for p in sel], spec.key)
            t = run_level_test(yb, yc, spec, learned)
        tests[spec.out] = (spec, t)
    err = error_test(sides, pairs)
    pv = {k: t.pvalue for k, (spec, t) in tests.items() if t is not None and spec.weight}
    if not isinstance(err, str):
        pv["error_rate"] = err.pvalue
    runs = (len(sides[0]), len(sides[1]))
    planned = {
        k: planned_se(k, t, design, runs) for k, (spec, t) in tests.items() if t is not None and spec.weight
    }
    weights = power_weights(planned, not isinstance(err, str), threshold, alpha)
    holm = weighted_holm(pv, weights, alpha)
    for k, (spec, t) in tests.items():
        if t is None:
            out[k] = _not_judged(
                _base(spec, threshold), "fewer than 3 matched steps with enough requests on both sides"
            )
        else:
            out[k] = _ratio_metric(t, holm, weights, threshold=threshold, alpha=alpha)
    metrics = list(out.values()) + [_error_metric(err, holm, weights, threshold=error_threshold, alpha=alpha)]
    return metrics, weights


def runs_needed(
    metrics: list[Metric],
    primary: str,
    threshold: float,
    runs: tuple[int, int],
    alpha: float,
    paired: bool = False,
) -> int | None:
    """Runs per side (recordings, when interleaved) that would most likely decide, if every change
    stayed where it is.  Computed once, from the design in force.

    Run-level design: with n runs per side the standard error is the
    metric's between-run sd times sqrt(2 / n), its degrees of freedom gain
    2(n - 1) from the repeats.  Interleaved recordings: the standard error
    shrinks with the square root of the recordings, the degrees of freedom
    grow in proportion.  Decided means the primary's one-sided bound below the
    threshold, or some metric's change shown at its Holm share.  None: no
    number up to 30 would.
    """
    for n in range(max(runs) + 1, 31):
        if any(_would_decide(m, primary, threshold, n, alpha, runs, paired) for m in metrics):
            return n
    return None


def _would_decide(m: Metric, primary: str, threshold: float, n: int, alpha: float, runs, paired) -> bool:
    if not m.decides or m.change is None or m.noise is None or m.key == "error_rate" or m.se is None:
        return False
    logc = math.log1p(m.change)
    bad = logc if m.better == "lower" else -logc
    if paired:
        r = max(runs)
        se, df = m.se * math.sqrt(r / n), m.noise.df * n / r
    else:
        df = m.noise.df + 2 * (n - 1)
        se = m.noise.sd * math.sqrt(2.0 / n)
    if m.key == primary and bad + t_quantile(1.0 - alpha, df) * se < math.log1p(threshold):
        return True
    w = m.weight if m.weight is not None else WEIGHTS[_wkey(m.key)]
    return abs(m.change) >= threshold and abs(logc) > t_quantile(1.0 - alpha * w / 2.0, df) * se


def _load_means(sides, key: str = "mean_percent") -> list[list[float | None]]:
    """Per run, the foreign CPU (or steal, ``steal_mean_percent``) headroom ramp recorded, % of the machine."""
    out = []
    for side in sides:
        vals = []
        for s in side:
            fc = s.run.meta.fields.get("foreign_cpu") if s.run.meta is not None else None
            v = fc.get(key) if isinstance(fc, dict) else None
            vals.append(float(v) if isinstance(v, (int, float)) else None)
        out.append(vals)
    return out


def _load_notes(sides, paired: bool = False) -> list[str]:
    notes = []
    when = "during each side's steps" if paired else "during the runs"
    for key, what in (
        ("mean_percent", "CPU used by other processes"),
        ("steal_mean_percent", "CPU stolen by the host"),
    ):
        means = _load_means(sides, key)
        if any(v is None for side in means for v in side):
            continue
        b, c = (", ".join(f"{v:.0f}" for v in side) for side in means)
        notes.append(f"{what} {when} (% of the machine): baseline {b}; candidate {c}")
    return notes


def _load_warnings(sides, paired: bool = False) -> list[str]:
    means = _load_means(sides)
    if any(v is None for side in means for v in side):
        return []
    mb, mc = float(np.mean(means[0])), float(np.mean(means[1]))
    out = []
    if paired and abs(mc - mb) > 10:  # the sides alternated within every level: bursts fell unevenly
        out.append(
            f"foreign load fell unevenly on the sides of the interleaved recording ({mb:.0f} % baseline, "
            f"{mc:.0f} % candidate, of the machine): the spread of the level pairs carries it, so the "
            "intervals are wider; throughput and latency are hit more than CPU per request"
        )
    elif abs(mc - mb) > 10:
        more = "candidate" if mc > mb else "baseline"
        out.append(
            f"the {more} runs were recorded under more foreign load ({max(mb, mc):.0f} % vs {min(mb, mc):.0f} % "
            "of the machine used by other processes): throughput and latency are not comparable; "
            "CPU per request is much less affected"
        )
    elif max(mb, mc) > 25:
        what = "the recording was made" if paired else "the runs were recorded"
        out.append(f"{what} under heavy foreign load ({max(mb, mc):.0f} % of the machine)")
    return out


def _mdc_warnings(metrics: list[Metric], runs: tuple[int, int], paired: bool = False) -> list[str]:
    from .text import big_pct

    big = [m for m in metrics if m.decides and m.mdc is not None and m.mdc > m.threshold]
    if not big:
        return []
    names = ", ".join(f"{m.name} {big_pct(m.mdc)}" for m in big)
    more = (
        f"more interleaved recordings (now {runs[0]}), more levels or longer steps"
        if paired
        else f"more interleaved runs per side (now {runs[0]} + {runs[1]}), longer steps or --noise-from A/A runs"
    )
    return [
        f"with this design the smallest change found (80 % power) is: {names} (threshold "
        f"{big[0].threshold:.0%}); {more} bring it down"
    ]


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


def _verdict(metrics: list[Metric], primary: str, threshold: float) -> tuple[str, str]:
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
    p = next((m for m in judged if m.key == primary), None)
    if p is None:  # no data is never a pass, whatever the error rate says
        name = next((m.name for m in dec if m.key == primary), primary)
        return "inconclusive", f"{name} could not be judged (too few matched steps): no data is no pass"
    if all(m.decision == "same" for m in judged):
        return "no change", f"all {len(judged)} judged metrics within their thresholds"
    if p.bound is not None and _within(p, threshold):
        return "no regression", (
            f"{p.name} {_pct(p.change)}, at worst {_pct(p.bound)} (one-sided 95 %): "
            f"not {threshold:.0%} worse; nothing worse"
        )
    if p.bound is not None:
        return "inconclusive", (
            f"{p.name} {_pct(p.change)} could still be {threshold:.0%} worse (at worst {_pct(p.bound)})"
        )
    unclear = sorted((m for m in judged if m.decision == "unclear"), key=size, reverse=True)
    if unclear:
        return (
            "inconclusive",
            f"{describe(unclear[0])} could be inside or beyond +-{unclear[0].threshold:.0%}",
        )
    return "inconclusive", "nothing could be judged (no matched steps with enough data)"


def _within(m: Metric, threshold: float) -> bool:
    """The one-sided bound of the change in the worse direction stays short of the threshold."""
    return m.bound < threshold if m.better == "lower" else m.bound > -threshold


# --------------------------------------------------------------------------
# JSON


_n = number


def _metric_doc(m: Metric) -> dict:
    doc = {
        "key": m.key,
        "name": m.name,
        "unit": m.unit,
        "better": m.better,
        "decides": m.decides,
        "baseline": _n(m.baseline),
        "candidate": _n(m.candidate),
        "change": _n(m.change),
        "ci": None if m.ci is None else [_n(m.ci[0]), _n(m.ci[1])],
        "level": _n(m.level),
        "bound": _n(m.bound),
        "pvalue": _n(m.pvalue),
        "threshold": _n(m.threshold),
        "decision": m.decision,
        "pairs": m.pairs,
        "noise": None
        if m.noise is None
        else {"sd": _n(m.noise.sd), "df": _n(m.noise.df), "source": m.noise.source},
        "smallest_detectable_change": _n(m.mdc),
        "note": m.note,
    }
    # added within schema 3 (a reader of older comparisons finds them absent)
    if m.se is not None:
        doc["se_log"] = _n(m.se)
    if m.weight is not None:
        doc["weight"] = _n(m.weight)
    return doc


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
    from .headline import headline

    return {
        "schema": COMPARE_SCHEMA,
        "kind": "comparison",
        "verdict": c.verdict,
        "exit_code": c.exit_code,
        "reason": c.reason,
        # added within schema 3: the answer in plain words, as the terminal and the report give it
        "headline": headline(c),
        "runs_needed": c.runs_needed,
        "baseline": c.baseline_labels,
        "candidate": c.candidate_labels,
        "settings": {
            "threshold": c.threshold,
            "error_threshold": c.error_threshold,
            "confidence": c.confidence,
            "weights": {k: round(v, 6) for k, v in c.weights.items()},
            **({"design": c.design} if c.design != "runs" else {}),
            "objective": None if c.objective is None else str(c.objective),
        },
        "primary": c.primary,
        "noise": {"source": c.noise.source, "runs": list(c.noise.runs)},
        "pairing": c.pairing,
        "metrics": [_metric_doc(m) for m in c.metrics],
        "pairs": [_pair_doc(p) for p in c.pairs],
        "notes": c.notes,
        "warnings": c.warnings,
        # added within schema 3: runs that stopped answering (absent when none did)
        **({"stopped": [x.to_dict() for x in c.stopped]} if c.stopped else {}),
        # added within schema 3: where the CPU went (absent when the runs have no step profiles)
        **(_profile_docs(c.profile_diff) if c.profile_diff is not None else {}),
    }


def _profile_docs(d) -> dict:
    from .profiles.compare import diff_docs

    return diff_docs(d)


def measure_noise(runs: Sequence[Run | Summary], **kw) -> dict:
    """Noise between runs of one unchanged build, per metric, as the comparison sees it.

    Returns {metric key: {"sd", "df", "lag1", "levels"}}: the sd of a run's
    log value over the concurrency levels every run shares (saturated ones
    for throughput), and the mean lag-1 correlation of the step residuals
    within a run (after removing each run's and each level's mean).  Used
    to set the defaults and the synthetic model (``bench/noise.py``).
    """
    summaries = _as_summaries(runs, **kw)
    tables = [s.table for s in summaries]
    pairs, _how = pair_steps(tables[:1], tables[1:]) if len(summaries) > 1 else ([], "")
    if not pairs:
        raise HeadroomError("measuring noise needs at least 2 runs with 3 or more shared concurrency levels")
    mask = _plateau_mask([summaries[:1], summaries[1:]], pairs)
    has_cpu = all(np.isfinite(s.table.cpu_s_per_req).any() for s in summaries)
    out = {}
    for spec in _specs(None, has_cpu):
        sel = [p for p, m in zip(pairs, mask) if m or spec.pairs == "all"]
        idx = [[p[1][0], *p[2]] for p in sel]  # per pair: the step of each run
        y = np.array(
            [
                [np.log(max(_series(s.table, spec.key)[i[r]], 1e-300)) for i in idx]
                for r, s in enumerate(summaries)
            ]
        )
        y = y[:, np.isfinite(y).all(axis=0)]
        ss, df = spread(y.mean(axis=1))
        resid = y - y.mean(axis=1, keepdims=True) - y.mean(axis=0, keepdims=True) + y.mean()
        lag = [np.corrcoef(r[:-1], r[1:])[0, 1] for r in resid if len(r) > 3 and np.std(r) > 0]
        out[spec.out] = {
            "sd": math.sqrt(ss / df) if df else None,
            "df": df,
            "lag1": float(np.mean(lag)) if lag else None,
            "levels": y.shape[1],
        }
    return out


def measure_paired_noise(runs: Sequence[Run | Summary], **kw) -> dict:
    """Noise of the level pairs of interleaved A/A recordings, per metric, as the paired test sees it.

    ``runs``: the a-NN and b-NN folders of one or more ``headroom ramp --ab
    --interleave steps`` jobs of an unchanged build.  Returns {metric key:
    {"sd", "df", "lag1", "rho", "levels", "recordings"}}: the residual sd of a
    level's log ratio B/A around its recording's mean, its df, the raw
    lag-1 correlation of neighbouring residuals and the value the test uses.
    Used to set the synthetic model of interleaved recordings (``bench/noise.py --paired``).
    """
    summaries = _as_summaries(runs, **kw)
    learned, why = _learn_paired(summaries, _specs(None, True), kw)
    if learned is None:
        raise HeadroomError(why)
    n = len([s for s in summaries]) // 2
    return {
        key: {
            "sd": rn.sd,
            "df": rn.df,
            "lag1": rn.lag_num / rn.lag_den if rn.lag_den > 0 else None,
            "rho": rn.rho,
            "levels": rn.levels,
            "recordings": n,
        }
        for key, rn in learned.items()
    }

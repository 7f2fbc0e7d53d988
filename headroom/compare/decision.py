"""The decision: each metric's judgement, the verdict, its exit code and the runs that would decide.

Per metric, as in asv: *worse*/*better* when the Holm procedure finds a
change AND the change is at least the threshold; *same* when the interval
lies inside +-threshold (two one-sided tests); *unclear* otherwise.  With the
model across load (interleaved recordings) a change counts when its
average over the levels reaches the threshold, or when at some level the
fitted change reaches it and that level's simultaneous interval excludes
no change on the same side; *same* needs every level's band inside
+-threshold.

The verdict: any worse -> "regressed" (exit 1); else any better ->
"improved" (0); else every judged metric the same -> "no change" (0); else
the primary metric (CPU per request where measured, otherwise throughput)
shown not to be worse on average by the threshold (one-sided 95 % bound) ->
"no regression" (0); else "inconclusive" (3), with how many more runs (or
recordings) would most likely decide it.
"""

from __future__ import annotations

import math

from ..stats import t_quantile
from .budget import WEIGHTS
from .result import LevelChange, Metric
from .tests import ErrorTest, Test

POWER = 0.8  # for the smallest detectable change
FEW_PAIRS = 5  # fewer saturated pairs than this: said in the reason line


def interval(t: Test, q: float) -> tuple[float, float]:
    return math.exp(t.d - q * t.se) - 1.0, math.exp(t.d + q * t.se) - 1.0


def _level_rows(t: Test, alpha: float, a_level: float | None = None) -> tuple[LevelChange, ...]:
    """Every level's fitted change with its simultaneous interval at ``alpha``; the levels' own means
    with theirs at ``a_level`` (default: half of ``alpha``, the levels' half of the Bonferroni)."""
    m = t.model
    if m is None:
        return ()
    lo, hi = m.band(alpha)
    if a_level is None:
        a_level = alpha / 2.0 if not m.tail else alpha
    rlo, rhi = m.level_band(max(a_level, 1e-12))
    e = _expm1
    return tuple(
        LevelChange(float(x), e(f), (e(a), e(b)), e(r), int(n), m.kind, (e(ra), e(rb)))
        for x, f, a, b, r, n, ra, rb in zip(m.loads, m.fitted, lo, hi, m.raw, m.level_pairs, rlo, rhi)
    )


def _expm1(x: float) -> float:
    """exp(x) - 1, infinite past what a float holds (a level's interval at a tiny level can be that wide)."""
    return math.expm1(x) if x < 700.0 else math.inf


def decide(
    t: Test, rejected: bool, threshold: float, alpha: float, a_local: float, a_level=None, route=None
) -> tuple[str, float, float | None]:
    """(decision, one-sided bound of the average change in the worse direction, the load of the level
    that decided it or None when the average did).

    ``a_level``: the level at which the levels' own means were tested (interleaved recordings);
    ``route``: how the closed test rejected ("line", "+level" or both): found at single levels only,
    a change is worse or better only where a level's own interval is clear of the threshold."""
    sign = 1.0 if t.spec.better == "lower" else -1.0
    change = math.exp(t.d) - 1.0
    lo, hi = interval(t, t_quantile(1.0 - alpha, t.df))
    bound = hi if sign > 0 else lo
    worse, better = sign * change >= threshold, -sign * change >= threshold
    if route == "+level":
        worse = better = False
    at = None
    if t.model is not None and not t.model.tail:  # a level's own mean beyond the threshold and the noise
        coarse = set(t.model.coarse)  # levels of rounding alone (a percentile on a coarse grid)
        rows = [r for r in _level_rows(t, a_local, a_level) if r.load not in coarse]
        w_rows = [r for r in rows if _beyond(r, sign, threshold)]
        b_rows = [r for r in rows if _beyond(r, -sign, threshold)]
        # "better" never where the fitted change is worse by the threshold at some level: a change that
        # turns with load (far slower at light load, a little faster at the top) is not an improvement
        turns = any(sign * math.log1p(r.change) >= math.log1p(threshold) for r in rows)
        if rejected and not worse and w_rows:
            at = max(w_rows, key=lambda r: abs(math.log1p(r.raw))).load
        elif rejected and not worse and not better and b_rows and not turns:
            at = max(b_rows, key=lambda r: abs(math.log1p(r.raw))).load
        worse = worse or bool(w_rows)
        better = (better or bool(b_rows)) and not w_rows and not turns
    if rejected and worse:
        return "worse", bound, at
    if rejected and better:
        return "better", bound, at
    if _same(t, lo, hi, threshold, alpha):
        return "same", bound, None
    return "unclear", bound, None


def _beyond(r: LevelChange, sign: float, threshold: float) -> bool:
    """A level's own interval lies beyond the threshold on the side ``sign`` points to (clear of it,
    not only of no change: one level of a busy machine jumps by tens of per cent)."""
    return sign * math.log1p(_toward(r, sign)) >= math.log1p(threshold)


def _toward(r: LevelChange, sign: float) -> float:
    """The end of a level's own interval nearest to no change, on the side ``sign`` points to."""
    return r.raw_ci[0] if sign > 0 else r.raw_ci[1]


def _same(t: Test, lo: float, hi: float, threshold: float, alpha: float) -> bool:
    """Inside +-threshold: the average (90 % interval), and every level's band (90 %) with a model."""
    if not (lo > -threshold and hi < threshold):
        return False
    if t.model is None:
        return True
    return all(r.ci[0] > -threshold and r.ci[1] < threshold for r in _level_rows(t, 2.0 * alpha))


def mdc(t: Test, alpha_local: float) -> float:
    q = t_quantile(1.0 - alpha_local / 2.0, t.df) + t_quantile(POWER, t.df)
    return math.exp(q * t.se) - 1.0


def base_fields(spec, threshold: float) -> dict:
    return dict(
        key=spec.out, name=spec.name, unit=spec.unit, better=spec.better, decides=bool(spec.weight),
        threshold=threshold,
    )  # fmt: skip


def not_judged(base: dict, note: str) -> Metric:
    return Metric(
        **base, baseline=None, candidate=None, change=None, ci=None, decision="not judged", note=note
    )


def ratio_metric(t: Test, holm: dict, weights: dict, *, threshold: float, alpha: float) -> Metric:
    spec = t.spec
    what = "saturated" if spec.pairs == "plateau" else "matched"
    note = f"geometric mean over {t.pairs} {what} step pairs"
    if spec.out == "paired_plateau_rps":
        note += " (the summary's plateau is the median of one run's saturated steps)"
    common = dict(
        **base_fields(spec, threshold), baseline=t.baseline, candidate=t.candidate,
        change=math.exp(t.d) - 1.0, note=note, pairs=t.pairs, noise=t.noise, se=t.se,
        test=_test_line(t),
    )  # fmt: skip
    if not spec.weight:  # shown with a plain two-sided interval, not tested
        q = t_quantile(1.0 - alpha / 2.0, t.df)
        return Metric(**common, ci=interval(t, q), decision="shown", level=1.0 - alpha,
                      levels=_level_rows(t, alpha))  # fmt: skip
    rejected, a_local, *rest = holm[spec.out]
    a_local = max(a_local, 1e-9)  # a level no pattern reaches: the interval at a tiny level, not none
    a_level, route = (rest + [None, None])[:2]
    decision, bound, at = decide(t, rejected, threshold, alpha, a_local, a_level, route)
    q = t_quantile(1.0 - a_local / 2.0, t.df)
    return Metric(
        **common, ci=interval(t, q), decision=decision, level=1.0 - a_local, bound=bound,
        mdc=mdc(t, alpha * weights[spec.out]), pvalue=t.pvalue, weight=weights[spec.out],
        levels=_level_rows(t, a_local, a_level), decided_at=at,
    )  # fmt: skip


def _test_line(t: Test) -> str:
    if t.model is None:
        return "run-level t test of the mean over the matched levels"
    m = t.model
    if m.tail:
        return (
            f"no change at any level: F test of a line in log load and sign-flip test, both ({m.df:.0f} df)"
        )
    return f"no change at any level: F test of a line in log load or the levels' own means, Bonferroni ({m.df:.0f} df)"


def error_metric(e: ErrorTest | str, holm: dict, weights: dict, *, threshold: float, alpha: float) -> Metric:
    from ..stats import z_quantile

    base = dict(
        key="error_rate", name="error rate", unit="%", better="lower", decides=True, threshold=threshold
    )
    if isinstance(e, str):
        return not_judged(base, e)
    rejected, a_local, *_ = holm["error_rate"]
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
        **base, baseline=e.rates[0], candidate=e.rates[1], change=e.diff, ci=ci, decision=decision,
        note=_error_note(e), pairs=e.pairs,
        level=1.0 - a_local, bound=hi, pvalue=e.pvalue, weight=weights.get("error_rate"),
        test="two-proportion z test",
    )  # fmt: skip


def _error_note(e: ErrorTest) -> str:
    if e.extra:
        return (
            f"failed / all requests over {e.pairs} matched steps and {e.extra} more at levels every run ran "
            "(too short to pair, or failing every request; difference in points)"
        )
    return f"failed / all requests over {e.pairs} matched steps (difference in points)"


def _worse_by(m: Metric, threshold: float) -> bool:
    """The point estimate is at least the threshold the worse way."""
    lc = math.log1p(m.change)
    return (lc if m.better == "lower" else -lc) >= math.log1p(threshold)


def within(m: Metric, threshold: float) -> bool:
    """The one-sided bound of the change in the worse direction stays short of the threshold."""
    return m.bound < threshold if m.better == "lower" else m.bound > -threshold


def verdict(metrics: list[Metric], primary: str, threshold: float, alpha: float = 0.05) -> tuple[str, str]:
    """The verdict and one short sentence naming the metric that decided it (``alpha``: the family's,
    whose one-sided bound "at worst" is)."""
    from .wording import describe, pct

    dec = [m for m in metrics if m.decides]
    size = lambda m: abs(m.change or 0.0) / (m.threshold or 1.0)  # noqa: E731
    worse = sorted((m for m in dec if m.decision == "worse"), key=size, reverse=True)
    better = sorted((m for m in dec if m.decision == "better"), key=size, reverse=True)
    judged = [m for m in dec if m.decision in ("worse", "better", "same", "unclear")]
    more = lambda ms: f", and {len(ms) - 1} more metric(s)" if len(ms) > 1 else ""  # noqa: E731
    if worse:  # a mixed change (faster but costlier) is a regression; what improved is said too
        also = f"; although {describe(better[0], 'better')}" if better else ""
        return "regressed", f"{describe(worse[0], 'worse')}{more(worse)}{also}"
    p = next((m for m in judged if m.key == primary), None)
    if better and p is not None and p.change is not None and _worse_by(p, threshold):
        return "inconclusive", (
            f"{describe(better[0], 'better')}, but {p.name} {pct(p.change)} is {threshold:.0%} worse "
            "(not shown beyond the noise): not an improvement"
        )
    if better:
        return "improved", f"{describe(better[0], 'better')}{more(better)}"
    if p is None:  # no data is never a pass, whatever the error rate says
        name = next((m.name for m in dec if m.key == primary), primary)
        return "inconclusive", f"{name} could not be judged (too few matched steps): no data is no pass"
    if all(m.decision == "same" for m in judged):
        return "no change", f"all {len(judged)} judged metrics within their thresholds"
    if p.bound is not None and within(p, threshold):
        return "no regression", (
            f"{p.name} {pct(p.change)}, at worst {pct(p.bound)} (one-sided {100 * (1 - alpha):.3g} %): "
            f"not {threshold:.0%} worse; nothing worse"
        )
    if p.bound is not None:
        return "inconclusive", (
            f"{p.name} {pct(p.change)} could still be {threshold:.0%} worse (at worst {pct(p.bound)})"
        )
    unclear = sorted((m for m in judged if m.decision == "unclear"), key=size, reverse=True)
    if unclear:
        return (
            "inconclusive",
            f"{describe(unclear[0])} could be inside or beyond +-{unclear[0].threshold:.0%}",
        )
    return "inconclusive", "nothing could be judged (no matched steps with enough data)"


def decision(metrics, primary, threshold, runs, alpha, saturated, paired) -> tuple[str, str, int | None]:
    """The verdict, its reason (with the runs that would decide and too few saturated pairs), runs needed."""
    v, reason = verdict(metrics, primary, threshold, alpha)
    needed = runs_needed(metrics, primary, threshold, runs, alpha, paired) if v == "inconclusive" else None
    if needed:
        what = "interleaved recordings" if paired else "interleaved runs per side"
        reason += f"; about {needed} {what} would most likely decide"
    if saturated < FEW_PAIRS and v in ("inconclusive", "no regression", "no change"):
        reason += f" (only {saturated} saturated step pairs: too few to judge throughput well)"
    return v, reason, needed


def runs_needed(
    metrics: list[Metric], primary: str, threshold: float, runs: tuple[int, int], alpha: float, paired=False
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
    w = m.weight if m.weight is not None else WEIGHTS.get(m.key, WEIGHTS["tail"])
    return abs(m.change) >= threshold and abs(logc) > t_quantile(1.0 - alpha * w / 2.0, df) * se

"""compare_runs: the stages in order (pairing -> tests -> error budget -> decision -> wording)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..model import Objective, Run
from ..noise import LearnedNoise
from ..stopped import stop_note, stop_verdict, stops
from ..summary import Summary
from . import learned as learn
from .budget import planned_se, power_weights, weighted_holm
from .capacity import capacity_spec, capacity_test
from .decision import base_fields, decision, error_metric, not_judged, ratio_metric
from .endpoints import EndpointSettings, judge_endpoints, with_endpoints
from .joint import (
    CAPACITY_SHARE,
    ERROR_SHARE,
    FLIP_FLOOR,
    LEVEL_PREFIX,
    LEVEL_SHARE,
    Member,
    closed_test,
    effective_share,
    flip_block,
)
from .options import ERROR_THRESHOLD, CompareOptions
from .pairing import pairs_for, plateau_mask
from .result import Comparison, Noise, StepPair
from .shown import shown
from .specs import COARSE_QUANTA, all_levels, logs, series, specs
from .tests import error_test, paired_test, run_level_test
from .wording import load_notes, load_warnings, mdc_warnings, same_files, single_pair_note


@dataclass(frozen=True)
class Design:
    """How the comparison's replicates are formed: runs, or the level pairs of interleaved recordings."""

    recordings: list[tuple[int, int]] | None = None  # (baseline run, candidate run) of each recording
    learned: dict | None = None  # metric -> PairNoise of earlier interleaved A/A recordings
    levels: int = 0  # distinct load levels compared
    closed_loop: bool = True

    @property
    def paired(self) -> bool:
        return self.recordings is not None


@dataclass(frozen=True)
class _Plan:
    """What is judged and against what: the pairs, the specs, the design and learned noise."""

    sides: list
    pairs: list
    how: str
    mask: np.ndarray
    specs: list
    design: Design
    learned: LearnedNoise | None
    notes: list
    few: list
    side_stops: list


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
    accept_mismatch: bool = False,
) -> Comparison:
    """Compare a baseline with a candidate at matched load (see :mod:`headroom.compare`).

    Parameters
    ----------
    baseline, candidate
        A run or summary, or several repeat runs of the same build (or the halves of
        interleaved recordings).
    objective
        Latency objective (``"p99<=20ms"`` or an Objective): its percentile
        is the tail metric, and the throughput at it is shown.
    threshold
        Practical threshold: a smaller relative change is never called.
    error_threshold
        Smallest rise of the error rate (a fraction: 0.001 is 0.1 points) called a regression.
    noise_from
        Earlier runs of one unchanged build (or earlier interleaved A/A recordings), or a
        :class:`headroom.noise.LearnedNoise` (e.g. from :func:`headroom.noise.load_history_noise`).
    confidence
        Family-wide confidence: the chance that no metric is called changed when none changed.
    bucket_s
        Time bucket width for runs not yet analysed (does not change the decision).
    accept_mismatch
        Judge runs that do not measure the same thing (:mod:`headroom.mismatch`: a side with fewer
        steps than its own plan, other requests, load generators or plans; the same request at two
        addresses is said but judged); by default such a comparison is inconclusive (exit 3) with
        the reason, whatever its steps say.
    """
    if isinstance(objective, str):
        from ..model import parse_objective

        objective = parse_objective(objective) if objective else None
    opts = CompareOptions(objective, threshold, error_threshold, confidence, bucket_s)
    plan = _plan(baseline, candidate, noise_from, opts)
    metrics, weights = _decision_metrics(plan, opts)
    metrics += [m for m in shown(plan.sides) if m.key not in {j.key for j in metrics}]
    primary = "cpu_s_per_req" if _judged(metrics, "cpu_s_per_req") else "paired_plateau_rps"
    runs = (len(plan.sides[0]), len(plan.sides[1]))
    verdict, reason, needed = decision(
        metrics, primary, threshold, runs, opts.alpha, int(np.sum(plan.mask)), plan.design.paired
    )
    verdict, reason, needed = _with_stops(plan.sides, plan.side_stops, verdict, reason, needed)
    eps = _endpoints(plan, opts)
    verdict, reason = with_endpoints(verdict, reason, eps)
    c = replace(_assemble(plan, opts, metrics, weights, primary, (verdict, reason, needed)), endpoints=eps)
    return c if accept_mismatch else _cannot_answer(c)


def _endpoints(plan: _Plan, opts: CompareOptions) -> list:
    """Every request name both sides carry, judged at matched load (:mod:`headroom.compare.endpoints`)."""
    obj = opts.objective
    tail = (obj.name, obj.q) if obj is not None and obj.q is not None else ("p99", (99, 100))
    st = EndpointSettings(tail, opts.threshold, opts.error_threshold, opts.confidence)
    return judge_endpoints(plan.sides, plan.pairs, plan.design.recordings, st)


def _cannot_answer(c: Comparison) -> Comparison:
    """Runs that do not measure the same thing cannot answer the gate's question: inconclusive (exit 3)
    with the mismatch as the reason, and what the matched steps alone would say (a side whose server
    stopped answering is a regression, said by the stops, not a mismatch)."""
    from ..mismatch import PREFIX

    if c.stopped:  # a side stopped answering: the stops decide (a regression), whatever else differs
        return c
    # said, but measuring the same thing: the same request served at two addresses (a baseline and a
    # candidate server on two ports), and steps of different lengths (a ramp that ends a step after N
    # requests gives a slower candidate longer steps: the regression itself, not another plan)
    said_only = (PREFIX + "different addresses", PREFIX + "different step durations")
    found = [w for w in c.warnings if w.startswith(PREFIX) and not w.startswith(said_only)]
    if not found:
        return c
    what = found[0].split(": ", 1)[1]
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    reason = (
        f"the runs do not measure the same thing: {what}{more}; the matched steps alone would say "
        f"{c.verdict.upper()} ({c.reason}); judge them anyway with --accept-mismatch"
    )
    return replace(c, verdict="inconclusive", reason=reason, runs_needed=None)


def _plan(baseline, candidate, noise_from, opts: CompareOptions) -> _Plan:
    kw = opts.analyze_kwargs()
    sides = [learn.as_summaries(s, **kw) for s in (baseline, candidate)]
    labels = _distinct_labels(sides[0] + sides[1])
    side_stops = stops(sides, labels)
    pairs, how = pairs_for(sides, side_stops)
    mask = plateau_mask(sides, pairs)
    has_cpu = all(np.isfinite(s.table.cpu_s_per_req).any() for side in sides for s in side)
    sp = specs(opts.objective, has_cpu)
    design, dnotes = _design(sides, noise_from, sp, pairs, kw)
    if design.paired:  # every level's pair shares the host: throughput is judged at every level
        sp = [all_levels(s) if s.out == "paired_plateau_rps" else s for s in sp]
    learned, notes = (None, []) if design.paired else learn.for_runs(noise_from, sp, pairs, mask, kw)
    learned, few = learn.few_df(learned)
    return _Plan(sides, pairs, how, mask, sp, design, learned, notes + dnotes, few, side_stops)


def _design(sides, noise_from, sp, pairs, kw) -> tuple[Design, list[str]]:
    """Interleaved recordings (every run with its partner on the other side) or runs."""
    meta = [[s.run.meta.fields if s.run.meta is not None else {} for s in side] for side in sides]
    recs = partners(meta[0], meta[1])
    closed = all(s.table.kind == "concurrency" for side in sides for s in side)
    if recs is None:
        return Design(closed_loop=closed), []
    notes, learned = [], None
    if noise_from is not None:
        learned, why = learn.for_pairs(noise_from, sp, kw)
        notes.append(why)
    levels = len({p[0] if p[0] is not None else k for k, p in enumerate(pairs)})
    return Design(recs, learned, levels, closed), notes


def partners(base_meta: Sequence[dict], cand_meta: Sequence[dict]) -> list[tuple[int, int]] | None:
    """[(baseline index, candidate index)] of the interleaved recordings, or None.

    Every run on both sides must be one half of an interleaved recording whose
    other half is on the other side; otherwise the comparison is not paired.
    """

    def key(meta: dict):
        ab = meta.get("ab") if isinstance(meta, dict) else None
        if not isinstance(ab, dict) or ab.get("design") != learn.DESIGN:
            return None
        rec, job = ab.get("recording"), ab.get("job")
        if not isinstance(rec, int) or not isinstance(job, str):
            return None
        return job, rec

    kb, kc = [key(m) for m in base_meta], [key(m) for m in cand_meta]
    if any(k is None for k in kb + kc) or len(kb) != len(kc):
        return None
    if len(set(kb)) != len(kb) or set(kb) != set(kc):
        return None
    return [(i, kc.index(k)) for i, k in enumerate(kb)]


def _tests(plan: _Plan) -> dict:
    """Each metric's test by the design in force: {out key: (spec, Test or None)}."""
    out = {}
    for spec in plan.specs:
        sel = [p for p, m in zip(plan.pairs, plan.mask) if m or spec.pairs == "all"]
        if plan.design.paired:
            t = paired_test(plan.sides, sel, spec, plan.design.recordings, plan.design.learned)
        else:
            yb = logs(plan.sides[0], [p[1] for p in sel], spec.key)
            yc = logs(plan.sides[1], [p[2] for p in sel], spec.key)
            t = run_level_test(yb, yc, spec, plan.learned)
        out[spec.out] = (spec, t)
    return out


def _decision_metrics(plan: _Plan, opts: CompareOptions):
    tests = _tests(plan)
    if (
        opts.objective is not None and opts.objective.q is not None
    ):  # issue 39: judged, paired when interleaved
        t, _why = capacity_test(*plan.sides, plan.design.recordings, opts.confidence)
        if t is not None:  # else shown as before (shown.py), with the summaries' values
            tests["rps_at_objective"] = (capacity_spec(), t)
    err = error_test(plan.sides, plan.pairs)
    plan.notes.extend(n for spec, t in tests.values() if (n := coarse_note(spec, t)))
    if plan.design.paired:
        holm, weights = _joint(tests, err, opts.alpha)
    else:
        holm, weights = _budgeted(plan, tests, err, opts)
    out = []
    for _k, (spec, t) in tests.items():
        if t is None:
            why = "fewer than 3 matched steps with enough requests on both sides"
            out.append(not_judged(base_fields(spec, opts.threshold), why))
        else:
            out.append(ratio_metric(t, holm, weights, threshold=opts.threshold, alpha=opts.alpha))
    out.append(error_metric(err, holm, weights, threshold=opts.error_threshold, alpha=opts.alpha))
    return out, weights


def coarse_note(spec, t) -> str | None:
    """The levels of a percentile recorded on a coarse grid that cannot decide alone, said once."""
    if t is None or not spec.weight or t.cells is None or t.cells.coarse is None:
        return None
    q, loads = t.cells.coarse
    unit = {"concurrency": "c=", "rate": "", "step": "step "}[t.cells.kind]
    where = ", ".join(f"{unit}{x:g}" for x in loads[:8]) + (
        f" and {len(loads) - 8} more" if len(loads) > 8 else ""
    )
    return (
        f"{spec.name} at {where}: both sides at most {COARSE_QUANTA} x the generator's {q * 1e3:g} ms grid "
        f"({COARSE_QUANTA * q * 1e3:g} ms), where rounding alone moves a ratio by 30-100 %: these levels count "
        "in the line across load, but none decides alone"
    )


def _budgeted(plan: _Plan, tests: dict, err, opts: CompareOptions):
    """Runs recorded apart: weighted Holm with the shares planned from the design (budget.py)."""
    pv = {k: t.pvalue for k, (spec, t) in tests.items() if t is not None and spec.weight}
    if not isinstance(err, str):
        pv["error_rate"] = err.pvalue
    runs = (len(plan.sides[0]), len(plan.sides[1]))
    planned = {
        k: planned_se(k, t.pairs, plan.design, runs)
        for k, (spec, t) in tests.items()
        if t is not None and spec.weight
    }
    weights = power_weights(
        planned, not isinstance(err, str), opts.threshold, opts.alpha, plan.design.closed_loop
    )
    return weighted_holm(pv, weights, opts.alpha), weights


def _joint(tests: dict, err, alpha: float):
    """Interleaved recordings: one closed test (joint.py) over the metrics' lines across load (sign flips
    of whole levels, all metrics at once), their levels' own means (a share each), the capacity at the
    objective and the error rate (fixed shares).  {key: (rejected, level, level's alpha, route)} and
    the shares shown."""
    paired = {k: t for k, (spec, t) in tests.items() if t is not None and spec.weight and t.cells is not None}
    members = [Member(k, t.cells, t.learned) for k, t in paired.items()]
    obs, null = flip_block(members) if members else ({}, {})
    others = {
        k: (t.pvalue, CAPACITY_SHARE)
        for k, (spec, t) in tests.items()
        if t is not None and spec.weight and t.cells is None
    }
    if obs and min(float(np.min(q)) for q in null.values()) > alpha * FLIP_FLOOR:
        # too few levels for sign flips to reach the level (a 4-level ramp has 16 patterns: the smallest
        # p is 1/8): the lines' F tests, parametric, share the block's budget equally (Bonferroni)
        share = (1.0 - LEVEL_SHARE - sum(w for _, w in others.values()) - ERROR_SHARE) / len(paired)
        others.update({k: (t.model.p_f, share) for k, t in paired.items()})
        obs, null = {}, {}
    one_level = [k for k, t in paired.items() if not t.model.tail]
    for k in one_level:
        others[LEVEL_PREFIX + k] = (paired[k].model.p_levels, LEVEL_SHARE / len(one_level))
    if not isinstance(err, str):
        others["error_rate"] = (err.pvalue, ERROR_SHARE)
    judged = closed_test(obs, null, others, alpha)
    holm, weights = {}, {}
    for k, j in judged.items():
        if k.startswith(LEVEL_PREFIX):
            continue
        lv = judged.get(LEVEL_PREFIX + k)
        route = ("line" if j.rejected else "") + ("+level" if lv is not None and lv.rejected else "")
        holm[k] = (j.rejected or (lv is not None and lv.rejected), j.alpha, lv.alpha if lv else None, route)
        weights[k] = effective_share(j.alpha, alpha)
    for k, (spec, t) in tests.items():  # the p-value the closed test judged: the marginal flip p
        if k in obs and t is not None:
            tests[k] = (spec, replace(t, pvalue=obs[k]))
    return holm, weights


def _assemble(plan: _Plan, opts: CompareOptions, metrics, weights, primary, decided) -> Comparison:
    verdict, reason, needed = decided
    sides, design = plan.sides, plan.design
    runs = (len(sides[0]), len(sides[1]))
    labels = _distinct_labels(sides[0] + sides[1])
    noise = _noise_of(design, plan.learned, runs)
    how = plan.how + (
        "; A and B of each level recorded seconds apart (interleaved steps)" if design.paired else ""
    )
    notes = [noise.describe(), f"steps paired {how}", *plan.notes, *load_notes(sides, design.paired)]
    notes += [n for n in (stop_note(plan.side_stops),) if n] + single_pair_note(metrics, design.paired)
    from ..mismatch import GENERATOR, mismatch_warnings  # runs that do not match: said first, once

    warnings = mismatch_warnings(sides[0], sides[1]) + same_files(sides)
    warnings += [
        f"{s.label}: {w}" if GENERATOR in w else w for side in sides for s in side for w in s.warnings
    ]
    warnings += load_warnings(sides, design.paired) + plan.few + mdc_warnings(metrics, runs, design.paired)
    c = Comparison(
        verdict=verdict, reason=reason, metrics=metrics, pairs=_pair_rows(sides, plan.pairs, plan.mask),
        pairing=how, baseline_labels=labels[: len(sides[0])], candidate_labels=labels[len(sides[0]) :],
        threshold=opts.threshold, error_threshold=opts.error_threshold, confidence=opts.confidence,
        noise=noise, objective=opts.objective, notes=notes, warnings=list(dict.fromkeys(warnings)),
        runs_needed=needed, primary=primary, holm_weights=weights,
        design="interleaved steps" if design.paired else "runs",
        stopped=[x for row in plan.side_stops for x in row if x is not None],
    )  # fmt: skip
    return _with_profiles(c, sides)


def _with_profiles(c: Comparison, sides) -> Comparison:
    """Where the CPU went, when both sides have step profiles (``RUN/profiles/``)."""
    from ..profiles.compare import side_diff

    d, warnings = side_diff(sides, c.confidence)
    return replace(c, profile_diff=d, warnings=c.warnings + warnings) if (d or warnings) else c


def _with_stops(sides, side_stops, verdict: str, reason: str, needed):
    """The verdict when a side stopped answering: said first; the matched steps can only add to it."""
    got = stop_verdict(sides, side_stops)
    if got is None:
        return verdict, reason, needed
    sv, sr = got
    if sv == "regressed":
        extra = f"; the levels both sides ran also say: {reason}" if verdict == "regressed" else ""
        return "regressed", sr + extra, None
    if verdict == "regressed":  # the candidate took the load the baseline could not, but costs more
        return "regressed", f"{reason}; although {sr[0].lower()}{sr[1:]}", None
    return "improved", sr, None


def _noise_of(design: Design, learned: LearnedNoise | None, runs: tuple[int, int]) -> Noise:
    """Where the comparison's noise came from: the level pairs, learned, repeats or the defaults."""
    if design.paired:
        return Noise("interleaved" + (", learned" if design.learned else ""), runs)
    return Noise("learned" if learned is not None else ("repeats" if max(runs) > 1 else "default"), runs)


def _distinct_labels(summaries: list[Summary]) -> list[str]:
    from ..text import run_labels  # one rule for every table, legend and header

    return run_labels(summaries)


def _judged(metrics, key: str) -> bool:
    return any(m.key == key and m.decides and m.decision != "not judged" for m in metrics)


_PAIR_KEYS = ("rps", "p50_s", "p99_s", "cpu_s_per_req")


def _pair_rows(sides, pairs, mask) -> list[StepPair]:
    out = []
    for p, plateau in zip(pairs, mask):
        vals = []
        for k, side in enumerate(sides):
            row = {}
            for key in _PAIR_KEYS:
                v = np.array([series(s.table, key)[p[1 + k][r]] for r, s in enumerate(side)])
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

"""Baseline against candidate: matched-load comparison, intervals, verdict.

How a verdict is reached (also in the README and ``headroom compare --help``):

1. Both sides are cut into the same throughput bins.  A bin is *compared*
   only when every side has at least ``min_blocks`` resampling blocks in it
   (a block bootstrap cannot estimate noise from fewer) and, for a
   percentile, at least 10 requests above it.  A block is a time bucket, or
   consecutive buckets of one step spanning at least ``block_s`` (1 s).  Bins only one side reached,
   or with too little data, are listed, not compared.
2. Decision metrics: p50, p90 and p99 latency at matched load (per-bin
   ratios combined as a request-weighted geometric mean over the compared
   bins), CPU per request at matched load, maximum sustained throughput, and
   throughput at the latency objective when one is given (and both runs
   cross it).  The knee is shown with an interval but does not decide.
3. Intervals come from a block bootstrap that resamples whole time buckets
   (within each bin, or within each step for throughput), never single
   requests; with several runs per side it first resamples runs.  The
   confidence level is Bonferroni-adjusted for the number of decision
   metrics, so that the family of them keeps the stated level.
4. A metric is *worse* or *better* only when its interval excludes zero AND
   its estimate is at least the threshold (default 10 %; raised to the
   spread between repeat runs of a side when that is larger).  It is the
   *same* when its whole interval lies inside +-threshold, and *unclear*
   otherwise.
5. Verdict: any worse metric -> "regressed" (exit 1); else any better ->
   "improved" (exit 0); else every judged metric the same -> "no change"
   (exit 0); else "inconclusive" (exit 3).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from . import stats
from .binning import bin_edges, nice_width, rank
from .capacity import fit_knee_xy
from .model import MIN_TAIL_REQUESTS, SCHEMA_VERSION, Objective, Run
from .summary import Summary, analyze

EXIT_CODES = {"improved": 0, "no change": 0, "regressed": 1, "inconclusive": 3}
LATENCY_PCTS = (("p50", 50, 100), ("p90", 90, 100), ("p99", 99, 100))


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
    change: float | None  # candidate / baseline - 1
    ci: tuple[float, float] | None
    threshold: float
    noise_floor: float | None
    decision: str  # worse, better, same, unclear, not judged
    note: str = ""


@dataclass(frozen=True)
class MatchedBin:
    """One throughput bin of the common grid, with what each side has in it."""

    rps_lo: float
    rps_hi: float
    baseline_requests: int
    candidate_requests: int
    baseline_blocks: int
    candidate_blocks: int
    status: str  # compared, baseline only, candidate only, too few blocks
    latency: dict[str, tuple[float | None, float | None, float | None, tuple[float, float] | None]] = field(
        default_factory=dict
    )  # pct -> (baseline s, candidate s, change, ci)


@dataclass(frozen=True)
class Comparison:
    """The outcome of :func:`compare_runs`."""

    verdict: str
    reason: str
    metrics: list[Metric]
    bins: list[MatchedBin]
    baseline_labels: list[str]
    candidate_labels: list[str]
    threshold: float
    confidence: float
    metric_confidence: float
    n_boot: int
    seed: int
    min_blocks: int
    block_s: float
    bucket_s: float
    objective: Objective | None
    notes: list[str]
    warnings: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]


# --------------------------------------------------------------------------
# per-run material for resampling


@dataclass
class _RunBins:
    """One run cut into the common bins: per-bucket histograms on the side's columns."""

    summary: Summary
    bucket_bin: np.ndarray  # matched bin of each bucket
    block: np.ndarray  # resampling block of each bucket (>= block_s of one step)
    # per bin: (bucket indices, histogram rows (m x columns), columns (value idx))
    hist: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]


def _bucket_entries(s: Summary, union: np.ndarray):
    """Sparse per-bucket histograms of a run on the common value axis: (bucket, value idx, count)."""
    remap = np.searchsorted(union, s.hist.values)
    return s.hist.bucket, remap[s.hist.value], s.hist.count


def bucket_blocks(s: Summary, block_s: float) -> np.ndarray:
    """Resampling block of each bucket: consecutive buckets of one step spanning ``block_s``.

    Buckets shorter than a second within the same second are strongly
    correlated; treating them as independent would fake precision.
    """
    b = s.buckets
    if len(b) == 0:
        return np.zeros(0, dtype=np.int64)
    step_start = np.zeros(len(b), dtype=np.int64)
    first = np.r_[True, b.step[1:] != b.step[:-1]]
    step_start = np.maximum.accumulate(np.where(first, np.arange(len(b)), 0))
    offset = (b.start_ns - b.start_ns[step_start]) / 1e9
    within = np.floor(offset / max(block_s, b.bucket_s) + 1e-9).astype(np.int64)
    key = b.step.astype(np.int64) * (int(within.max()) + 1) + within
    return np.unique(key, return_inverse=True)[1]


def _expand(rng: np.random.Generator, blocks: np.ndarray, n_boot: int) -> np.ndarray:
    """Bootstrap weights of buckets (n_boot, len(blocks)) from resampling their blocks."""
    ub, inv = np.unique(blocks, return_inverse=True)
    return stats.block_weights(rng, len(ub), n_boot)[:, inv]


def _run_bins(s: Summary, edges: np.ndarray, union: np.ndarray, block_s: float) -> _RunBins:
    nb = len(edges) - 1
    bucket_bin = np.clip(np.searchsorted(edges, s.buckets.rps, side="right") - 1, 0, nb - 1)
    bkt, val, cnt = _bucket_entries(s, union)
    ent_bin = bucket_bin[bkt]
    hist = {}
    for j in np.unique(bucket_bin):
        idx = np.flatnonzero(bucket_bin == j)
        m = ent_bin == j
        cols, col_of = np.unique(val[m], return_inverse=True)
        row_of = np.searchsorted(idx, bkt[m])
        h = np.zeros((len(idx), len(cols)))
        np.add.at(h, (row_of, col_of), cnt[m])
        hist[int(j)] = (idx, h, cols)
    return _RunBins(s, bucket_bin, bucket_blocks(s, block_s), hist)


def _geo(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted geometric mean along the last axis; non-finite or non-positive entries are dropped."""
    v = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(v) & (v > 0)
    lw = np.where(ok, np.broadcast_to(weights, v.shape), 0.0)
    lv = np.where(ok, np.log(np.where(ok, v, 1.0)), 0.0)
    total = lw.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, np.exp((lv * lw).sum(axis=-1) / np.where(total > 0, total, 1.0)), np.nan)


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
    confidence: float = 0.95,
    seed: int = 0,
    n_boot: int = 1000,
    n_boot_knee: int = 200,
    min_blocks: int = 5,
    block_s: float = 1.0,
    bucket_s: float = 1.0,
    bins: int | None = None,
    bin_width: float | None = None,
) -> Comparison:
    """Compare a baseline with a candidate at matched load, with block-bootstrap intervals.

    Parameters
    ----------
    baseline, candidate
        A run or summary, or several repeat runs of the same build.
    objective
        Latency objective; adds "throughput at the objective" as a decision metric.
    threshold
        Practical threshold: a smaller relative change is never called.
    confidence
        Family-wide confidence of the decision metrics' intervals.
    seed
        Seed of the resampling (same inputs and seed: same result).
    n_boot, n_boot_knee
        Bootstrap resamples (the knee refits the model per resample; 0 skips its interval).
    min_blocks
        Resampling blocks each side needs in a bin for the bin to be compared.
    block_s
        Shortest resampling block, seconds: consecutive buckets of a step are
        resampled together until they span this long (never less than a bucket).
    bucket_s, bins, bin_width
        Time bucket width and the common throughput bins (default: round
        numbers, about ten bins over both sides' range).

    Returns
    -------
    Comparison
    """
    kw = {"objective": objective, "bucket_s": bucket_s}
    sides = [_as_summaries(baseline, **kw), _as_summaries(candidate, **kw)]
    rng = np.random.default_rng(seed)
    all_rps = np.concatenate([s.buckets.rps for side in sides for s in side])
    if bins is None and bin_width is None:
        lo, hi = float(np.nanmin(all_rps)), float(np.nanmax(all_rps))
        bin_width = nice_width(hi - lo)
    edges = bin_edges(all_rps, bins=bins, width=bin_width)
    nbins = len(edges) - 1
    union = np.unique(np.concatenate([s.hist.values for side in sides for s in side]))
    rbins = [[_run_bins(s, edges, union, block_s) for s in side] for side in sides]

    # which bins can be compared
    counts = np.zeros((2, nbins), dtype=np.int64)
    nbuck = np.zeros((2, nbins), dtype=np.int64)
    for k in range(2):
        for rb in rbins[k]:
            for j, (idx, h, _) in rb.hist.items():
                counts[k, j] += int(h.sum())
                nbuck[k, j] += len(np.unique(rb.block[idx]))
    compared = (nbuck >= min_blocks).all(axis=0)

    # bootstrap per side and bin: pooled latency percentiles, CPU per request,
    # and per-run replicate percentiles for run-level metrics
    picks = [stats.pick_runs(rng, len(rbins[k]), n_boot) for k in range(2)]
    sel = [np.stack([(picks[k] == r).sum(axis=1) for r in range(len(rbins[k]))]) for k in range(2)]
    obj_q = objective.q if (objective is not None and objective.q is not None) else None
    pct_point = np.full((2, nbins, 3), np.nan)
    pct_boot = np.full((2, nbins, 3, n_boot), np.nan)
    cpu_point = np.full((2, nbins), np.nan)
    cpu_boot = np.full((2, nbins, n_boot), np.nan)
    run_point: list[list[dict]] = [[{} for _ in rbins[k]] for k in range(2)]
    run_boot: list[list[dict]] = [[{} for _ in rbins[k]] for k in range(2)]
    for k in range(2):
        for j in range(nbins):
            members = [rb for rb in rbins[k] if j in rb.hist]
            if not members:
                continue
            cols = np.unique(np.concatenate([rb.hist[j][2] for rb in members]))
            vals = union[cols]
            pooled = np.zeros((n_boot, len(cols)))
            pooled_point = np.zeros(len(cols))
            cpu_num = np.zeros(n_boot)
            cpu_den = np.zeros(n_boot)
            cpu_num_pt = cpu_den_pt = 0.0
            for r, rb in enumerate(rbins[k]):
                if j not in rb.hist:
                    continue
                idx, h, c = rb.hist[j]
                place = np.searchsorted(cols, c)
                full = np.zeros((len(idx), len(cols)))
                full[:, place] = h
                w = _expand(rng, rb.block[idx], n_boot)
                rep = w @ full  # (n_boot, cols)
                wsel = sel[k][r][:, None]
                pooled += wsel * rep
                pooled_point += full.sum(axis=0)
                b = rb.summary.buckets
                cores = rb.summary.run.cpu.cores if rb.summary.run.cpu is not None else 1.0
                has = np.isfinite(b.cpu_pct[idx])
                core_s = np.where(has, b.cpu_pct[idx], 0.0) / 100.0 * cores * b.length_s[idx]
                n_cpu = np.where(has, b.count[idx], 0).astype(np.float64)
                cpu_num += sel[k][r] * (w @ core_s)
                cpu_den += sel[k][r] * (w @ n_cpu)
                cpu_num_pt += float(core_s.sum())
                cpu_den_pt += float(n_cpu.sum())
                # per-run replicates for run-level metrics (throughput at objective, knee)
                rp, rbt = run_point[k][r], run_boot[k][r]
                secs = b.length_s[idx]
                cnts = b.count[idx].astype(np.float64)
                rp.setdefault("x", np.full(nbins, np.nan))[j] = cnts.sum() / secs.sum()
                rbt.setdefault("x", np.full((n_boot, nbins), np.nan))[:, j] = (w @ cnts) / (w @ secs)
                for key, q in (("obj", obj_q), ("p99", (99, 100))):
                    if q is None:
                        continue
                    rp.setdefault(key, np.full(nbins, np.nan))[j] = stats.row_quantiles(
                        full.sum(axis=0)[None, :], vals, *q
                    )[0]
                    rp.setdefault(key + "_n", np.zeros(nbins))[j] = full.sum()
                    rbt.setdefault(key, np.full((n_boot, nbins), np.nan))[:, j] = stats.row_quantiles(
                        rep, vals, *q
                    )
            for i, (_, num, den) in enumerate(LATENCY_PCTS):
                pct_point[k, j, i] = stats.row_quantiles(pooled_point[None, :], vals, num, den)[0]
                pct_boot[k, j, i] = stats.row_quantiles(pooled, vals, num, den)
            if cpu_den_pt > 0:
                cpu_point[k, j] = cpu_num_pt / cpu_den_pt
                with np.errstate(invalid="ignore", divide="ignore"):
                    cpu_boot[k, j] = cpu_num / cpu_den

    notes: list[str] = []
    if len(sides[0]) == 1 or len(sides[1]) == 1:
        notes.append(
            "between-run noise is unknown: with one run on a side, the intervals cover only the "
            "variation within that run (repeat runs of the same build, e.g. --baseline A1 A2, measure it)"
        )
    metrics: list[_Draft] = []

    # latency and CPU per request at matched load
    weights = np.minimum(counts[0], counts[1]).astype(np.float64)
    for i, (pname, num, den) in enumerate(LATENCY_PCTS):
        enough = compared & ((counts.min(axis=0) - rank(counts.min(axis=0), num, den)) >= MIN_TAIL_REQUESTS)
        metrics.append(
            _matched_metric(
                f"latency_{pname}",
                f"{pname} latency at matched load",
                "s",
                "lower",
                pct_point[:, :, i],
                pct_boot[:, :, i, :],
                enough,
                weights,
                [
                    [_run_combined(rb, pname, num, den, enough, weights, union) for rb in rbins[k]]
                    for k in range(2)
                ],
                nbuck,
            )
        )
    cpu_ok = compared & np.isfinite(cpu_point).all(axis=0)
    metrics.append(
        _matched_metric(
            "cpu_per_request",
            "CPU per request at matched load",
            "s",
            "lower",
            cpu_point,
            cpu_boot,
            cpu_ok,
            weights,
            [[_run_cpu(rb, cpu_ok, weights) for rb in rbins[k]] for k in range(2)],
            nbuck,
        )
    )

    # run-level metrics
    metrics.append(
        _run_metric(
            "max_rps",
            "max sustained throughput",
            "req/s",
            "higher",
            True,
            sides,
            rng,
            n_boot,
            sel,
            lambda s, rng, n: _max_rps_boot(s, rng, n, block_s),
            block_s,
        )
    )
    if objective is not None:
        metrics.append(
            _objective_metric(objective, sides, rbins, run_point, run_boot, compared, sel, n_boot, nbuck)
        )
    metrics.append(_knee_metric(sides, rbins, run_point, run_boot, sel, n_boot, n_boot_knee, objective))
    metrics.append(_cpu_overall_metric(sides))

    # decisions
    judged = [d for d in metrics if d.decides and d.samples is not None and d.baseline is not None]
    level = 1.0 - (1.0 - confidence) / max(1, len(judged))
    decided = [_decide(d, threshold, level, confidence) for d in metrics]
    verdict, reason = _verdict(decided)
    matched = _matched_bins(edges, counts, nbuck, compared, pct_point, pct_boot, level, min_blocks)
    return Comparison(
        verdict=verdict,
        reason=reason,
        metrics=decided,
        bins=matched,
        baseline_labels=[s.label for s in sides[0]],
        candidate_labels=[s.label for s in sides[1]],
        threshold=threshold,
        confidence=confidence,
        metric_confidence=level,
        n_boot=n_boot,
        seed=seed,
        min_blocks=min_blocks,
        block_s=max(block_s, bucket_s),
        bucket_s=bucket_s,
        objective=objective,
        notes=notes,
        warnings=[w for side in sides for s in side for w in s.warnings],
    )


# --------------------------------------------------------------------------
# metric drafts: point values and bootstrap replicates of the relative change


@dataclass
class _Draft:
    key: str
    name: str
    unit: str
    better: str
    decides: bool
    baseline: float | None = None
    candidate: float | None = None
    samples: np.ndarray | None = None  # replicates of candidate / baseline - 1
    noise_floor: float | None = None
    note: str = ""
    blocks: int = 0  # fewest resampling blocks behind the replicates (for the small-sample correction)


def _spread(values: list[float]) -> float | None:
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=np.float64)
    if len(v) < 2 or v.mean() <= 0:
        return None
    return float((v.max() - v.min()) / v.mean())


def _noise(per_run: list[list[float]]) -> float | None:
    floors = [f for f in (_spread(side) for side in per_run) if f is not None]
    return max(floors) if floors else None


def _matched_metric(key, name, unit, better, point, boot, ok, weights, per_run, nblocks) -> _Draft:
    d = _Draft(key, name, unit, better, True)
    j = ok & np.isfinite(point).all(axis=0) & (point > 0).all(axis=0)
    if not j.any():
        d.note = "no throughput bin that both sides reached with enough blocks and requests"
        return d
    w = weights[j]
    d.baseline = float(_geo(point[0, j], w))
    d.candidate = float(_geo(point[1, j], w))
    rb = _geo(boot[0][j].T, w)
    rc = _geo(boot[1][j].T, w)
    with np.errstate(invalid="ignore", divide="ignore"):
        d.samples = rc / rb - 1.0
    d.noise_floor = _noise(per_run)
    d.blocks = int(nblocks[:, j].min())
    d.note = f"{int(j.sum())} throughput bin(s) compared"
    return d


def _run_pct_point(rb: _RunBins, j: int, union: np.ndarray, num: int, den: int) -> float:
    _, h, cols = rb.hist[j]
    return float(stats.row_quantiles(h.sum(axis=0)[None, :], union[cols], num, den)[0])


def _run_combined(rb: _RunBins, pname, num, den, ok, weights, union) -> float:
    js = [j for j in np.flatnonzero(ok) if j in rb.hist]
    if not js:
        return float("nan")
    v = np.array([_run_pct_point(rb, j, union, num, den) for j in js])
    return float(_geo(v, weights[js]))


def _run_cpu(rb: _RunBins, ok, weights) -> float:
    b = rb.summary.buckets
    cores = rb.summary.run.cpu.cores if rb.summary.run.cpu is not None else 1.0
    js = [j for j in np.flatnonzero(ok) if j in rb.hist]
    vals = []
    for j in js:
        idx = rb.hist[j][0]
        has = np.isfinite(b.cpu_pct[idx])
        n = b.count[idx][has].sum()
        vals.append(np.sum(b.cpu_pct[idx][has] / 100 * cores * b.length_s[idx][has]) / n if n else np.nan)
    return float(_geo(np.array(vals), weights[js])) if js else float("nan")


def _max_rps_boot(s: Summary, rng: np.random.Generator, n_boot: int, block_s: float) -> np.ndarray:
    """Replicates of the highest step throughput, resampling blocks within each step."""
    b = s.buckets
    blocks = bucket_blocks(s, block_s)
    best = np.full(n_boot, -np.inf)
    for k in np.unique(b.step):
        idx = np.flatnonzero(b.step == k)
        w = _expand(rng, blocks[idx], n_boot)
        with np.errstate(invalid="ignore", divide="ignore"):
            best = np.maximum(best, (w @ b.count[idx]) / (w @ b.length_s[idx]))
    return best


def _side_values(sel_k: np.ndarray, per_run_boot: list[np.ndarray]) -> np.ndarray:
    """Hierarchical replicate of a side: the mean over the runs each resample picked."""
    stacked = np.stack(per_run_boot)  # (runs, n_boot)
    return (sel_k * stacked).sum(axis=0) / sel_k.sum(axis=0)


def _peak_step_blocks(s: Summary, block_s: float) -> int:
    """Resampling blocks in the run's highest-throughput step."""
    k = s.capacity.max_rps_step
    blocks = bucket_blocks(s, block_s)
    return int(len(np.unique(blocks[s.buckets.step == k]))) if k is not None else 0


def _run_metric(key, name, unit, better, decides, sides, rng, n_boot, sel, boot_fn, block_s) -> _Draft:
    d = _Draft(key, name, unit, better, decides)
    points = [[s.capacity.max_rps for s in side] for side in sides]
    if any(p is None for side in points for p in side):
        d.note = "a run has no step with a throughput"
        return d
    boots = [[boot_fn(s, rng, n_boot) for s in side] for side in sides]
    d.baseline = float(np.mean(points[0]))
    d.candidate = float(np.mean(points[1]))
    d.samples = _side_values(sel[1], boots[1]) / _side_values(sel[0], boots[0]) - 1.0
    d.noise_floor = _noise(points)
    d.blocks = min(_peak_step_blocks(s, block_s) for side in sides for s in side)
    k = max(len(side) for side in sides)
    if d.blocks < 2 and min(len(side) for side in sides) < 2:
        # one block cannot be resampled: the interval would have zero width, which
        # says nothing about the noise; repeat runs would supply it
        d.samples = None
        d.note = (
            "the peak step is shorter than two resampling blocks, so its noise cannot be "
            "estimated (longer steps or repeat runs would tell)"
        )
        return d
    d.note = "highest per-step throughput" + (" (mean over the repeat runs of a side)" if k > 1 else "")
    return d


def _crossing(x: np.ndarray, y: np.ndarray, bound: float) -> tuple[float | None, str]:
    """Objective crossing over bins already ordered by throughput (NaN bins skipped)."""
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if len(x) == 0:
        return None, "no usable bin"
    bad = np.flatnonzero(y > bound)
    if len(bad) == 0:
        return float(x[-1]), "held"
    i = int(bad[0])
    if i == 0:
        return None, "violated"
    x0, y0, x1, y1 = x[i - 1], y[i - 1], x[i], y[i]
    return float(x0 + (bound - y0) * (x1 - x0) / (y1 - y0)) if y1 != y0 else float(x0), "crossed"


def _objective_metric(objective, sides, rbins, run_point, run_boot, compared, sel, n_boot, nblocks) -> _Draft:
    d = _Draft("rps_at_objective", f"throughput at {objective}", "req/s", "higher", True)
    if objective.q is None:
        d.note = "objective on the mean is not bootstrapped"
        return d
    present = (nblocks > 0).all(axis=0)
    min_blocks_any = int(nblocks[:, present].min()) if present.any() else 0
    pts, boots, status = [], [], []
    for k in range(2):
        side_p, side_b, side_s = [], [], []
        for r in range(len(rbins[k])):
            rp, rbt = run_point[k][r], run_boot[k][r]
            usable = (
                rp.get("obj_n", np.zeros(1))
                - rank(rp.get("obj_n", np.zeros(1)).astype(np.int64), *objective.q)
            ) >= MIN_TAIL_REQUESTS
            x = np.where(usable, rp["x"], np.nan)
            v, st = _crossing(x, rp["obj"], objective.bound_s)
            side_p.append(v)
            side_s.append(st)
            xb = np.where(usable[None, :], rbt["x"], np.nan)
            side_b.append(
                np.array(
                    [(_crossing(xb[b], rbt["obj"][b], objective.bound_s)[0] or np.nan) for b in range(n_boot)]
                )
            )
        pts.append(side_p)
        boots.append(side_b)
        status.append(side_s)
    if any(v is None for side in pts for v in side):
        d.note = "a run breaks the objective already at its lowest load, or has no usable bin"
        return d
    d.baseline, d.candidate = float(np.mean(pts[0])), float(np.mean(pts[1]))
    held_b = any(s == "held" for s in status[0])
    held_c = any(s == "held" for s in status[1])
    if held_b and held_c:
        d.note = "the objective held at every measured load on both sides: no crossing to compare"
        return d
    # a side that never broke the objective gives a lower bound: usable only when
    # the bound points the same way as the conclusion (conservative)
    if held_c and d.candidate < d.baseline:
        d.note = "the candidate never broke the objective but was not loaded as far as the baseline"
        return d
    if held_b and d.baseline < d.candidate:
        d.note = "the baseline never broke the objective but was not loaded as far as the candidate"
        return d
    with np.errstate(invalid="ignore", divide="ignore"):
        d.samples = _side_values(sel[1], boots[1]) / _side_values(sel[0], boots[0]) - 1.0
    d.noise_floor = _noise(pts)
    d.blocks = min_blocks_any
    d.note = "interpolated between the common bins" + (
        " (a side that never broke the objective counts at its highest load: a bound)"
        if held_b or held_c
        else ""
    )
    return d


def _knee_metric(sides, rbins, run_point, run_boot, sel, n_boot, n_boot_knee, objective) -> _Draft:
    key = "obj" if objective is not None and objective.q is not None else "p99"
    metric = objective.name if key == "obj" else "p99"
    d = _Draft("knee_rps", f"knee ({metric} fit)", "req/s", "higher", False)
    pts, boots = [], []
    for k in range(2):
        sp, sb = [], []
        for r in range(len(rbins[k])):
            rp, rbt = run_point[k][r], run_boot[k][r]
            n = rp.get(key + "_n", np.zeros(1))
            q = objective.q if key == "obj" else (99, 100)
            usable = (n - rank(n.astype(np.int64), *q)) >= MIN_TAIL_REQUESTS
            fit = fit_knee_xy(np.where(usable, rp["x"], np.nan), rp[key], metric=metric)
            if fit is None or fit.knee_rps is None:
                d.note = "no knee within the measured load for " + rbins[k][r].summary.label
                return d
            sp.append(fit.knee_rps)
            reps = np.full(n_boot, np.nan)
            for b in range(min(n_boot_knee, n_boot)):
                f = fit_knee_xy(np.where(usable, rbt["x"][b], np.nan), rbt[key][b], metric=metric, start=fit)
                reps[b] = f.knee_rps if (f is not None and f.knee_rps is not None) else np.nan
            sb.append(reps)
        pts.append(sp)
        boots.append(sb)
    d.baseline, d.candidate = float(np.mean(pts[0])), float(np.mean(pts[1]))
    if n_boot_knee > 0:
        with np.errstate(invalid="ignore", divide="ignore"):
            d.samples = _side_values(sel[1], boots[1]) / _side_values(sel[0], boots[0]) - 1.0
    d.noise_floor = _noise(pts)
    d.blocks = 0
    d.note = "model-based (fitted on the common bins); shown, not used for the verdict"
    return d


def _cpu_overall_metric(sides) -> _Draft:
    d = _Draft("cpu_per_request_overall", "CPU per request over the whole run", "s", "lower", False)
    vals = [[s.capacity.cpu_s_per_req for s in side] for side in sides]
    if any(v is None for side in vals for v in side):
        d.note = "no CPU samples on a side"
        return d
    d.baseline, d.candidate = float(np.mean(vals[0])), float(np.mean(vals[1]))
    d.note = "mixes different loads; the matched-load figure above is the one that decides"
    return d


def _decide(d: _Draft, threshold: float, level: float, confidence: float) -> Metric:
    change = None
    if d.baseline is not None and d.candidate is not None and d.baseline > 0:
        change = d.candidate / d.baseline - 1.0
    ci = None
    if d.samples is not None:
        ci = stats.interval(stats.small_sample(d.samples, d.blocks), level if d.decides else confidence)
    t = max(threshold, d.noise_floor or 0.0)
    if change is None or ci is None:
        decision = "not judged" if d.decides or d.samples is not None else "shown"
    else:
        bad = change if d.better == "lower" else -change
        bad_lo, bad_hi = (ci[0], ci[1]) if d.better == "lower" else (-ci[1], -ci[0])
        if bad_lo > 0 and bad >= t:
            decision = "worse"
        elif bad_hi < 0 and -bad >= t:
            decision = "better"
        elif ci[0] > -t and ci[1] < t:
            decision = "same"
        else:
            decision = "unclear"
    return Metric(
        key=d.key,
        name=d.name,
        unit=d.unit,
        better=d.better,
        decides=d.decides,
        baseline=d.baseline,
        candidate=d.candidate,
        change=change,
        ci=ci,
        threshold=t,
        noise_floor=d.noise_floor,
        decision=decision,
        note=d.note,
    )


def _pct(v: float) -> str:
    return f"{v * 100:+.1f}%"


def describe(m: Metric) -> str:
    """One sentence a release manager can read: what changed, by how much, how sure."""
    if m.change is None:
        return f"{m.name}: not judged ({m.note})"
    word = {"lower": ("higher", "lower"), "higher": ("higher", "lower")}[m.better][0 if m.change > 0 else 1]
    s = f"{m.name} is {abs(m.change) * 100:.1f}% {word} in the candidate"
    if m.ci is not None:
        s += f" (interval {_pct(m.ci[0])} to {_pct(m.ci[1])}"
        s += f", threshold {m.threshold * 100:.0f}%)"
    return s


def _verdict(metrics: list[Metric]) -> tuple[str, str]:
    dec = [m for m in metrics if m.decides]
    worse = [m for m in dec if m.decision == "worse"]
    better = [m for m in dec if m.decision == "better"]
    judged = [m for m in dec if m.decision in ("worse", "better", "same", "unclear")]
    if worse:
        reason = "; ".join(describe(m) for m in worse)
        if better:
            reason += ". Also improved: " + "; ".join(describe(m) for m in better)
        return "regressed", reason
    if better:
        return "improved", "; ".join(describe(m) for m in better)
    if judged and all(m.decision == "same" for m in judged):
        return "no change", "every judged metric stayed within its threshold: " + "; ".join(
            describe(m) for m in judged
        )
    unclear = [m for m in judged if m.decision == "unclear"]
    if unclear:
        return "inconclusive", "the data cannot tell: " + "; ".join(
            describe(m) + " — interval crosses the threshold" for m in unclear
        )
    return "inconclusive", "nothing could be judged: " + "; ".join(f"{m.name}: {m.note}" for m in dec)


def _matched_bins(edges, counts, nbuck, compared, pct_point, pct_boot, level, min_blocks) -> list[MatchedBin]:
    out = []
    for j in range(len(edges) - 1):
        nb, nc = int(counts[0, j]), int(counts[1, j])
        if nb == 0 and nc == 0:
            continue
        if nb and not nc:
            status = "baseline only"
        elif nc and not nb:
            status = "candidate only"
        elif compared[j]:
            status = "compared"
        else:
            status = f"too few blocks (< {min_blocks} on a side)"
        lat = {}
        if status == "compared":
            for i, (pname, _, _) in enumerate(LATENCY_PCTS):
                b, c = pct_point[0, j, i], pct_point[1, j, i]
                with np.errstate(invalid="ignore", divide="ignore"):
                    reps = pct_boot[1, j, i] / pct_boot[0, j, i] - 1.0
                change = float(c / b - 1.0) if b > 0 else None
                lat[pname] = (float(b), float(c), change, stats.interval(reps, level))
        out.append(
            MatchedBin(
                float(edges[j]), float(edges[j + 1]), nb, nc, int(nbuck[0, j]), int(nbuck[1, j]), status, lat
            )
        )
    return out


# --------------------------------------------------------------------------
# JSON


def _n(v, digits: int = 6):
    if v is None:
        return None
    v = float(v)
    if not math.isfinite(v):
        return None
    return float(f"{v:.{digits}g}") if v != 0 else 0.0


def to_json(c: Comparison) -> dict:
    """The versioned JSON document of a comparison (deterministic for a given seed)."""
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
            "confidence": c.confidence,
            "metric_confidence": _n(c.metric_confidence),
            "n_boot": c.n_boot,
            "seed": c.seed,
            "min_blocks": c.min_blocks,
            "block_s": c.block_s,
            "bucket_s": c.bucket_s,
            "objective": None if c.objective is None else str(c.objective),
        },
        "metrics": [
            {
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
                "noise_floor": _n(m.noise_floor),
                "decision": m.decision,
                "note": m.note,
            }
            for m in c.metrics
        ],
        "bins": [
            {
                "rps_lo": _n(b.rps_lo),
                "rps_hi": _n(b.rps_hi),
                "status": b.status,
                "baseline_requests": b.baseline_requests,
                "candidate_requests": b.candidate_requests,
                "baseline_blocks": b.baseline_blocks,
                "candidate_blocks": b.candidate_blocks,
                "latency": {
                    p: {
                        "baseline_s": _n(v[0]),
                        "candidate_s": _n(v[1]),
                        "change": _n(v[2]),
                        "ci": None if v[3] is None else [_n(v[3][0]), _n(v[3][1])],
                    }
                    for p, v in b.latency.items()
                },
            }
            for b in c.bins
        ],
        "notes": c.notes,
        "warnings": c.warnings,
    }

"""Where the CPU went: baseline against candidate, per request, at matched concurrency.

Only concurrency levels profiled on both sides are used (several runs of a
side at one level are pooled: their CPU seconds over their requests).  A
side's figure for a function is the mean over those levels of its CPU
seconds per request, so both sides weigh the same loads alike.

Uncertainty: a profile samples the CPU at a fixed period, so a function's
sample count n is Poisson, with variance n; its CPU per request at a level
has variance (n + 1) * period^2 / requests^2 (the +1 keeps a function seen
on one side only, or in very few samples, from looking exact).  The
intervals are simultaneous over every function compared (Bonferroni), so
that an A/A pair with hundreds of functions does not throw up a few
"changes" by chance; a change whose interval holds 0 is *within the
sampling uncertainty*.  Sampling is the only noise counted: run-to-run
variation of the server itself comes on top (compare's verdict accounts
for that on the total CPU per request).

Cumulative changes run up the call stack (every caller of a function that
got slower got slower by as much), so a caller whose change is almost all
(``PASS_THROUGH``) through one callee, or two thirds of it with the rest
within its sampling uncertainty, is folded into that callee's row
(``callers``): the list then starts at the function that holds the change,
not at ``runtime.goexit``.  Go's runtime trampolines (``runtime.systemstack``,
``runtime.mcall`` ...) sit on the stacks of unrelated work and are folded
too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np

from .steps import ProfileSet

PASS_THROUGH = 0.8
PASS_WITHIN_NOISE = 2 / 3  # ... or this much, the rest within the uncertainty
#: Go runtime trampolines: on the stacks of unrelated work (a goroutine's start, a switch to
#: the system stack), so their cumulative change says nothing of their own; folded, never listed
TRAMPOLINES = frozenset(
    {
        "runtime.goexit",
        "runtime.goexit1",
        "runtime.systemstack",
        "runtime.mcall",
        "runtime.morestack",
        "runtime.newstack",
        "runtime.mstart",
        "runtime.mstart0",
        "runtime.mstart1",
        "runtime.asmcgocall",
    }
)
JSON_ROWS = 30


@dataclass(frozen=True)
class FunctionChange:
    """One function's CPU seconds per request on both sides (``measure``: cum or flat)."""

    function: str
    measure: str
    baseline: float
    candidate: float
    low: float  # interval of the change (simultaneous over the functions compared)
    high: float
    baseline_samples: int
    candidate_samples: int
    by_level: tuple = ()  # (concurrency, baseline, candidate) per matched level
    callers: tuple[str, ...] = ()  # pass-through callers folded into this row
    explained_by: str | None = None  # set on a pass-through caller

    @property
    def change(self) -> float:
        return self.candidate - self.baseline

    @property
    def within_uncertainty(self) -> bool:
        return self.low <= 0.0 <= self.high

    @property
    def relative(self) -> float | None:
        return self.change / self.baseline if self.baseline > 0 else None

    def by_load(self, groups: int = 3) -> list[tuple[int, int, float]]:
        """(lowest, highest concurrency, mean change) over low, middle and high load.

        Robuster than the level where the change was largest (one level's profile
        holds few samples; the largest of many noisy values is mostly noise)."""
        levels = list(self.by_level)
        k = min(groups, len(levels))
        out = []
        for g in range(k):
            part = levels[g * len(levels) // k : (g + 1) * len(levels) // k]
            out.append((part[0][0], part[-1][0], sum(c - b for _, b, c in part) / len(part)))
        return out

    def load_text(self, unit: str = " us") -> str:
        """``+31.8 us at concurrency 1-8, +33.0 at 9-16, +35.4 at 17-25``."""
        parts = []
        for i, (lo, hi, v) in enumerate(self.by_load()):
            where = f"{lo}" if lo == hi else f"{lo}-{hi}"
            parts.append(
                f"{v * 1e6:+.1f}{unit if i == 0 else ''} at {'concurrency ' if i == 0 else ''}{where}"
            )
        return ", ".join(parts)

    def to_dict(self) -> dict:
        rel = self.relative
        return {
            "function": self.function,
            "measure": self.measure,
            "baseline_cpu_s_per_request": self.baseline,
            "candidate_cpu_s_per_request": self.candidate,
            "change": self.change,
            "change_low": self.low,
            "change_high": self.high,
            "relative_change": None if rel is None else round(rel, 4),
            "within_uncertainty": self.within_uncertainty,
            "baseline_samples": self.baseline_samples,
            "candidate_samples": self.candidate_samples,
            "by_level": [
                {"concurrency": c, "baseline_cpu_s_per_request": b, "candidate_cpu_s_per_request": v}
                for c, b, v in self.by_level
            ],
            "callers": list(self.callers),
        }


@dataclass(frozen=True)
class ProfileDiff:
    """The outcome of :func:`diff_profiles`; ``cum`` and ``flat``: the changes beyond their uncertainty
    first, then the others, each by absolute change."""

    levels: tuple[int, ...]
    baseline_labels: tuple[str, ...]
    candidate_labels: tuple[str, ...]
    cum: tuple[FunctionChange, ...]
    flat: tuple[FunctionChange, ...]
    folded: tuple[FunctionChange, ...]  # pass-through callers (cum), folded into ``cum`` rows
    baseline_cpu_s_per_request: float
    candidate_cpu_s_per_request: float
    confidence: float
    functions_compared: int
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def changed(self) -> tuple[FunctionChange, ...]:
        """Cumulative rows whose change is beyond the sampling uncertainty."""
        return tuple(r for r in self.cum if not r.within_uncertainty)

    def __repr__(self) -> str:
        top = self.cum[0] if self.cum else None
        what = f"top {top.function} {top.change * 1e6:+.2f} us/request" if top else "nothing compared"
        return f"<ProfileDiff {len(self.levels)} level(s), {len(self.changed)} changed; {what}>"

    def _repr_html_(self) -> str:
        from ..model import render_html  # by name: the renderer imports this module

        return render_html("ProfileDiff", self)

    def to_json(self, rows: int = JSON_ROWS) -> dict:
        return {
            "levels": list(self.levels),
            "baseline": list(self.baseline_labels),
            "candidate": list(self.candidate_labels),
            "baseline_cpu_s_per_request": self.baseline_cpu_s_per_request,
            "candidate_cpu_s_per_request": self.candidate_cpu_s_per_request,
            "confidence": self.confidence,
            "functions_compared": self.functions_compared,
            "interval": "simultaneous over the functions compared (Bonferroni), Poisson sample counts",
            "notes": list(self.notes),
        }


@dataclass
class _Side:
    """One side at the matched levels: (level, function) CPU seconds and samples, requests per level."""

    cpu: np.ndarray
    n: np.ndarray
    requests: np.ndarray
    period_s: np.ndarray
    edges: list[dict]  # per level: (caller, callee) -> CPU seconds


def _side(sets: Sequence[ProfileSet], levels: list[int], index: dict[str, int]) -> _Side:
    nl, nf = len(levels), len(index)
    cpu, n = np.zeros((nl, nf)), np.zeros((nl, nf))
    req, period, runs = np.zeros(nl), np.zeros(nl), np.zeros(nl)
    edges: list[dict] = [{} for _ in levels]
    for ps in sets:
        for j, c in enumerate(levels):
            st = ps.level(c)
            if st is None:
                continue
            p = st.profile
            cols = np.fromiter((index[f] for f in p.functions), np.int64, len(p.functions))
            cpu[j, cols] += p.cum_cpu_s
            n[j, cols] += p.cum_samples
            req[j] += st.requests_in_profile
            period[j] += p.period_ns / 1e9
            runs[j] += 1
            for key, v in _edges(p).items():
                edges[j][key] = edges[j].get(key, 0.0) + v
    return _Side(cpu, n, req, period / np.maximum(runs, 1), edges)


def _flat_side(sets: Sequence[ProfileSet], levels: list[int], index: dict[str, int], side: _Side) -> _Side:
    cpu, n = np.zeros_like(side.cpu), np.zeros_like(side.n)
    for ps in sets:
        for j, c in enumerate(levels):
            st = ps.level(c)
            if st is not None:
                p = st.profile
                cols = np.fromiter((index[f] for f in p.functions), np.int64, len(p.functions))
                cpu[j, cols] += p.flat_cpu_s
                n[j, cols] += p.flat_samples
    return _Side(cpu, n, side.requests, side.period_s, [])


def _edges(p) -> dict[tuple[str, str], float]:
    """(caller, callee) -> CPU seconds of the stacks through that call (once per stack)."""
    frames, off = p.frames, p.offsets
    if frames.size < 2:
        return {}
    stack = np.repeat(np.arange(len(off) - 1), np.diff(off))
    same = stack[1:] == stack[:-1]  # frame i (callee) and i + 1 (its caller) in one stack
    callee, caller, s = frames[:-1][same], frames[1:][same], stack[1:][same]
    nf = len(p.functions)
    key = np.unique((s * nf + caller) * nf + callee)
    s_of, pair = key // (nf * nf), key % (nf * nf)
    cpu_per_stack = p.stack_samples * (p.period_ns / 1e9)
    total = np.bincount(pair, weights=cpu_per_stack[s_of])
    names = p.functions
    return {(names[i // nf], names[i % nf]): float(total[i]) for i in np.flatnonzero(total)}


def _per_request(side: _Side) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean over levels, its Poisson variance, per level) of CPU seconds per request."""
    r = side.requests[:, None]
    per_level = side.cpu / r
    var_level = (side.n + 1) * side.period_s[:, None] ** 2 / r**2
    nl = per_level.shape[0]
    return per_level.mean(axis=0), var_level.sum(axis=0) / nl**2, per_level


def _rows(names, measure, b: _Side, c: _Side, z: float, levels) -> list[FunctionChange]:
    mb, vb, lb = _per_request(b)
    mc, vc, lc = _per_request(c)
    se = np.sqrt(vb + vc)
    d = mc - mb
    nb, nc = b.n.sum(axis=0), c.n.sum(axis=0)
    # the changes beyond their sampling uncertainty first, each group by the size of the change: a
    # large change within the noise of a busy function must not push a clear one down the list
    within = (d - z * se <= 0.0) & (0.0 <= d + z * se)
    order = np.lexsort((-np.abs(d), within))
    return [
        FunctionChange(
            function=names[i],
            measure=measure,
            baseline=float(mb[i]),
            candidate=float(mc[i]),
            low=float(d[i] - z * se[i]),
            high=float(d[i] + z * se[i]),
            baseline_samples=int(nb[i]),
            candidate_samples=int(nc[i]),
            by_level=tuple((lv, float(lb[j, i]), float(lc[j, i])) for j, lv in enumerate(levels)),
        )
        for i in order
        if nb[i] or nc[i]
    ]


def _fold(rows: list[FunctionChange], b: _Side, c: _Side) -> tuple[list, list]:
    """Split cumulative rows into kept ones and pass-through callers (see the module docstring)."""
    nl = len(b.requests)
    change: dict[tuple[str, str], float] = {}
    for side, sign in ((b, -1.0), (c, 1.0)):
        for j, edges in enumerate(side.edges):
            for key, v in edges.items():
                change[key] = change.get(key, 0.0) + sign * v / side.requests[j] / nl
    best: dict[str, tuple[str, float]] = {}
    for (caller, callee), v in change.items():
        if caller != callee and abs(v) > abs(best.get(caller, ("", 0.0))[1]):
            best[caller] = (callee, v)
    explained = {}
    for r in rows:
        callee, v = best.get(r.function, ("", 0.0))
        if r.change and not r.within_uncertainty and _passes(r, v):
            explained[r.function] = callee
        elif r.function in TRAMPOLINES:
            explained[r.function] = "(a runtime trampoline)"
    kept, folded = [], []
    for r in rows:
        if r.function in explained:
            folded.append(_replace(r, explained_by=explained[r.function]))
            continue
        dist = {f: _leads_to(f, r.function, explained) for f in explained}
        callers = tuple(sorted((f for f, k in dist.items() if k), key=lambda f: (dist[f], f)))
        kept.append(_replace(r, callers=callers))
    return kept, folded


def _passes(r: FunctionChange, through: float) -> bool:
    """Whether the change of ``r`` went through one call (``through`` of it): most of it
    (PASS_THROUGH), or two thirds (PASS_WITHIN_NOISE) with a remainder within ``r``'s own sampling uncertainty."""
    share = through / r.change
    remainder = abs(r.change - through)
    return share >= PASS_THROUGH or (share >= PASS_WITHIN_NOISE and remainder <= (r.high - r.low) / 2)


def _leads_to(f: str, target: str, explained: dict[str, str]) -> int:
    """How many pass-through steps lead from ``f`` down to ``target`` (0: none)."""
    seen = set()
    while f in explained and f not in seen:
        seen.add(f)
        f = explained[f]
        if f == target:
            return len(seen)
    return 0


def _replace(r: FunctionChange, **kw) -> FunctionChange:
    from dataclasses import replace

    return replace(r, **kw)


def diff_profiles(
    baseline: ProfileSet | Sequence[ProfileSet],
    candidate: ProfileSet | Sequence[ProfileSet],
    *,
    confidence: float = 0.95,
) -> ProfileDiff | None:
    """Where the CPU went between two sides (see the module docstring).

    Returns None when no concurrency level was profiled on both sides.
    """
    sides = [[s] if isinstance(s, ProfileSet) else list(s) for s in (baseline, candidate)]
    have = [
        {st.concurrency for ps in side for st in ps.steps if st.requests_in_profile > 0} for side in sides
    ]
    levels = sorted(c for c in have[0] & have[1] if c is not None)
    if not levels:
        return None
    names = sorted({f for side in sides for ps in side for st in ps.steps for f in st.profile.functions})
    index = {f: i for i, f in enumerate(names)}
    b, c = (_side(side, levels, index) for side in sides)
    m = max(1, int(np.count_nonzero(b.n.sum(axis=0) + c.n.sum(axis=0))))
    z = NormalDist().inv_cdf(1 - (1 - confidence) / (2 * m))
    kept, folded = _fold(_rows(names, "cum", b, c, z, levels), b, c)
    fb, fc = (_flat_side(side, levels, index, s) for side, s in zip(sides, (b, c)))
    flat = _rows(names, "flat", fb, fc, z, levels)
    tb, tc = (float(np.mean(fb.cpu.sum(axis=1) / fb.requests)) for fb in (fb, fc))
    only = sorted((have[0] ^ have[1]) - {None})
    notes = [
        f"{len(levels)} concurrency level(s) profiled on both sides: {', '.join(map(str, levels))}",
        f"intervals at {confidence:.0%} simultaneous over {m} functions (z = {z:.2f}); sampling noise only",
    ]
    if only:
        notes.append(f"profiled on one side only, left out: concurrency {', '.join(map(str, only))}")
    return ProfileDiff(
        levels=tuple(levels),
        baseline_labels=tuple(ps.label for ps in sides[0]),
        candidate_labels=tuple(ps.label for ps in sides[1]),
        cum=tuple(kept),
        flat=tuple(flat),
        folded=tuple(folded),
        baseline_cpu_s_per_request=tb,
        candidate_cpu_s_per_request=tc,
        confidence=confidence,
        functions_compared=m,
        notes=tuple(notes),
    )


def rows_json(rows: Sequence[FunctionChange], n: int = JSON_ROWS) -> list[dict]:
    return [r.to_dict() for r in rows[:n]]


def fmt_us(seconds: float) -> str:
    """Microseconds with a sign, e.g. ``+12.3 us``."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    return f"{seconds * 1e6:+.2f} us"

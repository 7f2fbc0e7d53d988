"""Per step: resident memory (median and max over the step), Go heap and GC, allocation per request.

A gauge (RSS, heap) is summarised by the samples taken inside the step: its
median (robust, what compare shows) and its maximum (information).  A rate
(GC share, bytes allocated per second) is time-weighted over the step and
divided by the step's good requests per second for a per-request figure.
Steps that no sample covers are NaN.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .model import Telemetry, mean_over, points_in

NS = 1_000_000_000


@dataclass(frozen=True, eq=False)
class StepMemory:
    """Memory and GC per step (NaN where unknown).

    Attributes
    ----------
    rss_bytes, rss_max_bytes
        Median and maximum of the resident memory samples in the step (bytes).
    heap_inuse_bytes
        Median Go heap in use (bytes).
    gc_cpu_share
        Share of the step's wall time the Go GC took (0-1; from the
        ``go_gc_duration_seconds`` pauses unless a query says otherwise).
    alloc_bytes_per_req
        Bytes the Go runtime allocated per good request.
    samples
        RSS samples in each step.
    """

    rss_bytes: np.ndarray
    rss_max_bytes: np.ndarray
    heap_inuse_bytes: np.ndarray
    gc_cpu_share: np.ndarray
    alloc_bytes_per_req: np.ndarray
    samples: np.ndarray
    source: str

    def __repr__(self) -> str:
        ok = np.isfinite(self.rss_bytes)
        peak = np.nanmax(self.rss_max_bytes) / 2**20 if ok.any() else float("nan")
        return f"<StepMemory {len(self.rss_bytes)} steps, {int(ok.sum())} with RSS, max {peak:.1f} MiB, from {self.source}>"

    def _repr_html_(self) -> str:
        from html import escape

        return f"<code>{escape(repr(self))}</code>"

    @property
    def has_gc(self) -> bool:
        return bool(np.isfinite(self.gc_cpu_share).any() or np.isfinite(self.alloc_bytes_per_req).any())


def step_memory(
    tel: Telemetry | None, start_ns: np.ndarray, end_ns: np.ndarray, goodput_rps: np.ndarray
) -> StepMemory | None:
    """Memory and GC of each step ``[start_ns, end_ns]``; None without a memory series."""
    if tel is None or tel.get("rss_bytes") is None:
        return None
    n = len(start_ns)
    rss = tel.get("rss_bytes")
    med, top, count = np.full(n, np.nan), np.full(n, np.nan), np.zeros(n, np.int64)
    heap = np.full(n, np.nan)
    for i, (a, b) in enumerate(zip(np.asarray(start_ns).tolist(), np.asarray(end_ns).tolist())):
        v = points_in(rss, a, b)
        count[i] = len(v)
        if len(v):
            med[i], top[i] = float(np.median(v)), float(v.max())
        h = tel.get("heap_inuse_bytes")
        if h is not None:
            hv = points_in(h, a, b)
            if len(hv):
                heap[i] = float(np.median(hv))
    length = (np.asarray(end_ns, np.float64) - np.asarray(start_ns, np.float64)) / NS
    gc = _rate(tel, "gc_cpu_share", start_ns, length)
    alloc = _rate(tel, "alloc_bytes_per_s", start_ns, length)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_req = alloc / np.asarray(goodput_rps, np.float64)
    return StepMemory(med, top, heap, gc, per_req, count, tel.source)


def _rate(tel: Telemetry, key: str, start_ns, length) -> np.ndarray:
    s = tel.get(key)
    if s is None:
        return np.full(len(length), np.nan)
    return mean_over(s, np.asarray(start_ns), length)


@dataclass(frozen=True, eq=False)
class MemoryComparison:
    """Resident memory at matched steps of two runs: shown beside the verdict, not judged.

    ``ratio`` is candidate / baseline of the step medians; ``noise`` is the
    spread of the ratio over the steps (a robust half-range: the median absolute
    deviation x 1.4826), so that a change is read against what memory does step to step.
    """

    steps: np.ndarray
    baseline_bytes: np.ndarray
    candidate_bytes: np.ndarray
    ratio: np.ndarray
    median_ratio: float
    noise: float

    def __repr__(self) -> str:
        return f"<MemoryComparison {len(self.steps)} matched steps: RSS x{self.median_ratio:.3f} (step-to-step noise +-{self.noise:.1%})>"

    def _repr_html_(self) -> str:
        from html import escape

        return f"<code>{escape(repr(self))}</code>"


def compare_memory(
    base: StepMemory | None, cand: StepMemory | None, base_conc, cand_conc
) -> MemoryComparison | None:
    """RSS of the two runs at the concurrency steps both reached (None when one run has no memory)."""
    if base is None or cand is None:
        return None
    bc = {float(c): i for i, c in enumerate(np.asarray(base_conc, np.float64)) if np.isfinite(c)}
    pairs = [
        (bc[float(c)], j)
        for j, c in enumerate(np.asarray(cand_conc, np.float64))
        if np.isfinite(c) and float(c) in bc
    ]
    pairs = [
        (i, j)
        for i, j in pairs
        if np.isfinite(base.rss_bytes[i]) and np.isfinite(cand.rss_bytes[j]) and base.rss_bytes[i] > 0
    ]
    if not pairs:
        return None
    bi, cj = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    b, c = base.rss_bytes[bi], cand.rss_bytes[cj]
    r = c / b
    med = float(np.median(r))
    noise = float(1.4826 * np.median(np.abs(r - med)) / med) if len(r) > 2 else float("nan")
    return MemoryComparison(np.asarray(base_conc, np.float64)[bi], b, c, r, med, noise)


def run_memory(run) -> StepMemory | None:
    """The per-step memory of a read run (from its telemetry and its steps), None without memory."""
    from . import telemetry_of

    tel = telemetry_of(run)
    if tel is None or run.reduced is None:
        return None
    st = run.reduced.steps
    dur = (st.end_ns - st.start_ns) / NS
    with np.errstate(invalid="ignore", divide="ignore"):
        good = np.where(dur > 0, st.requests / np.where(dur > 0, dur, 1), np.nan)
    return step_memory(tel, st.start_ns, st.end_ns, good)


def compare_run_memory(base_runs, cand_runs) -> MemoryComparison | None:
    """Memory of the first baseline and first candidate run at matched concurrency (shown, not judged)."""
    if not base_runs or not cand_runs:
        return None
    b, c = base_runs[0], cand_runs[0]
    conc = [
        np.array([np.nan if x is None else float(x) for x in r.reduced.steps.concurrency]) for r in (b, c)
    ]
    return compare_memory(run_memory(b), run_memory(c), conc[0], conc[1])


def memory_doc(m: MemoryComparison | None) -> dict | None:
    """A memory comparison as JSON (``memory`` of ``headroom compare --json``)."""
    if m is None:
        return None

    def num(v):
        return None if not np.isfinite(v) else float(v)

    return {
        "judged": False,
        "median_ratio": num(m.median_ratio),
        "noise": num(m.noise),
        "steps": [
            {
                "concurrency": num(k),
                "baseline_rss_bytes": num(a),
                "candidate_rss_bytes": num(b),
                "ratio": num(r),
            }
            for k, a, b, r in zip(m.steps, m.baseline_bytes, m.candidate_bytes, m.ratio)
        ],
    }

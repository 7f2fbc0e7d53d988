"""Per-step and per-time-bucket tables: throughput, and CPU aligned to them.

The bucket rule (also in the README):

* Every step (CSV section) is cut into buckets of ``bucket_s`` seconds
  anchored at the step's first request start.  The step ends when its last
  response arrives (``max(start + latency)``).
* A request belongs to the bucket its start time falls in.  Throughput of a
  bucket = requests started in it / the bucket's real length.
* The last bucket of a step is usually partial.  When it is at least
  ``min_partial`` (default half) of a bucket long it stays, normalized by its
  real length; when shorter, it is merged into the bucket before it (whose
  length grows accordingly), so no request is dropped and a very short
  bucket does not produce a wild rate.  A step shorter than one bucket is
  one bucket of its own length, so 1-2 s steps still count.
* An empty bucket inside a step has throughput 0: it is kept, never filled
  from its neighbours.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .model import CpuSamples, HeadroomError, Run

NS = 1_000_000_000


@dataclass(frozen=True, eq=False)
class Steps:
    """One row per load step (CSV section)."""

    index: np.ndarray  # int
    concurrency: list[int | None]
    start_ns: np.ndarray  # first request start
    end_ns: np.ndarray  # last response end
    requests: np.ndarray
    rps: np.ndarray  # requests / (end - start); NaN for steps with < 2 requests

    def __len__(self) -> int:
        return int(self.index.shape[0])


@dataclass(frozen=True, eq=False)
class Buckets:
    """One row per time bucket; ``of_request`` maps every request to its bucket."""

    step: np.ndarray  # int32
    start_ns: np.ndarray  # int64
    length_s: np.ndarray  # float64, the real length
    count: np.ndarray  # int64, requests started in the bucket
    rps: np.ndarray  # float64 = count / length_s
    cpu_pct: np.ndarray  # float64, time-weighted CPU over the bucket, NaN if not covered
    of_request: np.ndarray  # int32, bucket index of each request (-1: not bucketed)
    bucket_s: float

    def __len__(self) -> int:
        return int(self.step.shape[0])

    @property
    def kept(self) -> int:
        return int(self.count.sum())


@dataclass(frozen=True)
class CpuOverlap:
    """How the CPU series lines up with the load window."""

    samples: int  # CPU samples whose interval overlaps the load window
    overlap_s: float  # seconds of the load window covered by CPU samples
    load_s: float  # seconds of the load window
    cpu_span_s: float  # seconds the CPU file covers


def steps_table(run: Run) -> Steps:
    """Index, concurrency, time span, request count and throughput of each step."""
    req = run.requests
    n = req.n_steps
    starts = np.zeros(n, np.int64)
    ends = np.zeros(n, np.int64)
    counts = np.diff(req.step_offsets)
    has = counts > 0
    if has.any():
        end_each = req.start_ns + np.rint(req.latency_s * NS).astype(np.int64)
        first = req.step_offsets[:-1][has]  # reduceat needs non-empty segments
        starts[has] = np.minimum.reduceat(req.start_ns, first)
        ends[has] = np.maximum.reduceat(end_each, first)
    return Steps(
        index=np.arange(n),
        concurrency=[run.meta.concurrency(k) for k in range(n)],
        start_ns=starts,
        end_ns=ends,
        requests=counts.astype(np.int64),
        rps=step_rps(counts, starts, ends),
    )


def step_rps(count: np.ndarray, start_ns: np.ndarray, end_ns: np.ndarray) -> np.ndarray:
    """Throughput of each step: requests / (last response - first start); NaN below 2 requests."""
    with np.errstate(invalid="ignore", divide="ignore"):
        dur = (end_ns - start_ns) / NS
        return np.where((count >= 2) & (dur > 0), count / np.where(dur > 0, dur, 1), np.nan)


def per_bucket(
    run: Run,
    *,
    bucket_s: float = 1.0,
    min_partial: float = 0.5,
    steps: Steps | None = None,
) -> Buckets:
    """Bucket the requests of every step by start time (see the module docstring).

    Parameters
    ----------
    run
        The run.
    bucket_s
        Bucket width in seconds.
    min_partial
        A step's last partial bucket shorter than this fraction of
        ``bucket_s`` is merged into the previous bucket of the same step.
    steps
        The run's :func:`steps_table`, if already computed.
    """
    if bucket_s <= 0:
        raise ValueError("bucket_s must be positive")
    req = run.requests
    steps = steps if steps is not None else steps_table(run)
    b_ns = int(round(bucket_s * NS))
    of_request = np.full(len(req), -1, dtype=np.int32)
    b_step, b_start, b_len, b_count = [], [], [], []
    nb = 0
    for k in range(req.n_steps):
        a, b = int(req.step_offsets[k]), int(req.step_offsets[k + 1])
        if b - a < 2:
            continue  # a step of 0 or 1 request has no throughput
        t0 = int(steps.start_ns[k])
        dur_ns = int(steps.end_ns[k]) - t0
        if dur_ns <= 0:
            continue
        if dur_ns // b_ns > 10 * (b - a) + 100_000:  # memory and time bounded by rows, not by the span
            raise HeadroomError(
                f"{run.meta.source}: step {k + 1} has {b - a:,} requests spread over {dur_ns / NS:,.0f} s: "
                "its timestamps are damaged or from different clocks"
            )
        lengths = bucket_lengths_ns(dur_ns, b_ns, min_partial)
        m = len(lengths)
        idx = (req.start_ns[a:b] - t0) // b_ns
        np.minimum(idx, m - 1, out=idx)
        of_request[a:b] = idx + nb
        counts = np.bincount(idx, minlength=m)
        b_step.append(np.full(m, k, np.int32))
        b_start.append(t0 + np.arange(m, dtype=np.int64) * b_ns)
        b_len.append(np.asarray(lengths, np.float64) / NS)
        b_count.append(counts.astype(np.int64))
        nb += m
    return make_buckets(b_step, b_start, b_len, b_count, run.cpu, of_request, bucket_s)


def bucket_lengths_ns(dur_ns: int, b_ns: int, min_partial: float) -> list[int]:
    """Bucket lengths of a step lasting ``dur_ns`` (the rule in the module docstring)."""
    nfull, rem = divmod(int(dur_ns), int(b_ns))
    lengths = [int(b_ns)] * nfull
    if rem >= min_partial * b_ns or nfull == 0:
        lengths.append(rem)
    else:
        lengths[-1] += rem
    return lengths


def make_buckets(b_step, b_start, b_len, b_count, cpu, of_request, bucket_s: float) -> Buckets:
    """Assemble the bucket table from per-step pieces (shared by in-memory and streamed reads)."""
    cat = lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.empty(0, dt)  # noqa: E731
    step = cat(b_step, np.int32)
    start = cat(b_start, np.int64)
    length = cat(b_len, np.float64)
    count = cat(b_count, np.int64)
    rps = count / length if len(length) else np.empty(0)
    cpu_pct = cpu_over(cpu, start, length) if cpu is not None else np.full(len(step), np.nan)
    return Buckets(step, start, length, count, rps, cpu_pct, of_request, float(bucket_s))


def _cpu_integral(cpu: CpuSamples) -> tuple[np.ndarray, np.ndarray]:
    """Breakpoints (ns) and the running integral of CPU % over them (%·s)."""
    t = cpu.time_ns.astype(np.int64)
    if len(t) >= 2:
        first = int(np.median(np.diff(t)))
    else:
        first = NS
    edges = np.concatenate([[t[0] - first], t])
    widths = np.diff(edges) / NS
    integral = np.concatenate([[0.0], np.cumsum(cpu.pct * widths)])
    return edges, integral


def cpu_over(
    cpu: CpuSamples, start_ns: np.ndarray, length_s: np.ndarray, *, min_coverage: float = 0.5
) -> np.ndarray:
    """Time-weighted mean CPU % over each interval ``[start, start + length)``.

    Each sample's percentage applies to the interval since the previous
    sample; an interval covered by samples for less than ``min_coverage`` of
    its length gets NaN (never a value carried over from elsewhere).
    """
    if len(cpu) == 0 or len(start_ns) == 0:
        return np.full(len(start_ns), np.nan)
    edges, integral = _cpu_integral(cpu)
    lo = start_ns.astype(np.float64)
    hi = lo + length_s * NS
    clo = np.clip(lo, edges[0], edges[-1])
    chi = np.clip(hi, edges[0], edges[-1])
    e = edges.astype(np.float64)
    covered = (chi - clo) / NS
    area = np.interp(chi, e, integral) - np.interp(clo, e, integral)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = area / covered
    out[covered < min_coverage * length_s] = np.nan
    return out


def cpu_overlap(cpu: CpuSamples | None, steps: Steps) -> CpuOverlap | None:
    """Compare the CPU file's span with the load window (first start to last response)."""
    if cpu is None:
        return None
    has = steps.requests > 0
    lo, hi = int(steps.start_ns[has].min()), int(steps.end_ns[has].max())
    edges, _ = _cpu_integral(cpu)
    olo, ohi = max(lo, int(edges[0])), min(hi, int(edges[-1]))
    overlap = max(0, ohi - olo) / NS
    # sample i covers (edges[i], edges[i+1]]
    n = int(np.sum((edges[1:] > lo) & (edges[:-1] < hi)))
    return CpuOverlap(
        samples=n,
        overlap_s=overlap,
        load_s=(hi - lo) / NS,
        cpu_span_s=(int(edges[-1]) - int(edges[0])) / NS,
    )

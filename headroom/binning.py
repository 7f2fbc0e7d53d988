"""Latency histograms and throughput bins.

Latencies come quantized (0.1 ms in 4-decimal files), so a run has few
distinct latency values.  Every request is coded as the index of its value
in the sorted distinct values; a group's latency distribution is then an
integer histogram over those codes, which gives exact percentiles, merges by
addition and costs O(n) to build.

Percentiles use the nearest-rank definition: the p-th percentile of n
values is the ceil(p * n)-th smallest (numpy's ``inverted_cdf``), computed
with exact integer arithmetic so that p99.5 of 1000 values is the 995th.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .aggregate import Buckets
from .model import MIN_TAIL_REQUESTS, PERCENTILES

_DENSE_LIMIT = 1 << 24  # distinct-value tables up to 16M ticks use a lookup array


@dataclass(frozen=True, eq=False)
class LatencyCodes:
    """Each request's latency as an index into ``values`` (sorted, distinct)."""

    codes: np.ndarray  # int32 per request
    values: np.ndarray  # float64, ascending


def encode_latency(latency_s: np.ndarray) -> LatencyCodes:
    """Code latencies as indices of their distinct values.

    Uses an O(n) lookup table when the values sit on a decimal grid (0.1 ms,
    10 us, 1 us, 0.1 us); falls back to a sort otherwise.  On the grid the
    value of a code is ``tick / 10**decimals``, which is bit-for-bit the
    double the CSV parser produced (both are correctly rounded).
    """
    lat = np.asarray(latency_s, dtype=np.float64)
    if len(lat) == 0:
        return LatencyCodes(np.empty(0, np.int32), np.empty(0))
    top = float(lat.max())
    for decimals in (4, 5, 6, 7):
        scale = 10.0**decimals
        if top * scale >= _DENSE_LIMIT:
            break
        scaled = lat * scale
        ticks = np.rint(scaled)
        np.subtract(scaled, ticks, out=scaled)
        if np.max(np.abs(scaled)) > 1e-3:  # not on this grid
            continue
        ticks = ticks.astype(np.int32)
        present = np.flatnonzero(np.bincount(ticks))
        lut = np.zeros(int(present[-1]) + 1, dtype=np.int32)
        lut[present] = np.arange(len(present), dtype=np.int32)
        return LatencyCodes(lut[ticks], present / scale)
    values, inverse = np.unique(lat, return_inverse=True)
    return LatencyCodes(inverse.astype(np.int32), values)


def latency_ticks(latency_s: np.ndarray) -> tuple[np.ndarray, float] | None:
    """Latencies as integer ticks of a decimal grid (0.1 ms, 10 us, 1 us, 0.1 us) and the ticks per
    second, or None off the grid; ``tick / scale`` is bit-for-bit the parsed double (as in
    :func:`encode_latency`)."""
    lat = np.asarray(latency_s, dtype=np.float64)
    if len(lat) == 0:
        return None
    top = float(lat.max())
    for decimals in (4, 5, 6, 7):
        scale = 10.0**decimals
        if top * scale >= _DENSE_LIMIT:
            return None
        scaled = lat * scale
        ticks = np.empty(len(lat), np.int64)
        np.rint(scaled, out=ticks, casting="unsafe")  # straight to integers (below 2**24: exact)
        np.subtract(scaled, ticks, out=scaled)
        if scaled.max() > 1e-3 or scaled.min() < -1e-3:  # not on this grid
            continue
        return ticks, scale
    return None


def rank(n: int | np.ndarray, num: int, den: int):
    """1-based nearest rank of the num/den quantile among n values: ceil(n*num/den)."""
    return np.maximum(1, -((-np.asarray(n) * num) // den))


def quantiles(counts: np.ndarray, values: np.ndarray, num: int, den: int) -> np.ndarray:
    """The num/den quantile of each histogram row; NaN for empty rows."""
    counts = np.atleast_2d(counts)
    cum = np.cumsum(counts, axis=1)
    n = cum[:, -1] if cum.shape[1] else np.zeros(len(counts), np.int64)
    r = rank(n, num, den)
    idx = np.array([np.searchsorted(cum[i], r[i]) for i in range(len(counts))], dtype=np.int64)
    out = np.full(len(counts), np.nan)
    ok = n > 0
    out[ok] = values[idx[ok]]
    return out


@dataclass(frozen=True, eq=False)
class LatencyStats:
    """Latency summary of a set of groups (bins or steps); latencies in seconds."""

    requests: np.ndarray  # successful requests per group
    mean_s: np.ndarray
    max_s: np.ndarray
    pct: dict[str, np.ndarray]  # "p50" -> seconds per group
    thin: dict[str, np.ndarray]  # "p99" -> bool: fewer than MIN_TAIL_REQUESTS above it
    #: the histograms themselves: (group, value index, count) entries, or a dense (groups, values) table
    entries: tuple | np.ndarray = field(repr=False)
    values: np.ndarray | None = field(default=None, repr=False)

    @property
    def counts(self) -> np.ndarray:
        """The histograms as a dense (groups, values) table (built on demand: it can be large)."""
        if isinstance(self.entries, np.ndarray):
            return self.entries
        g, v, c = self.entries
        out = np.zeros((len(self.requests), len(self.values)), np.int64)
        out[g, v] = c
        return out


def stats_from_counts(
    counts: np.ndarray,
    sums: np.ndarray,
    values: np.ndarray,
    *,
    extra: tuple[tuple[str, int, int], ...] = (),
) -> LatencyStats:
    """Count, mean, max and percentiles per row of a latency histogram.

    ``sums`` holds each row's sum of latencies (for the exact mean).
    """
    n = counts.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n > 0, sums / np.maximum(n, 1), np.nan)
    nz = counts > 0
    last = counts.shape[1] - 1 - np.argmax(nz[:, ::-1], axis=1) if counts.shape[1] else np.zeros(len(n), int)
    mx = np.full(len(n), np.nan)
    mx[n > 0] = values[last[n > 0]]
    pct, thin = {}, {}
    for name, num, den in PERCENTILES + tuple(extra):
        pct[name] = quantiles(counts, values, num, den)
        # requests strictly above the rank that the percentile stands on
        thin[name] = (n - rank(n, num, den)) < MIN_TAIL_REQUESTS
    return LatencyStats(n, mean, mx, pct, thin, counts, values)


def stats_from_entries(
    entries: tuple[np.ndarray, np.ndarray, np.ndarray],
    n_groups: int,
    sums: np.ndarray,
    values: np.ndarray,
    *,
    extra: tuple[tuple[str, int, int], ...] = (),
) -> LatencyStats:
    """Like :func:`stats_from_counts`, from sparse ``(group, value index, count)`` entries sorted by
    group, then value: memory follows the entries, not groups x distinct values."""
    g, v, c = entries
    n = np.bincount(g, weights=c, minlength=n_groups).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n > 0, sums / np.maximum(n, 1), np.nan)
    has = n > 0
    groups = np.arange(n_groups)
    first = np.searchsorted(g, groups, side="left")
    last = np.searchsorted(g, groups, side="right") - 1
    mx = np.full(n_groups, np.nan)
    mx[has] = values[v[last[has]]]
    cum = np.cumsum(c)
    before = (
        np.where(first > 0, cum[np.maximum(first - 1, 0)], 0) if len(cum) else np.zeros(n_groups, np.int64)
    )
    pct, thin = {}, {}
    for name, num, den in PERCENTILES + tuple(extra):
        r = rank(n, num, den)
        out = np.full(n_groups, np.nan)
        out[has] = values[v[np.searchsorted(cum, (before + r)[has])]]
        pct[name] = out
        thin[name] = (n - r) < MIN_TAIL_REQUESTS
    return LatencyStats(n, mean, mx, pct, thin, (g, v, c), values)


@dataclass(frozen=True, eq=False)
class BucketHist:
    """Sparse latency histogram of every time bucket: the reduced form of a run.

    Entries ``(bucket, value, count)`` are sorted by bucket, then value;
    ``values`` holds the distinct latencies.  Histograms merge by addition, so
    a run can be reduced chunk by chunk (see :func:`headroom.io.reduce_run`)
    and every statistic (bins, steps, density, per-bucket percentiles,
    comparisons) is computed from this, never from the requests again.
    Requests of steps too short to bucket are kept as ``loose_*``.
    """

    bucket: np.ndarray  # int32 or int64
    value: np.ndarray  # int32 or int64, index into values
    count: np.ndarray  # int32 or int64
    sums: np.ndarray  # float64 per bucket: latency sum (for exact means)
    values: np.ndarray  # float64, ascending
    loose_step: np.ndarray  # int64: step of each request that is in no bucket
    loose_value: np.ndarray  # int64: its value index

    def grouped_entries(self, group_of_bucket: np.ndarray, n_groups: int, *, loose: bool = False):
        """((group, value, count) entries sorted by group then value, latency sums per group) of buckets
        grouped (group < 0 left out); ``loose`` adds the unbucketed requests with their step as group."""
        d = max(len(self.values), 1)
        gb = np.asarray(group_of_bucket)
        top = max(n_groups, int(self.loose_step.max()) + 1 if loose and len(self.loose_step) else 0)
        kt = np.int32 if top * d < 2**31 else np.int64  # keys of 4 bytes when they fit: half the sort
        g = gb.astype(kt)[self.bucket] if len(self.bucket) else np.zeros(0, kt)
        ok = g >= 0
        keys = [g[ok] * kt(d) + self.value[ok].astype(kt, copy=False)]
        weights = [self.count[ok]]
        del g
        okb = gb >= 0
        sums = np.bincount(gb[okb], weights=self.sums[okb], minlength=n_groups)
        if loose and len(self.loose_step):
            keys.append((self.loose_step * d + self.loose_value).astype(kt))
            weights.append(np.ones(len(self.loose_step), np.int64))
            np.add.at(sums, self.loose_step, self.values[self.loose_value])
        return _added_keys(keys, weights, d), sums

    def grouped(self, group_of_bucket: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
        """(counts (n_groups, n_values), latency sums (n_groups,)) of buckets grouped; group < 0 left out."""
        d = len(self.values)
        g = np.asarray(group_of_bucket)[self.bucket] if len(self.bucket) else np.zeros(0, np.int64)
        ok = g >= 0
        key = g[ok].astype(np.int64) * d + self.value[ok]
        counts = np.bincount(key, weights=self.count[ok], minlength=n_groups * d)
        gb = np.asarray(group_of_bucket)
        okb = gb >= 0
        sums = np.bincount(gb[okb], weights=self.sums[okb], minlength=n_groups)
        return np.rint(counts).astype(np.int64).reshape(n_groups, d), sums


def _added_keys(keys: list[np.ndarray], weights: list[np.ndarray], d: int):
    """(key // d, key % d, summed weight) of every distinct key, ascending (one sort, no inverse)."""
    key = np.concatenate(keys) if len(keys) > 1 else keys[0]
    weight = np.concatenate(weights) if len(weights) > 1 else weights[0]
    if not len(key):
        z = np.zeros(0, np.int64)
        return z, z, z
    order = np.argsort(key)  # equal keys add up in any order: no stable sort needed
    key, weight = key[order], weight[order]
    del order
    first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    count = np.add.reduceat(weight, first, dtype=np.int64)
    key = key[first]
    return key // d, key % d, count


def sparse_counts(
    bucket: np.ndarray, n_buckets: int, code: np.ndarray, n_values: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Count requests per (bucket, value code): sorted (bucket, value, count) of the non-empty pairs.

    A dense bincount when the table is small (and not much larger than the rows), a sort otherwise.
    """
    key = np.asarray(bucket).astype(np.int64) * n_values + code
    if n_buckets * n_values <= min(1 << 22, max(8 * len(key), 1 << 16)):
        c = np.bincount(key, minlength=n_buckets * n_values)
        nz = np.flatnonzero(c)
        cnt = c[nz]
    else:
        nz, cnt = np.unique(key, return_counts=True)
    return nz // n_values, nz % n_values, cnt.astype(np.int64, copy=False)


def bucket_hist(
    buckets: Buckets,
    latency_s: np.ndarray,
    codes: LatencyCodes,
    step_offsets: np.ndarray,
) -> BucketHist:
    """Reduce in-memory requests to per-bucket histograms, step by step in O(n)."""
    d = len(codes.values)
    ob = buckets.of_request
    parts_b, parts_v, parts_c = [], [], []
    loose_s, loose_v = [], []
    for k in range(len(step_offsets) - 1):
        a, b = int(step_offsets[k]), int(step_offsets[k + 1])
        if b == a:
            continue
        g = ob[a:b]
        if g[0] < 0:  # a step too short to bucket
            loose_s.append(np.full(b - a, k, np.int64))
            loose_v.append(codes.codes[a:b].astype(np.int64))
            continue
        b0 = int(g.min())
        bk, vk, cnt = sparse_counts(g - b0, int(g.max()) - b0 + 1, codes.codes[a:b], d)
        parts_b.append(b0 + bk)
        parts_v.append(vk)
        parts_c.append(cnt)
    cat = lambda xs: np.concatenate(xs).astype(np.int64) if xs else np.zeros(0, np.int64)  # noqa: E731
    keep = ob >= 0
    sums = np.bincount(ob[keep], weights=latency_s[keep], minlength=len(buckets))
    return BucketHist(
        cat(parts_b), cat(parts_v), cat(parts_c), sums, codes.values, cat(loose_s), cat(loose_v)
    )


def step_stats(
    hist: BucketHist, buckets: Buckets, n_steps: int, *, extra: tuple[tuple[str, int, int], ...] = ()
) -> LatencyStats:
    """Latency per step: its buckets' histograms plus any unbucketed request."""
    entries, sums = hist.grouped_entries(buckets.step, n_steps, loose=True)
    return stats_from_entries(entries, n_steps, sums, hist.values, extra=extra)


# --------------------------------------------------------------------------
# throughput bins


def nice_width(span: float, target_bins: int = 10) -> float:
    """A round bin width (1, 2, 2.5 or 5 times a power of ten) giving about ``target_bins``."""
    if span <= 0 or not math.isfinite(span):
        return 1.0
    raw = span / target_bins
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if m * mag >= raw:
            return m * mag
    return 10 * mag


def bin_edges(rps: np.ndarray, *, bins: int | None = None, width: float | None = None) -> np.ndarray:
    """Edges of throughput bins covering every bucket's throughput.

    ``width`` gives bins of that many req/s aligned to multiples of it;
    ``bins`` gives that many equal bins from the lowest to the highest
    bucket; neither gives round-numbered bins, about ten of them.
    """
    r = np.asarray(rps, dtype=np.float64)
    r = r[np.isfinite(r)]
    if len(r) == 0:
        return np.array([0.0, 1.0])
    lo, hi = float(r.min()), float(r.max())
    if bins is not None:
        if bins < 1:
            raise ValueError("bins must be at least 1")
        if hi == lo:
            return np.array([lo, hi + 1.0])
        return np.linspace(lo, hi, bins + 1)
    w = width if width is not None else nice_width(hi - lo)
    if w <= 0:
        raise ValueError("bin width must be positive")
    first = math.floor(lo / w) * w
    n = max(1, math.floor((hi - first) / w) + 1)
    return first + w * np.arange(n + 1)


@dataclass(frozen=True, eq=False)
class Bins:
    """Latency and CPU per throughput bin.

    ``rps`` is the bin's real mean throughput (its requests over its buckets'
    total seconds), which is what curves and fits use as x.
    """

    rps_lo: np.ndarray
    rps_hi: np.ndarray
    rps: np.ndarray
    buckets: np.ndarray  # how many time buckets fall in the bin
    seconds: np.ndarray  # their total length
    latency: LatencyStats
    cpu_pct: np.ndarray  # time-weighted mean over buckets with CPU; NaN if none
    cpu_s_per_req: np.ndarray
    of_bucket: np.ndarray  # bin index of each bucket
    values: np.ndarray  # distinct latencies (columns of latency.counts)

    def __len__(self) -> int:
        return int(self.rps_lo.shape[0])

    @property
    def requests(self) -> np.ndarray:
        return self.latency.requests


def by_throughput(
    buckets: Buckets,
    hist: BucketHist,
    *,
    bins: int | None = None,
    width: float | None = None,
    cpu_cores: float = 1.0,
    extra: tuple[tuple[str, int, int], ...] = (),
) -> Bins:
    """Bin the time buckets by throughput and summarize the requests in each bin.

    Percentiles come from the raw request latencies of the bin (exactly, via
    integer histograms), never from per-bucket percentiles.
    """
    edges = bin_edges(buckets.rps, bins=bins, width=width)
    nbins = len(edges) - 1
    of_bucket = np.clip(np.searchsorted(edges, buckets.rps, side="right") - 1, 0, nbins - 1)
    entries, sums = hist.grouped_entries(of_bucket, nbins)
    lat = stats_from_entries(entries, nbins, sums, hist.values, extra=extra)
    nb = np.bincount(of_bucket, minlength=nbins)
    secs = np.bincount(of_bucket, weights=buckets.length_s, minlength=nbins)
    has_cpu = np.isfinite(buckets.cpu_pct)
    cpu_w = np.where(has_cpu, buckets.cpu_pct, 0.0) * buckets.length_s
    cpu_secs = np.bincount(of_bucket, weights=np.where(has_cpu, buckets.length_s, 0.0), minlength=nbins)
    cpu_int = np.bincount(of_bucket, weights=cpu_w, minlength=nbins)
    cpu_req = np.bincount(of_bucket, weights=np.where(has_cpu, buckets.count, 0), minlength=nbins)
    with np.errstate(invalid="ignore", divide="ignore"):
        rps = np.where(secs > 0, lat.requests / secs, np.nan)
        cpu = np.where(cpu_secs > 0, cpu_int / cpu_secs, np.nan)
        cpu_per_req = np.where(cpu_req > 0, cpu_int / 100.0 * cpu_cores / cpu_req, np.nan)
    return Bins(
        rps_lo=edges[:-1],
        rps_hi=edges[1:],
        rps=rps,
        buckets=nb,
        seconds=secs,
        latency=lat,
        cpu_pct=cpu,
        cpu_s_per_req=cpu_per_req,
        of_bucket=of_bucket,
        values=hist.values,
    )


# --------------------------------------------------------------------------
# what the plots draw: computed here so that headroom.plot only draws


def bucket_percentiles(
    buckets: Buckets, hist: BucketHist, names: tuple[str, ...] = ("p50", "p99")
) -> dict[str, np.ndarray]:
    """Exact latency percentiles of every time bucket (NaN for empty buckets)."""
    nb = len(buckets)
    n = np.bincount(hist.bucket, weights=hist.count, minlength=nb).astype(np.int64)
    cum = np.cumsum(hist.count)
    before = np.concatenate([[0], np.cumsum(n)[:-1]])  # requests in earlier buckets
    table = {p[0]: p for p in PERCENTILES}
    out = {}
    for name in names:
        _, num, den = table[name]
        r = rank(n, num, den)
        idx = np.searchsorted(cum, before + r)  # first entry reaching the rank
        v = np.full(nb, np.nan)
        ok = n > 0
        v[ok] = hist.values[hist.value[np.minimum(idx[ok], len(cum) - 1)]]
        out[name] = v
    return out


@dataclass(frozen=True, eq=False)
class Density:
    """Requests counted on a (throughput, latency) grid: a 2-D histogram."""

    x_edges: np.ndarray  # req/s
    y_edges: np.ndarray  # seconds
    counts: np.ndarray  # (nx, ny)
    above: int  # requests with latency above the top edge (not drawn)

    @property
    def x_marginal(self) -> np.ndarray:
        """Requests per throughput column."""
        return self.counts.sum(axis=1)

    @property
    def y_marginal(self) -> np.ndarray:
        """Requests per latency row."""
        return self.counts.sum(axis=0)


def density(
    buckets: Buckets,
    hist: BucketHist,
    *,
    x_max: float,
    y_max_s: float,
    nx: int = 120,
    ny: int = 100,
    y_edges_s: np.ndarray | None = None,
) -> Density:
    """2-D histogram of requests by their bucket's throughput and their latency.

    Each bucket falls in one throughput column and each distinct latency in
    one row, so one weighted bincount over the histogram entries does it.
    ``y_edges_s`` (e.g. from :func:`latency_edges`) replaces the ``ny``
    equal rows up to ``y_max_s``.  Latencies below the first edge count in
    the lowest row; ``above`` counts those at or above the top edge.
    """
    x_edges = np.linspace(0.0, x_max, nx + 1)
    if y_edges_s is None:
        y_edges = np.linspace(0.0, y_max_s, ny + 1)
    else:
        y_edges = np.asarray(y_edges_s, dtype=np.float64)
        y_max_s, ny = float(y_edges[-1]), len(y_edges) - 1
    xb = np.clip(np.searchsorted(x_edges, buckets.rps, side="right") - 1, 0, nx - 1)
    yb = np.searchsorted(y_edges, hist.values, side="right") - 1
    yb[yb < 0] = 0  # below the first row (a log axis has no 0): counted in the lowest row
    yb[hist.values >= y_max_s] = -1
    ey = yb[hist.value]
    ok = ey >= 0
    above = int(hist.count[~ok].sum())
    key = xb[hist.bucket[ok]].astype(np.int64) * ny + ey[ok]
    counts = np.rint(np.bincount(key, weights=hist.count[ok], minlength=nx * ny)).astype(np.int64)
    return Density(x_edges, y_edges, counts.reshape(nx, ny), above)


def latency_tick(values: np.ndarray) -> float | None:
    """The quantization step of latencies (1e-4 s for 4-decimal files), or None when not on a decimal grid."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return None
    for decimals in range(1, 8):
        scaled = v * 10.0**decimals
        if np.max(np.abs(scaled - np.rint(scaled))) <= 1e-3:
            return 10.0**-decimals
    return None


def latency_edges(
    values: np.ndarray, y_max_s: float, *, ny: int = 100, log: bool = False, y_min_s: float | None = None
) -> np.ndarray:
    """Row edges of a latency grid that never splits the quantization step.

    Latencies sit on a grid (0.1 ms in 4-decimal files): equal rows that are
    not whole multiples of that step hold alternately one and two distinct
    values, or none, and the density shows horizontal stripes.  Edges here
    lie halfway between grid values, so every row holds a whole number of
    them (at least one).  ``log=True`` spaces the rows geometrically from
    ``y_min_s`` (default: the smallest latency) to ``y_max_s``.
    """
    tick = latency_tick(values)
    if log:
        lo = y_min_s or (float(np.min(values[values > 0])) if np.any(values > 0) else y_max_s / 1000)
        lo = max(min(lo, y_max_s / 2), 1e-9)
        edges = np.geomspace(lo, y_max_s, ny + 1)
    else:
        edges = np.linspace(0.0, y_max_s, ny + 1)
    if tick is None:
        return edges
    if not log:
        per_row = max(1, int(np.ceil(y_max_s / ny / tick)))
        n = int(np.ceil((y_max_s / tick + 0.5) / per_row - 1e-9))
        return (np.arange(n + 1) * per_row - 0.5) * tick if n else edges
    k = np.unique(np.rint(edges / tick - 0.5))
    if (k[-1] + 0.5) * tick < y_max_s:
        k = np.append(k, k[-1] + 1)
    return (k + 0.5) * tick

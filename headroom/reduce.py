"""One reduction for every format: requests -> steps, time buckets, exact latency histograms.

The bucket rule is :mod:`headroom.aggregate`'s.  A file is reduced step by
step and chunk by chunk: a step's requests are cut into buckets anchored
at its first start, and each bucket keeps an exact integer histogram of its
latencies (:class:`LatencyHist`).  Histograms merge by addition over the
union of their values, so chunks, files (several load generators of one
ramp) and machines (:mod:`headroom.dask`-style ``client``) reduce
independently and add up to the same result, bit for bit.

Memory is bounded by the chunk size and the histograms, not the file, for
throughputramp and hey-fork files (streamed); the other formats, hey with
relative offsets and ``--steps`` runs are parsed whole, then reduced here.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from .aggregate import Buckets, Steps, bucket_lengths_ns, make_buckets, step_rps
from .binning import BucketHist, encode_latency, latency_ticks, sparse_counts
from .formats._checks import add_codes, check_plausible, failed_codes
from .model import CpuSamples, HeadroomError, Run, RunMeta

NS = 1_000_000_000
#: Latencies that are not on a decimal grid of at most 7 decimals (vegeta, k6 and oha record
#: nanoseconds) are counted at this resolution, so that histograms stay sparse; means stay exact.
RESOLUTION_S = 1e-6


# --------------------------------------------------------------------------
# the histogram


def _distinct(a: np.ndarray) -> np.ndarray:
    """The distinct values of ``a``, ascending: ``np.unique`` without its import of ``numpy.ma`` (20 ms)."""
    s = np.sort(a)
    return s[np.r_[True, s[1:] != s[:-1]]] if len(s) else s


_I32 = np.iinfo(np.int32).max


def _pair_counts(group: np.ndarray, n_groups: int, code: np.ndarray, n_codes: int):
    """:func:`~headroom.binning.sparse_counts`, the sort case by a stable sort: rows come in time order,
    their groups (time buckets) nearly sorted, which a stable (merging) sort uses and NumPy's default
    one does not (fine latency ticks of many buckets: 3-5x faster)."""
    if n_groups * n_codes <= min(1 << 22, max(8 * len(code), 1 << 16)):
        return sparse_counts(group, n_groups, code, n_codes)
    key = np.sort(group * n_codes + code, kind="stable")
    first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    count = np.diff(np.r_[first, len(key)]).astype(np.int64)
    key = key[first]
    return key // n_codes, key % n_codes, count


def _small(a: np.ndarray, top: int) -> np.ndarray:
    """``a`` (integers in ``[0, top]``) as int32 when ``top`` fits, else int64: 4 bytes an entry."""
    return a.astype(np.int32 if top <= _I32 else np.int64, copy=False)


def _added(ix: list[np.ndarray], cn: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Entries (index, count) of one group from several histograms, added: index ascending."""
    if len(ix) == 1:
        return ix[0], cn[0]
    ix, cn = np.concatenate(ix), np.concatenate(cn)
    order = np.argsort(ix, kind="stable")
    ix, cn = ix[order], cn[order]
    first = np.flatnonzero(np.r_[True, ix[1:] != ix[:-1]])
    return ix[first], np.add.reduceat(cn, first, dtype=np.int64)


class _Writer:
    """Entries of a sum written in group order into arrays of their total length; the last
    group seen is held back until the next histogram shows whether it continues there."""

    def __init__(self, total: int, top_group: int, n_values: int, count_dtype):
        self.g = np.empty(total, np.int32 if top_group <= _I32 else np.int64)
        self.i = np.empty(total, np.int32 if n_values <= _I32 else np.int64)
        self.c = np.empty(total, count_dtype)
        self.n, self.held, self.ix, self.cn = 0, None, [], []

    def put(self, g, ix, cn) -> None:
        k = len(cn)
        self.g[self.n : self.n + k], self.i[self.n : self.n + k], self.c[self.n : self.n + k] = g, ix, cn
        self.n += k

    def release(self) -> None:
        if self.held is not None:
            ix, cn = _added(self.ix, self.cn)
            self.put(self.held, ix, cn)
        self.held, self.ix, self.cn = None, [], []

    def hold(self, g: int, ix, cn) -> None:
        if self.held != g:
            self.release()
            self.held = g
        self.ix.append(ix)
        self.cn.append(cn)

    def add(self, h: LatencyHist, ix: np.ndarray) -> None:
        """One histogram whose groups come at or after every group written."""
        lo = 0
        if self.held is not None and int(h.group[0]) == self.held:  # the held group continues
            lo = int(np.searchsorted(h.group, self.held, side="right"))
            self.hold(self.held, ix[:lo], h.count[:lo])
            if lo == len(h.group):
                return
        self.release()
        last = int(h.group[-1])
        hi = int(np.searchsorted(h.group, last, side="left"))
        self.put(h.group[lo:hi], ix[lo:hi], h.count[lo:hi])
        self.hold(last, ix[hi:], h.count[hi:])


@dataclass(frozen=True, eq=False)
class LatencyHist:
    """Exact integer latency histogram of every group (a bucket, a step): sparse counts.

    Entries ``(group, index, count)`` are sorted by group, then index, with
    no zero counts; ``values[index]`` is the latency in seconds (``values``
    ascending and distinct).  Two histograms add over the union of their
    values; equal histograms compare equal whatever order they were built in.
    """

    group: np.ndarray  # int32 (int64 past 2**31 groups)
    index: np.ndarray  # int32 into values (likewise)
    count: np.ndarray  # int32, int64 when a count could pass 2**31
    values: np.ndarray  # float64, ascending, distinct

    @classmethod
    def empty(cls) -> LatencyHist:
        """A histogram with no requests."""
        z = np.zeros(0, np.int64)
        return cls(z, z, z, np.zeros(0))

    @classmethod
    def of(
        cls, group: np.ndarray, latency_s: np.ndarray, n_groups: int, *, resolution_s: float | None = None
    ) -> LatencyHist:
        """Count each request (its group, its latency) once.

        Latencies on a decimal grid (0.1 ms ... 0.1 us) are counted exactly;
        others are rounded to ``resolution_s`` when given (nanosecond
        latencies: millions of distinct values), else counted exactly.
        """
        return cls.counted(group, latency_s, n_groups, resolution_s=resolution_s)[0]

    @classmethod
    def counted(
        cls, group: np.ndarray, latency_s: np.ndarray, n_groups: int, *, resolution_s: float | None = None
    ) -> tuple[LatencyHist, bool]:
        """:meth:`of`, and whether latencies were rounded to ``resolution_s``."""
        grid = latency_ticks(latency_s)
        rounded = grid is None and resolution_s is not None and len(latency_s) > 0
        if rounded:
            scale = 1.0 / resolution_s
            grid = np.rint(np.asarray(latency_s, np.float64) * scale).astype(np.int64), scale
        return cls._count(group, latency_s, n_groups, grid), rounded

    @classmethod
    def _count(cls, group, latency_s, n_groups: int, grid) -> LatencyHist:
        n_groups = max(n_groups, 1)
        if grid is not None:  # one count over (group, tick): no table of distinct values first
            ticks, scale = grid
            d = int(ticks.max()) + 1 if len(ticks) else 1
            g, t, c = _pair_counts(np.asarray(group, np.int64), n_groups, ticks, d)
            if d <= max(4 * len(t), 1 << 16):  # the ticks present marked in a table: no sort
                seen = np.zeros(d, bool)
                seen[t] = True
                present = np.flatnonzero(seen)
                index = (np.cumsum(seen, dtype=np.int64 if d > _I32 else np.int32) - 1)[t]
            else:
                present = _distinct(t)
                index = _small(np.searchsorted(present, t), len(present))
            values = present / scale
        else:
            codes = encode_latency(latency_s)
            values = codes.values
            g, v, c = sparse_counts(np.asarray(group, np.int64), n_groups, codes.codes, len(values))
            index = _small(v, len(values))
        return cls(_small(g, n_groups), index, _small(c, len(latency_s)), values)

    @classmethod
    def sum(cls, hists: Iterable[LatencyHist]) -> LatencyHist:
        """The sum of several histograms (one sort over all their entries; parts in group order: none)."""
        return cls.drain([h for h in hists if len(h.count)])

    @classmethod
    def drain(cls, hists: list[LatencyHist]) -> LatencyHist:
        """:meth:`sum` of the histograms in the list ``hists``, which is emptied on the way: parts in
        group order (chunks of a file in time order) are copied one by one into the sum and freed
        (the caller keeping no other reference), so memory stays near one copy of the entries."""
        hists[:] = [h for h in hists if len(h.count)]
        if len(hists) <= 1:
            return hists.pop() if hists else cls.empty()
        if all(h.values is hists[0].values for h in hists):  # parts of one histogram: one set of values
            values, remap = hists[0].values, None
        else:
            values = _distinct(np.concatenate([h.values for h in hists]))
            remap = True
        pairs = zip(hists, hists[1:])
        if not all(int(a.group[-1]) <= int(b.group[0]) for a, b in pairs):
            out = cls._sorted_sum(hists, values, remap)
            hists.clear()
            return out
        total = sum(len(h.count) for h in hists)
        requests = sum(int(h.count.sum()) for h in hists)
        dtype = np.int32 if requests <= _I32 and all(h.count.dtype == np.int32 for h in hists) else np.int64
        w = _Writer(total, int(hists[-1].group[-1]), len(values), dtype)
        hists.reverse()
        while hists:
            h = hists.pop()
            w.add(h, np.searchsorted(values, h.values)[h.index] if remap else h.index)
            del h
        w.release()
        return cls(w.g[: w.n], w.i[: w.n], w.c[: w.n], values)

    @classmethod
    def _sorted_sum(cls, hists: list[LatencyHist], values: np.ndarray, remap) -> LatencyHist:
        """The sum of histograms in any order: one sort of all their entries."""
        idx = [np.searchsorted(values, h.values)[h.index] if remap else h.index for h in hists]
        group = np.concatenate([h.group.astype(np.int64, copy=False) for h in hists])
        count = np.concatenate([h.count.astype(np.int64, copy=False) for h in hists])
        d = max(len(values), 1)
        key = group * d + np.concatenate(idx).astype(np.int64, copy=False)
        order = np.argsort(key, kind="stable")
        key, count = key[order], count[order]
        first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        count = np.add.reduceat(count, first)
        key = key[first]
        top = int(count.max()) if len(count) else 0
        return cls(_small(key // d, int(key[-1] // d)), _small(key % d, d), _small(count, top), values)

    def add(self, other: LatencyHist) -> LatencyHist:
        """This histogram plus ``other``."""
        return LatencyHist.sum([self, other])

    __add__ = add

    def shifted(self, offset: int) -> LatencyHist:
        """The same counts with every group moved by ``offset``."""
        if not len(self.group):
            return self
        top = int(self.group[-1]) + int(offset)  # groups ascend: the last is the largest
        if self.group.dtype == np.int32 and 0 <= top <= _I32 and abs(int(offset)) <= _I32:
            return dataclasses.replace(self, group=self.group + np.int32(offset))
        return dataclasses.replace(self, group=_small(self.group.astype(np.int64) + np.int64(offset), top))

    @property
    def total(self) -> int:
        """Requests counted."""
        return int(self.count.sum())

    def __eq__(self, other) -> bool:
        if not isinstance(other, LatencyHist):
            return NotImplemented
        return all(
            np.array_equal(a, b)
            for a, b in zip(
                (self.group, self.index, self.count, self.values),
                (other.group, other.index, other.count, other.values),
            )
        )

    __hash__ = None  # mutable arrays inside: not hashable


# --------------------------------------------------------------------------
# one file's contribution


@dataclass
class StepPart:
    """One step of one file: its span, and its buckets' counts, latency sums and histograms."""

    t0: int = 0
    t1: int = 0
    n: int = 0
    lengths: np.ndarray | None = None  # ns, per bucket of the step's frame
    counts: np.ndarray | None = None
    sums: np.ndarray | None = None
    hist: LatencyHist | None = None  # group = bucket within the step
    loose: LatencyHist | None = None  # requests of a step too short to bucket (group: the step)
    rounded: bool = False  # latencies were rounded to RESOLUTION_S


@dataclass
class Partial:
    """What one file (or part of one) contributes to a run; partials of one run add up."""

    source: str
    kind: str
    n_steps: int
    steps: dict[int, StepPart] = field(default_factory=dict)
    step_errors: np.ndarray | None = None
    error_codes: dict[int, int] = field(default_factory=dict)
    skipped: list = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    step_concurrency: tuple | None = None
    step_rates: tuple | None = None  # rate steps: intended/sent rate, dropped, fell behind per step
    failures_said: bool = False  # the reader already warned about failed requests
    #: the kept requests of every step, (start ns, latency s) pieces in file order (None: not kept)
    rows: dict[int, list] | None = None
    #: every (step, request name)'s requests (:class:`headroom.endpoints.EndpointCounts`; None: no names)
    endpoints: object = None

    def span(self) -> tuple[int, int] | None:
        """First start and last response of the file (None without requests)."""
        parts = [p for p in self.steps.values() if p.n]
        if not parts:
            return None
        return min(p.t0 for p in parts), max(p.t1 for p in parts)


@dataclass(frozen=True)
class Frame:
    """Where a step's buckets lie: its first start, last response, requests (of all files)."""

    t0: int
    t1: int
    n: int


def span_of(batches: Iterable[tuple[np.ndarray, np.ndarray]]) -> Frame:
    """First start, last response and count of requests given as (start ns, latency s) batches."""
    t0 = t1 = None
    n = 0
    for st, lat in batches:
        if len(st):
            end = st + np.rint(lat * 1e9).astype(np.int64)
            t0 = int(st.min()) if t0 is None else min(t0, int(st.min()))
            t1 = int(end.max()) if t1 is None else max(t1, int(end.max()))
            n += len(st)
    return Frame(t0 or 0, t1 or 0, n)


def bucket_step(
    batches: Callable[[], Iterator[tuple[np.ndarray, np.ndarray]]],
    frame: Frame,
    *,
    bucket_ns: int,
    min_partial: float,
    where: str,
    step: int,
) -> StepPart:
    """Reduce one step's requests (``batches()`` iterates them) into the buckets of ``frame``."""
    part = StepPart(frame.t0, frame.t1, frame.n)
    if frame.n == 0:
        return part
    if frame.n < 2 or frame.t1 <= frame.t0:  # too short to bucket: kept for the step statistics
        lats = [lat for _, lat in batches()]
        lat = np.concatenate(lats)
        part.loose, part.rounded = LatencyHist.counted(
            np.full(len(lat), step, np.int64), lat, step + 1, resolution_s=RESOLUTION_S
        )
        return part
    _check_span(frame, bucket_ns, where, step)
    part.lengths = np.asarray(bucket_lengths_ns(frame.t1 - frame.t0, bucket_ns, min_partial), np.int64)
    m = len(part.lengths)
    counts, sums, hists = np.zeros(m, np.int64), np.zeros(m), []
    for st, lat in batches():
        if len(st) == 0:
            continue
        idx = np.minimum((st - frame.t0) // bucket_ns, m - 1)
        sums += np.bincount(idx, weights=lat, minlength=m)
        h, rounded = LatencyHist.counted(idx, lat, m, resolution_s=RESOLUTION_S)
        part.rounded |= rounded
        counts += np.bincount(h.group, weights=h.count, minlength=m).astype(np.int64)  # from the entries
        hists.append(h)
    part.counts, part.sums, part.hist = counts, sums, LatencyHist.drain(hists)
    return part


class _Grid:
    """Where the buckets of every step lie, one row of arrays per step (the last: steps not reduced)."""

    def __init__(self, frames: dict[int, Frame], bucket_ns: int, min_partial: float, where: str):
        size = max(frames, default=-1) + 2
        self.t0, self.m, self.off = (np.zeros(size, np.int64) for _ in range(3))
        self.mode = np.zeros(size, np.int8)  # 0 not reduced here, 1 bucketed, 2 too short to bucket
        self.parts: dict[int, StepPart] = {}
        self.nb, self.bucket_ns = 0, bucket_ns
        for k in sorted(frames):
            fr = frames[k]
            self.parts[k] = part = StepPart(fr.t0, fr.t1, fr.n)
            if fr.n == 0:
                continue
            if fr.n < 2 or fr.t1 <= fr.t0:
                self.mode[k] = 2
                continue
            _check_span(fr, bucket_ns, where, k)
            part.lengths = np.asarray(bucket_lengths_ns(fr.t1 - fr.t0, bucket_ns, min_partial), np.int64)
            self.mode[k], self.t0[k], self.m[k], self.off[k] = 1, fr.t0, len(part.lengths), self.nb
            self.nb += len(part.lengths)

    def bucket_one(self, st: np.ndarray, k: int) -> np.ndarray:
        """The run-wide bucket of each row of the bucketed step ``k``."""
        g = st - self.t0[k]
        np.floor_divide(g, self.bucket_ns, out=g)
        np.minimum(g, self.m[k] - 1, out=g)
        g += self.off[k]
        return g

    def bucket(self, st: np.ndarray, key: np.ndarray) -> np.ndarray:
        """The run-wide bucket of each row (all of bucketed steps)."""
        if key[0] == key[-1] and not (key != key[0]).any():  # one step: scalars
            return self.bucket_one(st, int(key[0]))
        g = st - self.t0[key]
        np.floor_divide(g, self.bucket_ns, out=g)
        np.minimum(g, self.m[key] - 1, out=g)
        return g + self.off[key]


def bucket_steps(
    batches: Callable[[], Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]],
    frames: dict[int, Frame],
    *,
    bucket_ns: int,
    min_partial: float,
    where: str,
) -> dict[int, StepPart]:
    """Every step of ``frames`` reduced in one pass over ``batches()`` of (start ns, latency s, step),
    steps mixed in any order: the parts :func:`bucket_step` gives each step's rows (latency sums
    added batch by batch).  Rows of steps not in ``frames`` are left out."""
    grid = _Grid(frames, bucket_ns, min_partial, where)
    last = len(grid.mode) - 1
    sums, counts, hists, loose, rounded = np.zeros(grid.nb), np.zeros(grid.nb, np.int64), [], [], False
    for st, lat, key in batches():
        if len(key) == 0:
            continue
        if key[0] == key[-1] and not (key != key[0]).any():  # rows all of one step: no gather
            k = min(int(key[0]), last)
            if grid.mode[k] == 2:
                loose.append((np.full(len(key), k, np.int64), lat))
            if grid.mode[k] != 1:
                continue
            g = grid.bucket_one(st, k)
        else:
            found = _mixed(grid, st, lat, key, loose)
            if found is None:
                continue
            g, lat = found
        lo, hi = int(g.min()), int(g.max())
        g -= lo
        sums[lo : hi + 1] += np.bincount(g, weights=lat, minlength=hi - lo + 1)
        h, r = LatencyHist.counted(g, lat, hi - lo + 1, resolution_s=RESOLUTION_S)
        counts[lo : hi + 1] += np.bincount(g, minlength=hi - lo + 1)
        hists.append(h.shifted(lo))
        rounded |= r
    _fill_parts(grid, (counts, sums), LatencyHist.drain(hists), rounded)
    _loose_parts(grid, loose)
    return grid.parts


def _mixed(grid: _Grid, st: np.ndarray, lat: np.ndarray, key: np.ndarray, loose: list):
    """The buckets and latencies of the bucketed rows of a batch of several steps (None: no such row);
    rows of steps too short to bucket go to ``loose``."""
    key = np.minimum(key, len(grid.mode) - 1)
    mode = grid.mode[key]
    b = mode == 1
    if not b.all():
        if (mode == 2).any():
            loose.append((key[mode == 2].astype(np.int64), lat[mode == 2]))
        st, lat, key = st[b], lat[b], key[b]
        if len(key) == 0:
            return None
    return grid.bucket(st, key), lat


def _fill_parts(
    grid: _Grid, counts_sums: tuple[np.ndarray, np.ndarray], h: LatencyHist, rounded: bool
) -> None:
    """Each bucketed step's share of the run-wide requests and latency sums per bucket, and histogram."""
    counts, sums = counts_sums
    bucketed = np.flatnonzero(grid.mode[:-1] == 1)
    off, m = grid.off[bucketed], grid.m[bucketed]
    lo, hi = np.searchsorted(h.group, off), np.searchsorted(h.group, off + m)
    for k, o, n, a, b in zip(bucketed.tolist(), off.tolist(), m.tolist(), lo.tolist(), hi.tolist()):
        part = grid.parts[k]
        part.counts, part.sums = counts[o : o + n], sums[o : o + n]
        part.hist = LatencyHist(h.group[a:b] - o, h.index[a:b], h.count[a:b], h.values)
        part.rounded = rounded


def _loose_parts(grid: _Grid, loose: list) -> None:
    """The steps too short to bucket: their requests counted per step."""
    for k in np.flatnonzero(grid.mode[:-1] == 2).tolist():
        lat = [la[kk == k] for kk, la in loose]
        lat = np.concatenate(lat) if lat else np.zeros(0)
        part = grid.parts[k]
        part.loose, part.rounded = LatencyHist.counted(
            np.full(len(lat), k, np.int64), lat, k + 1, resolution_s=RESOLUTION_S
        )


def last_end(st: np.ndarray, lat: np.ndarray) -> int:
    """``max(st + rint(lat * 1e9))`` over the rows that can end last (within the longest latency
    of the last start): the same value, without a pass of integer arithmetic over every row."""
    hi = int(st.max())
    reach = int(np.rint(float(lat.max()) * 1e9))  # rint is monotonic: no row's latency rounds above it
    sel = st >= hi - reach
    st, lat = st[sel], lat[sel]
    return int((st + np.rint(lat * 1e9).astype(np.int64)).max())


def bucket_batch(
    st: np.ndarray, lat: np.ndarray, *, bucket_ns: int, min_partial: float, where: str, step: int
):
    """A step given as one batch: ``bucket_step`` in ``span_of``'s frame, the same part bit for bit
    in fewer passes over the rows (the common case: a step that fits in one chunk)."""
    n = len(st)
    if n < 2:
        return bucket_step(lambda: iter([(st, lat)]), span_of([(st, lat)]), bucket_ns=bucket_ns,
                           min_partial=min_partial, where=where, step=step)  # fmt: skip
    frame = Frame(int(st.min()), last_end(st, lat), n)
    if frame.t1 <= frame.t0:
        return bucket_step(lambda: iter([(st, lat)]), frame, bucket_ns=bucket_ns, min_partial=min_partial,
                           where=where, step=step)  # fmt: skip
    _check_span(frame, bucket_ns, where, step)
    lengths = np.asarray(bucket_lengths_ns(frame.t1 - frame.t0, bucket_ns, min_partial), np.int64)
    m = len(lengths)
    idx = st - np.int64(frame.t0)
    np.floor_divide(idx, bucket_ns, out=idx)
    np.minimum(idx, m - 1, out=idx)
    sums = np.bincount(idx, weights=lat, minlength=m)
    h, rounded = LatencyHist.counted(idx, lat, m, resolution_s=RESOLUTION_S)
    counts = np.bincount(h.group, weights=h.count, minlength=m).astype(np.int64)
    return StepPart(frame.t0, frame.t1, n, lengths, counts, sums, LatencyHist.sum([h]), rounded=rounded)


def _check_span(frame: Frame, bucket_ns: int, where: str, step: int) -> None:
    """Refuse a step whose buckets would outnumber its requests (memory bounded by rows, not the span)."""
    if (frame.t1 - frame.t0) // bucket_ns > 10 * frame.n + 100_000:
        raise HeadroomError(
            f"{where}: step {step} has {frame.n:,} requests spread over {(frame.t1 - frame.t0) / 1e9:,.0f} s: "
            "its timestamps are damaged or from different clocks"
        )


def bucket_stream(
    batches: Iterable[tuple[np.ndarray, np.ndarray]],
    *,
    bucket_ns: int,
    min_partial: float,
    where: str,
    step: int,
) -> tuple[StepPart | None, Frame]:
    """Reduce one step in a single pass over its batches, its frame found on the way.

    Buckets are anchored at the first batch's earliest start.  Rows come in
    completion order, so that is nearly always the step's earliest start;
    when a later batch starts earlier (a slow first request), or the step is
    too short to bucket, or its span looks damaged, the result is ``None``
    (with the step's frame, all batches having been read): reduce it again
    with :func:`bucket_step` in that frame.  Memory: one batch and the
    histograms, never the step's rows.  The result equals :func:`bucket_step`'s
    except that the sums of latencies (floats) add per batch.
    """
    t0 = t1 = anchor = None
    n, ng, ok, rounded = 0, 0, True, False
    hists: list[LatencyHist] = []
    sums = np.zeros(0)
    for st, lat in batches:
        if len(st) == 0:
            continue
        lo = int(st.min())
        t0 = lo if t0 is None else min(t0, lo)
        hi = last_end(st, lat)
        t1 = hi if t1 is None else max(t1, hi)
        n += len(st)
        if anchor is None:
            anchor = lo
        if not ok:
            continue
        top = (int(st.max()) - anchor) // bucket_ns
        if lo < anchor or top > 10 * n + 100_000:  # not the anchor after all, or a damaged span
            ok, hists, sums = False, [], np.zeros(0)
            continue
        # groups counted from the batch's first bucket: a batch spans a few buckets of a long step
        g0 = (lo - anchor) // bucket_ns
        idx = st - np.int64(anchor + g0 * bucket_ns)
        np.floor_divide(idx, bucket_ns, out=idx)
        ng = max(ng, top + 1)
        if top >= len(sums):  # grown by doubling: a long step has many batches
            sums = np.concatenate([sums, np.zeros(max(top + 1, 2 * len(sums)) - len(sums))])
        sums[g0 : top + 1] += np.bincount(idx, weights=lat, minlength=top + 1 - g0)
        h, r = LatencyHist.counted(idx, lat, top + 1 - g0, resolution_s=RESOLUTION_S)
        rounded |= r
        hists.append(h.shifted(g0))
        # merged as a binary counter: few histograms held, each entry merged O(log batches) times
        while len(hists) > 1 and len(hists[-2].count) <= 2 * len(hists[-1].count):
            hists[-2:] = [LatencyHist.sum(hists[-2:])]
    frame = Frame(t0 or 0, t1 or 0, n)
    if not ok or n < 2 or frame.t1 <= frame.t0:
        return None, frame
    _check_span(frame, bucket_ns, where, step)
    lengths = np.asarray(bucket_lengths_ns(frame.t1 - frame.t0, bucket_ns, min_partial), np.int64)
    m = len(lengths)
    hist = LatencyHist.sum(hists)
    if len(hist.group) and int(hist.group[-1]) >= m:  # a short last bucket joins the one before
        hist = _regrouped(hist, np.minimum(hist.group, m - 1))
    sums = sums[:ng]
    if len(sums) > m:
        sums = np.concatenate([sums[: m - 1], [sums[m - 1 :].sum()]])
    elif len(sums) < m:
        sums = np.concatenate([sums, np.zeros(m - len(sums))])
    counts = np.bincount(hist.group, weights=hist.count, minlength=m).astype(np.int64)
    part = StepPart(frame.t0, frame.t1, frame.n, lengths, counts, sums, hist, rounded=rounded)
    return part, frame


def _regrouped(h: LatencyHist, group: np.ndarray) -> LatencyHist:
    """``h`` with its entries moved to ``group`` (ascending; entries that meet are added)."""
    d = max(len(h.values), 1)
    key = group.astype(np.int64) * d + h.index
    order = np.argsort(key, kind="stable")
    key, count = key[order], h.count[order]
    first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    key, count = key[first], np.add.reduceat(count, first, dtype=np.int64)
    top = int(count.max()) if len(count) else 0
    return LatencyHist(_small(key // d, int(group.max())), _small(key % d, d), _small(count, top), h.values)


def add_step_parts(parts: list[StepPart], frame: Frame) -> StepPart:
    """Parts of one step from several files, reduced in the same frame, added (in file order)."""
    out = StepPart(frame.t0, frame.t1, frame.n, rounded=any(p.rounded for p in parts))
    bucketed = [p for p in parts if p.counts is not None]
    if bucketed:
        out.lengths = bucketed[0].lengths
        out.counts = np.sum([p.counts for p in bucketed], axis=0)
        sums = bucketed[0].sums.copy()
        for p in bucketed[1:]:
            sums += p.sums
        out.sums = sums
        out.hist = LatencyHist.sum(p.hist for p in bucketed)
    loose = [p.loose for p in parts if p.loose is not None]
    out.loose = LatencyHist.sum(loose) if loose else None
    return out


# --------------------------------------------------------------------------
# accounting of one batch of parsed rows


def accept(
    acc: Partial, step: int, start_ns, latency_s, status, ok, line_of, *, record: bool, check_shift: int = 0
):
    """Check a batch, count its failed requests into ``acc`` (when ``record``); return the good rows."""
    if record:
        check_plausible(acc.source, start_ns + np.int64(check_shift), latency_s, line_of)
    failed = None
    if ok is not None:
        failed = ~ok
    elif status is not None:
        failed = (status < 200) | (status > 299)
    if failed is None or not failed.any():
        return start_ns, latency_s
    if record:
        acc.step_errors[step] += int(failed.sum())
        codes = status[failed] if status is not None else np.full(int(failed.sum()), -1, np.int64)
        add_codes(acc.error_codes, failed_codes(codes))
    return start_ns[~failed], latency_s[~failed]


# --------------------------------------------------------------------------
# assembling a run


@dataclass(frozen=True, eq=False)
class ReducedRun:
    """A run reduced to steps, time buckets (with CPU) and their latency histograms.

    Unpacks as ``steps, buckets, hist`` (what :func:`headroom.analyze`
    reads).  :meth:`save` writes it (with the run's labels, failed requests
    and warnings: :func:`save_run`) to a small versioned file that a CI job
    can keep instead of the raw log; :func:`load_run_file` reads it back.
    """

    steps: Steps
    buckets: Buckets
    hist: BucketHist
    cpu: CpuSamples | None = None

    def __iter__(self):
        return iter((self.steps, self.buckets, self.hist))

    def __repr__(self) -> str:
        return (
            f"<ReducedRun: {len(self.steps)} steps, {len(self.buckets)} buckets of {self.buckets.bucket_s:g} s, "
            f"{int(self.steps.requests.sum()):,} requests, {len(self.hist.values):,} distinct latencies>"
        )


def assemble(parts: dict[int, StepPart], n_steps: int, concurrency: list, cpu, bucket_s: float) -> ReducedRun:
    """Steps, buckets and histograms of a run from its reduced steps (in step order)."""
    b_ns = int(round(bucket_s * NS))
    st_start, st_end, st_count = (np.zeros(n_steps, np.int64) for _ in range(3))
    pieces = ([], [], [], [])  # step, start, length, count of buckets
    sums, hists, loose = [], [], []
    nb = 0
    for k in range(n_steps):
        p = parts.get(k)
        if p is None or p.n == 0:
            continue
        st_start[k], st_end[k], st_count[k] = p.t0, p.t1, p.n
        if p.loose is not None:
            loose.append(p.loose)
        if p.counts is None:
            continue
        m = len(p.counts)
        pieces[0].append(np.full(m, k, np.int32))
        pieces[1].append(p.t0 + np.arange(m, dtype=np.int64) * b_ns)
        pieces[2].append(p.lengths.astype(np.float64) / 1e9)
        pieces[3].append(p.counts)
        sums.append(p.sums)
        hists.append(p.hist.shifted(nb))
        nb += m
    steps = Steps(
        index=np.arange(n_steps),
        concurrency=list(concurrency),
        start_ns=st_start,
        end_ns=st_end,
        requests=st_count,
        rps=step_rps(st_count, st_start, st_end),
    )
    buckets = make_buckets(*pieces, cpu, np.empty(0, np.int32), bucket_s)
    return ReducedRun(
        steps, buckets, _bucket_hist(LatencyHist.drain(hists), LatencyHist.sum(loose), sums), cpu
    )


def _bucket_hist(h: LatencyHist, loose: LatencyHist, sums: list[np.ndarray]) -> BucketHist:
    """The analysis' histogram table: bucket entries and loose requests over one set of values."""
    values = _distinct(np.concatenate([h.values, loose.values]))
    if len(values) == len(h.values):  # no value of the loose requests is new: the same indices
        hv = h.index
    else:
        hv = _small(np.searchsorted(values, h.values)[h.index], len(values))
    lv = np.searchsorted(values, loose.values)[loose.index] if len(loose.index) else np.zeros(0, np.int64)
    return BucketHist(
        bucket=h.group,
        value=hv,
        count=h.count,
        sums=np.concatenate(sums) if sums else np.zeros(0),
        values=values,
        loose_step=np.repeat(loose.group, loose.count).astype(np.int64),
        loose_value=np.repeat(lv, loose.count).astype(np.int64),
    )


# --------------------------------------------------------------------------
# saving and loading a reduced run

#: Version of the reduced-run file; :data:`_READERS` reads every version up to it.
REDUCED_VERSION = 1
_MAGIC = "headroom-reduced-run"
#: the arrays of a run's request-name counts (headroom.endpoints.EndpointCounts), saved when it has names
_ENDPOINT_ARRAYS = ("group", "index", "count", "values", "failed")
_ARRAYS = {
    "steps": ("index", "start_ns", "end_ns", "requests", "rps"),
    "buckets": ("step", "start_ns", "length_s", "count", "rps", "cpu_pct"),
    "hist": ("bucket", "value", "count", "sums", "values", "loose_step", "loose_value"),
    "cpu": ("time_ns", "pct"),
}


def save_run(run: Run, path: str | os.PathLike) -> None:
    """Write a reduced run (from :func:`headroom.reduce_run`) to ``path`` (a compressed ``.npz``).

    The file holds the steps, buckets, histograms and CPU samples, the
    run's labels, failed requests and warnings, and its request names'
    counts when it has names (optional ``endpoints.*`` arrays: version 1
    files without them read as before); its size is that of the histograms,
    not of the requests.
    """
    r = run.reduced
    if r is None:
        raise HeadroomError(f"{run.meta.source}: only a reduced run (reduce_run) can be saved")
    arrays = {f"{part}.{name}": getattr(getattr(r, part), name) for part in ("steps", "buckets", "hist")
              for name in _ARRAYS[part]}  # fmt: skip
    if r.cpu is not None:
        arrays.update({f"cpu.{n}": getattr(r.cpu, n) for n in _ARRAYS["cpu"]})
        if r.cpu.per_cpu is not None:
            arrays["cpu.per_cpu"] = r.cpu.per_cpu
    head = {
        "magic": _MAGIC, "version": REDUCED_VERSION, "bucket_s": r.buckets.bucket_s,
        "concurrency": list(r.steps.concurrency),
        "cpu": None if r.cpu is None else {"cores": r.cpu.cores, "source": r.cpu.source},
        "run": {"label": run.meta.label, "source": run.meta.source, "fields": run.meta.fields,
                "step_concurrency": run.meta.step_concurrency, "step_rates": run.meta.step_rates,
                "errors": run.errors,
                "error_codes": {str(k): v for k, v in run.error_codes.items()},
                "warnings": list(run.warnings), "format": run.format,
                "step_errors": None if run.step_errors is None else [int(x) for x in run.step_errors]},
    }  # fmt: skip
    ep = run.endpoints
    if ep is not None:
        head["endpoints"] = {"names": list(ep.names), "n_steps": int(ep.n_steps)}
        arrays.update({f"endpoints.{n}": getattr(ep, n) for n in _ENDPOINT_ARRAYS})
    arrays["header"] = np.frombuffer(json.dumps(head, default=str).encode(), np.uint8)
    try:
        with open(path, "wb") as f:
            np.savez_compressed(f, **arrays)
    except OSError as e:
        raise HeadroomError(f"{path}: cannot write ({e.strerror})") from None


def load_run_file(path: str | os.PathLike) -> Run:
    """Read a run written by :func:`save_run` (any version up to :data:`REDUCED_VERSION`)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
        head = json.loads(bytes(data.pop("header")).decode())
    except (OSError, ValueError, KeyError) as e:
        raise HeadroomError(f"{path}: not a reduced run file ({e})") from None
    if not isinstance(head, dict) or head.get("magic") != _MAGIC:
        raise HeadroomError(f"{path}: not a reduced run file (no {_MAGIC} header)")
    version = head.get("version")
    if version not in _READERS:
        raise HeadroomError(
            f"{path}: reduced run file version {version!r}; this headroom reads versions "
            f"{', '.join(map(str, _READERS))}: upgrade headroom"
        )
    return _READERS[version](head, data)


def _read_v1(head: dict, a: dict) -> Run:
    def part(name):
        return {n: a[f"{name}.{n}"] for n in _ARRAYS[name]}

    cpu = None
    if head["cpu"] is not None:
        c = part("cpu")
        cpu = CpuSamples(c["time_ns"], c["pct"], a.get("cpu.per_cpu"), float(head["cpu"]["cores"]),
                         head["cpu"]["source"])  # fmt: skip
    steps = Steps(concurrency=list(head["concurrency"]), **part("steps"))
    buckets = Buckets(of_request=np.empty(0, np.int32), bucket_s=float(head["bucket_s"]), **part("buckets"))
    reduced = ReducedRun(steps, buckets, BucketHist(**part("hist")), cpu)
    r = head["run"]
    conc = tuple(r["step_concurrency"]) if r["step_concurrency"] is not None else None
    rates = tuple(r["step_rates"]) if r.get("step_rates") is not None else None
    meta = RunMeta(label=r["label"], source=r["source"], fields=r["fields"], step_concurrency=conc,
                   step_rates=rates)  # fmt: skip
    step_errors = None if r["step_errors"] is None else np.asarray(r["step_errors"], np.int64)
    return Run(requests=None, cpu=cpu, meta=meta, errors=int(r["errors"]),
               error_codes={int(k): int(v) for k, v in r["error_codes"].items()}, warnings=tuple(r["warnings"]),
               format=r["format"], reduced=reduced, step_errors=step_errors,
               endpoints=_read_endpoints(head, a))  # fmt: skip


def _read_endpoints(head: dict, a: dict):
    """The request names' counts of a saved run (None: a run without names, or a file from before)."""
    e = head.get("endpoints")
    if e is None:
        return None
    from .endpoints import EndpointCounts

    return EndpointCounts(
        tuple(e["names"]), int(e["n_steps"]), **{n: a[f"endpoints.{n}"] for n in _ENDPOINT_ARRAYS}
    )


#: A reader for every file version (an old file stays readable when the format moves on).
_READERS = {1: _read_v1}

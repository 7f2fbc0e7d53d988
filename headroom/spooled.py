"""Reading a request file in bounded memory: one parse into a spool, steps from the spool, then buckets.

:class:`SpoolSource` is the source (:mod:`headroom.reading`) of every format
but the streamed throughputramp/hey CSV: its format's scan yields record
batches (:mod:`headroom.formats._batch`) that go to a :class:`~headroom.spool.Spool`;
the format's step plan (:mod:`headroom.formats._plans`) reads the spool to find
the steps; one pass then gives every row its step, counts the failed ones
and writes each step's rows to a spool of its own; each step is bucketed
from its spool (:func:`headroom.reduce.bucket_step`).  Memory is a chunk of
rows plus the histograms; disk is about 30 bytes a request while the file
is read.  Results equal those of the whole-table path, number for number.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .formats._checks import (
    MAX_TIME_NS,
    MIN_TIME_NS,
    SPAN_TOLERANCE_IQR,
    SPAN_TOLERANCE_S,
    add_codes,
    all_failed,
    check_base,
    check_plausible,
    failed_codes,
    failed_warning,
    mtime_base,
)
from .formats._common import check_rows
from .model import HeadroomError
from .reduce import Frame, Partial, StepPart
from .spool import Cursor, Spool

RAW = {"start_ns": np.int64, "latency_s": np.float64, "status": np.int64, "ok": np.bool_, "key": np.int64,
       "line": np.int64, "name": np.int32}  # fmt: skip
#: the optional columns of a batch (None when its format has none): read back as zeros when absent
OPTIONAL = ("status", "ok", "key", "line", "name")
#: Every row's step, as kept rows of step k (k), failed rows of step k (-2 - k) or rows in no step (-1).
KEYS = {"step": np.int32}
_I64 = np.iinfo(np.int64)


@dataclass
class StepStats:
    """What one pass learns of a step: rows, failed rows, span of all and of the kept rows."""

    n: int = 0
    failed: int = 0
    lo: int | None = None  # all rows' first and last start, longest latency (plausibility)
    hi: int | None = None
    max_lat: float = 0.0
    end: int | None = None  # all rows' last response (anchors relative times)
    kept: int = 0
    t0: int | None = None  # the kept rows' first start and last response (the frame)
    t1: int | None = None
    codes: dict = field(default_factory=dict)

    def add(self, st: np.ndarray, lat: np.ndarray, failed: np.ndarray) -> None:
        """Add rows all of this step."""
        if len(st):
            _tally(self, np.zeros(len(st), np.int64), {"start_ns": st, "latency_s": lat}, failed, None)

    def merge(self, n, failed, lo, hi, max_lat, end, t0, t1) -> None:
        """Add the figures of a run of rows (``t0``/``t1`` None when all of them failed)."""
        self.n += n
        self.failed += failed
        self.kept += n - failed
        self.lo, self.hi, self.end = _min(self.lo, lo), _max(self.hi, hi), _max(self.end, end)
        self.max_lat = max(self.max_lat, max_lat)
        if t0 is not None:
            self.t0, self.t1 = _min(self.t0, t0), _max(self.t1, t1)


def _min(a, b):
    return b if a is None else min(a, b)


def _max(a, b):
    return b if a is None else max(a, b)


def _tally(stats, sid: np.ndarray, c: dict, failed: np.ndarray, have: dict | None) -> None:
    """The statistics of every step of a chunk (into ``stats``: {step: StepStats}, or one StepStats for
    rows all of one step), by runs of rows of one step (no sort when the rows come in step order)."""
    st, lat = c["start_ns"], c["latency_s"]
    with_status = bool(have and have["status"])
    if len(sid) > 1 and not (sid[1:] >= sid[:-1]).all():
        order = np.argsort(sid, kind="stable")  # rows of a step together, in file order
        sid, st, lat, failed = sid[order], st[order], lat[order], failed[order]
        status = c["status"][order] if with_status else None
    else:
        status = c["status"] if with_status else None
    first = np.flatnonzero(np.r_[True, sid[1:] != sid[:-1]])
    end = st + np.rint(lat * 1e9).astype(np.int64)
    kept = ~failed
    figures = (
        np.diff(np.r_[first, len(sid)]),
        np.add.reduceat(failed, first),
        np.minimum.reduceat(st, first),
        np.maximum.reduceat(st, first),
        np.maximum.reduceat(lat, first),
        np.maximum.reduceat(end, first),
        np.minimum.reduceat(np.where(kept, st, _I64.max), first),
        np.maximum.reduceat(np.where(kept, end, _I64.min), first),
    )
    codes = _run_codes(first, failed, status) if have is not None and failed.any() else {}
    for j, k in enumerate(sid[first].tolist()):
        if k < 0:
            continue
        n, nf, lo, hi, ml, en, t0, t1 = (int(f[j]) if i != 4 else float(f[j]) for i, f in enumerate(figures))
        s = stats if isinstance(stats, StepStats) else stats.setdefault(k, StepStats())
        s.merge(n, nf, lo, hi, ml, en, *((t0, t1) if nf < n else (None, None)))
        if j in codes:  # (StepStats.add: no codes)
            add_codes(s.codes, codes[j])


def _run_codes(first: np.ndarray, failed: np.ndarray, status) -> dict[int, dict[int, int]]:
    """The failed rows' codes counted per run of rows (``first``: where each run begins), in one count
    for the whole chunk (-1: no status)."""
    where = np.flatnonzero(failed)
    run = np.searchsorted(first, where, side="right") - 1
    code = status[where] if status is not None else np.full(len(where), -1, np.int64)
    lo = int(code.min())
    key = run.astype(np.int64) * (int(code.max()) - lo + 1) + (code - lo)
    vals, counts = np.unique(key, return_counts=True)
    width = int(code.max()) - lo + 1
    out: dict[int, dict[int, int]] = {}
    for v, c in zip(vals.tolist(), counts.tolist()):
        out.setdefault(v // width, {})[v % width + lo] = c
    return out


def _tally_one(s: StepStats, c: dict, failed: np.ndarray, have: dict) -> None:
    """:func:`_tally` of rows all of one step (``s``), with no runs to find."""
    from .reduce import last_end

    st, lat = c["start_ns"], c["latency_s"]
    nf = int(np.count_nonzero(failed))
    end = last_end(st, lat)
    if nf == 0:
        t0, t1 = int(st.min()), end
    elif nf < len(st):
        kept = ~failed
        t0, t1 = int(st[kept].min()), last_end(st[kept], lat[kept])
    else:
        t0 = t1 = None
    s.merge(len(st), nf, int(st.min()), int(st.max()), float(lat.max()), end, t0, t1)
    if nf:
        codes = c["status"][failed] if have["status"] else np.full(nf, -1, np.int64)
        add_codes(s.codes, failed_codes(codes))


def assign_steps(raw: Spool, plan, have: dict, keys: Spool) -> dict[int, StepStats]:
    """Every spooled row's step by ``plan`` (to ``keys``, see :data:`KEYS`), and every step's statistics."""
    stats: dict[int, StepStats] = {}
    for c in raw.chunks(tuple(n for n in RAW if n not in ("line", "name"))):  # lines: only for a message
        sid = np.asarray(plan.assign(c), np.int64)
        failed = failed_rows(c, have)
        _tally(stats, sid, c, failed, have)
        keys.append(step=np.where(failed & (sid >= 0), -2 - sid, sid).astype(np.int32))
    return stats


class SpoolSource:
    """One request file of a non-CSV format, read once into a spool, reduced in one pass over it."""

    def __init__(self, path: Path, settings, reader):
        self.path, self.settings, self.reader = Path(path), settings, reader
        self.fmt = reader.name
        self._done = None

    # ---------------------------------------------------------------- the passes

    def _spool(self, one_step: bool = False, keyed: bool = False):
        """Parse the file into a spool; check every row's values (as the table path does first).
        ``one_step``: every row is in step 0, whose statistics are taken here (else None);
        ``keyed``: every row's step is its key (in key order), whose statistics are taken here by key."""
        from .formats._batch import CHUNK_BYTES

        # blocks of at most 16 MB: a parsed block takes several times its size while it is converted
        scan = self.reader.open(
            self.path, chunk_bytes=min(self.settings.chunk_bytes, CHUNK_BYTES), options=self.settings
        )
        raw = None
        have: dict[str, bool] | None = None
        stats: dict[int, StepStats] = {}
        for b in scan.batches():
            if not len(b):
                continue
            if have is None:  # the columns the format has are kept; the others read back as zeros
                have = {k: getattr(b, k) is not None for k in OPTIONAL}
                raw = Spool(RAW, zeros=[k for k, v in have.items() if not v], counting=("line",))
            check_rows(self.path, b.start_ns, b.latency_s, b.line, scan.relative)
            z = np.zeros(len(b), np.int64)
            c = dict(start_ns=b.start_ns, latency_s=b.latency_s,
                     status=b.status if have["status"] else z, ok=b.ok if have["ok"] else z.astype(bool),
                     key=b.key if have["key"] else z, line=b.line if have["line"] else z)  # fmt: skip
            if have["name"]:
                c["name"] = b.name.astype(np.int32, copy=False)
            raw.append(own=True, **c)  # (the batch's arrays are not used after this pass)
            if one_step:
                _tally_one(stats.setdefault(0, StepStats()), c, failed_rows(c, have), have)
            elif keyed:
                _tally(stats, c["key"], c, failed_rows(c, have), have)
        if raw is None or raw.n == 0:
            if raw is not None:
                raw.close()
            raise HeadroomError(f"{self.path}: no requests (the file has a header but no data rows)")
        _release_arrow_memory()
        return scan, raw, have, stats if one_step or keyed else None

    def _prepare(self):
        """Steps found, every row's step, accounting per step (once)."""
        if self._done is not None:
            return self._done
        from .formats._plans import plan_for

        one_step = self.reader.one_step and not self.settings.steps
        keyed = self.reader.keyed and not self.settings.steps and not one_step
        scan, raw, have, stats = self._spool(one_step, keyed)
        keys = OneStepKeys(have) if one_step else None if keyed else Spool(KEYS)
        try:
            plan = plan_for(scan, raw, self.settings, have, self.reader)
            if keyed:  # the steps are the keys in order: each key's rank, no pass over the rows
                rank = plan.ranks()
                keys = KeyedSteps(have, rank)
                stats = {int(rank[k]): v for k, v in stats.items()}
            elif not one_step:
                stats = assign_steps(raw, plan, have, keys)
            found = plan.found()
            errors_known = have["ok"] or have["status"]
            self._done = _finish(self.path, scan, found, (stats, raw, keys), errors_known, self.settings)
            self._done.names = tuple(scan.names) if have["name"] else None
        except BaseException:
            raw.close()
            if keys is not None:
                keys.close()
            raise
        return self._done

    # ---------------------------------------------------------------- the source interface

    def spans(self) -> Partial:
        """Accounting and the span of every step."""
        d = self._prepare()
        acc = d.partial()
        for k, s in d.stats.items():
            if s.kept:
                acc.steps[k] = StepPart(s.t0 + d.shift, s.t1 + d.shift, s.kept)
        return acc

    def reduce(self, frames: dict[int, Frame] | None = None) -> Partial:
        """Reduce every step in its own frame, or in ``frames``."""
        d = self._prepare()
        acc = d.partial()
        if frames is None:
            frames = {}
            for k in range(d.n_steps):
                st = d.stats.get(k)
                kept = st is not None and st.kept
                frames[k] = Frame(st.t0 + d.shift, st.t1 + d.shift, st.kept) if kept else Frame(0, 0, 0)
        else:
            acc.step_errors, acc.warnings = None, []
        acc.steps = bucket_spooled(d, frames, self.settings)
        if d.names and len(d.names) == 1:  # every request of one name: its steps are the name's
            from .endpoints import counts_of_steps

            acc.endpoints = counts_of_steps(d.names[0], acc.steps, d.n_steps, d.step_errors)
        elif d.names:  # one more pass over the rows: every (step, name)'s requests
            from .endpoints import count_endpoints

            acc.endpoints = count_endpoints(d.rows(("latency_s", "name")), list(d.names), d.n_steps)
        if getattr(self.settings, "keep_requests", False):
            acc.rows = d.kept_rows()
        return acc

    def close(self) -> None:
        if self._done is not None:
            self._done.raw.close()
            self._done.keys.close()


def _release_arrow_memory() -> None:
    """Give the memory Arrow's pool kept from the parsed blocks back to the system: the passes after
    the parse allocate with numpy, and would otherwise add their peak to the pool's (tens of MB)."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


@dataclass
class Prepared:
    """A prepared file: its steps, their statistics, the spooled rows and their steps (``raw``, ``keys``:
    open until the source is closed), the accounting and warnings, the shift of relative times."""

    path: Path
    fmt: str
    n_steps: int
    stats: dict
    raw: Spool
    keys: Spool | OneStepKeys  # every row's step
    step_errors: np.ndarray | None
    codes: dict
    warnings: list
    conc: tuple | None
    rates: tuple | None
    shift: int
    names: tuple[str, ...] | None = None  # request names of the rows' ``name`` codes (None: no names)

    def partial(self) -> Partial:
        return Partial(str(self.path), self.fmt, self.n_steps,
                       step_errors=None if self.step_errors is None else self.step_errors.copy(),
                       error_codes=dict(self.codes), warnings=list(self.warnings), step_concurrency=self.conc,
                       step_rates=self.rates, failures_said=True)  # fmt: skip

    def rows(self, names: tuple[str, ...]):
        """The spooled rows, chunk by chunk, with every row's step key (see :data:`KEYS`)."""
        return _rows(self.raw, self.keys, names)

    def kept_rows(self) -> dict[int, list]:
        """Every step's kept requests, {step: [(start ns, latency s)]}, in file order (times shifted)."""
        parts = [(c["start_ns"][m], c["latency_s"][m], key[m])
                 for c, key in self.rows(("start_ns", "latency_s")) if (m := key >= 0).any()]  # fmt: skip
        if not parts:
            return {}
        st, lat, key = (np.concatenate(x) for x in zip(*parts))
        order = np.argsort(key, kind="stable")
        st, lat, key = st[order] + np.int64(self.shift), lat[order], key[order]
        cuts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        ends = np.r_[cuts[1:], len(key)]
        return {int(key[a]): [(st[a:b], lat[a:b])] for a, b in zip(cuts, ends)}


class OneStepKeys:
    """The steps of the rows of a file that is one step (see :data:`KEYS`): 0, or -2 for a failed row,
    computed from the row as it is read back (nothing spooled)."""

    def __init__(self, have: dict):
        self.have = have
        self.needs = ("ok",) if have["ok"] else ("status",) if have["status"] else ()

    def of(self, c: dict) -> np.ndarray:
        if not self.needs:
            return np.zeros(len(c["start_ns"]), np.int32)
        return np.where(failed_rows(c, self.have), np.int32(-2), np.int32(0))

    def close(self) -> None:
        pass


class KeyedSteps:
    """The steps of the rows of a file whose key is its step (``Reader.keyed``): the key's rank
    (``rank[key]``), -2 - rank for a failed row, computed from the row as it is read back."""

    def __init__(self, have: dict, rank: np.ndarray):
        self.have, self.rank = have, np.asarray(rank, np.int32)
        self.needs = ("key", *(("ok",) if have["ok"] else ("status",) if have["status"] else ()))

    def of(self, c: dict) -> np.ndarray:
        step = self.rank[c["key"]]
        if len(self.needs) == 1:
            return step
        return np.where(failed_rows(c, self.have), np.int32(-2) - step, step)

    def close(self) -> None:
        pass


def _rows(raw: Spool, keys, names: tuple[str, ...]):
    if isinstance(keys, OneStepKeys | KeyedSteps):
        for c in raw.chunks(tuple(dict.fromkeys(("start_ns", *names, *keys.needs)))):
            yield c, keys.of(c)
        return
    cur = Cursor(keys, ("step",))
    for c in raw.chunks(names):
        yield c, cur.take(len(c[names[0]]))["step"]


def bucket_spooled(d: Prepared, frames: dict[int, Frame], settings) -> dict[int, StepPart]:
    """Every step of a prepared file bucketed in ``frames``, in one pass over its kept rows."""
    from .reduce import bucket_steps

    shift = np.int64(d.shift)

    def kept():
        for c, key in d.rows(("start_ns", "latency_s")):
            m = key >= 0
            if m.all():
                yield (c["start_ns"] + shift if shift else c["start_ns"]), c["latency_s"], key
            elif m.any():
                yield c["start_ns"][m] + shift, c["latency_s"][m], key[m]

    return bucket_steps(kept, frames, bucket_ns=settings.bucket_ns, min_partial=settings.min_partial,
                        where=str(d.path))  # fmt: skip


def failed_rows(c: dict, have: dict) -> np.ndarray:
    if have["ok"]:
        return ~c["ok"]
    if have["status"]:
        s = c["status"]
        return (s < 200) | (s > 299)
    return np.zeros(len(c["start_ns"]), bool)


def plausible_step(path: Path, s: StepStats, rows, shift: int, quartiles=None) -> None:
    """:func:`check_plausible` on a step: from its statistics, or (a long step) from its start quartiles
    (``quartiles()``, a :class:`StartQuartiles`, when given: the rows are gathered only to name a bad
    one), else from its rows
    (``rows()``: start ns and latency s of all of them, and ``line_of(i)``, the file line of the i-th)."""
    if s.hi - s.lo < SPAN_TOLERANCE_S * 1e9 - 4096 and s.max_lat <= SPAN_TOLERANCE_S:
        lo, hi = s.lo + shift, s.hi + shift
        if lo >= MIN_TIME_NS and hi < MAX_TIME_NS:
            return
    elif quartiles is not None and MIN_TIME_NS <= s.lo + shift and s.hi + shift < MAX_TIME_NS:
        # check_plausible's verdict from the quartiles and the extremes (the same arithmetic): first
        # from the bins that hold them (passed at the worst values in those bins: the exact
        # quartiles pass too), else from the exact quartiles
        q = quartiles()
        (_, q25_hi), mid_range, (q75_lo, _) = q.bounds()
        if _far_ok(s, shift, q25_hi, mid_range, q75_lo):
            return
        q25, mid, q75 = q.exact()
        if _far_ok(s, shift, q25, (mid, mid), q75):
            return
    st, lat, line_of = rows()
    check_plausible(path, st + np.int64(shift) if shift else st, lat, line_of)


def _far_ok(s: StepStats, shift: int, q25: int, mid: tuple[int, int], q75: int) -> bool:
    """No start of the step far from the median (``mid``: the median, or the range it lies in: the
    farthest of it is taken), nor a latency beyond the tolerance, by :func:`check_plausible`'s
    arithmetic."""
    tol_ns = max(SPAN_TOLERANCE_S * 1e9, SPAN_TOLERANCE_IQR * float(q75 - q25))
    ends = (float(s.lo + shift), float(s.hi + shift))
    far = max(abs(e - float(m + shift)) for e in ends for m in mid)
    return far <= tol_ns and s.max_lat <= tol_ns / 1e9


class StartQuartiles:
    """The 25th, 50th and 75th percentiles (``inverted_cdf``: the ``ceil(n p)``-th smallest) of the start
    times of the rows of step ``k`` (``s``: its statistics): each known to within a bin of ``2**shift``
    ns after one pass over the spool (a histogram of the starts, :meth:`bounds`), exactly after a
    second pass over the rows of the three bins that hold them (:meth:`exact`; memory: the histogram
    and those rows)."""

    def __init__(self, raw: Spool, keys, k: int, s: StepStats):
        self.raw, self.keys, self.k, self.s = raw, keys, k, s
        self.ranks = [max(int(np.ceil(s.n * p)) - 1, 0) for p in (0.25, 0.5, 0.75)]
        self.shift = ((s.hi - s.lo) >> 16).bit_length()  # bins of 2**shift ns: at most 65536 of them
        counts = np.zeros(((s.hi - s.lo) >> self.shift) + 1, np.int64)
        for st in _step_starts(raw, keys, k):
            counts += np.bincount((st - s.lo) >> self.shift, minlength=len(counts))
        self.cum = np.cumsum(counts)
        self.bins = [int(np.searchsorted(self.cum, r, side="right")) for r in self.ranks]

    def bounds(self) -> list[tuple[int, int]]:
        """The lowest and highest value each of the three can have (ns)."""
        lo, hi, sh = self.s.lo, self.s.hi, self.shift
        return [(max(lo + (b << sh), lo), min(lo + ((b + 1) << sh) - 1, hi)) for b in self.bins]

    def exact(self) -> tuple[int, int, int]:
        inside: dict[int, list] = {b: [] for b in self.bins}
        for st in _step_starts(self.raw, self.keys, self.k):
            b = (st - self.s.lo) >> self.shift
            for j in inside:
                inside[j].append(st[b == j])
        out = []
        for r, b in zip(self.ranks, self.bins):
            vals = np.sort(np.concatenate(inside[b]))
            out.append(int(vals[r - (int(self.cum[b - 1]) if b else 0)]))
        return out[0], out[1], out[2]


def step_quartiles(raw: Spool, keys, k: int, s: StepStats) -> tuple[int, int, int]:
    """The exact start quartiles of step ``k`` (:class:`StartQuartiles`)."""
    return StartQuartiles(raw, keys, k, s).exact()


def _step_starts(raw: Spool, keys, k: int):
    """The start times of the rows of step ``k`` (kept or failed), chunk by chunk."""
    for c, key in _rows(raw, keys, ("start_ns",)):
        m = (key == k) | (key == -2 - k)
        yield c["start_ns"] if m.all() else c["start_ns"][m]


def step_rows(raw: Spool, keys, k: int):
    """Start ns and latency s of every row of step ``k`` (kept or failed), gathered from the spool, and
    ``line_of(i)``: the file line of its i-th row (the lines are gathered only for a message)."""
    parts = []
    for c, key in _rows(raw, keys, ("start_ns", "latency_s")):
        m = (key == k) | (key == -2 - k)
        if m.all():  # a chunk all of this step: its columns as they are
            parts.append((c["start_ns"], c["latency_s"]))
        elif m.any():
            parts.append((c["start_ns"][m], c["latency_s"][m]))

    def line_of(i: int) -> int | None:
        lines = [c["line"][(key == k) | (key == -2 - k)] for c, key in _rows(raw, keys, ("line",))]
        return int(np.concatenate(lines)[i]) or None

    st, lat = (np.concatenate(x) for x in zip(*parts))
    return st, lat, line_of


def _finish(path: Path, scan, found, split, errors_known: bool, settings) -> Prepared:
    """Checks, failed requests, anchoring and the warnings, in the order the table path gives them."""
    stats, raw, keys = split
    warnings = list(found.warnings)
    check_shift = MIN_TIME_NS if scan.relative else 0
    for k in sorted(stats):
        plausible_step(path, stats[k], lambda k=k: step_rows(raw, keys, k), check_shift,
                       lambda k=k: StartQuartiles(raw, keys, k, stats[k]))  # fmt: skip
    n_steps = max(len(found.names), max(stats, default=-1) + 1, 1)
    step_errors, codes = None, {}
    if errors_known:
        step_errors, codes = failed_accounting(path, stats, n_steps, warnings)
    shift = 0
    if scan.relative:
        shift = _anchor(path, stats, settings.base_time_ns, warnings)
    if len(found.names) <= 1 and not settings.steps:
        warnings.append(f"{path}: one step ({found.source}); --steps DURATION or --steps T1,T2,... cuts it")
    conc, rates = found.concurrency, found.rates
    if settings.concurrency is not None:
        from .tables import stated_concurrency

        conc = stated_concurrency(str(path), settings.concurrency, n_steps, conc, rates, warnings)
    return Prepared(path, scan.fmt, n_steps, stats, raw, keys, step_errors, codes, warnings,
                 tuple(conc) if conc is not None else None, tuple(rates) if rates is not None else None,
                 shift)  # fmt: skip


def failed_accounting(where, stats: dict, n_steps: int, warnings: list) -> tuple[np.ndarray, dict]:
    """Failed requests per step and by code; all failed refused, some said in a warning (naming ``where``)."""
    step_errors, codes = np.zeros(n_steps, np.int64), {}
    for k, s in stats.items():
        step_errors[k] = s.failed
        add_codes(codes, s.codes)
    errors, n = int(step_errors.sum()), sum(s.n for s in stats.values())
    codes = dict(sorted(codes.items()))
    if errors:
        if errors == n:
            raise all_failed(where, n, codes)
        warnings.append(failed_warning(where, errors, n, codes))
    return step_errors, codes


def _anchor(path: Path, stats: dict, base_time_ns: int | None, warnings: list) -> int:
    """The base of relative times: ``--hey-start`` or the file's modification time at the run's end."""
    from .formats.hey import anchor_warning

    if base_time_ns is None:
        base_time_ns = mtime_base(path, max(s.end for s in stats.values()))
        warnings.append(anchor_warning(path, "relative start times"))
    check_base(path, base_time_ns, warnings)
    return int(base_time_ns)

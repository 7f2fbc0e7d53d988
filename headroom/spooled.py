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
from .reduce import Frame, Partial, StepPart, bucket_step
from .spool import Spool

RAW = {"start_ns": np.int64, "latency_s": np.float64, "status": np.int64, "ok": np.bool_, "key": np.int64,
       "line": np.int64}  # fmt: skip
STEP = {"start_ns": np.int64, "latency_s": np.float64, "failed": np.bool_, "line": np.int64}


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
        self.n += len(st)
        self.lo = _min(self.lo, int(st.min()))
        self.hi = _max(self.hi, int(st.max()))
        self.max_lat = max(self.max_lat, float(np.max(lat)))
        self.end = _max(self.end, int((st + np.rint(lat * 1e9).astype(np.int64)).max()))
        keep = ~failed
        self.failed += int(failed.sum())
        if keep.any():
            s, la = st[keep], lat[keep]
            self.kept += len(s)
            self.t0 = _min(self.t0, int(s.min()))
            self.t1 = _max(self.t1, int((s + np.rint(la * 1e9).astype(np.int64)).max()))


def _min(a, b):
    return b if a is None else min(a, b)


def _max(a, b):
    return b if a is None else max(a, b)


class SpoolSource:
    """One request file of a non-CSV format, read once, reduced step by step from spools."""

    def __init__(self, path: Path, settings, fmt: str):
        self.path, self.settings, self.fmt = Path(path), settings, fmt
        self._done = None

    # ---------------------------------------------------------------- the passes

    def _spool(self):
        """Parse the file into a spool; check every row's values (as the table path does first)."""
        from .formats import scan_file
        from .formats._batch import CHUNK_BYTES

        # blocks of at most 16 MB: a parsed block takes several times its size while it is converted
        scan = scan_file(self.path, self.fmt, min(self.settings.chunk_bytes, CHUNK_BYTES))
        raw = Spool(RAW)
        have: dict[str, bool] | None = None
        for b in scan.batches():
            if not len(b):
                continue
            if have is None:
                have = {k: getattr(b, k) is not None for k in ("status", "ok", "key", "line")}
            check_rows(self.path, b.start_ns, b.latency_s, b.line, scan.relative)
            z = np.zeros(len(b), np.int64)
            raw.append(start_ns=b.start_ns, latency_s=b.latency_s,
                       status=b.status if have["status"] else z, ok=b.ok if have["ok"] else z.astype(bool),
                       key=b.key if have["key"] else z, line=b.line if have["line"] else z)  # fmt: skip
        if raw.n == 0:
            raw.close()
            raise HeadroomError(f"{self.path}: no requests (the file has a header but no data rows)")
        return scan, raw, have

    def _prepare(self):
        """Steps found, every row's step, accounting per step, one spool per step (once)."""
        if self._done is not None:
            return self._done
        from .formats import FORMATS
        from .formats._plans import plan_for

        scan, raw, have = self._spool()
        try:
            plan = plan_for(scan, raw, self.settings, have, FORMATS[self.fmt])
            stats, spools = self._split(raw, plan, have)
        finally:
            raw.close()
        found = plan.found()
        errors_known = have["ok"] or have["status"]
        self._done = _finish(self.path, scan, found, (stats, spools), errors_known, self.settings)
        return self._done

    def _split(self, raw: Spool, plan, have):
        """Every row's step; failed rows counted; each step's rows to its spool."""
        stats: dict[int, StepStats] = {}
        spools: dict[int, Spool] = {}
        for c in raw.chunks(tuple(RAW)):
            sid = plan.assign(c)
            failed = _failed(c, have)
            order = np.argsort(sid, kind="stable")  # the rows of each step together, in file order
            srt = sid[order]
            cuts = np.flatnonzero(srt[1:] != srt[:-1]) + 1
            for rows in np.split(order, cuts):
                k = int(sid[rows[0]]) if len(rows) else -1
                if k < 0:
                    continue
                st, lat, fl, ln = c["start_ns"][rows], c["latency_s"][rows], failed[rows], c["line"][rows]
                s = stats.setdefault(k, StepStats())
                s.add(st, lat, fl)
                if fl.any():
                    codes = c["status"][rows][fl] if have["status"] else np.full(int(fl.sum()), -1, np.int64)
                    add_codes(s.codes, failed_codes(codes))
                if k not in spools:
                    spools[k] = Spool(STEP)
                spools[k].append(start_ns=st, latency_s=lat, failed=fl, line=ln)
        return stats, spools

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
        s = self.settings
        for k in range(d.n_steps):
            if frames is not None and k not in frames:
                continue
            st = d.stats.get(k)
            if frames is not None:
                fr = frames[k]
            elif st is None or not st.kept:
                fr = Frame(0, 0, 0)
            else:
                fr = Frame(st.t0 + d.shift, st.t1 + d.shift, st.kept)
            acc.steps[k] = bucket_step(lambda k=k: d.kept(k), fr, bucket_ns=s.bucket_ns,
                                       min_partial=s.min_partial, where=str(self.path), step=k)  # fmt: skip
        if frames is not None:
            acc.step_errors, acc.warnings = None, []
        return acc

    def close(self) -> None:
        if self._done is not None:
            for sp in self._done.spools.values():
                sp.close()


@dataclass
class _Done:
    """A prepared file: its steps, their statistics and spools, the shift of relative times."""

    path: Path
    fmt: str
    n_steps: int
    stats: dict
    spools: dict
    step_errors: np.ndarray | None
    codes: dict
    warnings: list
    conc: tuple | None
    rates: tuple | None
    shift: int

    def partial(self) -> Partial:
        return Partial(str(self.path), self.fmt, self.n_steps,
                       step_errors=None if self.step_errors is None else self.step_errors.copy(),
                       error_codes=dict(self.codes), warnings=list(self.warnings), step_concurrency=self.conc,
                       step_rates=self.rates, failures_said=True)  # fmt: skip

    def kept(self, k: int):
        """(start ns, latency s) batches of step ``k``'s kept rows, times anchored."""
        sp = self.spools.get(k)
        if sp is None:
            return
        for c in sp.chunks(("start_ns", "latency_s", "failed")):
            keep = ~c["failed"]
            yield c["start_ns"][keep] + np.int64(self.shift), c["latency_s"][keep]


def _failed(c: dict, have: dict) -> np.ndarray:
    if have["ok"]:
        return ~c["ok"]
    if have["status"]:
        s = c["status"]
        return (s < 200) | (s > 299)
    return np.zeros(len(c["start_ns"]), bool)


def _plausible(path: Path, k: int, s: StepStats, spool: Spool, shift: int) -> None:
    """:func:`check_plausible` on a step: from its statistics, or (a long step) from its spool."""
    if s.hi - s.lo < SPAN_TOLERANCE_S * 1e9 - 4096 and s.max_lat <= SPAN_TOLERANCE_S:
        lo, hi = s.lo + shift, s.hi + shift
        if lo >= MIN_TIME_NS and hi < MAX_TIME_NS:
            return
    st, lat, ln = spool.column("start_ns"), spool.column("latency_s"), spool.column("line")
    check_plausible(path, st + np.int64(shift), lat, lambda i: int(ln[i]) or None)


def _finish(path: Path, scan, found, split, errors_known: bool, settings) -> _Done:
    """Checks, failed requests, anchoring and the warnings, in the order the table path gives them."""
    stats, spools = split
    warnings = list(found.warnings)
    n = sum(s.n for s in stats.values())
    check_shift = MIN_TIME_NS if scan.relative else 0
    for k in sorted(stats):
        _plausible(path, k, stats[k], spools[k], check_shift)
    n_steps = max(len(found.names), max(stats, default=-1) + 1, 1)
    step_errors, codes = None, {}
    if errors_known:
        step_errors = np.zeros(n_steps, np.int64)
        for k, s in stats.items():
            step_errors[k] = s.failed
            add_codes(codes, s.codes)
        errors = int(step_errors.sum())
        if errors:
            codes = dict(sorted(codes.items()))
            if errors == n:
                raise all_failed(path, n, codes)
            warnings.append(failed_warning(path, errors, n, codes))
    shift = 0
    if scan.relative:
        shift = _anchor(path, stats, settings.base_time_ns, warnings)
    if len(found.names) <= 1 and not settings.steps:
        warnings.append(f"{path}: one step ({found.source}); --steps DURATION or --steps T1,T2,... cuts it")
    conc, rates = found.concurrency, found.rates
    if settings.concurrency is not None:
        from .tables import stated_concurrency

        conc = stated_concurrency(str(path), settings.concurrency, n_steps, conc, rates, warnings)
    return _Done(path, scan.fmt, n_steps, stats, spools, step_errors, codes, warnings,
                 tuple(conc) if conc is not None else None, tuple(rates) if rates is not None else None,
                 shift)  # fmt: skip


def _anchor(path: Path, stats: dict, base_time_ns: int | None, warnings: list) -> int:
    """The base of relative times: ``--hey-start`` or the file's modification time at the run's end."""
    from .formats.hey import anchor_warning

    if base_time_ns is None:
        base_time_ns = mtime_base(path, max(s.end for s in stats.values()))
        warnings.append(anchor_warning(path, "relative start times"))
    check_base(path, base_time_ns, warnings)
    return int(base_time_ns)

"""The sources of a run's request files: each reads one file (or a folder of one file per step) and
reduces its steps into a :class:`~headroom.reduce.Partial`.

:class:`CsvSource` streams a throughputramp or hey-fork CSV (absolute start
times) section by section in bounded memory; :class:`HeySource` spools hey's
relative offsets first; :class:`StepFilesSource` reads a folder of one file
per step in sequence; every other format is a
:class:`~headroom.spooled.SpoolSource`.  :func:`source_for` picks one for a
file.  How several sources of a run combine is :mod:`headroom.reading`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .endpoints import NameCodes
from .formats._common import short
from .formats._scan import Progress
from .formats.hey import relative_offsets
from .formats.throughputramp import Chunk, CsvFile
from .model import HeadroomError
from .options import ReadOptions
from .reduce import (
    Frame,
    Partial,
    StepPart,
    accept,
    bucket_step,
    span_of,
)
from .runfolder import RunFiles
from .spool import Cursor, Spool
from .spooled import (
    KEYS,
    OPTIONAL,
    RAW,
    Prepared,
    SpoolSource,
    StepStats,
    assign_steps,
    failed_accounting,
    failed_rows,
    plausible_step,
)


@dataclass(frozen=True)
class ReadSettings:
    """How to read and reduce (the reading options of :func:`reduce_run`)."""

    bucket_s: float = 1.0
    min_partial: float = 0.5
    skip_bad_rows: bool = False
    chunk_bytes: int = 64 << 20
    progress: bool | None = None
    base_time_ns: int | None = None
    format: str | None = None
    steps: str | None = None
    concurrency: tuple[int, ...] | None = None  # a stated plan (--concurrency)
    keep_requests: bool = False  # every kept request too (load_run), in Partial.rows
    name: str | None = None  # only the requests of this name (--name)

    @property
    def bucket_ns(self) -> int:
        return int(round(self.bucket_s * 1e9))

    @classmethod
    def of(cls, options: ReadOptions, **how) -> ReadSettings:
        """The settings of reading with ``options`` (:class:`~headroom.options.ReadOptions`) and ``how``."""
        from .tables import parse_concurrency

        plan_c = parse_concurrency(options.concurrency) if options.concurrency is not None else None
        return cls(skip_bad_rows=options.skip_bad_rows, base_time_ns=options.hey_start_ns, format=options.format,
                   steps=options.steps, concurrency=plan_c, name=options.name, **how)  # fmt: skip


class CsvSource:
    """A throughputramp or hey-fork CSV (absolute start times), streamed section by section.

    ``sections=(a, b)`` restricts it to sections ``a`` to ``b - 1`` (one task
    of a file split across a cluster).  Sections are parsed in pieces of at
    most :attr:`PIECE_BYTES` (``chunk_bytes`` when smaller), on a second
    thread one piece ahead of the reduction (pyarrow spreads a piece's
    blocks over its own threads; a second parsing thread measured no
    faster, and 10-25 MB larger), and a step of several pieces is reduced in
    one pass (:func:`~headroom.reduce.bucket_stream`): memory is a few
    pieces and the histograms, whatever the size of a step or a file.
    """

    #: Bytes parsed at once (a piece and its columns take a few times this).
    PIECE_BYTES = 4 << 20
    #: Pieces parsed ahead of the one being reduced, and threads parsing them.
    AHEAD = 1
    WORKERS = 1

    def __init__(self, path: Path, settings: ReadSettings, sections: tuple[int, int] | None = None):
        self.path, self.settings, self.range = Path(path), settings, sections
        self.named_seen = [0, 0]  # --name: rows read and kept

    def _open(self, progress=None) -> CsvFile:
        return CsvFile(self.path, skip_bad_rows=self.settings.skip_bad_rows, stream=True, progress=progress)

    def _steps(self, f: CsvFile) -> range:
        a, b = self.range or (0, len(f.sections))
        return range(a, min(b, len(f.sections)))

    def _piece_bytes(self) -> int:
        return max(1, min(self.settings.chunk_bytes, self.PIECE_BYTES))

    def _partial(self, f: CsvFile) -> Partial:
        last = self._steps(f).stop == len(f.sections)  # file-level warnings once, with the last section
        errs = np.zeros(len(f.sections), np.int64) if f.layout.status_col else None
        return Partial(str(self.path), f.layout.kind, len(f.sections), step_errors=errs,
                       warnings=list(f.warnings) if last else [],
                       rows={} if self.settings.keep_requests else None)  # fmt: skip

    def _accepted(self, chunks, k: int, acc: Partial, record: bool, names: NameTally | None = None):
        if self.settings.name is not None:
            chunks = self._named(chunks)
        for c in chunks:
            if record:
                acc.skipped.extend(c.bad_rows)
            if names is not None and c.name is not None:
                names.add(k, c)
            yield accept(acc, k, c.start_ns, c.latency_s, c.status, None, c.line_of, record=record)

    def _named(self, chunks):
        """``--name``: the rows of one request name (headroom ramp's request-name column) only."""
        name = self.settings.name
        for c in chunks:
            if c.name is None:
                raise HeadroomError(
                    f"{self.path}: --name: this CSV has no request-name column (headroom ramp writes one "
                    "for a generator that names its requests: --engine locust)"
                )
            if isinstance(c.name, list):
                keep = np.array([n == name for n in c.name], bool)
            else:
                col = c.name.combine_chunks() if hasattr(c.name, "combine_chunks") else c.name
                vals = col.dictionary.to_pylist()
                keep = (NameCodes(list(vals)).of_dictionary(col) == vals.index(name)) if name in vals else \
                    np.zeros(len(col), bool)  # fmt: skip
            self.named_seen[0] += len(keep)
            self.named_seen[1] += int(keep.sum())
            if keep.any():
                yield Chunk(c.start_ns[keep], c.latency_s[keep], None if c.status is None else c.status[keep],
                            c.bad_rows, lambda i: None, None)  # fmt: skip

    def _batches(self, f: CsvFile, k: int, acc: Partial, record: bool):
        """Step ``k`` parsed again, piece by piece (a second pass)."""
        return self._accepted(f.chunks_of(k, self._piece_bytes()), k, acc, record)

    def _parsed(self, f: CsvFile, ks: list[int]):
        """``(k, pieces, its parsed chunks)`` for every step of ``ks``, parsed ahead on a thread.

        A step's chunks come from one stream shared by all steps: what the
        caller leaves unread is skipped before the next step.
        """
        piece = self._piece_bytes()

        def jobs():
            for k in ks:
                rs, s = f.ranges(k, piece), f.sections[k][0]
                for cs, ce in rs:
                    yield len(rs), cs, ce, cs == s

        stream = f.parsed(jobs(), self.AHEAD, self.WORKERS)
        left = 0

        def rest(first):
            nonlocal left
            yield first
            while left:
                left -= 1
                yield next(stream)[1]

        try:
            for k in ks:
                n, first = next(stream)
                left = n - 1
                yield k, n, rest(first)
                while left:
                    left -= 1
                    next(stream)
        finally:
            stream.close()

    def spans(self, keep: KeptSteps | None = None) -> Partial:
        """Accounting and the span of every step (a first pass, for aligning several files);
        with ``keep``, every step's accepted rows kept there as they were parsed."""
        with self._open() as f:
            acc = self._partial(f)
            steps = self._parsed(f, [k for k in self._steps(f) if not f.is_empty(k)])
            try:
                for k, _, chunks in steps:
                    batches = self._accepted(chunks, k, acc, True)
                    fr = span_of(batches if keep is None else keep.tee(k, batches))
                    acc.steps[k] = StepPart(fr.t0, fr.t1, fr.n)
                    f.buf.done_with(*f.sections[k])
            finally:
                steps.close()  # its parsing threads end before the file closes
            return acc

    def reduce(self, frames: dict[int, Frame] | None = None) -> Partial:
        """Reduce every step: in its own frame (accounting too), or in ``frames`` (no accounting)."""
        from .reduce import bucket_batch, bucket_stream

        s = self.settings
        opts = dict(bucket_ns=s.bucket_ns, min_partial=s.min_partial, where=str(self.path))
        with self._open(s.progress) as f:
            acc = self._partial(f)
            prog = Progress(self.path, len(f.buf.data), s.progress)
            ks = [k for k in self._steps(f) if not f.is_empty(k) and (frames is None or k in frames)]
            steps = self._parsed(f, ks)
            names = NameTally() if frames is None and f.layout.name_col else None
            try:
                for k, pieces, chunks in steps:
                    batches = self._accepted(chunks, k, acc, frames is None, names)
                    if acc.rows is not None:
                        batches = kept_rows(acc.rows.setdefault(k, []), batches)
                    if frames is not None:
                        part = bucket_step(lambda b=batches: b, frames[k], step=k, **opts)
                    elif pieces == 1:
                        got = list(batches)
                        if not got:  # --name: no request of that name in the step
                            continue
                        st, lat = got[0]
                        part = bucket_batch(st, lat, step=k, **opts)
                    else:  # one pass; again in the frame found when the first piece did not hold the start
                        part, fr = bucket_stream(batches, step=k, **opts)
                        if part is None:
                            part = bucket_step(
                                lambda k=k: self._batches(f, k, acc, False), fr, step=k, **opts
                            )
                    acc.steps[k] = part
                    f.buf.done_with(*f.sections[k])
                    prog.update(f.sections[k][1])
            finally:
                steps.close()  # its parsing threads end before the file closes
            prog.close()
            if self.settings.name is not None:
                self._name_said(acc)
            if frames is not None:
                acc.step_errors, acc.warnings = None, []
            if names is not None:
                acc.endpoints = names.counts(len(f.sections))
            return acc

    def _name_said(self, acc: Partial) -> None:
        seen, kept = self.named_seen
        name = self.settings.name
        if seen and not kept:
            raise HeadroomError(
                f"{self.path}: --name {short(name, 60)}: no request of that name in this file"
            )
        acc.warnings.append(f"{self.path}: --name {short(name, 60)}: {kept:,} of its {seen:,} requests")

    def close(self) -> None:
        """Nothing to free: a streamed file keeps nothing between its passes."""

    def spans_kept(self) -> tuple[Partial, KeptSteps]:
        """:meth:`spans`, and the rows it parsed kept (a :class:`KeptSteps`) to reduce without parsing again."""
        kept = KeptSteps(str(self.path), self.settings)
        try:
            acc = self.spans(kept)
        except BaseException:
            kept.close()
            raise
        kept.kind, kept.n_steps = acc.kind, acc.n_steps
        return acc, kept


class NameTally:
    """Every step's rows by request name as a CSV of headroom ramp is read (its request-name column)."""

    def __init__(self):
        self.codes = NameCodes([])
        self.parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []

    def add(self, k: int, c) -> None:
        code = self.codes.of_values(c.name) if isinstance(c.name, list) else self.codes.of_dictionary(c.name)
        s = c.status
        failed = np.zeros(len(code), bool) if s is None else (s < 200) | (s > 299)
        self.parts.append((np.full(len(code), k, np.int64), code.astype(np.int64), c.latency_s, failed))

    def counts(self, n_steps: int):
        from .endpoints import count_endpoints

        rows = (
            ({"latency_s": lat, "name": code}, np.where(bad, -2 - step, step))
            for step, code, lat, bad in self.parts
        )
        return count_endpoints(rows, self.codes.names, n_steps)


def kept_rows(into: list, batches):
    """``batches`` of (start ns, latency s) passed on, each kept in ``into``."""
    for st, lat in batches:
        into.append((st, lat))
        yield st, lat


#: The columns :class:`KeptSteps` keeps of a step's accepted rows.
KEPT = {"start_ns": np.int64, "latency_s": np.float64}


class KeptSteps:
    """A CSV file's accepted rows as its first pass parsed them (a spool, about 16 bytes a request), batch
    by batch: :meth:`reduce` gives what :meth:`CsvSource.reduce` gives in ``frames``, without parsing."""

    def __init__(self, source: str, settings: ReadSettings):
        self.source, self.settings = source, settings
        self.kind, self.n_steps = "", 0
        self.rows = Spool(KEPT)
        self.batches: dict[int, list[int]] = {}  # step -> its batches' lengths, in file order

    def tee(self, k: int, batches):
        """``batches`` of step ``k`` passed on, each kept."""
        sizes = self.batches.setdefault(k, [])
        for st, lat in batches:
            self.rows.append(start_ns=st, latency_s=lat)
            sizes.append(len(st))
            yield st, lat

    def reduce(self, frames: dict[int, Frame]) -> Partial:
        """Every kept step of ``frames`` bucketed in its frame, from the same batches (no accounting)."""
        s = self.settings
        acc = Partial(self.source, self.kind, self.n_steps)
        cur = Cursor(self.rows, tuple(KEPT))
        for k in sorted(self.batches):  # rows were kept in step order
            it = _replayed(cur, self.batches[k])
            if k in frames:
                acc.steps[k] = bucket_step(lambda it=it: it, frames[k], bucket_ns=s.bucket_ns,
                                           min_partial=s.min_partial, where=self.source, step=k)  # fmt: skip
            for _ in it:  # what the step left unread
                pass
        return acc

    def close(self) -> None:
        self.rows.close()


def _replayed(cur: Cursor, sizes: list[int]):
    """Batches of the given lengths read from ``cur``, as (start ns, latency s)."""
    for m in sizes:
        if m == 0:
            yield np.zeros(0, np.int64), np.zeros(0)
        else:
            b = cur.take(m)
            yield b["start_ns"], b["latency_s"]


class HeySource(SpoolSource):
    """A hey CSV with relative offsets, spooled (:class:`~headroom.spooled.SpoolSource`) in bounded
    memory: its sections are its steps, with the accounting, anchoring and warnings of
    hey's CSV always had (a whole file read section by section gives the same)."""

    def __init__(self, path: Path, settings: ReadSettings, reader):
        super().__init__(path, settings, reader)

    def _prepare(self):
        if self._done is not None:
            return self._done
        from .formats import hey
        from .formats._batch import CHUNK_BYTES

        s = self.settings
        scan = self.reader.open(self.path, chunk_bytes=min(s.chunk_bytes, CHUNK_BYTES), options=s)
        raw, have = _spool_rows(scan)
        keys = Spool(KEYS)
        try:
            if raw.n == 0:
                raise hey.no_requests(self.path, scan.side["kind"])
            plan = self.reader.plan(scan, raw)
            stats = assign_steps(raw, plan, have, keys)
            self._done = _hey_done(self.path, scan, plan.found(), (stats, raw, keys), s)
        except BaseException:
            raw.close()
            keys.close()
            raise
        return self._done


def _spool_rows(scan):
    """Every batch of a hey scan in a spool of :data:`~headroom.spooled.RAW` columns; (spool, columns had)."""
    have = {"status": scan.side["status"], "ok": False, "key": True, "line": False, "name": False}
    raw = Spool(RAW, zeros=[k for k, v in have.items() if not v])
    for b in scan.batches():
        z = np.zeros(len(b), np.int64)
        raw.append(start_ns=b.start_ns, latency_s=b.latency_s, status=b.status if have["status"] else z,
                   ok=z.astype(bool), key=b.key, line=z)  # fmt: skip
    return raw, have


def _hey_done(path: Path, scan, found, split, s: ReadSettings):
    """Failed requests (non-2xx left out, counted per section), anchoring and warnings of a hey file."""
    from .formats import hey
    from .tables import stated_concurrency

    stats, raw, keys = split
    warnings, n_steps = list(found.warnings), len(found.names)
    step_errors, codes = None, {}
    if scan.side["status"]:
        step_errors, codes = failed_accounting(path, stats, n_steps, warnings)
    shift = 0
    if scan.relative:
        end = max(st.t1 for st in stats.values() if st.kept)  # the kept rows' last response
        shift = hey.anchor_base(path, end, s.base_time_ns, warnings, hey.RELATIVE)
        if scan.side["runs"] > 1:
            warnings.append(hey.appended_warning(path, scan.side["runs"]))
    conc = None
    if s.concurrency is not None:
        conc = stated_concurrency(str(path), s.concurrency, n_steps, None, None, warnings)
    return Prepared(path, scan.side["kind"], n_steps, stats, raw, keys, step_errors, codes, warnings, conc,
                    None, shift)  # fmt: skip


class StepFilesSource(SpoolSource):
    """A folder of one request file per step (oha, k6, vegeta ...), spooled file by file in bounded memory.

    Every file's rows are its step (``--steps`` cuts the whole run instead);
    relative times are placed one after another.  Files, concurrency or
    rates from their names, failed requests, anchoring and warnings are
    those of :func:`headroom.tables.read_step_files` (the whole-table reader
    of :func:`headroom.load_run`); a damaged value is named by its file and line.
    """

    def __init__(self, files: RunFiles, settings: ReadSettings, reader):
        super().__init__(files.perf, settings, reader)
        self.files = files

    def _prepare(self):
        if self._done is not None:
            return self._done
        from .formats._plans import CutPlan

        raw, keys = Spool(RAW, zeros=() if named(self.reader) else ("name",)), Spool(KEYS)
        try:
            joined = _join_files(self.files, self.reader, self.settings, raw)
            if raw.n == 0:
                raise HeadroomError(
                    f"{self.files.perf.parent}: no requests (the file has a header but no data rows)"
                )
            plan = CutPlan(raw, self.settings.steps) if self.settings.steps else _FilePlan()
            stats = assign_steps(raw, plan, joined.have, keys)
            self._done = _step_files_done(
                self.files, self.fmt, joined, plan, (stats, raw, keys), self.settings
            )
            self._done.names = tuple(joined.names) if named(self.reader) else None
        except BaseException:
            raw.close()
            keys.close()
            raise
        return self._done


class _FilePlan:
    """Every row in its file's step (the ``key`` of the joined spool)."""

    def assign(self, c: dict) -> np.ndarray:
        return c["key"]


@dataclass
class _Joined:
    """What reading the files of a folder one after another learned."""

    warnings: list
    have: dict
    relative: bool
    conc: list | None
    rates: list | None
    names: list  # request names of the joined rows' ``name`` codes


def named(reader) -> bool:
    """Whether a format's rows carry request names (its scan takes ``--name``)."""
    return "name" in reader.scan_options


def _join_files(files: RunFiles, reader, s: ReadSettings, raw) -> _Joined:
    """Every file spooled into ``raw`` (``key``: its step), relative times placed after the previous file's."""
    from .tables import file_rates, relative_files_warning, step_concurrency_from_names

    warnings, shift, spans = [], 0, []
    have = {"status": False, "ok": False, "key": True, "line": True, "name": named(reader)}
    relative = False
    codes = NameCodes([])
    for i, path in enumerate(files.steps):
        st, relative = _spool_file(path, reader, s, (shift, i, codes), raw, have, warnings)
        spans.append((st.lo or 0, st.hi or 0, st.n))
        if relative and st.n:
            shift = st.end
    if relative and len(files.steps) > 1:
        warnings.append(relative_files_warning(files))
    conc = step_concurrency_from_names(files.steps)
    rates = None if conc else file_rates(files, *zip(*spans), warnings)
    return _Joined(warnings, have, relative, conc, rates, codes.names)


def _spool_file(path: Path, reader, s: ReadSettings, where: tuple, raw, have: dict, warnings: list):
    """One file of a folder: its rows checked, its reader's warnings, its rows (``where``: times + shift,
    step ``key``, the run's request names) into ``raw``; (its statistics of all rows, whether its times are
    relative) returned."""
    from .formats._batch import CHUNK_BYTES
    from .formats._checks import MIN_TIME_NS
    from .formats._common import check_rows
    from .formats._plans import plan_for

    shift, key, codes = where
    scan = reader.open(path, chunk_bytes=min(s.chunk_bytes, CHUNK_BYTES), options=s)
    one, mine = Spool(RAW, zeros=() if have["name"] else ("name",)), None
    try:
        for b in scan.batches():
            if not len(b):
                continue
            mine = mine or {k: getattr(b, k) is not None for k in OPTIONAL}
            st = b.start_ns + np.int64(shift)
            check_rows(path, st, b.latency_s, b.line, scan.relative)
            z = np.zeros(len(b), np.int64)
            one.append(start_ns=st, latency_s=b.latency_s, status=b.status if mine["status"] else z - 1,
                       ok=b.ok if mine["ok"] else z.astype(bool), key=b.key if mine["key"] else z,
                       line=b.line if mine["line"] else z,
                       name=b.name if mine["name"] else z.astype(np.int32))  # fmt: skip
        stats = StepStats()
        if mine is None:  # no rows: the reader's own warnings
            warnings += scan.warnings
            return stats, scan.relative
        plan = plan_for(scan, one, dataclasses.replace(s, steps=None), mine, reader)
        lut = codes.of_values(scan.names if mine["name"] else [""]) if have["name"] else None
        for c in one.chunks(tuple(RAW)):
            plan.assign(c)  # the reader's notes count every row, as on its whole table
            failed = failed_rows(c, mine)
            stats.add(c["start_ns"], c["latency_s"], failed)
            raw.append(start_ns=c["start_ns"], latency_s=c["latency_s"], status=c["status"], ok=~failed,
                       key=np.full(len(failed), key, np.int64), line=c["line"],
                       **({"name": lut[c["name"]]} if lut is not None else {}))  # fmt: skip
        warnings += plan.found().warnings
        whole = lambda: (one.column("start_ns"), one.column("latency_s"),  # noqa: E731
                         lambda i: int(one.column("line")[i]) or None)  # fmt: skip
        plausible_step(path, stats, whole, MIN_TIME_NS if scan.relative else 0)
        have["status"] |= mine["status"]
        have["ok"] |= mine["ok"] or mine["status"]
        return stats, scan.relative
    finally:
        one.close()


def _step_files_done(files: RunFiles, fmt: str, j: _Joined, plan, split, s: ReadSettings):
    """Failed requests, anchoring and warnings as :func:`headroom.tables.table_to_requests` gives them."""
    from .formats import hey
    from .tables import stated_concurrency

    stats, raw, keys = split
    where, warnings = files.perf.parent, list(j.warnings)
    conc, rates, n_steps = j.conc, j.rates, len(files.steps)
    if s.steps:
        conc, rates, n_steps = None, None, len(plan.uniq)
    step_errors, codes = None, {}
    if j.have["ok"]:
        step_errors, codes = failed_accounting(where, stats, n_steps, warnings)
    base = 0
    if j.relative:  # anchored on every request (failed ones too), as the generators' own clocks ran
        end = max(st.end for st in stats.values())
        base = hey.anchor_base(where, end, s.base_time_ns, warnings, "relative start times")
    if s.concurrency is not None:
        conc = stated_concurrency(str(files.perf), s.concurrency, n_steps, conc, rates, warnings)
    return Prepared(files.perf, fmt, n_steps, stats, raw, keys, step_errors, codes, warnings,
                 tuple(conc) if conc is not None else None, tuple(rates) if rates is not None else None,
                 base)  # fmt: skip


def source_for(files: RunFiles, path: Path, s: ReadSettings):
    """The source that reads one request file."""
    from .formats import reader_for

    reader = reader_for(path, s.format)
    if s.name is not None and "name" not in reader.scan_options and reader.layout != "sections":
        raise _no_names(path, reader)
    if reader.layout == "sections":
        if s.steps:
            raise _steps_of_their_own(path)
        if relative_offsets(path):
            if s.name is not None:
                raise _no_names(path, reader)
            return HeySource(path, s, reader)
        return CsvSource(path, s)
    return SpoolSource(path, s, reader)


def _no_names(path: Path, reader) -> HeadroomError:
    names = [r.name for r in _readers() if "name" in r.scan_options]
    return HeadroomError(
        f"{path}: --name: {reader.tool} output holds no request names (read with names: {', '.join(names)})"
    )


def _readers():
    from .formats import FORMATS

    return FORMATS.values()


def _steps_of_their_own(path: Path) -> HeadroomError:
    return HeadroomError(
        f"{path}: --steps is for files without steps of their own; this file's sections are its steps"
    )

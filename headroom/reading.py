"""Reading a run: its request files -> partial reductions -> one reduced :class:`~headroom.model.Run`.

Every request file becomes a *source* through its format's reader
(:func:`headroom.formats.reader_for`): the streamed throughputramp/hey CSV
(:class:`CsvSource`, bounded memory), hey with relative offsets spooled
(:class:`HeySource`), the other formats spooled
(:class:`~headroom.spooled.SpoolSource`), or a folder of one file per step
(:class:`StepFilesSource`).  A source reduces its steps into a
:class:`~headroom.reduce.Partial`; partials add up.  Several files of one
run are either load generators of one ramp (their times overlap: steps
aligned on the wall clock, concurrency summed, histograms added, never
percentiles averaged) or one file per step (in sequence).  With
``keep_requests`` the sources keep every request as well (in
:attr:`Partial.rows`): that is :func:`headroom.load_run`.  With a Dask
``client`` the same sources run as tasks on the cluster and the result is
the same, bit for bit; there a load-generator file is parsed once
(:mod:`headroom.cluster`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .cluster import Kept
from .formats._checks import add_codes, all_failed, failed_warning, skipped_warning
from .formats._scan import Progress
from .formats.hey import relative_offsets
from .formats.throughputramp import CsvFile
from .model import HeadroomError, Requests, Run, RunMeta
from .options import ReadOptions
from .reduce import (
    RESOLUTION_S,
    Frame,
    Partial,
    StepPart,
    accept,
    add_step_parts,
    assemble,
    bucket_step,
    span_of,
)
from .runfolder import RunFiles, cpu_for, locate_run, read_metadata, run_label
from .spool import Cursor, Spool
from .spooled import (
    KEYS,
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

    def _accepted(self, chunks, k: int, acc: Partial, record: bool):
        for c in chunks:
            if record:
                acc.skipped.extend(c.bad_rows)
            yield accept(acc, k, c.start_ns, c.latency_s, c.status, None, c.line_of, record=record)

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
            try:
                for k, pieces, chunks in steps:
                    batches = self._accepted(chunks, k, acc, frames is None)
                    if acc.rows is not None:
                        batches = kept_rows(acc.rows.setdefault(k, []), batches)
                    if frames is not None:
                        part = bucket_step(lambda b=batches: b, frames[k], step=k, **opts)
                    elif pieces == 1:
                        (st, lat), *_ = batches
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
            if frames is not None:
                acc.step_errors, acc.warnings = None, []
            return acc

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
    have = {"status": scan.side["status"], "ok": False, "key": True, "line": False}
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

        raw, keys = Spool(RAW), Spool(KEYS)
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


def _join_files(files: RunFiles, reader, s: ReadSettings, raw) -> _Joined:
    """Every file spooled into ``raw`` (``key``: its step), relative times placed after the previous file's."""
    from .tables import file_rates, relative_files_warning, step_concurrency_from_names

    warnings, shift, spans = [], 0, []
    have = {"status": False, "ok": False, "key": True, "line": True}
    relative = False
    for i, path in enumerate(files.steps):
        st, relative = _spool_file(path, reader, s, shift, i, raw, have, warnings)
        spans.append((st.lo or 0, st.hi or 0, st.n))
        if relative and st.n:
            shift = st.end
    if relative and len(files.steps) > 1:
        warnings.append(relative_files_warning(files))
    conc = step_concurrency_from_names(files.steps)
    rates = None if conc else file_rates(files, *zip(*spans), warnings)
    return _Joined(warnings, have, relative, conc, rates)


def _spool_file(path: Path, reader, s: ReadSettings, shift: int, key: int, raw, have: dict, warnings: list):
    """One file of a folder: its rows checked, its reader's warnings, its rows (``key``, times + ``shift``)
    into ``raw``; (its statistics of all rows, whether its times are relative) returned."""
    from .formats._batch import CHUNK_BYTES
    from .formats._checks import MIN_TIME_NS
    from .formats._common import check_rows
    from .formats._plans import plan_for

    scan = reader.open(path, chunk_bytes=min(s.chunk_bytes, CHUNK_BYTES), options=s)
    one, mine = Spool(RAW), None
    try:
        for b in scan.batches():
            if not len(b):
                continue
            mine = mine or {k: getattr(b, k) is not None for k in ("status", "ok", "key", "line")}
            st = b.start_ns + np.int64(shift)
            check_rows(path, st, b.latency_s, b.line, scan.relative)
            z = np.zeros(len(b), np.int64)
            one.append(start_ns=st, latency_s=b.latency_s, status=b.status if mine["status"] else z - 1,
                       ok=b.ok if mine["ok"] else z.astype(bool), key=b.key if mine["key"] else z,
                       line=b.line if mine["line"] else z)  # fmt: skip
        stats = StepStats()
        if mine is None:  # no rows: the reader's own warnings
            warnings += scan.warnings
            return stats, scan.relative
        plan = plan_for(scan, one, dataclasses.replace(s, steps=None), mine, reader)
        for c in one.chunks(tuple(RAW)):
            plan.assign(c)  # the reader's notes count every row, as on its whole table
            failed = failed_rows(c, mine)
            stats.add(c["start_ns"], c["latency_s"], failed)
            raw.append(start_ns=c["start_ns"], latency_s=c["latency_s"], status=c["status"], ok=~failed,
                       key=np.full(len(failed), key, np.int64), line=c["line"])  # fmt: skip
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


# --------------------------------------------------------------------------
# planning: which sources, and how their partials combine


def source_for(files: RunFiles, path: Path, s: ReadSettings):
    """The source that reads one request file."""
    from .formats import reader_for

    reader = reader_for(path, s.format)
    if s.name is not None and "name" not in reader.scan_options:
        raise _no_names(path, reader)
    if reader.layout == "sections":
        if s.steps:
            raise _steps_of_their_own(path)
        return HeySource(path, s, reader) if relative_offsets(path) else CsvSource(path, s)
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


def candidates(files: RunFiles, s: ReadSettings) -> tuple[str, list]:
    """("one", [source]) for one file (or a folder of one file per step); for several, ("csv" |
    "spooled", a source per file): load generators when their times overlap, else steps."""
    from .formats import reader_for

    if not files.steps or len(files.steps) == 1:
        return "one", [source_for(files, files.request_files[0], s)]
    files = read_together(files, s)
    if len(files.steps) == 1:
        return "one", [source_for(files, files.steps[0], s)]
    readers = [reader_for(p, s.format) for p in files.steps]
    if any(r.name != readers[0].name for r in readers):
        k = next(i for i, r in enumerate(readers) if r.name != readers[0].name)
        raise HeadroomError(
            f"{files.steps[k]}: {readers[k].name}, but {files.steps[0].name} is {readers[0].name}: "
            "one format per run"
        )
    reader = readers[0]
    if s.name is not None and "name" not in reader.scan_options:
        raise _no_names(files.steps[0], reader)
    if reader.layout == "sections":
        if any(relative_offsets(p) for p in files.steps):
            from .tables import csv_family_folder

            raise csv_family_folder(files.steps[0])
        return "csv", [CsvSource(p, s) for p in files.steps]
    if reader.one_file_per_step:  # relative times, or starts to the second: one file per step
        return "one", [StepFilesSource(files, s, reader)]
    return "spooled", [SpoolSource(p, s, reader) for p in files.steps]


def read_together(files: RunFiles, s: ReadSettings) -> RunFiles:
    """A folder's files without those its reader reads with another of them (``Reader.read_with``)."""
    from dataclasses import replace

    from .formats import reader_for

    given = {Path(p).resolve() for p in files.steps}
    kept = []
    for p in files.steps:
        with_ = reader_for(p, s.format).read_with
        other = with_(Path(p)) if with_ is not None else None
        if other is None or other.resolve() not in given:
            kept.append(p)
    if len(kept) == len(files.steps):
        return files
    return replace(files, perf=kept[0], steps=tuple(kept) if len(kept) > 1 else ())


def plan(files: RunFiles, s: ReadSettings) -> tuple[str, list]:
    """("one", [source]) for one file; ("generators" | "several", sources) for several (the spooled
    formats' spans read here, in this process)."""
    mode, sources = candidates(files, s)
    if mode == "csv":
        return "several", sources
    if mode == "spooled":
        if not overlapping([t.spans() for t in sources]):
            for t in sources:
                t.close()
            return "one", [StepFilesSource(read_together(files, s), s, sources[0].reader)]
        return "generators", sources
    return mode, sources


def overlapping(spans: list[Partial]) -> bool:
    """Whether the files' time spans overlap (load generators of one ramp) rather than follow each other."""
    sp = [p.span() for p in spans]
    if any(x is None for x in sp):
        return False
    sp.sort()
    return all(sp[i + 1][0] < sp[i][1] for i in range(len(sp) - 1))


def align(spans: list[Partial]) -> tuple[list[dict[int, int]], list[Frame]]:
    """Steps of several generators matched on the wall clock: (file step -> run step per file, frames).

    Steps with the same index are matched when every generator has as many
    steps and they overlap; else steps are grouped by overlapping spans.
    """
    n = spans[0].n_steps
    if all(p.n_steps == n for p in spans) and all(_same_time(spans, k) for k in range(n)):
        maps = [{k: k for k in range(n)} for _ in spans]
    else:
        maps = _group_by_time(spans)
    m = 1 + max((j for mp in maps for j in mp.values()), default=-1)
    frames = []
    for j in range(m):
        parts = [p.steps[k] for p, mp in zip(spans, maps) for k, jj in mp.items() if jj == j and k in p.steps]
        parts = [q for q in parts if q.n]
        frames.append(Frame(min((q.t0 for q in parts), default=0), max((q.t1 for q in parts), default=0),
                            sum(q.n for q in parts)))  # fmt: skip
    return maps, frames


def _same_time(spans: list[Partial], k: int) -> bool:
    parts = [p.steps[k] for p in spans if k in p.steps and p.steps[k].n]
    return all(a.t0 < b.t1 and b.t0 < a.t1 for a in parts for b in parts)


def _group_by_time(spans: list[Partial]) -> list[dict[int, int]]:
    items = sorted((q.t0, q.t1, i, k) for i, p in enumerate(spans) for k, q in p.steps.items() if q.n)
    maps: list[dict[int, int]] = [{} for _ in spans]
    j, end = -1, None
    for t0, t1, i, k in items:
        if end is None or t0 >= end:
            j, end = j + 1, t1
        end = max(end, t1)
        maps[i][k] = j
    return maps


# --------------------------------------------------------------------------
# running: locally or on a Dask cluster


def _spans(src) -> Partial:
    return src.spans()


def _reduce(src, frames=None) -> Partial:
    return src.reduce(frames)


class _Local:
    """Runs tasks in this process, in order (the same functions a cluster runs).

    A spooled file is parsed once (its source keeps its spool from its spans
    to its reduction); a CSV file is streamed twice (spans, then buckets),
    in bounded memory and no disk.
    """

    def map(self, fn, *iterables):
        return [fn(*args) for args in zip(*iterables)]

    def prepare(self, sources: list) -> Kept:
        kept = Kept(list(sources))
        try:
            kept.spans = [src.spans() for src in sources]
        except BaseException:
            self.release(kept)
            raise
        return kept

    def reduce(self, kept: Kept, frames: list[dict]) -> list:
        return [src.reduce(fr) for src, fr in zip(kept.sources, frames)]

    def release(self, kept: Kept) -> None:
        for src in kept.sources:
            if isinstance(src, SpoolSource):
                src.close()


def _union(partials: list[Partial]) -> Partial:
    """Partials of disjoint steps of one file (sections split across tasks) as one."""
    out = dataclasses.replace(partials[0], steps={}, warnings=[], skipped=[], error_codes={})
    if out.step_errors is not None:
        out.step_errors = np.zeros(out.n_steps, np.int64)
    out.rows = None if partials[0].rows is None else {}
    for p in partials:
        out.steps.update(p.steps)
        if out.rows is not None:
            out.rows.update(p.rows)
        out.warnings += p.warnings
        out.skipped += p.skipped
        add_codes(out.error_codes, p.error_codes)
        if p.step_errors is not None:
            out.step_errors += p.step_errors
    return out


def _one(src, runner) -> Partial:
    if not isinstance(runner, _Local) and isinstance(src, CsvSource):
        with CsvFile(src.path, stream=True) as f:
            n = len(f.sections)
        pieces = [CsvSource(src.path, src.settings, (k, k + 1)) for k in range(n)]
        return _union(runner.map(_reduce, pieces))
    return runner.map(_reduce, [src])[0]


def generators(kept: Kept, runner) -> Partial:
    """Load generators of one ramp (read once by ``runner.prepare``): steps aligned, then every file
    reduced in the shared frames."""
    spans = kept.spans
    maps, frames = align(spans)
    per_file = [{k: frames[j] for k, j in mp.items()} for mp in maps]
    reduced = runner.reduce(kept, per_file)
    out = _merged_accounting(spans, maps, len(frames))
    for j, fr in enumerate(frames):
        parts = [
            r.steps[k] for r, mp in zip(reduced, maps) for k, jj in mp.items() if jj == j and k in r.steps
        ]
        out.steps[j] = add_step_parts(parts, fr)
    if reduced and reduced[0].rows is not None:  # every file's rows of the step, in file order
        out.rows = {j: [x for r, mp in zip(reduced, maps) for k, jj in sorted(mp.items()) if jj == j
                        for x in r.rows.get(k, [])] for j in range(len(frames))}  # fmt: skip
    out.warnings.append(
        f"{out.source}: {len(spans)} files whose times overlap are read as load generators of one ramp "
        f"({len(frames)} steps aligned on the wall clock, "
        f"{'histograms added' if out.rows is None else 'requests concatenated'})"
    )
    return out


def _merged_accounting(spans: list[Partial], maps: list[dict[int, int]], m: int) -> Partial:
    """The generators' warnings, failed requests, concurrency and rates, on the run's ``m`` steps."""
    first = spans[0]
    out = Partial(first.source, first.kind, m, failures_said=first.failures_said)
    out.step_errors = None if first.step_errors is None else np.zeros(m, np.int64)
    conc: list | None = [0] * m
    for p, mp in zip(spans, maps):
        out.warnings += p.warnings
        out.skipped += p.skipped
        add_codes(out.error_codes, p.error_codes)
        for k, j in mp.items():
            if out.step_errors is not None and p.step_errors is not None:
                out.step_errors[j] += p.step_errors[k]
            c = p.step_concurrency[k] if p.step_concurrency is not None else None
            conc = None if conc is None or c is None else conc
            if conc is not None:
                conc[j] += c
    out.step_concurrency = tuple(conc) if conc is not None else None
    out.step_rates = summed_rates(spans, maps, m)
    return out


def summed_rates(spans: list[Partial], maps: list[dict[int, int]], m: int) -> tuple | None:
    """Rate steps of load generators of one ramp: every step's planned and sent rates added up,
    dropped work added, behind when any generator fell behind (None when a file has no rates)."""
    if any(p.step_rates is None for p in spans):
        return None
    parts: list[list[dict]] = [[] for _ in range(m)]
    for p, mp in zip(spans, maps):
        for k, j in mp.items():
            if k < len(p.step_rates):
                parts[j].append(p.step_rates[k])

    def total(rs, key):
        vals = [r.get(key) for r in rs]
        return None if not vals or any(v is None for v in vals) else sum(vals)

    out = []
    for rs in parts:
        behind = [r.get("fell_behind") for r in rs]
        out.append({"intended_rps": total(rs, "intended_rps"), "sent_rps": total(rs, "sent_rps"),
                    "dropped": total(rs, "dropped"),
                    "fell_behind": True if True in behind else (False if behind and all(b is False for b in behind)
                                                               else None)})  # fmt: skip
    return tuple(out)


def _sequence(sources: list, runner) -> Partial:
    """Files that follow each other: each file's steps after the previous file's."""
    parts = runner.map(_reduce, sources)
    order = sorted(range(len(parts)), key=lambda i: parts[i].span() or (0, 0))
    parts = [parts[i] for i in order]
    out = Partial(parts[0].source, parts[0].kind, sum(p.n_steps for p in parts))
    out.step_errors = None if parts[0].step_errors is None else np.zeros(out.n_steps, np.int64)
    out.rows = None if parts[0].rows is None else {}
    base = 0
    for p in parts:
        if out.rows is not None:
            out.rows.update({base + k: q for k, q in p.rows.items()})
        out.warnings += p.warnings
        out.skipped += p.skipped
        add_codes(out.error_codes, p.error_codes)
        out.steps.update({base + k: q for k, q in p.steps.items()})
        if out.step_errors is not None and p.step_errors is not None:
            out.step_errors[base : base + p.n_steps] = p.step_errors
        base += p.n_steps
    return out


def runner_for(client):
    """Where tasks run: this process, or the cluster of a Dask ``client``."""
    if client is None:
        return _Local()
    from .cluster import DaskRunner

    return DaskRunner(client)


def reduce_partial(files: RunFiles, settings: ReadSettings, client=None) -> Partial:
    """Reduce every request file of a run into one partial (on ``client``'s cluster when given)."""
    runner = runner_for(client)
    mode, sources = candidates(files, settings)
    if mode == "one":
        return _one(sources[0], runner)
    kept = runner.prepare(sources)
    try:
        if overlapping(kept.spans):
            return generators(kept, runner)
    finally:
        runner.release(kept)
    if mode == "spooled":  # files that follow each other: one file per step
        return _one(StepFilesSource(read_together(files, settings), settings, sources[0].reader), runner)
    return _sequence(sources, runner)


def reduce_run(
    path,
    *,
    bucket_s: float = 1.0,
    min_partial: float = 0.5,
    label: str | None = None,
    cpu_cores: float | None = None,
    skip_bad_rows: bool = False,
    chunk_bytes: int = 64 << 20,
    progress: bool | None = None,
    base_time_ns: int | None = None,
    format: str | None = None,
    steps: str | None = None,
    concurrency: str | None = None,
    client=None,
    telemetry=None,
    options: ReadOptions | None = None,
    keep_requests: bool = False,
) -> Run:
    """Read a run of any size, reduced to per-bucket latency histograms.

    Throughputramp and hey-fork files are streamed section by section (a
    section longer than ``chunk_bytes`` in chunks, in two passes: its span,
    then its buckets), with memory bounded by the chunk and the histograms;
    other formats are parsed whole, then reduced the same way.  Several
    request files (a list, or a folder of them) whose times overlap are load
    generators of one ramp; files that follow each other are steps.

    Parameters
    ----------
    path
        A run folder, a request file, a file prefix such as ``runs/x/old_``,
        or a list of request files.
    bucket_s, min_partial
        The bucket rule (:mod:`headroom.aggregate`).
    label, cpu_cores, skip_bad_rows, base_time_ns, format, steps
        As for :func:`headroom.load_run`.
    concurrency
        A stated plan for a file that does not carry it (a hey ramp, ``--steps``):
        ``"1:40:3"`` or ``"1,2,4,8"``, one level per step (else a one-line error).
    chunk_bytes
        Bytes of a section parsed at once.
    progress
        A progress line on stderr (default: on a terminal, for reads over 2 s).
    client
        A ``dask.distributed.Client`` (or its address): reduce the files (or
        a file's sections) as tasks on that cluster; the result is identical.
    telemetry
        A :class:`headroom.telemetry.PromSource`: the server's CPU and memory from
        Prometheus over the run's load window, instead of the run folder's files.
    options
        The reading options whole (:class:`headroom.options.ReadOptions`): when given,
        they replace ``cpu_cores``, ``skip_bad_rows``, ``base_time_ns``, ``format``,
        ``steps`` and ``concurrency``.
    keep_requests
        Keep every request too (what :func:`headroom.load_run` does).

    Returns
    -------
    Run
        With ``reduced`` (a :class:`~headroom.reduce.ReducedRun`), and ``requests``
        when ``keep_requests`` (else None).
    """
    kept = reduced_file(path)
    if kept is not None:
        return _kept_run(kept, bucket_s, label)
    if options is None:
        options = ReadOptions(cpu_cores, skip_bad_rows, base_time_ns, format, steps, concurrency)
    files = locate_run(path)
    fields = read_metadata(files.meta) if files.meta else {}
    settings = ReadSettings.of(options, bucket_s=bucket_s, min_partial=min_partial, chunk_bytes=chunk_bytes,
                               progress=progress, keep_requests=keep_requests)  # fmt: skip
    files = read_together(files, settings)
    if isinstance(client, str):
        with _connect(client) as c:
            p = reduce_partial(files, settings, c)
    else:
        p = reduce_partial(files, settings, client)
    return run_from_partial(p, files, fields, settings, label=label, cpu_cores=options.cpu_cores,
                            telemetry=telemetry)  # fmt: skip


#: the name of a run folder's reduced form (headroom.reduce.save_run), read when the folder
#: keeps no request file
REDUCED_NAME = "reduced.npz"


def reduced_file(path) -> Path | None:
    """A reduced run to read instead of request files: ``path`` itself when it is a ``.npz`` file,
    or a folder's ``reduced.npz`` when the folder holds no ``perfResults.csv[.gz]``."""
    if isinstance(path, (list, tuple)):
        return None
    p = Path(path)
    if p.suffix == ".npz" and p.is_file():
        return p
    if p.is_dir() and (p / REDUCED_NAME).is_file():
        if not any((p / n).exists() for n in ("perfResults.csv", "perfResults.csv.gz")):
            return p / REDUCED_NAME
    return None


def _kept_run(path: Path, bucket_s: float, label: str | None) -> Run:
    import dataclasses

    from .reduce import load_run_file

    run = load_run_file(path)
    kept = run.reduced.buckets.bucket_s
    if abs(kept - bucket_s) > 1e-9:
        raise HeadroomError(
            f"{path}: a reduced run kept at {kept:g} s buckets, not {bucket_s:g} s: read the request "
            "files for other buckets"
        )
    if label is not None:
        run = dataclasses.replace(run, meta=dataclasses.replace(run.meta, label=label))
    return run


def _connect(address: str):
    """A Dask client of the scheduler at ``address``, or a one-line error."""
    try:
        from distributed import Client
    except ImportError:
        raise HeadroomError(
            "--dask needs the dask extra: python3 -m pip install 'headroom-plot[dask]'"
        ) from None
    try:
        return Client(address, timeout="10s")
    except (OSError, TimeoutError, ValueError) as e:
        raise HeadroomError(
            f"--dask {address}: cannot reach the Dask scheduler ({str(e).splitlines()[0]})"
        ) from None


def run_from_partial(
    p: Partial, files: RunFiles, fields: dict, s: ReadSettings, *, label=None, cpu_cores=None, telemetry=None
) -> Run:
    """The reduced run: steps, buckets, histograms, CPU, failed requests and warnings."""
    from .telemetry.load import server_telemetry

    warnings = list(p.warnings)
    cpu, tel, fields = server_telemetry(
        files, fields, p, telemetry, lambda: cpu_for(files, fields, cpu_cores, warnings)
    )
    if tel is not None:
        warnings.extend(tel.warnings)
    errors = int(sum(p.error_codes.values()))
    total = sum(q.n for q in p.steps.values())
    if p.skipped:
        warnings.append(skipped_warning(Path(p.source), p.skipped))
    if errors and not p.failures_said:
        if total == 0:
            raise all_failed(p.source, errors, p.error_codes)
        warnings.append(failed_warning(p.source, errors, errors + total, p.error_codes))
    if total == 0 and not _died_at_once(fields, p.n_steps):
        raise HeadroomError(f"{p.source}: no requests (the file has a header but no data rows)")
    if p.rows is None and any(q.rounded for q in p.steps.values()):  # kept requests are analysed exactly
        warnings.append(
            f"{p.source}: latencies finer than 0.1 us (nanoseconds) are counted at "
            f"{RESOLUTION_S * 1e6:g} us resolution: percentiles and maxima to the nearest us, means exact"
        )
    conc = p.step_concurrency
    if s.concurrency is not None:
        from .tables import stated_concurrency

        conc = stated_concurrency(p.source, s.concurrency, p.n_steps, conc, p.step_rates, warnings)
    meta = RunMeta(label=label or run_label(fields, files.name), source=str(files.perf), fields=fields,
                   step_concurrency=conc, step_rates=p.step_rates)  # fmt: skip
    reduced = assemble(p.steps, p.n_steps, [meta.concurrency(k) for k in range(p.n_steps)], cpu, s.bucket_s)
    requests = kept_requests(p) if p.rows is not None else None
    run = Run(requests=requests, cpu=cpu, meta=meta, errors=errors, error_codes=dict(sorted(p.error_codes.items())),
              warnings=tuple(warnings), format=p.kind, reduced=reduced, step_errors=p.step_errors)  # fmt: skip
    from .telemetry import attach

    return attach(run, tel)


def _died_at_once(fields: dict, n_steps: int) -> bool:
    """headroom ramp's server stopped answering before it answered any request (step 1, no section):
    a run of no step, to which the analysis adds the step it died in (headroom.stopped)."""
    from .stopped import server_stop

    st = server_stop(fields)
    return n_steps <= 1 and st is not None and st.get("step") == 1


def kept_requests(p: Partial) -> Requests:
    """The requests a reduction kept (:attr:`Partial.rows`), step by step."""
    pieces = [p.rows.get(k, []) for k in range(p.n_steps)]
    counts = [sum(len(st) for st, _ in step) for step in pieces]
    offsets = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(np.int64)
    starts = [st for step in pieces for st, _ in step]
    lats = [lat for step in pieces for _, lat in step]
    return Requests(
        np.concatenate(starts).astype(np.int64, copy=False) if starts else np.zeros(0, np.int64),
        np.concatenate(lats).astype(np.float64, copy=False) if lats else np.zeros(0, np.float64),
        offsets,
    )

"""throughputramp ``perfResults.csv`` and hey's raw CSV: sections of ``start-time,response-time``.

Fidelity: exact per request (0.1 ms latencies), no status column (errors
unknown).  Every section starts with its own header line and is one load
step.  hey's CSV (``hey -o csv``) is the same family (see
:mod:`headroom.formats.hey`): its header has a ``status-code`` and an
``offset`` (relative) or, in the Cloud Foundry fork, a ``start-time``.

Parsing is pyarrow's, one ``read_csv`` per section (or per chunk of a
section longer than the chunk size) of a memory-mapped buffer; a slow
line-by-line pass runs only after pyarrow refused some bytes, to name the
offending line.  Line numbers are counted only for an error message.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from ..model import HeadroomError
from ._checks import MAX_OFFSET_S, check_finite
from ._scan import (
    BOM,
    HINT,
    TS_UTC,
    Buffer,
    chunks,
    diagnose,
    first_null,
    line_at,
    np_column,
    pool,
    prefetch,
    scan_lines,
    sections,
    short,
    truncated_tail,
    truncated_warning,
)

NAME = "throughputramp"
TOOL = "Cloud Foundry throughputramp (perfResults.csv)"
FIDELITY = "exact per request"
EXPORT = "throughputramp"
PERF_NAMES = ("perfResults.csv", "perfResults.csv.gz")
#: pyarrow's CSV block size (its default): the blocks of a chunk are parsed on pyarrow's threads.
BLOCK_BYTES = 1 << 20


def guess_can_open(head: bytes) -> bool:
    """A first line of exactly ``start-time,response-time``."""
    line = head.lstrip(BOM).split(b"\n", 1)[0].rstrip(b"\r")
    return [c.strip() for c in line.split(b",")] == [b"start-time", b"response-time"]


@dataclass(frozen=True)
class Layout:
    """Which columns a file of the family has."""

    kind: str  # "throughputramp", "hey", "hey-fork"
    columns: list[str]
    time_col: str  # "start-time" or "offset"
    status_col: str | None
    name_col: str | None = None  # "request-name": headroom ramp's requests of a generator that names them


#: the column of a request's name (an endpoint) that headroom ramp adds when its generator names requests
NAME_COL = "request-name"


def layout(header: bytes, path: Path) -> Layout:
    """The layout of a header line, or a one-line error."""
    cols = [c.strip() for c in header.decode("utf-8").split(",")]
    if "response-time" not in cols:
        raise HeadroomError(
            f"{path}:1: unexpected header '{short(header, 100)}': "
            "expected 'start-time,response-time' (throughputramp) or hey's CSV header"
        )
    status = "status-code" if "status-code" in cols else None
    if cols == ["start-time", "response-time"]:
        return Layout("throughputramp", cols, "start-time", None)
    if "start-time" in cols:
        return Layout("hey-fork", cols, "start-time", status, NAME_COL if NAME_COL in cols else None)
    if "offset" in cols:
        return Layout("hey", cols, "offset", status)
    raise HeadroomError(
        f"{path}:1: header has response-time but neither start-time nor offset: '{short(header, 100)}'"
    )


def _csv_options(lay: Layout):
    """(line checks, included columns, pyarrow options) for a layout."""
    types = {"response-time": pa.float64()}
    checks = {"response-time": "float"}
    if lay.time_col == "start-time":
        types["start-time"] = TS_UTC
        checks["start-time"] = "time"
    else:
        types["offset"] = pa.float64()
        checks["offset"] = "float"
    include = [lay.time_col, "response-time"]
    if lay.status_col:
        types[lay.status_col] = pa.int64()
        checks[lay.status_col] = "int"
        include.append(lay.status_col)
    if lay.name_col:
        types[lay.name_col] = pa.dictionary(pa.int32(), pa.string())
        include.append(lay.name_col)
    opts = (
        pacsv.ReadOptions(column_names=lay.columns, skip_rows=1, use_threads=True, block_size=BLOCK_BYTES),
        pacsv.ParseOptions(newlines_in_values=False, ignore_empty_lines=False),
        pacsv.ConvertOptions(
            column_types=types,
            include_columns=include,
            null_values=[""],
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        ),
    )
    return checks, include, opts


@dataclass
class Chunk:
    """Parsed rows of one byte range: start (ns, or relative ns for hey offsets), latency, status."""

    start_ns: np.ndarray
    latency_s: np.ndarray
    status: np.ndarray | None
    bad_rows: list  # (line, problem) of rows dropped by --skip-bad-rows
    line_of: object  # row -> line number (lazy; None when rows no longer match lines)
    name: object = None  # request names: a pyarrow dictionary column, or a list of str (None: no names)


class CsvFile:
    """An open throughputramp or hey CSV: its header, layout and sections (one per step).

    ``stream=True`` keeps a gzip file's decompressed bytes in a mapped
    temporary file instead of memory.  Use as a context manager.
    """

    def __init__(self, path: Path, *, skip_bad_rows: bool = False, stream: bool = True, progress=None):
        self.path = Path(path)
        self.skip_bad_rows = skip_bad_rows
        self.buf = Buffer(self.path, stream=stream, progress=progress)
        try:
            release = self.buf.done_with if stream else None
            self.header, _, secs = sections(self.buf.data, self.path, release=release)
            self.layout = layout(self.header, self.path)
            self.checks, self.include, self.opts = _csv_options(self.layout)
            self.warnings: list[str] = []
            self._lines = ([0], [1])  # byte offsets and their line numbers, counted so far (ascending)
            self._lines_lock = threading.Lock()
            self.sections = self._drop_truncated_tail(secs)
        except BaseException:
            self.buf.close()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Release the file's bytes."""
        self.buf.close()

    def _drop_truncated_tail(self, secs: list[tuple[int, int]]) -> list[tuple[int, int]]:
        raw, n = self.buf.raw, len(self.buf.data)
        cut = truncated_tail(raw, n)
        s, e = secs[-1]
        if cut is None or cut <= s:
            return secs
        end = len(bytes(raw[cut:n]).rstrip(b" \t"))
        self.warnings.append(
            truncated_warning(self.path, self.line_at(cut), end, bytes(raw[cut : cut + end]))
        )
        return [*secs[:-1], (s, cut - 1)]

    def line_at(self, offset: int) -> int:
        """1-based line number of a byte offset (for messages), counted from the nearest offset
        counted before: chunk after chunk of a file with bad rows costs one pass, not one each."""
        with self._lines_lock:
            offs, lines = self._lines
            i = bisect.bisect_right(offs, offset) - 1
            n = line_at(self.buf.data, offset, self.buf.done_with, offs[i]) - 1 + lines[i]
            if offs[i] != offset:
                offs.insert(i + 1, offset)
                lines.insert(i + 1, n)
            return n

    def is_empty(self, k: int) -> bool:
        """A section of a header and no rows (an empty step)."""
        s, e = self.sections[k]
        nl = self.buf.raw.find(b"\n", s, e)
        return nl < 0 or (e - nl < 64 and not bytes(self.buf.data[nl:e]).strip())

    def ranges(self, k: int, chunk_bytes: int) -> list[tuple[int, int]]:
        """Byte ranges of section ``k``, each about ``chunk_bytes`` (the first starts at its header)."""
        s, e = self.sections[k]
        return chunks(self.buf.raw, s, e, chunk_bytes, release=self.buf.done_with)

    def chunks_of(self, k: int, chunk_bytes: int) -> Iterator[Chunk]:
        """Parse section ``k`` chunk by chunk."""
        s = self.sections[k][0]
        for cs, ce in self.ranges(k, chunk_bytes):
            yield self.parse(cs, ce, first=cs == s)

    def parsed(self, jobs, ahead: int = 1, workers: int = 1) -> Iterator[tuple[object, Chunk]]:
        """``(key, chunk)`` for every ``(key, start, end, first)`` job, in order, up to ``ahead`` parsed
        ahead on ``workers`` threads."""
        return prefetch(lambda job: (job[0], self.parse(job[1], job[2], first=job[3])), jobs, ahead, workers)

    def parse(self, cs: int, ce: int, *, first: bool) -> Chunk:
        """Parse a byte range: a section from its header (``first``) or a continuation chunk."""
        if first:
            line0 = lambda: self.line_at(cs)  # noqa: E731
            arrow = self.buf.arrow_slice(cs, ce)
        else:  # give pyarrow the header again; the line before the chunk stands for it
            line0 = lambda: self.line_at(cs) - 1  # noqa: E731
            arrow = self.buf.arrow_slice(cs, ce, prefix=self.header + b"\n")
        data = memoryview(arrow)  # the same bytes, for the line-by-line diagnosis
        try:
            st, lat, code, name = self._parse_fast(data, line0, arrow)
        except HeadroomError:
            if not self.skip_bad_rows:
                raise
            st, lat, code, bad, name = self._parse_slow(data, line0())
            return Chunk(st, lat, code, bad, lambda i: None, name)
        return Chunk(st, lat, code, [], lambda i: line0() + 1 + i, name)

    def _parse_fast(self, data, header_line, arrow: pa.Buffer):
        """One pyarrow read of CSV bytes that start with a header line (``arrow``: the same bytes,
        Arrow-owned); errors name the first bad line."""
        read_opts, parse_opts, conv_opts = self.opts
        path, lay = self.path, self.layout
        try:
            table = pacsv.read_csv(
                pa.BufferReader(arrow),
                read_options=read_opts,
                parse_options=parse_opts,
                convert_options=conv_opts,
                memory_pool=pool(),
            )
        except pa.ArrowInvalid as exc:
            why = str(exc).splitlines()[0]
            raise diagnose(path, data, 0, len(data), header_line(), lay.columns, self.checks, why) from None
        for col in self.include:
            c = table.column(col)
            if c.null_count:
                raise HeadroomError(f"{path}:{header_line() + 1 + first_null(c)}: empty {col} value{HINT}")
        t = table.column(lay.time_col)
        if lay.time_col == "start-time":
            st = np_column(t, np.int64)
        else:
            st = _offsets_ns(np_column(t, np.float64), path, header_line)
        lat = np_column(table.column("response-time"), np.float64)
        check_finite(lat, path, header_line, "response-time", HINT)
        code = np_column(table.column(lay.status_col), np.int64) if lay.status_col else None
        return st, lat, code, table.column(lay.name_col) if lay.name_col else None

    def _parse_slow(self, data, line_no: int):
        """Line-by-line parse keeping good rows: (start, latency, status, bad rows)."""
        lay = self.layout
        times, lats, codes, bad, names = [], [], [], [], []
        ti, li = lay.columns.index(lay.time_col), lay.columns.index("response-time")
        si = lay.columns.index(lay.status_col) if lay.status_col else None
        ni = lay.columns.index(lay.name_col) if lay.name_col else None
        for ln, fields, problem in scan_lines(data, 0, len(data), line_no, lay.columns, self.checks):
            if problem is None:
                lat = float(fields[li])
                if not np.isfinite(lat):
                    problem = f"bad response-time {fields[li]!r} (must be a finite number >= 0)"
                elif lay.time_col == "offset" and not float(fields[ti]) <= MAX_OFFSET_S:
                    problem = f"bad offset '{short(fields[ti], 60)}' (more than {MAX_OFFSET_S:.0e} s after the start)"
            if problem:
                bad.append((ln, problem))
                continue
            times.append(fields[ti])
            lats.append(lat)
            if si is not None:
                codes.append(int(fields[si]))
            if ni is not None:
                names.append(fields[ni] if ni < len(fields) else "")
        if lay.time_col == "start-time":
            st = np_column(
                pa.chunked_array([pa.array(times, pa.string()).cast(TS_UTC)], type=TS_UTC), np.int64
            )
        else:
            st = np.rint(np.array([float(t) for t in times]) * 1e9).astype(np.int64)
        code = np.array(codes, dtype=np.int64) if si is not None else None
        return st, np.array(lats, dtype=np.float64), code, bad, names if ni is not None else None


def _offsets_ns(off: np.ndarray, path: Path, header_line) -> np.ndarray:
    """hey's relative offsets (s) as ns, refusing damaged values."""
    check_finite(off, path, header_line, "offset", HINT)
    big = off > MAX_OFFSET_S
    if big.any():
        i = int(np.argmax(big))
        raise HeadroomError(
            f"{path}:{header_line() + 1 + i}: bad offset {float(off[i]):.6g} s (more than "
            f"{MAX_OFFSET_S:.0e} s after the start: a damaged value){HINT}"
        )
    return np.rint(off * 1e9).astype(np.int64)

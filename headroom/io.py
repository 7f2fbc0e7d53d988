"""Every file headroom reads or writes goes through this module.

Readers for throughputramp run folders (``perfResults.csv[.gz]``,
``cpuStats.csv[.gz]``, ``metadata.yml``, also with the historic ``old_``
prefix) and for hey's raw CSV output.  Parsing is done by pyarrow, one
``read_csv`` per CSV section of a memory-mapped (or decompressed) buffer; a
slow line-by-line pass runs only after pyarrow rejected a section, to name
the offending line.
"""

from __future__ import annotations

import gzip
import json
import mmap
import os
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from .model import CpuSamples, HeadroomError, Requests, Run, RunMeta

_BOM = b"\xef\xbb\xbf"
_TS_UTC = pa.timestamp("ns", tz="UTC")

_PERF_NAMES = ("perfResults.csv", "perfResults.csv.gz")
_CPU_NAMES = ("cpuStats.csv", "cpuStats.csv.gz")
_META_NAMES = ("metadata.yml", "metadata.yaml")

# RFC 3339 as Go writes it: 0-9 fractional digits, "Z" or a numeric offset.
_RFC3339_RE = re.compile(
    r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d{1,9})?(Z|[+-](\d\d):(\d\d))$", re.ASCII
)
# Go's Time.String(): "2016-12-15 15:00:47.575579693 -0800 PST [m=+0.001]".
_GO_STRING_RE = re.compile(
    r"^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d(?:\.\d{1,9})?) ([+-]\d\d)(\d\d)(?: [A-Za-z0-9+-]+)?(?: m=[+-]\d+(?:\.\d+)?)?$"
)
_FLOAT_RE = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


# --------------------------------------------------------------------------
# locating the files of a run


@dataclass(frozen=True)
class RunFiles:
    """The files that make up one run."""

    perf: Path
    cpu: Path | None
    meta: Path | None
    name: str  # folder name (or file stem) used as the fallback label
    steps: tuple[Path, ...] = ()  # a folder of one request file per step (then perf is the first)


_NOT_STEPS = re.compile(r"^(cpuStats|generatorCpuStats|metadata|README|\.)", re.IGNORECASE)


def _step_files(folder: Path) -> list[Path]:
    """Request files of a folder with one file per step (vegeta, k6, JMeter, Gatling, oha), in natural order."""
    files = [f for f in folder.iterdir() if f.is_file() and not _NOT_STEPS.match(f.name)]

    def natural(f: Path):
        return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", f.name)]

    return sorted(files, key=natural)


def _step_concurrency_from_names(paths) -> list[int | None] | None:
    """``c4``, ``conc-4``, ``concurrency_4`` in every file name gives that step's concurrency."""
    out = []
    for f in paths:
        m = re.search(r"(?:^|[^a-z])c(?:onc(?:urrency)?)?[-_]?(\d+)", f.stem.lower())
        if not m:
            return None
        out.append(int(m[1]))
    return out


def _first_existing(folder: Path, prefix: str, names: tuple[str, ...]) -> Path | None:
    for n in names:
        p = folder / (prefix + n)
        if p.is_file():
            return p
    return None


def locate_run(path: str | os.PathLike) -> RunFiles:
    """Find the request, CPU and metadata files for ``path``.

    ``path`` may be a run folder, a ``perfResults.csv[.gz]`` file (with or
    without a prefix such as ``old_``), a file prefix such as
    ``runs/x/old_``, or any other CSV file (hey output).
    """
    p = Path(path)
    if p.is_dir():
        for pre in ("", "old_"):
            if all((p / (pre + n)).is_file() for n in _PERF_NAMES):
                raise HeadroomError(
                    f"{p}: both {pre}perfResults.csv and {pre}perfResults.csv.gz: which one is the run? "
                    "remove or rename the other (or give the file itself)"
                )
        perf = _first_existing(p, "", _PERF_NAMES)
        prefix = ""
        if perf is None:
            perf = _first_existing(p, "old_", _PERF_NAMES)
            prefix = "old_"
        if perf is None:
            steps = _step_files(p)
            if steps:
                return RunFiles(
                    steps[0], _first_existing(p, "", _CPU_NAMES), _first_existing(p, "", _META_NAMES),
                    p.resolve().name, steps,
                )  # fmt: skip
            raise HeadroomError(
                f"{p}: no perfResults.csv or perfResults.csv.gz in this folder "
                "(nor old_perfResults.csv): is this a throughputramp run folder?"
            )
        return RunFiles(
            perf,
            _first_existing(p, prefix, _CPU_NAMES),
            _first_existing(p, prefix, _META_NAMES),
            p.resolve().name,
        )
    if p.is_file():
        folder = p.parent
        for n in _PERF_NAMES:
            if p.name.endswith(n):
                prefix = p.name[: -len(n)]
                name = folder.resolve().name + (f"/{prefix.rstrip('_')}" if prefix else "")
                return RunFiles(
                    p,
                    _first_existing(folder, prefix, _CPU_NAMES),
                    _first_existing(folder, prefix, _META_NAMES),
                    name,
                )
        stem = p.name.split(".")[0]
        return RunFiles(p, None, None, stem)
    # a common file prefix such as runs/x/old_
    folder, prefix = p.parent, p.name
    perf = _first_existing(folder, prefix, _PERF_NAMES) if folder.is_dir() else None
    if perf is not None:
        return RunFiles(
            perf,
            _first_existing(folder, prefix, _CPU_NAMES),
            _first_existing(folder, prefix, _META_NAMES),
            folder.resolve().name + f"/{prefix.rstrip('_')}",
        )
    raise HeadroomError(f"{p}: no such file or folder")


# --------------------------------------------------------------------------
# raw bytes


class _Buffer:
    """The bytes of a file: memory-mapped when plain, decompressed when gzipped."""

    def __init__(self, path: Path):
        self.path = path
        self._mmap = None
        try:
            with open(path, "rb") as f:
                magic = f.read(2)
                if magic == b"\x1f\x8b":
                    f.seek(0)
                    raw = f.read()
                    try:
                        self.data = memoryview(gzip.decompress(raw))
                    except (EOFError, OSError, zlib.error) as e:
                        raise HeadroomError(
                            f"{path}: damaged or truncated gzip file ({e}); re-copy or re-compress it"
                        ) from None
                elif os.fstat(f.fileno()).st_size == 0:
                    self.data = memoryview(b"")
                else:
                    self._mmap = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                    self.data = memoryview(self._mmap)
        except FileNotFoundError:
            raise HeadroomError(f"{path}: no such file") from None
        except IsADirectoryError:
            raise HeadroomError(f"{path}: is a folder, expected a file") from None
        except PermissionError:
            raise HeadroomError(f"{path}: permission denied") from None

    def done_with(self, start: int, end: int) -> None:
        """Let the kernel drop parsed pages of a mapped file from this process's memory."""
        if self._mmap is None or not hasattr(mmap, "MADV_DONTNEED"):
            return
        page = mmap.PAGESIZE
        lo = (start // page) * page
        hi = (end // page) * page
        if hi > lo:
            self._mmap.madvise(mmap.MADV_DONTNEED, lo, hi - lo)

    @property
    def raw(self):
        """The underlying bytes-like object (bytes or mmap) for find/count."""
        return self.data.obj

    def close(self) -> None:
        try:
            self.data.release()
            if self._mmap is not None:
                self._mmap.close()
        except BufferError:  # a pyarrow buffer still refers to it; GC will close it
            pass


def _sections(data: memoryview, path: Path, release=None) -> tuple[bytes, int, list[tuple[int, int]]]:
    """Split a CSV buffer into sections that each start with the same header.

    Returns the header line (without line ending), the offset of the first
    data byte after a BOM, and ``(start, end)`` byte offsets of every section
    (each starting at its header line).
    """
    raw = data.obj
    n = len(data)
    begin = 3 if raw[:3] == _BOM else 0
    # drop trailing blank lines / whitespace: a file ending in "\n\n" is fine
    end = n
    while end > begin and raw[end - 1 : end] in (b"\n", b"\r", b" ", b"\t"):
        end -= 1
    if end <= begin:
        raise HeadroomError(f"{path}: the file is empty")
    nl = raw.find(b"\n", begin, end)
    header_line = bytes(raw[begin : (nl if nl >= 0 else end)])
    header = header_line.rstrip(b"\r")
    if b"\x00" in header or not _looks_like_text(header):
        raise HeadroomError(f"{path}:1: not a CSV text file (binary data in the first line)")
    marker = b"\n" + header_line + (b"\n" if nl >= 0 else b"")
    starts = [begin]
    pos = begin
    window = 1 << 26  # search 64 MB at a time, letting go of the pages behind
    while pos < end:
        stop = min(pos + window, end + 1)
        i = raw.find(marker, pos, stop)
        if i >= 0:
            starts.append(i + 1)
            if release is not None:
                release(pos, i)
            pos = i + 1
            continue
        if stop >= end + 1:
            break
        nxt = max(pos, stop - len(marker))
        if release is not None:
            release(pos, nxt)
        pos = nxt
    # a header as the very last line has no line end after it (trailing ones were stripped)
    tail = end - len(header)
    if nl >= 0 and tail > starts[-1] and raw[tail:end] == header and raw[tail - 1 : tail] == b"\n":
        starts.append(tail)
    sections = [(s, starts[k + 1] if k + 1 < len(starts) else end) for k, s in enumerate(starts)]
    return header, begin, sections


def _line_at(data: memoryview, offset: int) -> int:
    """1-based line number of a byte offset (a pass over the file: for error messages only)."""
    return 1 + int(np.count_nonzero(np.frombuffer(data[:offset], dtype=np.uint8) == 10))


def _looks_like_text(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return all(c >= 32 or c in (9, 13) for c in b)


def _np(chunked: pa.ChunkedArray, dtype) -> np.ndarray:
    """A numpy copy of a null-free fixed-width column, without importing pandas."""
    parts = []
    width = np.dtype(dtype).itemsize
    for a in chunked.chunks:
        if len(a) == 0:
            continue
        buf = a.buffers()[1]
        parts.append(np.frombuffer(buf, dtype=dtype, count=len(a), offset=a.offset * width))
    if not parts:
        return np.empty(0, dtype=dtype)
    # one section: a read-only view of pyarrow's buffer (kept alive by the array)
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


# --------------------------------------------------------------------------
# slow, line-by-line diagnosis: only runs after pyarrow rejected a section


def _check_time(value: str) -> bool:
    """RFC 3339 whose fields are a real date and time (so that a bad value is named at its own line)."""
    import calendar

    m = _RFC3339_RE.match(value)
    if not m:
        return False
    y, mo, d, h, mi, sec = (int(m[i]) for i in range(1, 7))
    if not (1 <= y and 1 <= mo <= 12 and h <= 23 and mi <= 59 and sec <= 60):
        return False
    if not 1 <= d <= calendar.monthrange(y, mo)[1]:
        return False
    return m[9] is None or (int(m[9]) <= 23 and int(m[10]) <= 59)


_HINT = " (or pass --skip-bad-rows to drop and count such rows)"


def _line_problem(fields: list[str], columns: list[str], checks: dict[str, str], line: str) -> str | None:
    """What is wrong with one CSV line, or None."""
    if len(fields) != len(columns):
        return f"expected {len(columns)} fields ({','.join(columns)}), got {len(fields)}: '{_short(line)}'"
    for col, kind in checks.items():
        v = fields[columns.index(col)]
        if kind == "time" and not _check_time(v):
            return f"bad {col} '{_short(v)}' (expected RFC 3339 UTC, e.g. 2017-08-25T21:07:33.008Z)"
        if kind == "float":
            if not _FLOAT_RE.match(v):
                return f"bad {col} '{_short(v)}' (expected a number)"
            if kind == "float" and float(v) < 0:
                return f"bad {col} '{_short(v)}' (must be >= 0)"
        if kind == "int" and not re.match(r"^\d{1,18}$", v, re.ASCII):
            return f"bad {col} '{_short(v)}' (expected an integer)"
    return None


def _scan(raw, start: int, end: int, line_no: int, columns: list[str], checks: dict[str, str]):
    """Yield (line number, fields, problem or None) for each data line of a section."""
    text = bytes(raw[start:end]).decode("utf-8", errors="replace")
    for i, line in enumerate(text.split("\n")[1:], start=1):
        line = line.rstrip("\r")
        fields = line.split(",")
        yield line_no + i, fields, _line_problem(fields, columns, checks, line)


def _diagnose(
    path: Path, raw, start: int, end: int, line_no: int, columns, checks, fallback: str
) -> HeadroomError:
    """Find the first bad line of a section and describe it in one line."""
    for ln, _, problem in _scan(raw, start, end, line_no, columns, checks):
        if problem:
            return HeadroomError(f"{path}:{ln}: {problem}{_HINT}")
    return HeadroomError(f"{path}:{line_no}: cannot parse this CSV section: {fallback}")


def _short(s: str, n: int = 60) -> str:
    """At most n characters, and only printable ASCII (binary junk shows as escapes)."""
    s = s if len(s) <= n else s[:n] + "..."
    return ascii(s)[1:-1]


# --------------------------------------------------------------------------
# requests


@dataclass(frozen=True)
class _Layout:
    kind: str  # "throughputramp", "hey", "hey-fork"
    columns: list[str]
    time_col: str  # "start-time" or "offset"
    status_col: str | None


def _layout(header: bytes, path: Path) -> _Layout:
    cols = [c.strip() for c in header.decode("utf-8").split(",")]
    if "response-time" not in cols:
        raise HeadroomError(
            f"{path}:1: unexpected header '{_short(header.decode('utf-8', 'replace'), 100)}': "
            "expected 'start-time,response-time' (throughputramp) or hey's CSV header"
        )
    status = "status-code" if "status-code" in cols else None
    if cols == ["start-time", "response-time"]:
        return _Layout("throughputramp", cols, "start-time", None)
    if "start-time" in cols:
        return _Layout("hey-fork", cols, "start-time", status)
    if "offset" in cols:
        return _Layout("hey", cols, "offset", status)
    raise HeadroomError(
        f"{path}:1: header has response-time but neither start-time nor offset: "
        f"'{_short(header.decode('utf-8', 'replace'), 100)}'"
    )


def read_requests(
    path: Path, *, base_time_ns: int | None = None, skip_bad_rows: bool = False
) -> tuple[Requests, int, dict[int, int], str, list[str]]:
    """Read a request file (throughputramp or hey CSV).

    Returns the requests, the number of error rows (non-2xx status), the
    error count per status code, the detected format, and warnings.
    """
    buf = _Buffer(path)
    try:
        return _read_requests(buf, path, base_time_ns, skip_bad_rows)
    finally:
        buf.close()


def _parse_fast(data, header_line, path, layout, include, opts, checks):
    """One pyarrow read of CSV bytes that start with a header line.

    ``header_line()`` gives that header's line number in the file (computed
    only for an error message).  Returns (start ns, latency s, status or None);
    raises HeadroomError naming the first bad line.
    """
    read_opts, parse_opts, conv_opts = opts
    try:
        table = pacsv.read_csv(
            pa.BufferReader(pa.py_buffer(data)),
            read_options=read_opts,
            parse_options=parse_opts,
            convert_options=conv_opts,
        )
    except pa.ArrowInvalid as exc:
        raise _diagnose(
            path, data, 0, len(data), header_line(), layout.columns, checks, str(exc).splitlines()[0]
        ) from None
    for col in include:
        c = table.column(col)
        if c.null_count:
            raise HeadroomError(f"{path}:{header_line() + 1 + _first_null(c)}: empty {col} value{_HINT}")
    t = table.column(layout.time_col)
    if layout.time_col == "start-time":
        st = _np(t, np.int64)
    else:
        off = _np(t, np.float64)
        _check_finite(off, path, header_line, "offset")
        big = off > MAX_OFFSET_S
        if big.any():
            i = int(np.argmax(big))
            raise HeadroomError(
                f"{path}:{header_line() + 1 + i}: bad offset {float(off[i]):.6g} s (more than "
                f"{MAX_OFFSET_S:.0e} s after the start: a damaged value){_HINT}"
            )
        st = np.rint(off * 1e9).astype(np.int64)
    lat = _np(table.column("response-time"), np.float64)
    _check_finite(lat, path, header_line, "response-time")
    code = _np(table.column(layout.status_col), np.int64) if layout.status_col else None
    return st, lat, code


def _csv_options(layout: _Layout):
    """(column types, line checks, included columns, pyarrow options) for a request file layout."""
    types = {"response-time": pa.float64()}
    checks = {"response-time": "float"}
    if layout.time_col == "start-time":
        types["start-time"] = _TS_UTC
        checks["start-time"] = "time"
    else:
        types["offset"] = pa.float64()
        checks["offset"] = "float"
    include = [layout.time_col, "response-time"]
    if layout.status_col:
        types[layout.status_col] = pa.int64()
        checks[layout.status_col] = "int"
        include.append(layout.status_col)
    opts = (
        pacsv.ReadOptions(column_names=layout.columns, skip_rows=1, use_threads=True),
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


def _parse_section(buf, path, s, e, layout, include, opts, checks, skip_bad_rows, skipped):
    """Parse one section (or chunk) starting with a header; bad rows fail, or are skipped and recorded."""
    try:
        return _parse_fast(buf.data[s:e], lambda: _line_at(buf.data, s), path, layout, include, opts, checks)
    except HeadroomError:
        if not skip_bad_rows:
            raise
        st, lat, code, bad = _parse_slow(buf.raw, s, e, _line_at(buf.data, s), layout, checks)
        skipped += bad
        return st, lat, code


def _parse_slow(raw, s: int, e: int, line_no: int, layout, checks):
    """Line-by-line parse of a section, keeping good rows: (start, latency, status, bad rows)."""
    times, lats, codes, bad = [], [], [], []
    ti, li = layout.columns.index(layout.time_col), layout.columns.index("response-time")
    si = layout.columns.index(layout.status_col) if layout.status_col else None
    for ln, fields, problem in _scan(raw, s, e, line_no, layout.columns, checks):
        if problem is None:
            lat = float(fields[li])
            if not np.isfinite(lat):
                problem = f"bad response-time {fields[li]!r} (must be a finite number >= 0)"
            elif layout.time_col == "offset" and not float(fields[ti]) <= MAX_OFFSET_S:
                problem = (
                    f"bad offset '{_short(fields[ti])}' (more than {MAX_OFFSET_S:.0e} s after the start)"
                )
        if problem:
            bad.append((ln, problem))
            continue
        times.append(fields[ti])
        lats.append(lat)
        if si is not None:
            codes.append(int(fields[si]))
    if layout.time_col == "start-time":
        arr = pa.array(times, pa.string()).cast(_TS_UTC)
        st = _np(pa.chunked_array([arr], type=_TS_UTC), np.int64)
    else:
        st = np.rint(np.array([float(t) for t in times]) * 1e9).astype(np.int64)
    code = np.array(codes, dtype=np.int64) if si is not None else None
    return st, np.array(lats, dtype=np.float64), code, bad


def _drop_truncated_tail(buf, path, sections, columns, checks, warnings):
    """A file cut off mid-write ends in a partial line without a line end: drop it, with a warning.

    Only the very last line, decided by the missing line end alone (a cut
    line may still parse); anything else bad is an error.
    """
    raw, n = buf.raw, len(buf.data)
    if n == 0 or raw[n - 1 : n] in (b"\n",):
        return sections
    last_nl = raw.rfind(b"\n", 0, n)
    if last_nl < 0:
        return sections
    line = bytes(raw[last_nl + 1 : n]).decode("utf-8", errors="replace").rstrip("\r")
    if not line.strip():
        return sections
    # decided by the missing line end alone: a cut line may still parse ("0.0" from "0.0010")
    s, e = sections[-1]
    if last_nl + 1 <= s:
        return sections
    ln = _line_at(buf.data, last_nl + 1)
    warnings.append(
        f"{path}:{ln}: dropped a truncated last line of {n - last_nl - 1} bytes without a line end "
        f"'{_short(line)}' (the load generator was probably stopped mid-write)"
    )
    return [*sections[:-1], (s, last_nl)]


def _read_requests(buf: _Buffer, path: Path, base_time_ns: int | None, skip_bad_rows: bool = False):
    raw = buf.raw
    header, _, sections = _sections(buf.data, path)
    layout = _layout(header, path)
    warnings: list[str] = []
    checks, include, opts = _csv_options(layout)

    starts, lats, codes, offsets = [], [], [], [0]
    total = 0
    skipped: list[tuple[int, str]] = []
    sections = _drop_truncated_tail(buf, path, sections, layout.columns, checks, warnings)
    hey_shift, hey_sections = 0, 0
    for s, e in sections:
        nl = raw.find(b"\n", s, e)
        if nl < 0 or (
            e - nl < 64 and not bytes(buf.data[nl:e]).strip()
        ):  # a header with no rows: an empty step
            offsets.append(total)
            continue
        n_skipped = len(skipped)
        st, lat, code = _parse_section(buf, path, s, e, layout, include, opts, checks, skip_bad_rows, skipped)
        line0 = (lambda s=s: _line_at(buf.data, s)) if len(skipped) == n_skipped else (lambda: None)
        if layout.time_col == "offset":
            _check_offsets(path, st, line0)
            _check_plausible(path, st + MIN_TIME_NS, lat, lambda i, f=line0: _plus(f(), i + 1))
        else:
            _check_plausible(path, st, lat, lambda i, f=line0: _plus(f(), i + 1))
        if layout.time_col == "offset" and len(st):
            # hey runs appended one after another (one per concurrency): each
            # section's offsets count from its own start, so it begins where
            # the previous one ended
            st = st + np.int64(hey_shift)
            hey_shift = int(np.max(st + np.rint(lat * 1e9).astype(np.int64)))
            hey_sections += 1
        starts.append(st)
        lats.append(lat)
        if layout.status_col:
            codes.append(code)
        total += len(st)
        offsets.append(total)
        buf.done_with(s, e)
    if skipped:
        warnings.append(
            f"{path}: skipped {len(skipped)} bad row(s) (--skip-bad-rows); first: line {skipped[0][0]}: {skipped[0][1]}"
        )

    start_ns = _join(starts, np.int64)
    latency = _join(lats, np.float64)
    step_offsets = np.asarray(offsets, dtype=np.int64)

    errors = 0
    error_codes: dict[int, int] = {}
    step_errors = None
    if layout.status_col:
        status = np.concatenate(codes) if codes else np.zeros(0, np.int64)
        bad = (status < 200) | (status > 299)
        errors = int(bad.sum())
        step_errors = _per_step(bad, step_offsets)
        if errors:
            vals, cnts = np.unique(status[bad], return_counts=True)
            error_codes = {int(v): int(c) for v, c in zip(vals, cnts)}
            if errors == len(status):
                raise _all_failed(path, errors, error_codes)
            warnings.append(
                f"{path}: {errors} of {len(status)} requests failed ("
                + ", ".join(f"{c}x HTTP {v}" for v, c in error_codes.items())
                + "); they are counted as errors, not used as latencies"
            )
            keep = ~bad
            # recompute step offsets over the kept rows
            kept_per_step = np.add.reduceat(keep.astype(np.int64), step_offsets[:-1]) if len(keep) else []
            kept_per_step = np.where(np.diff(step_offsets) == 0, 0, kept_per_step)
            step_offsets = np.concatenate([[0], np.cumsum(kept_per_step)]).astype(np.int64)
            start_ns, latency = start_ns[keep], latency[keep]

    if layout.time_col == "offset":
        if base_time_ns is None:
            # hey writes offsets relative to its own start: anchor the run so
            # that its last response ends at the file's modification time.
            end_rel = int(np.max(start_ns + np.rint(latency * 1e9).astype(np.int64))) if len(start_ns) else 0
            base_time_ns = _mtime_base(path, end_rel)
            warnings.append(
                f"{path}: hey CSV has relative start offsets; wall-clock times are "
                "anchored at the file's modification time (--hey-start TIME sets it), "
                "so CPU alignment is approximate"
            )
        if hey_sections > 1:
            warnings.append(
                f"{path}: {hey_sections} hey runs appended one after another are read as one ramp, "
                "each step starting when the previous one ended: the spacing between them is unknown"
            )
        _check_base(path, base_time_ns)
        start_ns = start_ns + np.int64(base_time_ns)

    if len(start_ns) == 0:
        if layout.kind == "hey":
            raise HeadroomError(
                f"{path}: no requests: hey wrote only its header line "
                "(it writes no row for a request that got no response: was every connection refused?)"
            )
        raise HeadroomError(f"{path}: no requests (the file has a header but no data rows)")

    # Rows stay in file (completion) order: bucketing needs no order, and a
    # sort of every step would cost more than the whole analysis.
    return Requests(start_ns, latency, step_offsets), step_errors, error_codes, layout.kind, warnings


def _per_step(flag: np.ndarray, step_offsets: np.ndarray) -> np.ndarray:
    """How many rows of each step (sections by ``step_offsets``) have ``flag`` set."""
    cum = np.concatenate([[0], np.cumsum(flag.astype(np.int64))])
    return (cum[step_offsets[1:]] - cum[step_offsets[:-1]]).astype(np.int64)


def _join(parts: list[np.ndarray], dtype) -> np.ndarray:
    if not parts:
        return np.empty(0, dtype)
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


def _first_null(col: pa.ChunkedArray) -> int:
    base = 0
    for a in col.chunks:
        if a.null_count:
            valid = np.frombuffer(a.buffers()[0], dtype=np.uint8)
            bits = np.unpackbits(valid, bitorder="little")[a.offset : a.offset + len(a)]
            return base + int(np.argmin(bits))
        base += len(a)
    return 0


def _check_finite(x: np.ndarray, path: Path, header_line, col: str) -> None:
    """Reject NaN, infinite and negative values, naming the line (header_line() is lazy)."""
    bad = ~np.isfinite(x) | (x < 0)
    if bad.any():
        i = int(np.argmax(bad))
        raise HeadroomError(
            f"{path}:{header_line() + 1 + i}: bad {col} {float(x[i])!r} (must be a finite number >= 0){_HINT}"
        )


# --------------------------------------------------------------------------
# CPU


#: CPU percentages may exceed 100 % (x cores) by 5 % (sampling jitter: 101 % is seen in real runs) before they are refused.
CPU_TOLERANCE = 1.05


def read_cpu(path: Path, *, cores: float | None = None) -> CpuSamples:
    """Read a ``cpuStats.csv`` (RFC 3339 or Go ``Time.String()`` timestamps)."""
    buf = _Buffer(path)
    try:
        raw = buf.raw
        header, _, sections = _sections(buf.data, path)
        if len(sections) > 1:
            raise HeadroomError(
                f"{path}:{_line_at(buf.data, sections[1][0])}: a second header line in a CPU file"
            )
        cols = [c.strip() for c in header.decode("utf-8").split(",")]
        if len(cols) < 2 or cols[0] != "timestamp" or any(c != "percentage" for c in cols[1:]):
            raise HeadroomError(
                f"{path}:1: unexpected CPU header '{_short(header.decode('utf-8', 'replace'), 100)}': "
                "expected 'timestamp,percentage' (one percentage column per CPU)"
            )
        s, e = sections[0]
        chunk = buf.data[s:e]
        nl = bytes(chunk[:4096]).find(b"\n")
        first = bytes(chunk[nl + 1 : nl + 200]).split(b"\n")[0].decode("utf-8", "replace") if nl >= 0 else ""
        old_format = bool(re.match(r"^\d{4}-\d\d-\d\d \d", first))
        names = ["timestamp"] + [f"cpu{i}" for i in range(len(cols) - 1)]
        types = {n: pa.float64() for n in names[1:]}
        types["timestamp"] = pa.string() if old_format else _TS_UTC
        checks = {n: "float" for n in names[1:]}
        if not old_format:
            checks["timestamp"] = "time"
        try:
            table = pacsv.read_csv(
                pa.BufferReader(pa.py_buffer(chunk)),
                read_options=pacsv.ReadOptions(column_names=names, skip_rows=1),
                parse_options=pacsv.ParseOptions(ignore_empty_lines=False),
                convert_options=pacsv.ConvertOptions(
                    column_types=types, null_values=[""], strings_can_be_null=False
                ),
            )
        except pa.ArrowInvalid as exc:
            raise _diagnose(path, raw, s, e, 1, names, checks, str(exc).splitlines()[0]) from None
        if table.num_rows == 0:
            raise HeadroomError(f"{path}: no CPU samples (header only)")
        for n in names[1:]:
            if table.column(n).null_count:
                raise HeadroomError(f"{path}:{2 + _first_null(table.column(n))}: empty percentage value")
        if table.column("timestamp").null_count:
            raise HeadroomError(f"{path}:{2 + _first_null(table.column('timestamp'))}: empty timestamp")
        if old_format:
            time_ns = _parse_go_times(table.column("timestamp"), path)
        else:
            time_ns = _np(table.column("timestamp"), np.int64)
        per = np.column_stack([_np(table.column(n), np.float64) for n in names[1:]])
        for j in range(per.shape[1]):
            _check_finite(per[:, j], path, lambda: 1, "percentage")
        # plausibility: a per-CPU column is at most 100 %, a single column at most 100 % x cores
        limit = 100.0 * CPU_TOLERANCE * (1.0 if per.shape[1] > 1 else (cores if cores is not None else 1.0))
        over = per > limit
        if over.any():
            i = int(np.argmax(over.any(axis=1)))
            v = float(per[i][over[i]][0])
            hint = (
                ""
                if per.shape[1] > 1
                else " (100 % is one core unless --cpu-cores or metadata cpu_cores says more)"
            )
            raise HeadroomError(
                f"{path}:{i + 2}: CPU {v:.6g} % is above {limit / CPU_TOLERANCE:.6g} %{hint}: a damaged value"
            )
        bad_t = (time_ns < MIN_TIME_NS) | (time_ns >= MAX_TIME_NS)
        if bad_t.any():
            i = int(np.argmax(bad_t))
            raise HeadroomError(f"{path}:{i + 2}: timestamp {_fmt_ns(int(time_ns[i]))} is outside 2000-2200")
    finally:
        buf.close()
    order = np.argsort(time_ns, kind="stable")
    time_ns, per = time_ns[order], per[order]
    k = per.shape[1]
    pct = per.mean(axis=1) if k > 1 else per[:, 0].copy()
    return CpuSamples(
        time_ns=time_ns,
        pct=pct,
        per_cpu=per if k > 1 else None,
        cores=float(cores if cores is not None else k),
        source=str(path),
    )


def _parse_go_times(col: pa.ChunkedArray, path: Path) -> np.ndarray:
    values = col.to_pylist()
    out = np.empty(len(values), dtype=np.int64)
    iso = []
    for i, v in enumerate(values):
        m = _GO_STRING_RE.match(v.strip())
        if not m:
            raise HeadroomError(
                f"{path}:{i + 2}: bad timestamp '{_short(v)}' "
                "(expected RFC 3339 or Go's '2016-12-15 15:00:47.575579693 -0800 PST')"
            )
        iso.append(f"{m[1]}T{m[2]}{m[3]}:{m[4]}")
    try:
        arr = pa.array(iso, pa.string()).cast(_TS_UTC)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        for i, v in enumerate(iso):
            try:
                pa.array([v], pa.string()).cast(_TS_UTC)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                raise HeadroomError(
                    f"{path}:{i + 2}: bad timestamp '{_short(values[i])}' (impossible date, time or zone)"
                ) from None
        raise HeadroomError(f"{path}: bad timestamps (impossible date, time or zone)") from None
    out[:] = _np(pa.chunked_array([arr]), np.int64)
    return out


# --------------------------------------------------------------------------
# metadata


def read_metadata(path: Path) -> dict:
    """Read ``metadata.yml`` with PyYAML's safe loader; several documents merge."""
    import yaml

    try:
        size = path.stat().st_size
        if size > MAX_METADATA_BYTES:
            raise HeadroomError(
                f"{path}: {size:,} bytes: metadata is limited to {MAX_METADATA_BYTES:,} bytes (labels, not data)"
            )
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise HeadroomError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        docs = list(yaml.load_all(text, Loader=_metadata_loader()))
    except yaml.MarkedYAMLError as e:
        # the context mark is where the broken construct began (an unclosed quote
        # or bracket); the problem mark is where the parser gave up
        mark = e.context_mark or e.problem_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = (e.problem or "invalid YAML").strip()
        if e.context and e.problem_mark is not None:
            problem = f"{e.context.strip()}: {problem} (line {e.problem_mark.line + 1})"
        raise HeadroomError(f"{path}{line}: bad YAML: {problem}") from None
    except yaml.YAMLError as e:
        raise HeadroomError(f"{path}: bad YAML: {str(e).splitlines()[0]}") from None
    merged: dict = {}
    for d in docs:
        if d is None:
            continue
        if not isinstance(d, dict):
            raise HeadroomError(f"{path}: expected a mapping of keys to values, got {type(d).__name__}")
        merged.update({str(k): v for k, v in d.items()})
    _check_metadata_values(path, text, merged)
    return merged


#: metadata.yml limits: size, nesting depth; aliases (``*name``) are refused, never expanded.
MAX_METADATA_BYTES = 1 << 20
MAX_METADATA_DEPTH = 32


def _metadata_loader():
    import yaml
    from yaml.composer import ComposerError

    class Loader(yaml.SafeLoader):
        _depth = 0

        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                mark = self.peek_event().start_mark
                raise ComposerError(None, None, "aliases (*name) are not allowed in metadata", mark)
            self._depth += 1
            try:
                if self._depth > MAX_METADATA_DEPTH:
                    mark = self.peek_event().start_mark
                    raise ComposerError(None, None, f"nested deeper than {MAX_METADATA_DEPTH} levels", mark)
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

    return Loader


def _key_line(text: str, key: str) -> str:
    for i, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith(f"{key}:"):
            return f":{i}"
    return ""


def _check_metadata_values(path: Path, text: str, fields: dict) -> None:
    """Core counts and ramp parameters that would make numbers up: exit 2 with file and line."""
    v = fields.get("cpu_cores")
    if v is not None:
        ok = (
            isinstance(v, (int, float))
            and not isinstance(v, bool)
            and np.isfinite(v)
            and 0.01 <= v <= 100_000
        )
        if not ok:
            raise HeadroomError(
                f"{path}{_key_line(text, 'cpu_cores')}: cpu_cores {_short(repr(v))} must be a finite number "
                "of cores from 0.01 to 100000"
            )
    for key, low in (("lower_concurrency", 1), ("upper_concurrency", 1), ("concurrency_step", 0)):
        v = fields.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or v < low:
            raise HeadroomError(
                f"{path}{_key_line(text, key)}: {key} {_short(repr(v))} must be a whole number >= {low}"
            )


def run_label(fields: dict, fallback: str) -> str:
    """The label of a run: its ``sha`` or ``version`` in metadata, else the folder name."""
    for key in ("sha", "version", "label", "name"):
        v = fields.get(key)
        if v is not None and str(v).strip():
            return str(v).strip()
    return fallback


# --------------------------------------------------------------------------
# the run


def load_run(
    path: str | os.PathLike,
    *,
    label: str | None = None,
    cpu_cores: float | None = None,
    base_time_ns: int | None = None,
    skip_bad_rows: bool = False,
    format: str | None = None,
    steps: str | None = None,
) -> Run:
    """Load one run: requests, CPU samples (if present) and metadata.

    Parameters
    ----------
    path
        A throughputramp run folder, a ``perfResults.csv[.gz]`` file (also
        ``old_perfResults.csv``), a file prefix such as ``runs/x/old_``, or a
        hey CSV file.
    label
        Overrides the label taken from metadata (``sha``) or the folder name.
    cpu_cores
        How many cores 100 % in a single-column CPU file stands for.  Default:
        metadata ``cpu_cores`` if present, else 1 (percent of one core).  A
        per-CPU file always counts one core per column.
    base_time_ns
        For hey files with relative offsets: the wall-clock start (UTC ns).
    skip_bad_rows
        Drop unparsable request rows instead of failing, counting them in a
        warning that names the first one (throughputramp and hey files).
    format
        The input format (see :data:`headroom.formats.FORMATS`, or a tool name
        such as ``k6``); default: detected from the file's content.
    steps
        For files without steps of their own: cut the run into steps of a
        duration (``"10s"``) or at times in seconds since the first start
        (``"0,10,20"``).

    Returns
    -------
    Run

    Raises
    ------
    HeadroomError
        With a one-line message naming the file (and line) on bad input.
    """
    files = locate_run(path)
    fields = read_metadata(files.meta) if files.meta else {}
    fmt = _detect_format(files.perf, format)
    conc = None
    if files.steps:
        table, fmt = _read_step_files(files, format)
        requests, step_errors, error_codes, warnings, conc = _table_to_requests(
            table, Path(path), base_time_ns, steps
        )
    elif fmt == "throughputramp":
        if steps:
            raise HeadroomError(
                f"{files.perf}: --steps is for files without steps of their own; "
                "this file's sections are its steps"
            )
        requests, step_errors, error_codes, fmt, warnings = read_requests(
            files.perf, base_time_ns=base_time_ns, skip_bad_rows=skip_bad_rows
        )
    else:
        from . import formats

        table = formats.read_table(files.perf, fmt)
        requests, step_errors, error_codes, warnings, conc = _table_to_requests(
            table, files.perf, base_time_ns, steps
        )
    errors = 0 if step_errors is None else int(step_errors.sum())
    cpu = _read_cpu_for(files, fields, cpu_cores, warnings)
    meta = RunMeta(
        label=label or run_label(fields, files.name),
        source=str(files.perf),
        fields=fields,
        step_concurrency=conc,
    )
    return Run(
        requests=requests,
        cpu=cpu,
        meta=meta,
        errors=errors,
        error_codes=error_codes,
        warnings=tuple(warnings),
        format=fmt,
        step_errors=step_errors,
    )


def write_json(doc: dict, path: str | os.PathLike) -> None:
    """Write a JSON document deterministically (same input, same bytes)."""
    text = json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    target = Path(path)
    if str(target) == "-":
        import sys

        sys.stdout.write(text)
        return
    try:
        target.write_text(text, encoding="utf-8")
    except OSError as e:
        raise HeadroomError(f"{target}: cannot write JSON ({e.strerror})") from None


# --------------------------------------------------------------------------
# streaming: reduce a run of any size to per-bucket histograms, chunk by chunk


class _Progress:
    """A one-line progress report on a terminal, shown only for reads longer than a few seconds."""

    def __init__(
        self, path: Path, total: int, enabled: bool | None = None, after_s: float = 2.0, verb: str = "reading"
    ):
        import sys
        import time

        self._time = time.monotonic
        self._out = sys.stderr
        self.enabled = self._out.isatty() if enabled is None else enabled
        self.path, self.total, self.after, self.verb = path, max(total, 1), after_s, verb
        self.t0 = self._time()
        self.shown = False

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        elapsed = self._time() - self.t0
        if elapsed < self.after:
            return
        frac = min(done / self.total, 1.0)
        bar = "#" * int(frac * 30)
        self._out.write(
            f"\r{self.verb} {self.path.name} [{bar:<30}] {frac * 100:3.0f}% "
            f"{done / 2**20:,.0f}/{self.total / 2**20:,.0f} MB {elapsed:.0f} s"
        )
        self._out.flush()
        self.shown = True

    def close(self) -> None:
        if self.shown:
            self._out.write("\n")
            self._out.flush()


#: Seconds of decompression after which a progress line appears (on a terminal).
_DECOMPRESS_NOTE_S = 1.0


class _StreamBuffer(_Buffer):
    """Like _Buffer, but a gzip file is decompressed to a temporary file and mapped,
    so that its size in memory stays bounded."""

    def __init__(self, path: Path, progress: bool | None = None):
        with open(path, "rb") as f:
            magic = f.read(2)
        if magic != b"\x1f\x8b":
            super().__init__(path)
            self._tmp = None
            return
        import tempfile

        self.path = path
        self._tmp = tempfile.TemporaryFile(prefix="headroom-")
        # decompressing takes seconds for a large run: say so on a terminal (share of the .gz read)
        prog = _Progress(
            path, path.stat().st_size, progress, after_s=_DECOMPRESS_NOTE_S, verb="decompressing"
        )
        try:
            with open(path, "rb") as raw, gzip.GzipFile(fileobj=raw) as src:
                while chunk := src.read(1 << 22):
                    self._tmp.write(chunk)
                    prog.update(raw.tell())
        except (EOFError, OSError, zlib.error) as e:
            prog.close()
            self._tmp.close()
            raise HeadroomError(
                f"{path}: damaged or truncated gzip file ({e}); re-copy or re-compress it"
            ) from None
        prog.close()
        self._tmp.flush()
        if self._tmp.tell() == 0:
            self._mmap = None
            self.data = memoryview(b"")
        else:
            self._mmap = mmap.mmap(self._tmp.fileno(), 0, access=mmap.ACCESS_READ)
            self.data = memoryview(self._mmap)

    def close(self) -> None:
        super().close()
        if self._tmp is not None:
            self._tmp.close()


def _chunks(buf: _Buffer, s: int, e: int, chunk_bytes: int) -> list[tuple[int, int]]:
    """Split a section into byte ranges of about ``chunk_bytes`` ending at line ends."""
    out, pos = [], s
    while e - pos > chunk_bytes:
        cut = buf.raw.find(b"\n", pos + chunk_bytes, e)
        if cut < 0:
            break
        out.append((pos, cut + 1))
        pos = cut + 1
    out.append((pos, e))
    return out


def reduce_run(
    path: str | os.PathLike,
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
) -> Run:
    """Read a run of any size with bounded memory, reduced to per-bucket histograms.

    Sections are parsed one at a time (a section longer than ``chunk_bytes``
    in chunks, in two passes: its time span first, then its buckets); each is
    reduced to per-bucket latency histograms, which merge by addition, and its
    pages are released.  Memory is bounded by the chunk size and the
    histograms, not the file.  The returned run has ``requests=None`` and
    ``reduced`` set; :func:`headroom.analyze` uses it (with the same bucket).
    hey files with relative offsets (at most 1M rows) are read in memory.

    Parameters are those of :func:`load_run`, plus ``bucket_s`` and
    ``min_partial`` (the bucket rule) and ``progress`` (a progress line on
    stderr; default: when it is a terminal and the read takes over 2 s).
    """
    from .aggregate import Steps, bucket_lengths_ns, make_buckets, step_rps
    from .binning import BucketHist, encode_latency, sparse_counts

    files = locate_run(path)
    if steps or files.steps or _detect_format(files.perf, format) != "throughputramp":
        # the other formats are read in memory (see headroom.formats)
        return load_run(
            path, label=label, cpu_cores=cpu_cores, skip_bad_rows=skip_bad_rows, base_time_ns=base_time_ns,
            format=format, steps=steps,
        )  # fmt: skip
    fields = read_metadata(files.meta) if files.meta else {}
    buf = _StreamBuffer(files.perf, progress)
    try:
        header, _, sections = _sections(buf.data, files.perf, release=buf.done_with)
        layout = _layout(header, files.perf)
        if layout.time_col == "offset":
            buf.close()
            return load_run(
                path, label=label, cpu_cores=cpu_cores, skip_bad_rows=skip_bad_rows, base_time_ns=base_time_ns
            )
        warnings: list[str] = []
        checks, include, opts = _csv_options(layout)
        sections = _drop_truncated_tail(buf, files.perf, sections, layout.columns, checks, warnings)
        cpu = _read_cpu_for(files, fields, cpu_cores, warnings)
        b_ns = int(round(bucket_s * 1e9))
        prog = _Progress(files.perf, len(buf.data), progress)
        skipped: list[tuple[int, str]] = []
        n_steps = len(sections)
        st_start = np.zeros(n_steps, np.int64)
        st_end = np.zeros(n_steps, np.int64)
        st_count = np.zeros(n_steps, np.int64)
        pieces = ([], [], [], [])  # step, start, length, count of buckets
        ent_b, ent_v, ent_c, sums = [], [], [], []
        loose_s, loose_v = [], []
        errors, error_codes = 0, {}
        step_errors = np.zeros(n_steps, np.int64) if layout.status_col else None
        nb = 0

        def parse(cs: int, ce: int, first: bool, record: bool = True, step: int = 0):
            """Parse a chunk; ``record`` counts its skipped rows and HTTP errors (not on a second pass)."""
            bad_rows: list[tuple[int, str]] = []
            if first:
                st, lat, code = _parse_section(
                    buf, files.perf, cs, ce, layout, include, opts, checks, skip_bad_rows, bad_rows
                )
            else:  # a continuation chunk: give pyarrow the header again
                data = header + b"\n" + bytes(buf.data[cs:ce])
                line0 = _line_at(buf.data, cs) - 1
                try:
                    st, lat, code = _parse_fast(
                        data, lambda: line0, files.perf, layout, include, opts, checks
                    )
                except HeadroomError:
                    if not skip_bad_rows:
                        raise
                    st, lat, code, bad_rows = _parse_slow(data, 0, len(data), line0, layout, checks)
            if record:
                skipped.extend(bad_rows)
                if bad_rows:
                    line_of = lambda i: None  # noqa: E731 - rows no longer match lines
                elif first:
                    line_of = lambda i: _line_at(buf.data, cs) + 1 + i  # noqa: E731
                else:
                    line_of = lambda i: _line_at(buf.data, cs) + i  # noqa: E731
                _check_plausible(files.perf, st, lat, line_of)
            if code is not None:
                failed = (code < 200) | (code > 299)
                if failed.any():
                    if record:
                        nonlocal errors
                        errors += int(failed.sum())
                        step_errors[step] += int(failed.sum())
                        for v, c in zip(*np.unique(code[failed], return_counts=True), strict=True):
                            error_codes[int(v)] = error_codes.get(int(v), 0) + int(c)
                    st, lat = st[~failed], lat[~failed]
            return st, lat

        for k, (s, e) in enumerate(sections):
            nl = buf.raw.find(b"\n", s, e)
            if nl < 0 or (e - nl < 64 and not bytes(buf.data[nl:e]).strip()):
                continue  # a header with no rows: an empty step
            ranges = _chunks(buf, s, e, chunk_bytes)
            if len(ranges) == 1:
                parts = [parse(s, e, True, step=k)]

                def source(parts=parts):
                    return iter(parts)

            else:
                parts = (parse(cs, ce, i == 0, step=k) for i, (cs, ce) in enumerate(ranges))  # first pass

                def source(ranges=ranges):  # second pass: parse again, chunk by chunk
                    return (parse(cs, ce, i == 0, record=False) for i, (cs, ce) in enumerate(ranges))

            t0, t1, n = None, None, 0
            for st, lat in parts:
                if len(st):
                    end = st + np.rint(lat * 1e9).astype(np.int64)
                    t0 = int(st.min()) if t0 is None else min(t0, int(st.min()))
                    t1 = int(end.max()) if t1 is None else max(t1, int(end.max()))
                    n += len(st)
            st_count[k] = n
            if n == 0:
                continue
            st_start[k], st_end[k] = t0, t1
            if n < 2 or t1 <= t0:  # too short to bucket: kept for the step statistics only
                for st, lat in source():
                    loose_s.append(np.full(len(st), k, np.int64))
                    loose_v.append(lat)
                continue
            if (t1 - t0) // b_ns > 10 * n + 100_000:  # memory and time bounded by rows, not by the span
                raise HeadroomError(
                    f"{files.perf}: step {k} has {n:,} requests spread over {(t1 - t0) / 1e9:,.0f} s: "
                    "its timestamps are damaged or from different clocks"
                )
            lengths = bucket_lengths_ns(t1 - t0, b_ns, min_partial)
            m = len(lengths)
            counts = np.zeros(m, np.int64)
            bsum = np.zeros(m)
            for st, lat in source():
                if len(st) == 0:
                    continue
                idx = np.minimum((st - t0) // b_ns, m - 1)
                counts += np.bincount(idx, minlength=m)
                bsum += np.bincount(idx, weights=lat, minlength=m)
                codes = encode_latency(lat)
                bk, vk, cnt = sparse_counts(idx, m, codes.codes, len(codes.values))
                ent_b.append(nb + bk)
                ent_v.append(codes.values[vk])
                ent_c.append(cnt)
            pieces[0].append(np.full(m, k, np.int32))
            pieces[1].append(t0 + np.arange(m, dtype=np.int64) * b_ns)
            pieces[2].append(np.asarray(lengths, np.float64) / 1e9)
            pieces[3].append(counts)
            sums.append(bsum)
            nb += m
            buf.done_with(s, e)
            prog.update(e)
        prog.close()
    finally:
        buf.close()
    if int(st_count.sum()) == 0:
        raise HeadroomError(f"{files.perf}: no requests (the file has a header but no data rows)")
    if skipped:
        warnings.append(
            f"{files.perf}: skipped {len(skipped)} bad row(s) (--skip-bad-rows); "
            f"first: line {skipped[0][0]}: {skipped[0][1]}"
        )
    if errors:
        warnings.append(
            f"{files.perf}: {errors} of {errors + int(st_count.sum())} requests failed ("
            + ", ".join(f"{c}x HTTP {v}" for v, c in sorted(error_codes.items()))
            + "); they are counted as errors, not used as latencies"
        )
    values_parts = ent_v + loose_v
    values = np.sort(np.concatenate(values_parts)) if values_parts else np.zeros(0)
    values = values[np.r_[True, values[1:] != values[:-1]]] if len(values) else values  # unique, sorted
    bucket = np.concatenate(ent_b).astype(np.int64) if ent_b else np.zeros(0, np.int64)
    vidx = np.searchsorted(values, np.concatenate(ent_v)) if ent_v else np.zeros(0, np.int64)
    count = np.concatenate(ent_c) if ent_c else np.zeros(0, np.int64)
    # merge entries of the same (bucket, value) from different chunks, sorted by bucket then value
    key = bucket * max(len(values), 1) + vidx
    order = np.argsort(key, kind="stable")
    key, count = key[order], count[order]
    first = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else np.zeros(0, np.int64)
    count = np.add.reduceat(count, first) if len(key) else count
    key = key[first] if len(key) else key
    d = max(len(values), 1)
    meta = RunMeta(label=label or run_label(fields, files.name), source=str(files.perf), fields=fields)
    steps = Steps(
        index=np.arange(n_steps),
        concurrency=[meta.concurrency(k) for k in range(n_steps)],
        start_ns=st_start,
        end_ns=st_end,
        requests=st_count,
        rps=step_rps(st_count, st_start, st_end),
    )
    buckets = make_buckets(*pieces, cpu, np.empty(0, np.int32), bucket_s)
    hist = BucketHist(
        bucket=key // d,
        value=key % d,
        count=count.astype(np.int64),
        sums=np.concatenate(sums) if sums else np.zeros(0),
        values=values,
        loose_step=np.concatenate(loose_s) if loose_s else np.zeros(0, np.int64),
        loose_value=np.searchsorted(values, np.concatenate(loose_v)) if loose_v else np.zeros(0, np.int64),
    )
    return Run(
        requests=None,
        cpu=cpu,
        meta=meta,
        errors=errors,
        error_codes=error_codes,
        warnings=tuple(warnings),
        format=layout.kind,
        reduced=(steps, buckets, hist),
        step_errors=step_errors,
    )


def _read_cpu_for(
    files: RunFiles, fields: dict, cpu_cores: float | None, warnings: list | None = None
) -> CpuSamples | None:
    if files.cpu is None:
        return None
    cores = cpu_cores
    if cores is None and isinstance(fields.get("cpu_cores"), (int, float)):
        cores = float(fields["cpu_cores"])
    cpu = read_cpu(files.cpu, cores=cores)
    if cpu.per_cpu is None and cores is None and warnings is not None:
        warnings.append(
            f"{files.cpu}: one CPU column and no core count: 100 % is taken as one core "
            "(--cpu-cores N or metadata cpu_cores: N says how many cores 100 % stands for; "
            "the Cloud Foundry cpumonitor's file is the whole machine)"
        )
    if cpu.per_cpu is not None and cpu_cores is not None:
        cpu = CpuSamples(cpu.time_ns, cpu.pct, cpu.per_cpu, float(cpu.per_cpu.shape[1]), cpu.source)
    return cpu


# --------------------------------------------------------------------------
# the other load generators (headroom.formats): request table -> Requests


def _all_failed(
    path, n: int, error_codes: dict[int, int], labels: dict[int, str] | None = None
) -> HeadroomError:
    parts = ", ".join(
        f"{c:,}x {_code_name(v)}" for v, c in sorted(error_codes.items(), key=lambda kv: -kv[1])
    )
    return HeadroomError(f"{path}: all {n:,} requests failed: {parts}; no latency to analyse")


def _code_name(v: int) -> str:
    if v < 0:
        return "failed (no status code in the file)"
    return "no HTTP response" if v == 0 else f"HTTP {v}"


def _steps_option(t, steps: str, path) -> None:
    """``--steps``: cut the run into steps of a duration (``10s``) or at times (``0,10,20``: s since the first start)."""
    from .model import parse_duration

    if not len(t.start_ns):
        return
    t0 = int(t.start_ns.min())
    rel = (t.start_ns - t0) / 1e9
    text = steps.strip()
    if "," in text:
        try:
            bounds = sorted({float(x) for x in text.split(",") if x.strip()})
        except ValueError:
            raise HeadroomError(
                f"bad --steps {short_text(steps)}: expected a duration (10s) or times in s (0,10,20)"
            ) from None
        if any(not np.isfinite(b) or b < 0 for b in bounds):
            raise HeadroomError(f"bad --steps {short_text(steps)}: times must be finite and >= 0")
        step = np.searchsorted(
            np.asarray(bounds[1:] if bounds and bounds[0] == 0 else bounds), rel, side="right"
        )
    else:
        d = parse_duration(text)
        step = np.floor(rel / d).astype(np.int64)
        if step.max() > 100_000:
            raise HeadroomError(f"--steps {short_text(steps)}: more than 100,000 steps over this run")
    uniq, inv = np.unique(step, return_inverse=True)
    t.step = inv.astype(np.int64)
    t.step_names = [f"step {k + 1}" for k in range(len(uniq))]
    t.step_concurrency = None
    t.steps_source = f"--steps {steps}"


def short_text(s: str) -> str:
    return _short(str(s), 60)


def _table_to_requests(t, path: Path, base_time_ns: int | None, steps: str | None):
    """(Requests, step_errors, error_codes, warnings, step concurrency) from a format reader's table."""
    from .formats._common import check_values

    warnings = list(t.warnings)
    n = len(t.start_ns)
    if n == 0:
        raise HeadroomError(f"{path}: no requests (the file has a header but no data rows)")
    check_values(path, t)

    def line_of(rows):
        return lambda i: None if t.line is None else int(t.line[rows[i]])

    if t.relative:
        st0 = t.start_ns
        if (st0 < 0).any() or (st0 > MAX_OFFSET_S * 1e9).any():
            i = int(np.argmax((st0 < 0) | (st0 > MAX_OFFSET_S * 1e9)))
            raise HeadroomError(
                f"{path}:{line_of(np.arange(n))(i)}: relative start {st0[i] / 1e9:.6g} s is outside 0 to "
                f"{MAX_OFFSET_S:.0e} s: a damaged value"
            )
    shift = MIN_TIME_NS if t.relative else 0
    step0 = t.step if t.step is not None else np.zeros(n, np.int64)
    for k in np.unique(step0):
        rows = np.flatnonzero(step0 == k)
        _check_plausible(path, t.start_ns[rows] + shift, t.latency_s[rows], line_of(rows))
    if steps:
        _steps_option(t, steps, path)
    step = t.step if t.step is not None else np.zeros(n, np.int64)
    n_steps = max(len(t.step_names), int(step.max()) + 1 if n else 1)
    if t.ok is not None:
        failed = ~t.ok
    elif t.status is not None:
        failed = (t.status < 200) | (t.status > 299)
    else:
        failed = None
    order = np.argsort(step, kind="stable")
    start, lat = t.start_ns[order], t.latency_s[order]
    counts = np.bincount(step, minlength=n_steps)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    step_errors = None
    error_codes: dict[int, int] = {}
    if failed is not None:
        failed = failed[order]
        step_errors = _per_step(failed, offsets)
        errors = int(failed.sum())
        if errors:
            codes = t.status[order][failed] if t.status is not None else np.full(errors, -1, np.int64)
            vals, cnts = np.unique(codes, return_counts=True)
            error_codes = {int(v): int(c) for v, c in zip(vals, cnts)}
            if errors == n:
                raise _all_failed(path, n, error_codes)
            warnings.append(
                f"{path}: {errors:,} of {n:,} requests failed ("
                + ", ".join(f"{c:,}x {_code_name(v)}" for v, c in error_codes.items())
                + "); they are counted as errors, not used as latencies"
            )
            keep = ~failed
            kept = np.add.reduceat(keep.astype(np.int64), offsets[:-1]) if len(keep) else []
            kept = np.where(counts == 0, 0, kept)
            offsets = np.concatenate([[0], np.cumsum(kept)]).astype(np.int64)
            start, lat = start[keep], lat[keep]
    if t.relative:
        if base_time_ns is None:
            end_rel = int(np.max(t.start_ns + np.rint(t.latency_s * 1e9).astype(np.int64)))
            base_time_ns = _mtime_base(path, end_rel)
            warnings.append(
                f"{path}: relative start times; wall-clock times are anchored at the file's "
                "modification time (--hey-start TIME sets it), so CPU alignment is approximate"
            )
        _check_base(path, base_time_ns)
        start = start + np.int64(base_time_ns)
    if len(t.step_names) <= 1 and not steps:
        warnings.append(f"{path}: one step ({t.steps_source}); --steps DURATION or --steps T1,T2,... cuts it")
    conc = tuple(t.step_concurrency) if t.step_concurrency is not None else None
    return Requests(start, lat, offsets), step_errors, error_codes, warnings, conc


def _detect_format(perf: Path, fmt: str | None) -> str:
    from . import formats

    head = formats.head_bytes(perf)
    if fmt:
        return formats.resolve(fmt, perf, head)
    if any(perf.name.endswith(n) for n in _PERF_NAMES):
        # a throughputramp run file: its own reader names what is wrong with it
        data = head.lstrip(_BOM)
        why = formats._summary_only(data) if data.strip() else None
        if why:
            raise HeadroomError(f"{perf}: {why}")
        for f in formats.FORMATS.values():
            if data.strip() and f.guess_can_open(data):
                return f.name
        return "throughputramp"
    return formats.detect(perf, head)


# --------------------------------------------------------------------------
# plausibility: limits stated in docs/formats.md and the README

#: Start times must fall between these (UTC ns): 2000-01-01 and 2200-01-01.
MIN_TIME_NS = 946_684_800 * 10**9
MAX_TIME_NS = 7_258_118_400 * 10**9
#: A start time further than this from the middle of its step is an error ...
SPAN_TOLERANCE_S = 600.0
#: ... or further than this many times the step's interquartile span, whichever is larger.
SPAN_TOLERANCE_IQR = 10.0
#: Relative offsets (hey, oha) above this many seconds are refused (115 days).
MAX_OFFSET_S = 1e7


def _mtime_base(path, end_rel: int) -> int:
    """The wall-clock start of a run with relative times: its file's modification time minus its length."""
    base = os.stat(path).st_mtime_ns - end_rel
    if not MIN_TIME_NS <= base < MAX_TIME_NS - end_rel:
        raise HeadroomError(
            f"{path}: relative times anchored at the file's modification time would start at "
            f"{_fmt_ns(base)}, outside 2000-2200: give the start with --hey-start TIME"
        )
    return base


def _check_base(path, base: int) -> None:
    if not 0 <= int(base) < MAX_TIME_NS:
        raise HeadroomError(f"{path}: --hey-start {_fmt_ns(int(base))} is outside 1970-2200")


def _plus(a, b):
    return None if a is None else a + b


def _check_offsets(path, st: np.ndarray, line0) -> None:
    big = st > MAX_OFFSET_S * 1e9
    if big.any():
        i = int(np.argmax(big))
        ln = line0()
        raise HeadroomError(
            f"{path}{'' if ln is None else f':{ln + 1 + i}'}: offset {st[i] / 1e9:.6g} s is beyond "
            f"{MAX_OFFSET_S:.0e} s since the start: a damaged value"
        )


def _check_plausible(path, start_ns: np.ndarray, latency_s: np.ndarray, line_of, what: str = "step") -> None:
    """Refuse start times outside 2000-2200 or far from the rest of their step, and latencies
    longer than that tolerance: exit 2 naming the line (``line_of(i)`` gives row i's line or None)."""
    n = len(start_ns)
    if n == 0:
        return

    def where(i):
        ln = line_of(int(i))
        return f"{path}:{ln}" if ln else f"{path}"

    bad = (start_ns < MIN_TIME_NS) | (start_ns >= MAX_TIME_NS)
    if bad.any():
        i = int(np.argmax(bad))
        raise HeadroomError(
            f"{where(i)}: start time {_fmt_ns(int(start_ns[i]))} is outside 2000-2200: a wrong clock or a damaged value"
        )
    q25, mid, q75 = np.percentile(start_ns, [25, 50, 75], method="inverted_cdf")
    tol_ns = max(SPAN_TOLERANCE_S * 1e9, SPAN_TOLERANCE_IQR * float(q75 - q25))
    far = np.abs(start_ns.astype(np.float64) - float(mid)) > tol_ns
    if far.any():
        i = int(np.argmax(far))
        off = (float(start_ns[i]) - float(mid)) / 1e9
        raise HeadroomError(
            f"{where(i)}: start time {_fmt_ns(int(start_ns[i]))} is {abs(off):,.0f} s "
            f"{'after' if off > 0 else 'before'} the middle of its {what} (tolerance {tol_ns / 1e9:,.0f} s): "
            "a moved or damaged timestamp"
        )
    lim = tol_ns / 1e9
    long = ~(latency_s <= lim)
    if long.any():
        i = int(np.argmax(long))
        raise HeadroomError(
            f"{where(i)}: latency {float(latency_s[i]):.6g} s is longer than its {what} could be "
            f"(limit {lim:,.0f} s): a damaged value"
        )


def _fmt_ns(t: int) -> str:
    import datetime as dt

    try:
        return dt.datetime.fromtimestamp(t / 1e9, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return f"{t} ns"


def _read_step_files(files: RunFiles, fmt_option: str | None):
    """One request table from a folder of one file per step: relative times placed one after another."""
    from . import formats
    from .formats._common import Table

    tables, fmt = [], None
    for f in files.steps:
        name = _detect_format(f, fmt_option)
        if name == "throughputramp":
            raise HeadroomError(
                f"{f}: a folder of one file per step is read for vegeta, k6, JMeter, Gatling and oha files; "
                "append hey runs to one file instead (each with its header)"
            )
        if fmt is not None and name != fmt:
            raise HeadroomError(f"{f}: {name}, but {files.steps[0].name} is {fmt}: one format per folder")
        fmt = name
        tables.append(formats.read_table(f, name))
    starts, lats, status, ok, lines, warnings = [], [], [], [], [], []
    shift = 0
    for t in tables:
        st = t.start_ns
        if t.relative:
            st = st + np.int64(shift)
            shift = int(np.max(st + np.rint(t.latency_s * 1e9).astype(np.int64))) if len(st) else shift
        starts.append(st)
        lats.append(t.latency_s)
        status.append(t.status if t.status is not None else np.full(len(st), -1, np.int64))
        if t.ok is not None:
            ok.append(t.ok)
        elif t.status is not None:
            ok.append((t.status >= 200) & (t.status <= 299))
        else:
            ok = None
        lines.append(t.line if t.line is not None else np.zeros(len(st), np.int64))
        warnings += t.warnings
    if not any(t.status is not None for t in tables):
        status = None
    relative = tables[0].relative
    if relative and len(tables) > 1:
        warnings.append(
            f"{files.perf.parent}: {len(tables)} files with relative times are read as one ramp, each step "
            "starting when the previous one ended: the spacing between them is unknown"
        )
    conc = _step_concurrency_from_names(files.steps)
    table = Table(
        fmt=fmt,
        fidelity=tables[0].fidelity,
        start_ns=np.concatenate(starts),
        latency_s=np.concatenate(lats),
        status=np.concatenate(status) if status is not None else None,
        ok=np.concatenate(ok) if ok is not None else None,
        step=np.repeat(np.arange(len(tables)), [len(t.start_ns) for t in tables]),
        step_names=[f.name for f in files.steps],
        step_concurrency=conc,
        steps_source=f"one file per step ({len(tables)} files)"
        + ("; concurrency from the file names" if conc else ""),
        relative=relative,
        line=None,
        warnings=warnings,
    )
    return table, fmt

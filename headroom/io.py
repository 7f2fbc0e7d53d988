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
_RFC3339_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|[+-]\d\d:\d\d)$")
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
        perf = _first_existing(p, "", _PERF_NAMES)
        prefix = ""
        if perf is None:
            perf = _first_existing(p, "old_", _PERF_NAMES)
            prefix = "old_"
        if perf is None:
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


def _sections(data: memoryview, path: Path) -> tuple[bytes, int, list[tuple[int, int, int]]]:
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
    while True:
        i = raw.find(marker, pos, end + 1)
        if i < 0:
            break
        starts.append(i + 1)
        pos = i + 1
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
    return bool(_RFC3339_RE.match(value))


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
        if kind == "int" and not re.match(r"^\d+$", v):
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
            f"{path}:1: unexpected header {header.decode('utf-8', 'replace')!r}: "
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
        f"{header.decode('utf-8', 'replace')!r}"
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


def _parse_fast(buf, path, s, e, layout, include, read_opts, parse_opts, conv_opts, checks):
    """One pyarrow read of a section; HeadroomError naming the first bad line otherwise."""
    raw = buf.raw
    try:
        table = pacsv.read_csv(
            pa.BufferReader(pa.py_buffer(buf.data[s:e])),
            read_options=read_opts,
            parse_options=parse_opts,
            convert_options=conv_opts,
        )
    except pa.ArrowInvalid as exc:
        raise _diagnose(
            path, raw, s, e, _line_at(buf.data, s), layout.columns, checks, str(exc).splitlines()[0]
        ) from None
    for col in include:
        c = table.column(col)
        if c.null_count:
            raise HeadroomError(
                f"{path}:{_line_at(buf.data, s) + 1 + _first_null(c)}: empty {col} value{_HINT}"
            )
    t = table.column(layout.time_col)
    if layout.time_col == "start-time":
        st = _np(t, np.int64)
    else:
        off = _np(t, np.float64)
        _check_finite(off, path, lambda: _line_at(buf.data, s), "offset")
        st = np.rint(off * 1e9).astype(np.int64)
    lat = _np(table.column("response-time"), np.float64)
    _check_finite(lat, path, lambda: _line_at(buf.data, s), "response-time")
    code = _np(table.column(layout.status_col), np.int64) if layout.status_col else None
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

    Only the very last line, and only when the file does not end with a line
    end and the line does not parse; anything else bad is an error.
    """
    raw, n = buf.raw, len(buf.data)
    if n == 0 or raw[n - 1 : n] in (b"\n",):
        return sections
    last_nl = raw.rfind(b"\n", 0, n)
    if last_nl < 0:
        return sections
    line = bytes(raw[last_nl + 1 : n]).decode("utf-8", errors="replace").rstrip("\r")
    if not line.strip() or _line_problem(line.split(","), columns, checks, line) is None:
        return sections
    s, e = sections[-1]
    if last_nl + 1 <= s:
        return sections
    ln = _line_at(buf.data, last_nl + 1)
    warnings.append(
        f"{path}:{ln}: dropped a truncated last line '{_short(line)}' "
        "(no line end: the load generator was probably stopped mid-write)"
    )
    return [*sections[:-1], (s, last_nl)]


def _read_requests(buf: _Buffer, path: Path, base_time_ns: int | None, skip_bad_rows: bool = False):
    raw = buf.raw
    header, _, sections = _sections(buf.data, path)
    layout = _layout(header, path)
    warnings: list[str] = []
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

    read_opts = pacsv.ReadOptions(column_names=layout.columns, skip_rows=1, use_threads=True)
    parse_opts = pacsv.ParseOptions(newlines_in_values=False, ignore_empty_lines=False)
    conv_opts = pacsv.ConvertOptions(
        column_types=types,
        include_columns=include,
        null_values=[""],
        strings_can_be_null=False,
        quoted_strings_can_be_null=False,
    )

    starts, lats, codes, offsets = [], [], [], [0]
    total = 0
    skipped: list[tuple[int, str]] = []
    sections = _drop_truncated_tail(buf, path, sections, layout.columns, checks, warnings)
    for s, e in sections:
        nl = raw.find(b"\n", s, e)
        if nl < 0 or (
            e - nl < 64 and not bytes(buf.data[nl:e]).strip()
        ):  # a header with no rows: an empty step
            offsets.append(total)
            continue
        try:
            st, lat, code = _parse_fast(
                buf, path, s, e, layout, include, read_opts, parse_opts, conv_opts, checks
            )
        except HeadroomError:
            if not skip_bad_rows:
                raise
            st, lat, code, bad = _parse_slow(raw, s, e, _line_at(buf.data, s), layout, checks)
            skipped += bad
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
    if layout.status_col:
        status = np.concatenate(codes)
        bad = (status < 200) | (status > 299)
        errors = int(bad.sum())
        if errors:
            vals, cnts = np.unique(status[bad], return_counts=True)
            error_codes = {int(v): int(c) for v, c in zip(vals, cnts)}
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
            base_time_ns = os.stat(path).st_mtime_ns - end_rel
            warnings.append(
                f"{path}: hey CSV has relative start offsets; wall-clock times are "
                "anchored at the file's modification time (pass a base time to override), "
                "so CPU alignment is approximate"
            )
        start_ns = start_ns + np.int64(base_time_ns)

    if len(start_ns) == 0:
        raise HeadroomError(f"{path}: no requests (the file has a header but no data rows)")

    # Rows stay in file (completion) order: bucketing needs no order, and a
    # sort of every step would cost more than the whole analysis.
    return Requests(start_ns, latency, step_offsets), errors, error_codes, layout.kind, warnings


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
                f"{path}:1: unexpected CPU header {header.decode('utf-8', 'replace')!r}: "
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
        if old_format:
            time_ns = _parse_go_times(table.column("timestamp"), path)
        else:
            time_ns = _np(table.column("timestamp"), np.int64)
        per = np.column_stack([_np(table.column(n), np.float64) for n in names[1:]])
        for j in range(per.shape[1]):
            _check_finite(per[:, j], path, lambda: 1, "percentage")
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
    arr = pa.array(iso, pa.string()).cast(_TS_UTC)
    out[:] = _np(pa.chunked_array([arr]), np.int64)
    return out


# --------------------------------------------------------------------------
# metadata


def read_metadata(path: Path) -> dict:
    """Read ``metadata.yml`` with PyYAML's safe loader; several documents merge."""
    import yaml

    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise HeadroomError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        docs = list(yaml.safe_load_all(text))
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
    return merged


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
        warning that names the first one.

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
    requests, errors, error_codes, fmt, warnings = read_requests(
        files.perf, base_time_ns=base_time_ns, skip_bad_rows=skip_bad_rows
    )
    cpu = None
    if files.cpu is not None:
        cores = cpu_cores
        if cores is None and isinstance(fields.get("cpu_cores"), (int, float)):
            cores = float(fields["cpu_cores"])
        cpu = read_cpu(files.cpu, cores=cores)
        if cpu.per_cpu is not None and cpu_cores is not None:
            cpu = CpuSamples(cpu.time_ns, cpu.pct, cpu.per_cpu, float(cpu.per_cpu.shape[1]), cpu.source)
    meta = RunMeta(label=label or run_label(fields, files.name), source=str(files.perf), fields=fields)
    return Run(
        requests=requests,
        cpu=cpu,
        meta=meta,
        errors=errors,
        error_codes=error_codes,
        warnings=tuple(warnings),
        format=fmt,
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

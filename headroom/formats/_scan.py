"""Bytes in: buffers (mapped or decompressed), sections, line diagnosis, RFC 3339, progress.

Everything a reader needs to turn a file into pyarrow tables and to name a
bad line: one buffer type, one gzip rule, one truncated-tail rule, one RFC
3339 parser, and the line-by-line diagnosis that runs only after pyarrow
refused some bytes (line numbers are counted only for error messages).
"""

from __future__ import annotations

import calendar
import gzip
import mmap
import os
import re
import sys
import time
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa

from ..model import HeadroomError

BOM = b"\xef\xbb\xbf"
#: The one timestamp type every reader produces: UTC nanoseconds.
TS_UTC = pa.timestamp("ns", tz="UTC")
#: Bytes of a file's beginning that detection looks at.
HEAD_BYTES = 64 << 10
#: Seconds of decompression after which a progress line appears (on a terminal).
DECOMPRESS_NOTE_S = 1.0

# RFC 3339 as Go writes it: 0-9 fractional digits, "Z" or a numeric offset.
RFC3339_RE = re.compile(
    r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d{1,9})?(Z|[+-](\d\d):(\d\d))$", re.ASCII
)
FLOAT_RE = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
HINT = " (or pass --skip-bad-rows to drop and count such rows)"


def _open_error(path: Path, exc: OSError) -> HeadroomError:
    if isinstance(exc, FileNotFoundError):
        return HeadroomError(f"{path}: no such file")
    if isinstance(exc, IsADirectoryError):
        return HeadroomError(f"{path}: is a folder, expected a file")
    if isinstance(exc, PermissionError):
        return HeadroomError(f"{path}: permission denied")
    return HeadroomError(f"{path}: cannot read ({exc.strerror or exc})")


def _gzip_error(path: Path, exc: Exception) -> HeadroomError:
    return HeadroomError(f"{path}: damaged or truncated gzip file ({exc}); re-copy or re-compress it")


class Progress:
    """A one-line progress report on a terminal, shown only for reads longer than a few seconds."""

    def __init__(
        self, path: Path, total: int, enabled: bool | None = None, after_s: float = 2.0, verb: str = "reading"
    ):
        self._time = time.monotonic
        self._out = sys.stderr
        self.enabled = self._out.isatty() if enabled is None else enabled
        self.path, self.total, self.after, self.verb = path, max(total, 1), after_s, verb
        self.t0 = self._time()
        self.shown = False

    def update(self, done: int) -> None:
        """Redraw the line when ``after_s`` has passed (``done`` of ``total`` bytes)."""
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
        """End the line (if one was shown)."""
        if self.shown:
            self._out.write("\n")
            self._out.flush()


class Buffer:
    """The bytes of a file: memory-mapped when plain; a gzip file decompressed.

    With ``stream=True`` a gzip file is decompressed to a temporary file and
    mapped, so that its size in memory stays bounded; otherwise in memory.
    """

    def __init__(self, path: Path, *, stream: bool = False, progress: bool | None = None):
        self.path = path
        self._mmap = None
        self._tmp = None
        self._file = None  # the mapped file, kept open for pread (slices read without touching the mapping)
        try:
            f = open(path, "rb")
            try:
                magic = f.read(2)
                if magic == b"\x1f\x8b" and stream:
                    self._tmp = _decompress_to_temp(path, progress)
                    self._map(self._tmp.fileno(), self._tmp.tell(), self._tmp.name)
                elif magic == b"\x1f\x8b":
                    f.seek(0)
                    try:
                        self.data = memoryview(gzip.decompress(f.read()))
                    except (EOFError, OSError, zlib.error) as e:
                        raise _gzip_error(path, e) from None
                else:
                    self._map(f.fileno(), os.fstat(f.fileno()).st_size, path)
                    if self._mmap is not None:
                        self._file, f = f, None
            finally:
                if f is not None:
                    f.close()
        except OSError as e:
            raise _open_error(path, e) from None

    def _map(self, fileno: int, size: int, name) -> None:
        if size == 0:
            self.data = memoryview(b"")
        else:
            self._mmap = mmap.mmap(fileno, 0, access=mmap.ACCESS_READ)
            self.data = memoryview(self._mmap)

    def arrow_slice(self, start: int, end: int, prefix: bytes = b"") -> pa.Buffer:
        """``prefix`` and bytes ``[start, end)`` as an Arrow-owned buffer, for pyarrow's threaded readers.

        Not ``pa.py_buffer`` over Python memory: its last reference may then
        be dropped on an Arrow worker thread while the interpreter exits,
        which takes the GIL from a finalizing interpreter and aborts the
        process ("terminate called without an active exception").
        """
        # a copy (one chunk at a time): an Arrow memory map of the file would keep every page
        # resident.  A mapped file is read with pread, so that its pages are never mapped into
        # this process (resident size stays that of the chunk, however large the file)
        fd = self._fd()
        if fd is None or not hasattr(os, "preadv"):  # in memory (gzip), or no preadv (Windows)
            out = arrow_copy(prefix + bytes(self.data[start:end]) if prefix else self.data[start:end])
            self.done_with(start, end)
            return out
        n, k = end - start, len(prefix)
        out = pa.allocate_buffer(k + n, memory_pool=pool())
        view = memoryview(out).cast("B")
        view[:k] = prefix
        done = 0
        while done < n:
            got = os.preadv(fd, [view[k + done :]], start + done)
            if got <= 0:  # the file shrank under us
                raise HeadroomError(f"{self.path}: the file changed while it was read")
            done += got
        return out

    def _fd(self) -> int | None:
        if self._mmap is None:
            return None
        f = self._file if self._file is not None else self._tmp
        return None if f is None or f.closed else f.fileno()

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
        """Release the mapping and any temporary file."""
        try:
            self.data.release()
            if self._mmap is not None:
                self._mmap.close()
        except BufferError:  # a pyarrow buffer still refers to it; GC will close it
            pass
        if self._file is not None:
            self._file.close()
        if self._tmp is not None:
            self._tmp.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_POOL: list = []


def pool() -> pa.MemoryPool:
    """The Arrow memory pool of streamed chunks: jemalloc where pyarrow has it.

    Chunks are allocated and freed on a parsing thread; mimalloc (pyarrow's
    default) keeps a heap per thread and holds on to freed chunks (measured
    at 5M rows: 7 MB more peak memory with one parsing thread, 20 MB with two).
    """
    if not _POOL:
        try:
            _POOL.append(pa.jemalloc_memory_pool())
        except (NotImplementedError, AttributeError):
            _POOL.append(pa.default_memory_pool())
    return _POOL[0]


def arrow_copy(data) -> pa.Buffer:
    """A copy of bytes in Arrow-owned memory (see :meth:`Buffer.arrow_slice` for why)."""
    out = pa.allocate_buffer(len(data))
    if len(data):
        np.frombuffer(out, np.uint8)[:] = np.frombuffer(data, np.uint8)
    return out


def _decompress_to_temp(path: Path, progress: bool | None):
    """A gzip file decompressed into a temporary file (its position at the end; removed on close)."""
    import tempfile

    tmp = tempfile.NamedTemporaryFile(prefix="headroom-")
    # decompressing takes seconds for a large run: say so on a terminal (share of the .gz read)
    prog = Progress(path, path.stat().st_size, progress, after_s=DECOMPRESS_NOTE_S, verb="decompressing")
    try:
        with open(path, "rb") as raw, gzip.GzipFile(fileobj=raw) as src:
            while chunk := src.read(1 << 22):
                tmp.write(chunk)
                prog.update(raw.tell())
    except (EOFError, OSError, zlib.error) as e:
        tmp.close()
        raise _gzip_error(path, e) from None
    finally:
        prog.close()
    tmp.flush()
    return tmp


def read_bytes(path: Path) -> bytes:
    """The whole file, decompressed when gzipped (whatever its name)."""
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise _open_error(path, e) from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (EOFError, OSError, zlib.error) as e:
            raise _gzip_error(path, e) from None
    return raw


def head_bytes(path: Path, n: int = HEAD_BYTES) -> bytes:
    """The first ``n`` bytes of a file, decompressed when gzipped."""
    try:
        with open(path, "rb") as f:
            raw = f.read(n)
            if raw[:2] != b"\x1f\x8b":
                return raw
            f.seek(0)
            try:
                with gzip.GzipFile(fileobj=f) as g:
                    return g.read(n)
            except (EOFError, OSError, zlib.error) as e:
                raise _gzip_error(path, e) from None
    except OSError as e:
        raise _open_error(path, e) from None


# --------------------------------------------------------------------------
# lines and text


def short(s, n: int = 100) -> str:
    """At most n characters of a value from a file as printed, printable ASCII only (binary junk as
    escapes, counted as printed: ``\\x00`` is four), and ``...`` when cut."""
    if isinstance(s, bytes):
        s = s[: n * 4].decode("utf-8", "replace")
    out, used = [], 0
    for ch in str(s):
        e = ascii(ch)[1:-1] if ch not in "'\"" else ch
        if used + len(e) > n:
            return "".join(out) + "..."
        out.append(e)
        used += len(e)
    return "".join(out)


def first_line(data: bytes) -> bytes:
    """The first line of ``data`` without its line end."""
    nl = data.find(b"\n")
    return (data if nl < 0 else data[:nl]).rstrip(b"\r")


def strip_bom(data: bytes) -> bytes:
    """``data`` without a leading UTF-8 byte order mark."""
    return data[3:] if data[:3] == BOM else data


def is_text(head: bytes) -> bool:
    """Whether the first 4 kB look like UTF-8 text (no NUL; a character cut at the end is fine)."""
    sample = head[:4096]
    if b"\x00" in sample:
        return False
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(sample) - 4:
            return False
    return True


def looks_like_text(b: bytes) -> bool:
    """One header line of printable UTF-8 text (tabs and CR allowed)."""
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return all(c >= 32 or c in (9, 13) for c in b)


def line_at(data, offset: int, release=None, start: int = 0) -> int:
    """1-based line number of a byte offset: a pass over the file, so for error messages only.

    Counted 4 MB at a time (memory bounded, whatever the offset);
    ``release(start, end)`` is called on the bytes counted.  With ``start``,
    the lines from there (1 + its line ends before ``offset``): a caller
    that knows the line at ``start`` counts only the bytes after it.
    """
    n, pos, step = 0, start, 1 << 22
    while pos < offset:
        end = min(pos + step, offset)
        n += bytes(data[pos:end]).count(b"\n")
        if release is not None:
            release(pos, end)
        pos = end
    return 1 + n


def truncated_tail(raw, n: int) -> int | None:
    """Offset of a last line cut off mid-write (no line end after it), or None.

    Decided by the missing line end alone, never by whether the fragment
    parses ("0.0" from "0.0010" still parses).
    """
    end = n
    while end and raw[end - 1 : end] in (b" ", b"\t"):
        end -= 1
    if end == 0 or raw[end - 1 : end] in (b"\n", b"\r"):
        return None
    nl = raw.rfind(b"\n", 0, end)
    if nl < 0 or not bytes(raw[nl + 1 : end]).strip():
        return None
    return nl + 1


def truncated_warning(path: Path, line: int, nbytes: int, text) -> str:
    """The one wording of the truncated-tail warning."""
    return (
        f"{path}:{line}: dropped a truncated last line of {nbytes} bytes without a line end "
        f"'{short(text, 60)}' (the load generator was probably stopped mid-write)"
    )


def drop_truncated_tail(data: bytes, path: Path, warnings: list[str]) -> bytes:
    """A file that does not end with a line end was cut mid-write: drop its last line, with a warning."""
    cut = truncated_tail(data, len(data))
    if cut is None:
        return data
    end = len(data.rstrip(b" \t"))
    warnings.append(truncated_warning(path, data.count(b"\n", 0, cut) + 1, end - cut, data[cut:end]))
    return data[:cut]


# --------------------------------------------------------------------------
# RFC 3339


def check_time(value: str) -> bool:
    """RFC 3339 whose fields are a real date and time (so that a bad value is named at its own line)."""
    m = RFC3339_RE.match(value)
    if not m:
        return False
    y, mo, d, h, mi, sec = (int(m[i]) for i in range(1, 7))
    if not (1 <= y and 1 <= mo <= 12 and h <= 23 and mi <= 59 and sec <= 60):
        return False
    if not 1 <= d <= calendar.monthrange(y, mo)[1]:
        return False
    return m[9] is None or (int(m[9]) <= 23 and int(m[10]) <= 59)


def np_column(chunked: pa.ChunkedArray, dtype) -> np.ndarray:
    """A numpy view (or copy, for several chunks) of a null-free fixed-width column, without pandas."""
    parts = []
    width = np.dtype(dtype).itemsize
    for a in chunked.chunks:
        if len(a) == 0:
            continue
        buf = a.buffers()[1]
        parts.append(np.frombuffer(buf, dtype=dtype, count=len(a), offset=a.offset * width))
    if not parts:
        return np.empty(0, dtype=dtype)
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


def rfc3339_ns(values, path: Path, line_of, what: str = "timestamp") -> np.ndarray:
    """RFC 3339 strings (a list or a pyarrow string array) as UTC ns; a bad one is named at its line.

    The one RFC 3339 parser of the readers: pyarrow's cast, and only when it
    fails a value-by-value pass to find the culprit (``line_of(i)``).
    """
    arr = values if isinstance(values, pa.Array | pa.ChunkedArray) else pa.array(values, pa.string())
    try:
        ts = arr.cast(TS_UTC)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        for i, v in enumerate(arr.to_pylist()):
            try:
                pa.array([v], pa.string()).cast(TS_UTC)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                ln = line_of(i)
                where = f"{path}:{ln}" if ln else f"{path}"
                raise HeadroomError(f"{where}: bad {what} '{short(v, 40)}' (expected RFC 3339)") from None
        raise
    if isinstance(ts, pa.Array):
        ts = pa.chunked_array([ts], type=TS_UTC)
    return np_column(ts, np.int64).copy()


def first_null(col: pa.ChunkedArray) -> int:
    """Row index of the first null of a column."""
    base = 0
    for a in col.chunks:
        if a.null_count:
            valid = np.frombuffer(a.buffers()[0], dtype=np.uint8)
            bits = np.unpackbits(valid, bitorder="little")[a.offset : a.offset + len(a)]
            return base + int(np.argmin(bits))
        base += len(a)
    return 0


# --------------------------------------------------------------------------
# slow, line-by-line diagnosis: only runs after pyarrow rejected some bytes


def line_problem(fields: list[str], columns: list[str], checks: dict[str, str], line: str) -> str | None:
    """What is wrong with one CSV line (``checks``: column -> "time", "float" or "int"), or None."""
    if len(fields) != len(columns):
        return f"expected {len(columns)} fields ({short(','.join(columns), 80)}), got {len(fields)}: '{short(line, 60)}'"
    for col, kind in checks.items():
        v = fields[columns.index(col)]
        if kind == "time" and not check_time(v):
            return f"bad {col} '{short(v, 60)}' (expected RFC 3339 UTC, e.g. 2017-08-25T21:07:33.008Z)"
        if kind == "float":
            if not FLOAT_RE.match(v):
                return f"bad {col} '{short(v, 60)}' (expected a number)"
            if float(v) < 0:
                return f"bad {col} '{short(v, 60)}' (must be >= 0)"
        if kind == "int" and not re.match(r"^\d{1,18}$", v, re.ASCII):
            return f"bad {col} '{short(v, 60)}' (expected an integer)"
    return None


def scan_lines(raw, start: int, end: int, line_no: int, columns: list[str], checks: dict[str, str]):
    """Yield (line number, fields, problem or None) for each data line after a header at ``line_no``."""
    text = bytes(raw[start:end]).decode("utf-8", errors="replace")
    lines = text.split("\n")[1:]
    if lines and lines[-1] == "":  # what follows the last line end is no line (a chunk ends with one)
        lines.pop()
    for i, line in enumerate(lines, start=1):
        line = line.rstrip("\r")
        fields = line.split(",")
        yield line_no + i, fields, line_problem(fields, columns, checks, line)


def diagnose(path: Path, raw, start: int, end: int, line_no: int, columns, checks, fallback: str):
    """Find the first bad line of a section (header at ``line_no``) and describe it in one line."""
    for ln, _, problem in scan_lines(raw, start, end, line_no, columns, checks):
        if problem:
            return HeadroomError(f"{path}:{ln}: {problem}{HINT}")
    return HeadroomError(f"{path}:{line_no}: cannot parse this CSV section: {fallback}")


def sections(data: memoryview, path: Path, release=None) -> tuple[bytes, int, list[tuple[int, int]]]:
    """Split a CSV buffer into sections that each start with the same header.

    Returns the header line (without line ending), the offset of the first
    data byte after a BOM, and ``(start, end)`` byte offsets of every section
    (each starting at its header line).  ``release(start, end)`` is called
    on bytes searched, so that a mapped file's pages can be let go.
    """
    raw = data.obj
    begin = 3 if raw[:3] == BOM else 0
    end = len(data)  # trailing blank lines / whitespace are fine
    while end > begin and raw[end - 1 : end] in (b"\n", b"\r", b" ", b"\t"):
        end -= 1
    if end <= begin:
        raise HeadroomError(f"{path}: the file is empty")
    nl = raw.find(b"\n", begin, end)
    header_line = bytes(raw[begin : (nl if nl >= 0 else end)])
    header = header_line.rstrip(b"\r")
    if b"\x00" in header or not looks_like_text(header):
        raise HeadroomError(f"{path}:1: not a CSV text file (binary data in the first line)")
    marker = b"\n" + header_line + (b"\n" if nl >= 0 else b"")
    starts = [begin] + _find_all(raw, marker, begin, end, release)
    # a header as the very last line has no line end after it (trailing ones were stripped)
    tail = end - len(header)
    if nl >= 0 and tail > starts[-1] and raw[tail:end] == header and raw[tail - 1 : tail] == b"\n":
        starts.append(tail)
    bounds = [(s, starts[k + 1] if k + 1 < len(starts) else end) for k, s in enumerate(starts)]
    return header, begin, bounds


def bare_cr(head: bytes) -> bool:
    """Whether a text file's first line ends in a bare CR (classic Mac line ends, or CR-only
    lines mixed with LF ones): its rows would run together."""
    if not is_text(head):
        return False  # a binary log (Gatling 3.13+) may hold any byte
    nl = head.find(b"\n")
    first = head if nl < 0 else head[:nl]
    cr = first.find(b"\r")
    return 0 <= cr < len(first) - 1 or (nl < 0 and cr >= 0)


def _find_all(raw, marker: bytes, pos: int, end: int, release) -> list[int]:
    """Offsets just after every ``marker``'s leading newline, 4 MB at a time."""
    out = []
    # small: the pages searched are let go after each window; never shorter than the marker
    window = max(1 << 22, 2 * len(marker))
    while pos < end:
        stop = min(pos + window, end + 1)
        i = raw.find(marker, pos, stop)
        if i >= 0:
            out.append(i + 1)
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
    return out


def prefetch(fn, items, ahead: int = 1, workers: int = 1):
    """``fn(item)`` for every item, in order, with up to ``ahead`` items computed ahead on ``workers`` threads.

    Parsing (pyarrow, which releases the GIL) of the next chunks then runs
    while the caller reduces the current one: a second core does the numpy
    work that would otherwise follow each parse.  Memory: ``ahead + 1``
    results at a time.  An exception is raised where its item is reached, so
    errors come in file order; stopping early cancels what was queued.
    """
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    items = iter(items)
    if ahead < 1:
        yield from map(fn, items)
        return
    executor = ThreadPoolExecutor(max(1, workers), thread_name_prefix="headroom-parse")
    queue: deque = deque()
    try:
        for item in items:
            queue.append(executor.submit(fn, item))
            if len(queue) > ahead:
                yield queue.popleft().result()
        while queue:
            yield queue.popleft().result()
    finally:
        for fut in queue:
            fut.cancel()
        executor.shutdown(wait=True)


def chunks(raw, s: int, e: int, chunk_bytes: int, release=None) -> list[tuple[int, int]]:
    """Split ``[s, e)`` into byte ranges of about ``chunk_bytes`` ending at line ends.

    ``release(start, end)`` is called on the bytes up to each line end found
    (the search maps pages of a mapped file, whole folios of them).
    """
    out, pos = [], s
    while e - pos > chunk_bytes:
        cut = raw.find(b"\n", pos + chunk_bytes, e)
        if cut < 0:
            break
        out.append((pos, cut + 1))
        if release is not None:
            release(pos, cut)
        pos = cut + 1
    out.append((pos, e))
    if release is not None and len(out) > 1:
        release(pos, e)
    return out

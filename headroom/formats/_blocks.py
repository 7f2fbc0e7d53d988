"""Text files cut into blocks of whole lines, and the pyarrow helpers that parse a block.

The streamed readers (vegeta, k6, oha, JMeter, Gatling) read a file once, a
block of about ``chunk_bytes`` (4 MB by default) at a time, plain or gzip
(by its magic bytes), so that memory follows the block and not the file.
A block ends at a line end, and, for CSV whose quoted values may hold line
ends, only at one outside quotes: no record is ever split.  Line numbers
are carried from block to block, so an error names the file line even
when pyarrow parsed the block.  A last line without a line end was cut
mid-write: it is left out with the one truncated-tail warning.

Two cutters, for two kinds of parser:

- :func:`blocks` reads straight into Arrow memory and yields :class:`Block`
  slices (no copy on the way to ``pyarrow.csv`` / ``pyarrow.json``), with
  the helpers that parse one (:func:`read_block_csv`, :func:`json_read_options`),
  map its rows back to file lines (:func:`row_lines`, :func:`json_row_lines`),
  name its first bad line (:func:`diagnose_block`, :func:`first_null_line`)
  and turn its columns into numpy (:func:`col_np`, :func:`label_codes`,
  :func:`py_strings`): vegeta, k6, oha;
- :class:`TextBlocks` over :func:`raw_chunks` yields ``bytes`` blocks for
  readers that work on the raw bytes (Gatling's numpy tab scan) or copy
  the block themselves (JMeter).

Nothing here knows a format: a reader passes its column names, types and
the function that says what is wrong with one row.
"""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ._common import diagnose_csv, fail, steps_of_labels  # noqa: F401 - k6, vegeta import it here
from ._scan import _gzip_error, _open_error, np_column, truncated_warning

# --------------------------------------------------------------------------
# blocks in Arrow memory (vegeta, k6, oha)


class Block(NamedTuple):
    """Whole lines of a file: ``data`` (an Arrow buffer; its last line end included except at the end
    of the file), ``line0`` the file line of its first line, ``nlines`` the line ends in it."""

    data: object
    line0: int
    nlines: int

    def text(self) -> bytes:
        """The block's bytes (a copy: for the line-by-line paths only)."""
        return self.data.to_pybytes()

    def lines(self) -> int:
        """Lines in the block (the last one may have no line end)."""
        n = len(self.data)
        return self.nlines + (1 if n and self.data[n - 1] != 10 else 0)

    def blank_line(self) -> bool:
        """Whether the block holds an empty line (``\\n\\n``, or a line end first)."""
        a = np.frombuffer(self.data, np.uint8)
        nl = a == 10
        return bool(len(a) and (nl[0] or (nl[1:] & nl[:-1]).any()))


_WS = np.zeros(256, bool)
_WS[[9, 10, 11, 12, 13, 32]] = True


def is_blank(buf) -> bool:
    """Whether an Arrow buffer holds only ASCII whitespace."""
    a = np.frombuffer(buf, np.uint8)
    return bool(_WS[a[:4096]].all() and _WS[a].all())


def _last_nl(a: np.ndarray, lo: int, hi: int) -> int:
    """Offset of the last line end in ``a[lo:hi]`` (-1: none), looking back from the end in windows."""
    w = 1 << 16
    while hi > lo:
        s = max(lo, hi - w)
        hit = np.flatnonzero(a[s:hi] == 10)
        if len(hit):
            return s + int(hit[-1])
        hi, w = s, w * 4
    return -1


#: Bytes a record may span inside quotes before a block is cut at a line end anyway (a stray quote)
_QUOTED_MAX = 64 << 20


def _record_end(a: np.ndarray, lo: int, hi: int, quotes: bool) -> int:
    """Offset just after the last line end in ``a[lo:hi]`` that ends a record (-1: none).

    With ``quotes`` (CSV fields may hold line ends inside double quotes) a line end
    ends a record when an even number of quotes comes before it (RFC 4180 doubles
    a quote inside a quoted field); ``lo`` is at a record start.
    """
    p = _last_nl(a, lo, hi)
    if quotes and p >= 0:
        qpos = lo + np.flatnonzero(a[lo:p] == 34)
        k = len(qpos)  # quotes before p
        while p >= 0 and k & 1:
            p = _last_nl(a, lo, int(qpos[k - 1]))
            k = int(np.searchsorted(qpos, p)) if p >= 0 else 0
        if p < 0 and hi - lo > _QUOTED_MAX:  # an open quote that never closes: pyarrow names the line
            p = _last_nl(a, lo, hi)
    return p + 1 if p >= 0 else -1


def _count_nl(a: np.ndarray) -> int:
    """Line ends in ``a``, counted 256 kB at a time (a mask of the whole block is slower to make)."""
    w = 1 << 18
    return sum(int(np.count_nonzero(a[i : i + w] == 10)) for i in range(0, len(a), w))


def _block(buf, a: np.ndarray, lo: int, hi: int, line: int) -> Block:
    return Block(buf.slice(lo, hi - lo), line, _count_nl(a[lo:hi]))


class _Source:
    """A file's bytes, plain or gzip (by its magic bytes), read into caller's buffers.

    ``read_errors``: a plain file that cannot be read is named so (as :func:`raw_chunks` does),
    not as a damaged gzip file."""

    def __init__(self, path: Path, read_errors: bool = False):
        self.path, self.read_errors = path, read_errors
        try:
            self.raw = open(path, "rb")  # noqa: SIM115 - closed by blocks()
        except OSError as e:
            raise _open_error(path, e) from None
        self.src, self.size = self.raw, None
        try:
            magic = self.raw.read(2)
        except OSError as e:
            if not read_errors:
                raise
            self.raw.close()
            raise _open_error(path, e) from None
        if magic == b"\x1f\x8b":
            self.src = gzip.GzipFile(fileobj=self.raw)
        else:
            self.size = os.fstat(self.raw.fileno()).st_size  # a plain file's blocks are no larger than it
        self.raw.seek(0)

    def fill(self, mv) -> int:
        """Read into ``mv`` until it is full or the file ends; the bytes read."""
        got = 0
        try:
            while got < len(mv):
                k = self.src.readinto(mv[got:])
                if not k:
                    break
                got += k
        except (EOFError, OSError, zlib.error) as e:
            if self.read_errors and self.src is self.raw:
                raise _open_error(self.path, e) from None
            raise _gzip_error(self.path, e) from None
        return got


def blocks(
    path: Path,
    chunk_bytes: int,
    warnings: list[str],
    *,
    quotes: bool = False,
    header: bool = False,
    read_errors: bool = False,
) -> Iterator[Block]:
    """The file (plain or gzip, by its magic bytes) as blocks of about ``chunk_bytes`` whole lines.

    The bytes are read straight into Arrow memory, and a block is a slice of it
    (no copy for pyarrow).  ``header``: a leading byte order mark and the first
    line are left out (the caller read the header).  A last line without a line
    end (a run killed mid-write) is dropped with the one truncated-tail warning.
    Blocks of line ends only are not yielded.  Memory: one block (and the bytes
    read after its last record).  ``read_errors``: see :class:`_Source`.
    """
    import pyarrow as pa

    chunk_bytes = max(int(chunk_bytes), 1)
    source = _Source(path, read_errors)
    raw, size, fill = source.raw, source.size, source.fill
    try:
        line, carry, seen_nl, first = 1, b"", False, header
        while True:
            want = chunk_bytes if size is None else min(chunk_bytes, max(size - raw.tell(), 0) + 1)
            buf = pa.allocate_buffer(len(carry) + want)
            mv = memoryview(buf).cast("B")
            mv[: len(carry)] = carry
            got = fill(mv[len(carry) :])
            n, eof = len(carry) + got, got < want
            a = np.frombuffer(buf, np.uint8, count=n)
            lo = 0
            if first:  # the header line (after a byte order mark): wait for its line end
                lo = 3 if bytes(a[:3]) == b"\xef\xbb\xbf" else 0
                hit = np.flatnonzero(a[lo:n] == 10)
                nl = lo + int(hit[0]) if len(hit) else -1
                if nl < 0 and not eof:
                    carry = bytes(a)
                    continue
                first, seen_nl, line = False, nl >= 0, 2
                lo = nl + 1 if nl >= 0 else n
            if eof:
                break
            cut = _record_end(a, lo, n, quotes)
            if cut < 0:
                carry = bytes(a[lo:n])
                continue
            seen_nl = True
            blk = _block(buf, a, lo, cut, line)
            if blk.nlines < cut - lo or not is_blank(blk.data):
                yield blk
            line += blk.nlines
            carry = bytes(a[cut:n])
        # the end of the file: whole lines up to the last line end (an open quote is pyarrow's to name)
        cut = _last_nl(a, lo, n) + 1
        if cut > 0:
            blk = _block(buf, a, lo, cut, line)
            if blk.nlines < cut - lo:
                yield blk
            line, lo, seen_nl = line + blk.nlines, cut, True
        rest = bytes(a[lo:n])
        end = len(rest.rstrip(b" \t"))
        if seen_nl and end and rest[end - 1 : end] != b"\r" and rest.strip():
            warnings.append(truncated_warning(path, line, end, rest[:end]))
        elif rest.strip(b"\r\n"):
            yield Block(buf.slice(lo, n - lo), line, 0)
    finally:
        raw.close()


def row_lines(block: Block, nrows: int, csv_quotes: bool = False, delimiter: str = ",") -> np.ndarray:
    """File line of every row pyarrow read from ``block`` (which skips blank lines)."""
    if nrows == block.lines():
        return np.arange(block.line0, block.line0 + nrows, dtype=np.int64)
    if csv_quotes:  # rows spanning lines: where each record starts
        import csv
        import io

        limit = csv.field_size_limit(1 << 30)  # restored: the diagnosis names fields over the default
        try:
            r = csv.reader(
                io.StringIO(block.text().decode("utf-8", "replace"), newline=""), delimiter=delimiter
            )
            out, prev = [], 0
            for row in r:
                if row:
                    out.append(block.line0 + prev)
                prev = r.line_num
        finally:
            csv.field_size_limit(limit)
        found = np.asarray(out, np.int64)
    else:
        text = block.text()
        parts = text.split(b"\n")
        if text.endswith(b"\n"):
            parts.pop()
        found = block.line0 + np.flatnonzero([bool(p.strip(b"\r")) for p in parts]).astype(np.int64)
    if len(found) != nrows:  # pragma: no cover - pyarrow and the csv module disagree: approximate
        return np.arange(block.line0, block.line0 + nrows, dtype=np.int64)
    return found


def json_row_lines(block: Block, nrows: int) -> np.ndarray | None:
    """File line of every JSON record pyarrow read from ``block`` (one per non-blank line; pyarrow
    skips blank ones), or None when the records are not the non-blank lines."""
    if nrows == block.lines():
        return np.arange(block.line0, block.line0 + nrows, dtype=np.int64)
    parts = block.text().split(b"\n")
    found = block.line0 + np.flatnonzero([bool(p.strip()) for p in parts]).astype(np.int64)
    return found if len(found) == nrows else None


def diagnose_block(block: Block, path: Path, ncols: int, row_problem, why: str, delimiter: str = ","):
    """The first bad line of a block pyarrow refused (line numbers from ``block.line0``), as an error."""
    return diagnose_csv(block.text(), path, ncols, False, row_problem, delimiter, why, line0=block.line0)


def read_block_csv(block: Block, path: Path, *, columns, types, row_problem, newlines=False, delimiter=","):
    """One block parsed by pyarrow (only the typed columns), else the error naming its bad line."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    try:
        return pacsv.read_csv(
            pa.BufferReader(block.data),
            read_options=pacsv.ReadOptions(column_names=columns, use_threads=len(block.data) >= 1 << 20),
            parse_options=pacsv.ParseOptions(newlines_in_values=newlines, delimiter=delimiter),
            convert_options=pacsv.ConvertOptions(
                column_types=types, include_columns=list(types), null_values=[""],
                strings_can_be_null=False, quoted_strings_can_be_null=False,
            ),
        )  # fmt: skip
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise diagnose_block(block, path, len(columns), row_problem, str(exc), delimiter) from None


def json_read_options(block: Block):
    """pyarrow.json options for a block: threads only for a block worth them (a small one pays more
    to start them than it saves)."""
    import pyarrow.json as pajson

    return pajson.ReadOptions(use_threads=len(block.data) >= 1 << 20)


def first_null_line(t, names, lines: np.ndarray, path: Path) -> None:
    """``empty NAME value`` at the line of the first null of the first column (of ``names``) with one."""
    from ._scan import first_null

    for n in names:
        c = t.column(n)
        if c.null_count:
            raise fail(path, int(lines[first_null(c)]), f"empty {n} value")


def py_strings(col) -> list[str]:
    """A pyarrow string column as Python strings (null: ""), bytes that are not UTF-8 replaced
    (pyarrow's JSON reader lets them through; ``to_pylist`` would raise)."""
    import pyarrow as pa

    return ["" if v is None else v.decode("utf-8", "replace") for v in col.cast(pa.binary()).to_pylist()]


def label_codes(col, labels: dict[str, int]) -> np.ndarray:
    """Codes (int64) of a pyarrow string column's values, new names added to ``labels`` in file order."""
    import pyarrow as pa
    import pyarrow.compute as pc

    uniq = pc.unique(col)
    ids = np.array([labels.setdefault(v, len(labels)) for v in py_strings(uniq)], np.int64)
    if len(uniq) == 1:
        return np.full(len(col), ids[0], np.int64)
    idx = pc.index_in(col, value_set=uniq)
    idx = idx if isinstance(idx, pa.ChunkedArray) else pa.chunked_array([idx])
    return ids[np_column(idx, np.int32)]


def col_np(col, dtype) -> np.ndarray:
    """A null-free fixed-width pyarrow column as a compact numpy copy (without pandas)."""
    import pyarrow as pa

    chunked = col if isinstance(col, pa.ChunkedArray) else pa.chunked_array([col])
    out = np_column(chunked, dtype)
    joined = sum(1 for a in chunked.chunks if len(a)) > 1  # then ``out`` is a new array already
    return out if joined else out.copy()


# --------------------------------------------------------------------------
# blocks of bytes (JMeter, Gatling)


def raw_chunks(path: Path, data: bytes | None, chunk_bytes: int) -> Iterator[bytes]:
    """The file's bytes (decompressed when gzipped, by its magic bytes), about ``chunk_bytes`` at a time.

    ``data``: the whole file already read (then no second read).
    """
    if data is not None:
        view = memoryview(data)
        for i in range(0, len(data), chunk_bytes):
            yield bytes(view[i : i + chunk_bytes])
        return
    try:
        f = open(path, "rb")
    except OSError as e:
        raise _open_error(path, e) from None
    with f:
        try:
            magic = f.read(2)
            f.seek(0)
        except OSError as e:
            raise _open_error(path, e) from None
        src = f
        if magic == b"\x1f\x8b":
            src = gzip.GzipFile(fileobj=f)
        while True:
            try:
                chunk = src.read(chunk_bytes)
            except (EOFError, zlib.error) as e:
                raise _gzip_error(path, e) from None
            except OSError as e:
                raise (_gzip_error(path, e) if src is not f else _open_error(path, e)) from None
            if not chunk:
                return
            yield chunk


class TextBlocks:
    """A text file cut into blocks of whole lines, about ``chunk_bytes`` each, in one pass.

    Iterating yields ``(buf, start, end, line)``: the block is ``buf[start:end]``
    (a memoryview of it is free), ``line`` the file line (1-based, counted
    by ``\\n``) it starts at, :attr:`line_after` the line after it.  With ``quotes`` a block ends only at a line end
    outside double quotes (an even number of ``"`` before it), so that a
    quoted value with line ends in it stays in one block.  The last line of
    a file that does not end with a line end was cut mid-write: it is left
    out, and :attr:`truncated` holds the warning (the one rule of
    ``_scan.truncated_tail``, applied to the file's end only).  After the
    pass :attr:`lines` is the number of ``\\n`` in what was yielded.
    """

    def __init__(self, path: Path, chunks: Iterator[bytes], chunk_bytes: int, *, quotes: bool = False):
        self.path, self.chunks, self.chunk_bytes, self.quotes = path, chunks, max(1, chunk_bytes), quotes
        self.truncated: str | None = None
        self.lines = 0
        self.line_after = 1  # while a block is out: the line after it

    @staticmethod
    def _quoted_cut(a: np.ndarray, parity: int) -> int:
        """After the last line end of ``a`` outside quotes (0: none), when the last one is inside."""
        npos = np.flatnonzero(a == 10)
        before = np.searchsorted(np.flatnonzero(a == 34), npos)
        ok = npos[(parity + before) % 2 == 0]
        return int(ok[-1]) + 1 if len(ok) else 0

    def __iter__(self):
        carry, parity, line = b"", 0, 1
        for chunk in self.chunks:
            buf = carry + chunk if carry else chunk
            cut = buf.rfind(b"\n") + 1 if len(buf) >= self.chunk_bytes else 0
            if cut and self.quotes:
                a = np.frombuffer(buf, np.uint8, count=cut)
                q = int(np.count_nonzero(a == 34))
                if (parity + q) % 2:  # the last line end is inside quotes (rare)
                    cut = self._quoted_cut(a, parity)
                    q = int(np.count_nonzero(a[:cut] == 34))
                parity = (parity + q) % 2
            if cut <= 0:
                carry = buf
                continue
            n = int(np.count_nonzero(np.frombuffer(buf, np.uint8, count=cut) == 10))
            carry = buf[cut:]
            self.line_after = line + n
            yield buf, 0, cut, line
            line += n
        # the end: a last line without a line end was cut mid-write (unless the file is one line)
        nl = carry.rfind(b"\n")
        tail = carry[nl + 1 :]
        end = len(tail.rstrip(b" \t"))
        if end and tail[end - 1 : end] != b"\r" and (nl >= 0 or line > 1) and tail[:end].strip():
            at = line + carry.count(b"\n")
            self.truncated = truncated_warning(self.path, at, end, tail[:end])
            carry = carry[: nl + 1]
        self.lines = line - 1 + carry.count(b"\n")
        self.line_after = self.lines + 1
        if carry:
            yield carry, 0, len(carry), line

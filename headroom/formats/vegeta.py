"""vegeta: ``vegeta encode -to csv`` (no header) and ``vegeta encode -to json`` (JSON lines).

Every result has its absolute start (unix ns), status code (0: no response)
and latency (ns): exact per request.  Steps: one per ``attack`` name (a rate
ramp is several named attacks), ordered by their first request; an attack name that
holds a number (``rate250``) states its intended rate (headroom.levels: sent
rate and "fell behind schedule").

Both readers are one pass over the file in blocks of whole lines
(:func:`blocks`, also used by the k6 and oha readers): each block is parsed
by pyarrow (only the needed columns), and only a block pyarrow refuses is
read again line by line to name the bad line, its line numbers known from
the blocks before it.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ._batch import CHUNK_BYTES, Batch, Scan
from ._common import EXACT, Table, diagnose_csv, fail, first_line, is_int, rfc3339_ns, short
from ._plans import Found, GroupPlan
from ._scan import TS_UTC, _gzip_error, _open_error, np_column, truncated_warning

CSV_COLUMNS = [
    "timestamp", "code", "latency", "bytes_out", "bytes_in", "error",
    "body", "attack", "seq", "method", "url", "headers",
]  # fmt: skip
_CSV_FIRST = re.compile(rb"^\d{15,20},\d{1,3},\d+,\d+,\d+,")
_JSON_KEYS = (b'"attack"', b'"seq"', b'"code"', b'"timestamp"', b'"latency"')


def guess_csv(head: bytes) -> bool:
    return bool(_CSV_FIRST.match(first_line(head)))


def guess_json(head: bytes) -> bool:
    line = first_line(head).lstrip()
    return line.startswith(b"{") and all(k in line for k in _JSON_KEYS)


# --------------------------------------------------------------------------
# blocks of whole lines (shared with k6 and oha)


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


def _block(buf, a: np.ndarray, lo: int, hi: int, line: int) -> Block:
    return Block(buf.slice(lo, hi - lo), line, int(np.count_nonzero(a[lo:hi] == 10)))


class _Source:
    """A file's bytes, plain or gzip (by its magic bytes), read into caller's buffers."""

    def __init__(self, path: Path):
        self.path = path
        try:
            self.raw = open(path, "rb")  # noqa: SIM115 - closed by blocks()
        except OSError as e:
            raise _open_error(path, e) from None
        self.src, self.size = self.raw, None
        if self.raw.read(2) == b"\x1f\x8b":
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
            raise _gzip_error(self.path, e) from None
        return got


def blocks(
    path: Path, chunk_bytes: int, warnings: list[str], *, quotes: bool = False, header: bool = False
) -> Iterator[Block]:
    """The file (plain or gzip, by its magic bytes) as blocks of about ``chunk_bytes`` whole lines.

    The bytes are read straight into Arrow memory, and a block is a slice of it
    (no copy for pyarrow).  ``header``: a leading byte order mark and the first
    line are left out (the caller read the header).  A last line without a line
    end (a run killed mid-write) is dropped with the one truncated-tail warning.
    Blocks of line ends only are not yielded.  Memory: one block (and the bytes
    read after its last record).
    """
    import pyarrow as pa

    chunk_bytes = max(int(chunk_bytes), 1)
    source = _Source(path)
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


def read_block_csv(block: Block, path: Path, *, columns, types, row_problem, newlines=False):
    """One block parsed by pyarrow (only the typed columns), else the error naming its bad line."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    try:
        return pacsv.read_csv(
            pa.BufferReader(block.data),
            read_options=pacsv.ReadOptions(column_names=columns, use_threads=len(block.data) >= 1 << 20),
            parse_options=pacsv.ParseOptions(newlines_in_values=newlines),
            convert_options=pacsv.ConvertOptions(
                column_types=types, include_columns=list(types), null_values=[""],
                strings_can_be_null=False, quoted_strings_can_be_null=False,
            ),
        )  # fmt: skip
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise diagnose_block(block, path, len(columns), row_problem, str(exc)) from None


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
    return np.array(np_column(chunked, dtype), dtype=dtype, copy=True)


def steps_of_labels(key: np.ndarray, labels: list[str], start: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Step of every row from its label code, steps ordered by their first start (ties: file order)."""
    first = np.full(len(labels), np.iinfo(np.int64).max)
    np.minimum.at(first, key, start)
    rank = np.argsort(first, kind="stable")
    pos = np.empty(len(labels), np.int64)
    pos[rank] = np.arange(len(labels))
    return pos[key], [labels[r] for r in rank]


# --------------------------------------------------------------------------
# CSV


def _row_problem(row):
    for i, name in ((0, "timestamp"), (1, "code"), (2, "latency")):
        if not is_int(row[i]) or int(row[i]) < 0:
            return f"bad {name} '{short(row[i], 40)}' (expected a non-negative integer)"
    if int(row[0]) > 2**63 - 1 or int(row[2]) > 2**63 - 1:
        return f"value out of range: '{short(','.join(row[:3]))}'"
    return None


def _check_batch(path: Path, start, code, lat_ns, lines) -> None:
    for name, arr in (("timestamp", start), ("latency", lat_ns), ("code", code)):
        if len(arr) and arr.min() < 0:
            i = int(np.argmin(arr))
            raise fail(path, int(lines[i]), f"bad {name} {int(arr[i])} (must be >= 0)")


def _new_scan(path: Path, fmt: str) -> Scan:
    return Scan(path=Path(path), fmt=fmt, fidelity=EXACT, key_kind="label")


def scan_csv(path: Path, *, chunk_bytes: int = CHUNK_BYTES) -> Scan:
    """One pass over a vegeta CSV in blocks: start, latency, code and the attack's code per row."""
    scan = _new_scan(path, "vegeta-csv")
    scan._gen = _csv_batches(scan, chunk_bytes)
    return scan


def _csv_batches(scan: Scan, chunk_bytes: int) -> Iterator[Batch]:
    import pyarrow as pa

    path, labels, rows = scan.path, {}, 0
    types = {"timestamp": pa.int64(), "code": pa.int64(), "latency": pa.int64(), "attack": pa.string()}
    any_text = False
    for blk in blocks(path, chunk_bytes, scan.warnings, quotes=True):
        if not any_text and is_blank(blk.data):
            continue
        any_text = True
        t = read_block_csv(
            blk, path, columns=CSV_COLUMNS, types=types, row_problem=_row_problem, newlines=True
        )
        if t.num_rows == 0:
            continue
        lines = row_lines(blk, t.num_rows, csv_quotes=True)
        first_null_line(t, ["timestamp", "code", "latency"], lines, path)
        start, code, lat = (col_np(t.column(c), np.int64) for c in ("timestamp", "code", "latency"))
        _check_batch(path, start, code, lat, lines)
        key = label_codes(t.column("attack"), labels)
        scan.labels[:] = list(labels)
        rows += len(start)
        yield Batch(start, lat / 1e9, code, None, key, lines)
    if not any_text:
        raise fail(path, None, "the file is empty")


def finish(scan: Scan, rows: Batch) -> Table:
    """The request table of a vegeta scan: one step per attack, rate steps from the attack names."""
    warnings = list(scan.warnings)
    path, start = scan.path, rows.start_ns
    key = rows.key if rows.key is not None else np.zeros(len(start), np.int64)
    labels = list(scan.labels) or [""]
    step, names = steps_of_labels(key, labels, start)
    if len(start) == 0:
        step, names = step, []
    src = f"the attack name ({len(names)} attacks)" if len(names) > 1 else "one attack: one step"
    rates = _rates(path, start, step, names, warnings)
    return Table(
        fmt=scan.fmt,
        fidelity=EXACT,
        start_ns=start,
        latency_s=rows.latency_s,
        status=rows.status,
        step=step,
        step_names=names,
        step_rates=rates,
        steps_source=src,
        line=rows.line,
        warnings=warnings,
    )


def _read(scan: Scan) -> Table:
    from ._batch import join

    return finish(scan, join(list(scan.batches())))


def read_csv(path: Path, data: bytes | None = None) -> Table:
    """The whole-table reader: :func:`scan_csv` joined (``data`` is not used: the file is read in blocks)."""
    return _read(scan_csv(path))


def _rates(path, start, step, names, warnings) -> list[dict] | None:
    """Rate steps of the attacks (headroom.levels): intended rate from the attack name
    (``rate250`` -> 250/s), sent rate as vegeta reports it, and whether the attack fell behind."""
    from ..levels import rate_from_name, reader_steps, steps_from_groups

    want = [rate_from_name(n) for n in names]
    if all(w is None for w in want):
        return None
    inf = steps_from_groups(start, step, intended_rps=want, source="the attack names")
    warnings += [f"{path}: {x}" for x in inf.notes]
    rs = reader_steps(inf, names=names)
    return None if rs is None else rs.rates


# --------------------------------------------------------------------------
# JSON lines


def _json_fast(blk: Block, path: Path, labels: dict[str, int]) -> Batch | None:
    """A block of JSON lines parsed by pyarrow (only the needed fields); None when anything is off,
    so that the block is read line by line to name the bad line."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pajson

    schema = pa.schema([("timestamp", pa.string()), ("code", pa.int64()), ("latency", pa.int64()),
                        ("attack", pa.string())])  # fmt: skip
    opts = pajson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    try:
        t = pajson.read_json(
            pa.BufferReader(blk.data), read_options=json_read_options(blk), parse_options=opts
        )
        if t.num_rows == 0 or any(t.column(c).null_count for c in ("timestamp", "code", "latency")):
            return None
        start = col_np(t.column("timestamp").cast(TS_UTC).cast(pa.int64()), np.int64)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    code, lat = col_np(t.column("code"), np.int64), col_np(t.column("latency"), np.int64)
    if (len(lat) and lat.min() < 0) or (len(code) and code.min() < 0):
        return None
    lines = json_row_lines(blk, t.num_rows)
    if lines is None:  # several results on one line, or one over several: the slow path knows
        return None
    key = label_codes(pc.fill_null(t.column("attack"), ""), labels)
    return Batch(start, lat / 1e9, code, None, key, lines)


def _json_slow(blk: Block, path: Path, labels: dict[str, int]) -> Batch:
    """A block line by line with the json module: the first bad line is named."""
    starts, lats, codes, keys, lines = [], [], [], [], []
    for ln, line in enumerate(blk.text().split(b"\n"), start=blk.line0):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            ts, lat, code = rec["timestamp"], rec["latency"], rec["code"]
            if (
                not (isinstance(lat, int) and isinstance(code, int) and isinstance(ts, str))
                or lat < 0
                or code < 0
            ):
                raise ValueError
        except (ValueError, KeyError, TypeError, RecursionError):
            raise fail(
                path, ln, f"not a vegeta JSON result (timestamp, code, latency): '{short(line)}'"
            ) from None
        starts.append(ts)
        lats.append(lat)
        codes.append(code)
        keys.append(labels.setdefault(str(rec.get("attack") or ""), len(labels)))
        lines.append(ln)
    start = rfc3339_ns(starts, path, lambda i: lines[i])
    try:
        lat_ns = np.array(lats, np.int64)
        code_a = np.array(codes, np.int64)
    except OverflowError:
        i = next(i for i in range(len(lats)) if max(lats[i], codes[i]) > 2**63 - 1)
        raise fail(path, lines[i], f"value out of range: latency {lats[i]}, code {codes[i]}") from None
    return Batch(start, lat_ns / 1e9, code_a, None, np.array(keys, np.int64), np.array(lines, np.int64))


def scan_json(path: Path, *, chunk_bytes: int = CHUNK_BYTES) -> Scan:
    """One pass over vegeta JSON lines in blocks (pyarrow per block; the json module for a block it refuses)."""
    scan = _new_scan(path, "vegeta-json")
    scan._gen = _json_batches(scan, chunk_bytes)
    return scan


def _json_batches(scan: Scan, chunk_bytes: int) -> Iterator[Batch]:
    path, labels, rows = scan.path, {}, 0
    for blk in blocks(path, chunk_bytes, scan.warnings):
        b = _json_fast(blk, path, labels)
        if b is None:  # pyarrow refused the block, or its rows are not its lines
            b = _json_slow(blk, path, labels)
        scan.labels[:] = list(labels)
        if len(b):
            rows += len(b)
            yield b
    if rows == 0:
        raise fail(path, None, "no results in this vegeta JSON file")


def read_json(path: Path, data: bytes | None = None) -> Table:
    """The whole-table reader: :func:`scan_json` joined (``data`` is not used)."""
    return _read(scan_json(path))


# --------------------------------------------------------------------------
# the step plan of a spooled file (headroom.spooled): the same steps as finish()


class VegetaPlan:
    """vegeta: one step per attack, in order of first request; rates from the attack names."""

    def __init__(self, scan, raw):
        self.scan = scan
        self.plan = GroupPlan(raw, scan.labels)

    def assign(self, c: dict) -> np.ndarray:
        return self.plan.assign(c)

    def found(self) -> Found:
        from ..levels import group_steps, rate_from_name, reader_steps

        g, names = self.plan, self.plan.names
        src = f"the attack name ({len(names)} attacks)" if len(names) > 1 else "one attack: one step"
        w, rates = list(self.scan.warnings), None
        want = [rate_from_name(n) for n in names]
        if any(x is not None for x in want):
            o = g.order
            inf = group_steps(g.first[o], g.last[o], g.n[o], intended_rps=want, source="the attack names")
            w += [f"{self.scan.path}: {x}" for x in inf.notes]
            rs = reader_steps(inf, names=names)
            rates = None if rs is None else rs.rates
        return Found(names, None, rates, src, w)

"""vegeta: ``vegeta encode -to csv`` (no header) and ``vegeta encode -to json`` (JSON lines).

Every result has its absolute start (unix ns), status code (0: no response)
and latency (ns): exact per request.  Steps: one per ``attack`` name (a rate
ramp is several named attacks), ordered by their first request; an attack name that
holds a number (``rate250``) states its intended rate (headroom.levels: sent
rate and "fell behind schedule").

Both readers are one pass over the file in blocks of whole lines
(:func:`headroom.formats._blocks.blocks`, also used by the k6 and oha readers): each block is parsed
by pyarrow (only the needed columns), and only a block pyarrow refuses is
read again line by line to name the bad line, its line numbers known from
the blocks before it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..endpoints import NameCodes, joined, only_name
from ._batch import CHUNK_BYTES, Batch, Scan
from ._blocks import (  # noqa: F401 - all importable from here, as before the move to _blocks
    Block,
    blocks,
    col_np,
    diagnose_block,
    first_null_line,
    is_blank,
    json_read_options,
    json_row_lines,
    label_codes,
    py_strings,
    read_block_csv,
    row_lines,
    steps_of_labels,
)
from ._common import EXACT, fail, first_line, is_int, rfc3339_ns, short
from ._plans import Found, GroupPlan
from ._protocol import Reader
from ._scan import TS_UTC

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


def scan_csv(path: Path, *, chunk_bytes: int = CHUNK_BYTES, name: str | None = None) -> Scan:
    """One pass over a vegeta CSV in blocks: start, latency, code, the attack's code and the request's
    name (``METHOD url``) per row; ``name``: the requests of that name only (``--name``)."""
    scan = _new_scan(path, "vegeta-csv")
    scan._gen = _csv_batches(scan, chunk_bytes)
    return only_name(scan, name)


def _csv_batches(scan: Scan, chunk_bytes: int) -> Iterator[Batch]:
    import pyarrow as pa

    path, labels, rows, names = scan.path, {}, 0, NameCodes(scan.names)
    # method and url as bytes: most runs have one of each, found by a compare (names.of_pairs)
    types = {"timestamp": pa.int64(), "code": pa.int64(), "latency": pa.int64(), "attack": pa.string(),
             "method": pa.binary(), "url": pa.binary()}  # fmt: skip
    any_text = False
    for blk in blocks(path, chunk_bytes, scan.warnings, quotes=True):
        if not any_text and is_blank(blk.data):
            continue
        any_text = True
        # a line end inside a quoted body is possible only in a block with a quote: pyarrow's
        # quote-aware row finder (slower, one thread) only then
        quoted = bool((np.frombuffer(blk.data, np.uint8) == 34).any())
        t = read_block_csv(
            blk, path, columns=CSV_COLUMNS, types=types, row_problem=_row_problem, newlines=quoted
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
        yield Batch(
            start, lat / 1e9, code, None, key, lines, names.of_pairs(t.column("method"), t.column("url"))
        )
    if not any_text:
        raise fail(path, None, "the file is empty")


# --------------------------------------------------------------------------
# JSON lines


def _json_fast(blk: Block, path: Path, labels: dict[str, int], names: NameCodes) -> Batch | None:
    """A block of JSON lines parsed by pyarrow (only the needed fields); None when anything is off,
    so that the block is read line by line to name the bad line."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pajson

    schema = pa.schema([("timestamp", pa.string()), ("code", pa.int64()), ("latency", pa.int64()),
                        ("attack", pa.string()), ("method", pa.string()), ("url", pa.string())])  # fmt: skip
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
    return Batch(
        start, lat / 1e9, code, None, key, lines, names.of_pairs(t.column("method"), t.column("url"))
    )


def _json_slow(blk: Block, path: Path, labels: dict[str, int], names: NameCodes) -> Batch:
    """A block line by line with the json module: the first bad line is named."""
    starts, lats, codes, keys, lines, named = [], [], [], [], [], []
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
        named.append(joined(rec.get("method") or "", rec.get("url") or ""))
        lines.append(ln)
    start = rfc3339_ns(starts, path, lambda i: lines[i])
    try:
        lat_ns = np.array(lats, np.int64)
        code_a = np.array(codes, np.int64)
    except OverflowError:
        i = next(i for i in range(len(lats)) if max(lats[i], codes[i]) > 2**63 - 1)
        raise fail(path, lines[i], f"value out of range: latency {lats[i]}, code {codes[i]}") from None
    keys_a, lines_a = np.array(keys, np.int64), np.array(lines, np.int64)
    return Batch(start, lat_ns / 1e9, code_a, None, keys_a, lines_a, names.of_values(named))


def scan_json(path: Path, *, chunk_bytes: int = CHUNK_BYTES, name: str | None = None) -> Scan:
    """One pass over vegeta JSON lines in blocks (pyarrow per block; the json module for a block it refuses);
    ``name``: the requests of that name (``METHOD url``) only (``--name``)."""
    scan = _new_scan(path, "vegeta-json")
    scan._gen = _json_batches(scan, chunk_bytes)
    return only_name(scan, name)


def _json_batches(scan: Scan, chunk_bytes: int) -> Iterator[Batch]:
    path, labels, rows, names = scan.path, {}, 0, NameCodes(scan.names)
    for blk in blocks(path, chunk_bytes, scan.warnings):
        b = _json_fast(blk, path, labels, names)
        if b is None:  # pyarrow refused the block, or its rows are not its lines
            b = _json_slow(blk, path, labels, names)
        scan.labels[:] = list(labels)
        if len(b):
            rows += len(b)
            yield b
    if rows == 0:
        raise fail(path, None, "no results in this vegeta JSON file")


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
        from ..levels import reader_steps
        from ..plan_steps import group_steps, rate_from_name

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


# --------------------------------------------------------------------------
# the readers

CSV_READER = Reader(
    "vegeta-csv", "vegeta", EXACT, "vegeta attack ... | vegeta encode -to csv > results.csv",
    "headerless rows 'unix-ns,code,latency-ns,bytes-out,bytes-in,...'", guess_csv, scan_csv, VegetaPlan,
    scan_options=("name",),
)  # fmt: skip
JSON_READER = Reader(
    "vegeta-json", "vegeta", EXACT, "vegeta attack ... | vegeta encode -to json > results.json",
    "JSON lines with attack, seq, code, timestamp and latency", guess_json, scan_json, VegetaPlan,
    scan_options=("name",),
)  # fmt: skip

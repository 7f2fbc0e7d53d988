"""vegeta: ``vegeta encode -to csv`` (no header) and ``vegeta encode -to json`` (JSON lines).

Every result has its absolute start (unix ns), status code (0: no response)
and latency (ns): exact per request.  Steps: one per ``attack`` name (a rate
ramp is several named attacks), ordered by their first request; an attack name that
holds a number (``rate250``) states its intended rate (headroom.levels: sent
rate and "fell behind schedule").
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from ._common import (
    EXACT,
    Table,
    arrow_csv,
    drop_truncated_tail,
    fail,
    first_line,
    is_int,
    rfc3339_ns,
    short,
)
from ._scan import TS_UTC, arrow_copy, np_column

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


def _row_problem(row):
    for i, name in ((0, "timestamp"), (1, "code"), (2, "latency")):
        if not is_int(row[i]) or int(row[i]) < 0:
            return f"bad {name} '{short(row[i], 40)}' (expected a non-negative integer)"
    if int(row[0]) > 2**63 - 1 or int(row[2]) > 2**63 - 1:
        return f"value out of range: '{short(','.join(row[:3]))}'"
    return None


def read_csv(path: Path, data: bytes) -> Table:
    import pyarrow as pa

    warnings: list[str] = []
    data = drop_truncated_tail(data, path, warnings)
    if not data.strip():
        raise fail(path, None, "the file is empty")
    t = arrow_csv(
        data,
        path,
        columns=CSV_COLUMNS,
        types={"timestamp": pa.int64(), "code": pa.int64(), "latency": pa.int64(), "attack": pa.string()},
        header=False,
        row_problem=_row_problem,
        newlines_in_values=True,
    )
    return _table(path, t, warnings, "vegeta-csv")


def stream_csv(path: Path) -> Table | None:
    """Read a plain (not gzipped) vegeta CSV in blocks, keeping only the columns it needs.

    Memory follows the kept columns (about 20 bytes a request), not the file
    (bodies and headers make vegeta's lines long).  None when pyarrow refuses
    the file: then the whole-file reader names the bad line.
    """
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from ._scan import truncated_tail, truncated_warning

    warnings: list[str] = []
    with open(path, "rb") as f:
        if f.read(2) == b"\x1f\x8b":
            return None
        size = f.seek(0, 2)
        f.seek(max(0, size - (1 << 16)))
        tail = f.read()
    cut = truncated_tail(tail, len(tail))
    if cut is not None and tail.rfind(b"\n", 0, cut) < 0 and size > len(tail):
        return None  # a cut line longer than 64 kB: the whole-file reader decides
    types = {"timestamp": pa.int64(), "code": pa.int64(), "latency": pa.int64(), "attack": pa.string()}
    opts = (
        pacsv.ReadOptions(column_names=CSV_COLUMNS, block_size=1 << 20),
        pacsv.ParseOptions(newlines_in_values=True),
        pacsv.ConvertOptions(column_types=types, include_columns=list(types), null_values=[""],
                             strings_can_be_null=False, quoted_strings_can_be_null=False),
    )  # fmt: skip
    cols: list[list[np.ndarray]] = [[], [], [], []]
    labels: dict[str, int] = {}
    try:
        with pacsv.open_csv(
            str(path), read_options=opts[0], parse_options=opts[1], convert_options=opts[2]
        ) as r:
            for b in r:  # keep compact numpy copies, let pyarrow's block go
                if any(b.column(i).null_count for i in range(3)):
                    return None
                for i in range(3):
                    cols[i].append(np_column(pa.chunked_array([b.column(i)]), np.int64).copy())
                enc = b.column(3).dictionary_encode()
                ids = np.array(
                    [labels.setdefault(str(v), len(labels)) for v in enc.dictionary.to_pylist()], np.int32
                )
                cols[3].append(ids[np_column(pa.chunked_array([enc.indices]), np.int32)])
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if not cols[0]:
        return None
    names = pa.array(list(labels), pa.string())
    attack = pa.DictionaryArray.from_arrays(pa.array(np.concatenate(cols[3])), names).cast(pa.string())
    t = pa.table({"timestamp": np.concatenate(cols[0]), "code": np.concatenate(cols[1]),
                  "latency": np.concatenate(cols[2]), "attack": attack})  # fmt: skip
    if cut is not None:  # drop the cut-off last line, as the whole-file reader does
        end = len(tail.rstrip(b" \t"))
        lines = t.num_rows + 1
        warnings.append(truncated_warning(path, lines, end - cut, tail[cut:end]))
        t = t.slice(0, t.num_rows - 1)
    return _table(path, t, warnings, "vegeta-csv")


def _table(path, t, warnings, fmt) -> Table:
    from ._common import as_np, null_check

    null_check(t, path, ["timestamp", "code", "latency"], header=False)
    start = as_np(t.column("timestamp"), np.int64)
    lat_ns = as_np(t.column("latency"), np.int64)
    code = as_np(t.column("code"), np.int64)
    for name, arr in (("timestamp", start), ("latency", lat_ns), ("code", code)):
        if len(arr) and arr.min() < 0:
            i = int(np.argmin(arr))
            raise fail(path, i + 1, f"bad {name} {int(arr[i])} (must be >= 0)")
    from ._common import steps_from_arrow

    step, names = steps_from_arrow(t.column("attack"), start)
    src = f"the attack name ({len(names)} attacks)" if len(names) > 1 else "one attack: one step"
    rates = _rates(path, start, step, names, warnings)
    return Table(
        fmt=fmt,
        fidelity=EXACT,
        start_ns=start,
        latency_s=lat_ns / 1e9,
        status=code,
        step=step,
        step_names=names,
        step_rates=rates,
        steps_source=src,
        line=np.arange(1, len(start) + 1),
        warnings=warnings,
    )


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


def _json_arrow(path: Path, data: bytes, warnings: list[str]) -> Table | None:
    """JSON lines parsed by pyarrow (only the needed fields); None when anything is off, so that
    the line-by-line reader names the bad line."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pajson

    schema = pa.schema([("timestamp", pa.string()), ("code", pa.int64()), ("latency", pa.int64()),
                        ("attack", pa.string())])  # fmt: skip
    opts = pajson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    try:
        t = pajson.read_json(pa.BufferReader(arrow_copy(data)), parse_options=opts)
        if t.num_rows == 0 or any(t.column(c).null_count for c in ("timestamp", "code", "latency")):
            return None
        if pc.min(t.column("latency")).as_py() < 0 or pc.min(t.column("code")).as_py() < 0:
            return None
        start = t.column("timestamp").cast(TS_UTC).cast(pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    t = pa.table({"timestamp": start, "code": t.column("code"), "latency": t.column("latency"),
                  "attack": pc.fill_null(t.column("attack"), "")})  # fmt: skip
    return _table(path, t, warnings, "vegeta-json")


def read_json(path: Path, data: bytes) -> Table:
    """JSON lines: pyarrow's JSON reader, or line by line with the json module to name a bad line."""
    import pyarrow as pa

    warnings: list[str] = []
    data = drop_truncated_tail(data, path, warnings)
    fast = _json_arrow(path, data, warnings)
    if fast is not None:
        return fast
    starts, lats, codes, attacks = [], [], [], []
    for ln, line in enumerate(data.split(b"\n"), start=1):
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
        attacks.append(str(rec.get("attack") or ""))
    if not starts:
        raise fail(path, None, "no results in this vegeta JSON file")
    start = rfc3339_ns(starts, path, lambda i: i + 1)
    t = pa.table({"timestamp": start, "code": np.array(codes, np.int64), "latency": np.array(lats, np.int64),
                  "attack": pa.array(attacks, pa.string())})  # fmt: skip
    return _table(path, t, warnings, "vegeta-json")

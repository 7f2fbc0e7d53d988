"""What every format reader shares: the request table it returns, bytes in, errors out."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ._checks import fail
from ._scan import (  # noqa: F401 - the readers' shared helpers, one import place
    HEAD_BYTES,
    arrow_copy,
    drop_truncated_tail,
    first_line,
    head_bytes,
    is_text,
    read_bytes,
    rfc3339_ns,
    short,
    strip_bom,
)

#: How exact a format is.
EXACT = "exact per request"
COARSE_MS = "per request, millisecond times"
SUMMARY = "not usable: one summary per run"


@dataclass
class Table:
    """The request table every reader produces (one row per request, any order).

    ``start_ns`` is UTC nanoseconds since the epoch, or relative to the
    generator's own start when ``relative``.  A request failed when ``ok`` is
    False (formats with their own success flag) or, without ``ok``, when its
    ``status`` is not 2xx (status 0: no HTTP response, e.g. connection
    refused).  Both None: the format cannot tell, errors are unknown.
    ``step`` is the 0-based step of every row (None: one step).  Rate steps
    (an open-loop ramp) have ``step_rates`` and no ``step_concurrency``.
    """

    fmt: str
    fidelity: str
    start_ns: np.ndarray
    latency_s: np.ndarray
    status: np.ndarray | None = None
    ok: np.ndarray | None = None
    step: np.ndarray | None = None
    step_names: list[str] = field(default_factory=list)
    step_concurrency: list[int | None] | None = None
    #: rate steps (open loop): per step intended_rps, sent_rps, dropped, fell_behind (None: unknown)
    step_rates: list[dict] | None = None
    steps_source: str = ""
    relative: bool = False
    line: np.ndarray | None = None  # file line of every row, for messages (None: unknown)
    warnings: list[str] = field(default_factory=list)


def line_of_row(row_lines: np.ndarray | None, i: int) -> int | None:
    if row_lines is None or i >= len(row_lines):
        return None
    return int(row_lines[i])


def check_values(path: Path, t: Table) -> None:
    """Latencies finite and >= 0, relative starts in range: else exit 2 naming the line."""
    check_rows(path, t.start_ns, t.latency_s, t.line, t.relative)


def check_rows(path: Path, start_ns: np.ndarray, latency_s: np.ndarray, lines, relative: bool) -> None:
    """:func:`check_values` on columns (a whole table, or one batch of a scan)."""
    from ._checks import MAX_OFFSET_S

    # two passes when all is well (NaN fails >= 0; +inf is the largest): the mask only for the message
    if len(latency_s) and not (bool((latency_s >= 0).all()) and np.isfinite(latency_s.max())):
        i = int(np.argmax(~np.isfinite(latency_s) | (latency_s < 0)))
        raise fail(
            path, line_of_row(lines, i), f"bad latency {float(latency_s[i])!r} (must be a finite number >= 0)"
        )
    if relative:
        bad = (start_ns < 0) | (start_ns > MAX_OFFSET_S * 1e9)
        if bad.any():
            i = int(np.argmax(bad))
            raise fail(path, line_of_row(lines, i), f"relative start {start_ns[i] / 1e9:.6g} s is outside 0 to "
                       f"{MAX_OFFSET_S:.0e} s: a damaged value")  # fmt: skip


def arrow_csv(
    data: bytes,
    path: Path,
    *,
    columns: list[str],
    types: dict,
    header: bool,
    row_problem,
    delimiter: str = ",",
    newlines_in_values: bool = False,
):
    """Parse CSV bytes with pyarrow (only the typed columns); on failure name the first bad line.

    ``row_problem(fields) -> str | None`` judges one row of strings, used only
    to find and describe the bad line after pyarrow refused the file.
    """
    import pyarrow as pa
    import pyarrow.csv as pacsv

    try:
        return pacsv.read_csv(
            pa.BufferReader(arrow_copy(data)),
            read_options=pacsv.ReadOptions(
                column_names=columns, skip_rows=1 if header else 0, use_threads=True
            ),
            parse_options=pacsv.ParseOptions(delimiter=delimiter, newlines_in_values=newlines_in_values),
            convert_options=pacsv.ConvertOptions(
                column_types=types,
                include_columns=list(types),
                null_values=[""],
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise diagnose_csv(data, path, len(columns), header, row_problem, delimiter, str(exc)) from None


def diagnose_csv(
    data: bytes,
    path: Path,
    ncols: int,
    header: bool,
    row_problem,
    delimiter: str,
    why: str,
    *,
    line0: int = 1,
):
    """The first bad line of CSV bytes pyarrow refused, as an error (``line0``: the file line of the
    bytes' first line; blank lines are skipped, as pyarrow skips them)."""
    import csv
    import io
    import re

    text = io.StringIO(data.decode("utf-8", "replace"), newline="")
    reader = csv.reader(text, delimiter=delimiter)
    off = line0 - 1
    try:
        for row in reader:
            ln = off + reader.line_num
            if (header and reader.line_num == 1) or not row:
                continue
            if len(row) != ncols:
                return fail(
                    path, ln, f"expected {ncols} fields, got {len(row)}: '{short(delimiter.join(row))}'"
                )
            problem = row_problem(row)
            if problem:
                return fail(path, ln, problem)
    except csv.Error as e:
        return fail(path, off + reader.line_num, f"bad CSV ({short(str(e))})")
    why = re.sub(r"Row #\d+: ", "", why.splitlines()[0] if why else why)  # pyarrow's count may be a block's
    return fail(path, None, f"cannot parse this CSV file: {short(why)}")


def as_np(col, dtype) -> np.ndarray:
    """A numpy copy of a pyarrow column with no nulls (by its buffers: ``to_numpy`` imports pandas)."""
    import pyarrow as pa

    from ._scan import np_column

    chunked = col if isinstance(col, pa.ChunkedArray) else pa.chunked_array([col])
    physical = {pa.int64(): np.int64, pa.int32(): np.int32, pa.float64(): np.float64}.get(chunked.type)
    if chunked.null_count == 0 and physical is not None:
        return np.asarray(np_column(chunked, physical), dtype=dtype).copy()
    return np.asarray(col.to_numpy(), dtype=dtype)


def null_check(table, path: Path, names, header: bool = True) -> None:
    for n in names:
        c = table.column(n)
        if c.null_count:
            i = int(np.flatnonzero(np.asarray(c.is_null().to_numpy(zero_copy_only=False)))[0])
            raise fail(path, i + 1 + (1 if header else 0), f"empty {n} value")


def is_float(v: str) -> bool:
    try:
        float(v)
    except ValueError:
        return False
    return True


def is_int(v: str) -> bool:
    v = v.strip()
    return v.isascii() and (v.isdigit() or (v[:1] in "+-" and v[1:].isdigit()))


def steps_from_labels(labels, order_by: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Step index of every row from a label per row; steps ordered by their first time."""
    uniq, inv = np.unique(np.asarray(labels, dtype=object).astype(str), return_inverse=True)
    first = np.full(len(uniq), np.iinfo(np.int64).max)
    np.minimum.at(first, inv, order_by)
    rank = np.argsort(first, kind="stable")
    pos = np.empty(len(uniq), np.int64)
    pos[rank] = np.arange(len(uniq))
    return pos[inv], [str(uniq[r]) for r in rank]


def steps_from_concurrency(conc: np.ndarray) -> tuple[np.ndarray, list[str], list[int | None]]:
    """Step index of every row from its concurrency: one step per level, in increasing order."""
    levels, inv = np.unique(conc, return_inverse=True)
    return inv.astype(np.int64), [f"concurrency {int(v)}" for v in levels], [int(v) for v in levels]


def steps_of_labels(key: np.ndarray, labels: list[str], start: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Step of every row from its label code, steps ordered by their first start (ties: file order)."""
    first = np.full(len(labels), np.iinfo(np.int64).max)
    np.minimum.at(first, key, start)
    rank = np.argsort(first, kind="stable")
    pos = np.empty(len(labels), np.int64)
    pos[rank] = np.arange(len(labels))
    return pos[key], [labels[r] for r in rank]


def steps_from_arrow(col, order_by: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Like :func:`steps_from_labels` for a pyarrow string column, without Python strings per row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    enc = pc.dictionary_encode(pc.fill_null(col, ""))
    idx = np.asarray(enc.indices.to_numpy(zero_copy_only=False), np.int64)
    labels = [str(v) for v in enc.dictionary.to_pylist()]
    return steps_of_labels(idx, labels, order_by)

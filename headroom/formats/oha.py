"""oha ``--output-format csv``: relative start (s since oha started), durations (s), status.

Exact per request, but times are relative like hey's: the run is anchored
at the file's modification time (or ``--hey-start``).  One file is one step.
Read in one pass, in blocks of whole lines (:func:`headroom.formats._blocks.blocks`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ._batch import CHUNK_BYTES, Batch, Scan
from ._blocks import blocks, col_np, first_null_line, read_block_csv, row_lines
from ._common import EXACT, fail, first_line, is_float, short
from ._protocol import Reader
from ._scan import head_bytes, np_column, strip_bom

HEADER = b"request-start,DNS,DNS+dialup,Response-delay,request-duration,bytes,status"


def guess_csv(head: bytes) -> bool:
    return first_line(head).lstrip(b"\xef\xbb\xbf").startswith(b"request-start,")


def scan_csv(path: Path, *, chunk_bytes: int = CHUNK_BYTES) -> Scan:
    """One pass over an oha CSV in blocks: relative start (ns), latency and status per row."""
    path = Path(path)
    head = first_line(strip_bom(head_bytes(path)))
    cols = [c.strip() for c in head.decode("utf-8", "replace").split(",")]
    for need in ("request-start", "request-duration"):
        if need not in cols:
            raise fail(path, 1, f"oha CSV header without {need}: '{short(head)}'")
    scan = Scan(path=path, fmt="oha-csv", fidelity=EXACT, key_kind=None, relative=True)
    scan._gen = _batches(scan, chunk_bytes, cols)
    return scan


def _batches(scan: Scan, chunk_bytes: int, cols: list[str]):
    import pyarrow as pa

    path = scan.path
    types = {"request-start": pa.float64(), "request-duration": pa.float64()}
    if "status" in cols:
        types["status"] = pa.int64()
    si, di = cols.index("request-start"), cols.index("request-duration")

    def problem(row):
        for i, n in ((si, "request-start"), (di, "request-duration")):
            if not is_float(row[i]):
                return f"bad {n} '{short(row[i], 40)}' (expected seconds)"
        if "status" in cols and not row[cols.index("status")].isdigit():
            return f"bad status '{short(row[cols.index('status')], 40)}' (expected an integer)"
        return None

    rows = 0
    for blk in blocks(path, chunk_bytes, scan.warnings, header=True):
        t = read_block_csv(blk, path, columns=cols, types=types, row_problem=problem)
        if t.num_rows == 0:
            continue
        lines = row_lines(blk, t.num_rows)
        first_null_line(t, list(types), lines, path)
        rel = np_column(t.column("request-start"), np.float64)  # only read: no copy
        lat = col_np(t.column("request-duration"), np.float64)
        for name, arr in (("request-start", rel), ("request-duration", lat)):
            lo, hi = arr.min(), arr.max()  # NaN in either when there is one
            if not (np.isfinite(hi) and lo >= 0 and hi <= 1e7):
                bad = ~np.isfinite(arr) | (arr < 0) | (arr > 1e7)
                i = int(np.argmax(bad))
                raise fail(
                    path,
                    int(lines[i]),
                    f"bad {name} {float(arr[i])!r} (must be a finite number of seconds, 0 to 1e7)",
                )
        status = col_np(t.column("status"), np.int64) if "status" in types else None
        rows += len(rel)
        ns = rel * 1e9
        yield Batch(np.rint(ns, out=ns).astype(np.int64), lat, status, None, None, lines)
    if rows == 0:
        raise fail(path, None, "no requests (the file has a header but no data rows)")


def plan(scan: Scan, raw):
    """The step plan of a spooled oha file: one step, as :func:`finish` says."""
    from ._plans import OneStep

    return OneStep(scan, "one oha run: one step (give one file per step, or --steps)")


READER = Reader(
    "oha-csv", "oha", EXACT, "oha --no-tui --output-format csv URL > results.csv", "a header 'request-start,...'",
    guess_csv, scan_csv, plan, one_file_per_step=True, one_step=True,
)  # fmt: skip

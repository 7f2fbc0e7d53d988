"""ApacheBench ``ab -g FILE``: one tab-separated row per request, written when the run ends.

``starttime<TAB>seconds<TAB>ctime<TAB>dtime<TAB>ttime<TAB>wait`` (Apache httpd
2.4 ``support/ab.c``): ``starttime`` is ``apr_ctime`` of the request's start (local
time, ``Wed Nov 25 16:31:05 2026``), ``seconds`` the same start in whole seconds
since the epoch (UTC), ``ctime`` the connect time, ``dtime`` total minus connect,
``ttime`` the total and ``wait`` the time to the first response byte, each
rounded to the millisecond.  What follows from that:

- the start of a request is known to the second (``seconds``, truncated):
  per-second counts are exact, anything finer is not;
- the latency is ``ttime`` (ms, rounded);
- rows are sorted by ``ttime`` (ab sorts its results for its percentiles
  before it writes them), not by start;
- there is no status column: ab writes a row for every response it read
  (non-2xx and bad lengths included) and none for a connection that failed,
  so errors are unknown (``ok`` and ``status`` None).

One file is one ab run, one concurrency: one step (a folder of one file per
step, the concurrency in each name: ``ab-c8.tsv``; or ``--steps``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ._batch import CHUNK_BYTES, Batch, Scan
from ._blocks import blocks, col_np, first_null_line, read_block_csv, row_lines
from ._common import fail, first_line, short
from ._protocol import Reader
from ._scan import head_bytes, strip_bom

TOOL = "ApacheBench"
HEADER = b"starttime\tseconds\tctime\tdtime\tttime\twait"
COLUMNS = ["starttime", "seconds", "ctime", "dtime", "ttime", "wait"]
FIDELITY = "per request, start time to 1 s, latency to 1 ms"
EXPORT = "ab -n N -c C -g ab-cC.tsv URL (one file per concurrency)"
ONE_STEP = "one ab run: one step (give one file per step, the concurrency in its name, or --steps)"
#: seconds since the epoch ab can have written: 2000-01-01 .. 2100-01-01
_SEC_MIN, _SEC_MAX = 946_684_800, 4_102_444_800


def guess_tsv(head: bytes) -> bool:
    return first_line(strip_bom(head)).rstrip(b"\r") == HEADER


def _problem(row: list[str]) -> str | None:
    for name, v in zip(COLUMNS[1:], row[1:]):
        if not v.isdigit():
            unit = "whole seconds since the epoch" if name == "seconds" else "whole ms"
            return f"bad {name} '{short(v, 40)}' (expected {unit})"
    return None


def scan_tsv(path: Path, *, chunk_bytes: int = CHUNK_BYTES) -> Scan:
    """One pass over an ``ab -g`` file in blocks: start (whole seconds, as ns) and ``ttime`` per row."""
    path = Path(path)
    head = first_line(strip_bom(head_bytes(path))).rstrip(b"\r")
    if head != HEADER:
        raise fail(path, 1, f"not the header of 'ab -g' ({HEADER.decode()!r}): '{short(head)}'")
    scan = Scan(path=path, fmt="ab", fidelity=FIDELITY)
    scan._gen = _batches(scan, chunk_bytes)
    return scan


def _batches(scan: Scan, chunk_bytes: int):
    import pyarrow as pa

    path = scan.path
    types = {"seconds": pa.int64(), "ttime": pa.int64()}
    rows = 0
    for blk in blocks(path, chunk_bytes, scan.warnings, header=True):
        t = read_block_csv(blk, path, columns=COLUMNS, types=types, row_problem=_problem, delimiter="\t")
        if t.num_rows == 0:
            continue
        lines = row_lines(blk, t.num_rows, delimiter="\t")
        first_null_line(t, list(types), lines, path)
        sec = col_np(t.column("seconds"), np.int64)
        ms = col_np(t.column("ttime"), np.int64)
        for name, arr, lo, hi, what in (
            ("seconds", sec, _SEC_MIN, _SEC_MAX, "seconds since the epoch, 2000 to 2100"),
            ("ttime", ms, 0, 10**10, "ms, 0 to 1e10"),
        ):
            if arr.min() < lo or arr.max() > hi:
                i = int(np.argmax((arr < lo) | (arr > hi)))
                raise fail(path, int(lines[i]), f"bad {name} {int(arr[i])} (expected {what})")
        rows += len(sec)
        yield Batch(sec * 1_000_000_000, ms / 1e3, None, None, None, lines)
    if rows == 0:
        raise fail(path, None, "no requests (the file has ab's header but no rows)")


def plan(scan: Scan, raw):
    """The step plan of a spooled ab file: one step, as :func:`finish` says."""
    from ._plans import OneStep

    return OneStep(scan, ONE_STEP)


def looks_like_summary(text: bytes) -> bool:
    """ab's own text summary (stdout): one summary per run."""
    return b"This is ApacheBench" in text[:400] or (
        b"Concurrency Level:" in text and b"Time taken for tests:" in text and b"Complete requests:" in text
    )


READER = Reader(
    "ab", TOOL, FIDELITY, EXPORT, "ab -g's header 'starttime<TAB>seconds<TAB>ctime<TAB>dtime<TAB>ttime<TAB>wait'",
    guess_tsv, scan_tsv, plan, one_file_per_step=True, one_step=True,
    errors_unknown="ab -g writes no status",
)  # fmt: skip

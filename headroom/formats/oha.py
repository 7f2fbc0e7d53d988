"""oha ``--output-format csv``: relative start (s since oha started), durations (s), status.

Exact per request, but times are relative like hey's: the run is anchored
at the file's modification time (or ``--hey-start``).  One file is one step.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ._common import EXACT, Table, arrow_csv, drop_truncated_tail, fail, first_line, is_float, short

HEADER = b"request-start,DNS,DNS+dialup,Response-delay,request-duration,bytes,status"


def guess_csv(head: bytes) -> bool:
    return first_line(head).lstrip(b"\xef\xbb\xbf").startswith(b"request-start,")


def read_csv(path: Path, data: bytes) -> Table:
    import pyarrow as pa

    warnings: list[str] = []
    data = drop_truncated_tail(data, path, warnings)
    if data[:3] == b"\xef\xbb\xbf":
        data = data[3:]
    cols = [c.strip() for c in first_line(data).decode("utf-8", "replace").split(",")]
    for need in ("request-start", "request-duration"):
        if need not in cols:
            raise fail(path, 1, f"oha CSV header without {need}: '{short(first_line(data))}'")
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

    t = arrow_csv(data, path, columns=cols, types=types, header=True, row_problem=problem)
    if t.num_rows == 0:
        raise fail(path, None, "no requests (the file has a header but no data rows)")
    from ._common import null_check

    null_check(t, path, list(types))
    rel = np.asarray(t.column("request-start").to_numpy(), np.float64)
    lat = np.asarray(t.column("request-duration").to_numpy(), np.float64)
    for name, arr in (("request-start", rel), ("request-duration", lat)):
        bad = ~np.isfinite(arr) | (arr < 0) | (arr > 1e7)
        if bad.any():
            i = int(np.argmax(bad))
            raise fail(
                path, i + 2, f"bad {name} {float(arr[i])!r} (must be a finite number of seconds, 0 to 1e7)"
            )
    status = np.asarray(t.column("status").to_numpy(), np.int64) if "status" in types else None
    return Table(
        fmt="oha-csv",
        fidelity=EXACT,
        start_ns=np.rint(rel * 1e9).astype(np.int64),
        latency_s=lat,
        status=status,
        step=np.zeros(len(rel), np.int64),
        step_names=["all"],
        steps_source="one oha run: one step (give one file per step, or --steps)",
        relative=True,
        line=np.arange(2, len(rel) + 2),
        warnings=warnings,
    )

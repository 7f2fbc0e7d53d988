"""hey's raw CSV (``hey -o csv``), read whole into memory (hey keeps at most 1,000,000 results).

Fidelity: exact per request; ``status-code`` tells failed requests (hey
writes no row for a request without a response).  Upstream hey writes
``offset``, seconds since the hey process started: runs appended one after
another (one per concurrency, as throughputramp does) are placed each where
the previous one ended, and the whole run is anchored at the file's
modification time unless ``--hey-start`` gives the start.  The Cloud
Foundry fork writes an absolute ``start-time`` instead.  The parser is the
throughputramp one (:mod:`headroom.formats.throughputramp`); this module
adds the relative times and the failed-request accounting.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..model import HeadroomError, Requests
from ._checks import (
    MIN_TIME_NS,
    all_failed,
    check_base,
    check_offsets,
    check_plausible,
    failed_codes,
    failed_warning,
    mtime_base,
    skipped_warning,
)
from ._scan import BOM
from .throughputramp import CsvFile

NAME = "hey"
TOOL = "hey (hey -o csv, also the Cloud Foundry fork with start-time)"
FIDELITY = "exact per request"
EXPORT = "hey -o csv URL > results.csv"


def guess_can_open(head: bytes) -> bool:
    """A header with ``response-time`` and hey's other columns."""
    line = head.lstrip(BOM).split(b"\n", 1)[0].rstrip(b"\r")
    cols = [c.strip() for c in line.split(b",")]
    return b"response-time" in cols and cols != [b"start-time", b"response-time"]


def _per_step(flag: np.ndarray, step_offsets: np.ndarray) -> np.ndarray:
    """How many rows of each step (sections by ``step_offsets``) have ``flag`` set."""
    cum = np.concatenate([[0], np.cumsum(flag.astype(np.int64))])
    return (cum[step_offsets[1:]] - cum[step_offsets[:-1]]).astype(np.int64)


def _join(parts: list[np.ndarray], dtype) -> np.ndarray:
    if not parts:
        return np.empty(0, dtype)
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


def _collect(f: CsvFile, warnings: list[str]):
    """Every section parsed whole: (start, latency, status, step offsets, hey sections)."""
    path, relative = f.path, f.layout.time_col == "offset"
    starts, lats, codes, offsets, skipped = [], [], [], [0], []
    total, hey_shift, hey_sections = 0, 0, 0
    for k, (s, e) in enumerate(f.sections):
        if f.is_empty(k):
            offsets.append(total)
            continue
        c = f.parse(s, e, first=True)
        skipped += c.bad_rows
        line0 = (lambda s=s: f.line_at(s)) if not c.bad_rows else (lambda: None)
        st, lat = c.start_ns, c.latency_s
        shift = MIN_TIME_NS if relative else 0
        if relative:
            check_offsets(path, st, line0)
        check_plausible(path, st + shift, lat, lambda i, f0=line0: None if f0() is None else f0() + 1 + i)
        if relative and len(st):
            # hey runs appended one after another (one per concurrency): each section's offsets
            # count from its own start, so it begins where the previous one ended
            st = st + np.int64(hey_shift)
            hey_shift = int(np.max(st + np.rint(lat * 1e9).astype(np.int64)))
            hey_sections += 1
        starts.append(st)
        lats.append(lat)
        if c.status is not None:
            codes.append(c.status)
        total += len(st)
        offsets.append(total)
        f.buf.done_with(s, e)
    if skipped:
        warnings.append(skipped_warning(path, skipped))
    status = (np.concatenate(codes) if codes else np.zeros(0, np.int64)) if f.layout.status_col else None
    return (
        _join(starts, np.int64),
        _join(lats, np.float64),
        status,
        np.asarray(offsets, np.int64),
        hey_sections,
    )


def _drop_failed(path, start, lat, status, offsets, warnings):
    """Leave out non-2xx rows: (start, latency, offsets, step errors, error codes)."""
    bad = (status < 200) | (status > 299)
    errors = int(bad.sum())
    step_errors = _per_step(bad, offsets)
    if not errors:
        return start, lat, offsets, step_errors, {}
    codes = failed_codes(status[bad])
    if errors == len(status):
        raise all_failed(path, errors, codes)
    warnings.append(failed_warning(path, errors, len(status), codes))
    keep = ~bad
    kept = np.add.reduceat(keep.astype(np.int64), offsets[:-1]) if len(keep) else []
    kept = np.where(np.diff(offsets) == 0, 0, kept)
    offsets = np.concatenate([[0], np.cumsum(kept)]).astype(np.int64)
    return start[keep], lat[keep], offsets, step_errors, codes


def anchor_warning(path, what: str) -> str:
    """The warning of a run anchored at its file's modification time."""
    return (
        f"{path}: {what}; wall-clock times are anchored at the file's modification time "
        "(--hey-start TIME sets it), so CPU alignment is approximate"
    )


def anchor(path, start: np.ndarray, lat: np.ndarray, base_time_ns: int | None, warnings, what: str):
    """Relative start times made absolute: at ``base_time_ns``, else ending at the file's mtime."""
    if base_time_ns is None:
        end_rel = int(np.max(start + np.rint(lat * 1e9).astype(np.int64))) if len(start) else 0
        base_time_ns = mtime_base(path, end_rel)
        warnings.append(anchor_warning(path, what))
    check_base(path, base_time_ns, warnings)
    return start + np.int64(base_time_ns)


def read_requests(path: Path, *, base_time_ns: int | None = None, skip_bad_rows: bool = False):
    """Read a throughputramp or hey CSV whole.

    Returns
    -------
    tuple
        (Requests, failed requests per step or None, error count per status
        code, the layout's kind, warnings).
    """
    with CsvFile(Path(path), skip_bad_rows=skip_bad_rows, stream=False) as f:
        warnings = list(f.warnings)
        start, lat, status, offsets, hey_sections = _collect(f, warnings)
        kind, relative = f.layout.kind, f.layout.time_col == "offset"
    step_errors, codes = None, {}
    if status is not None:
        start, lat, offsets, step_errors, codes = _drop_failed(path, start, lat, status, offsets, warnings)
    if relative:
        what = "hey CSV has relative start offsets"
        start = anchor(path, start, lat, base_time_ns, warnings, what)
        if hey_sections > 1:
            warnings.append(
                f"{path}: {hey_sections} hey runs appended one after another are read as one ramp, "
                "each step starting when the previous one ended: the spacing between them is unknown"
            )
    if len(start) == 0:
        if kind == "hey":
            raise HeadroomError(
                f"{path}: no requests: hey wrote only its header line "
                "(it writes no row for a request that got no response: was every connection refused?)"
            )
        raise HeadroomError(f"{path}: no requests (the file has a header but no data rows)")
    # rows stay in file (completion) order: bucketing needs no order
    return Requests(start, lat, offsets), step_errors, codes, kind, warnings

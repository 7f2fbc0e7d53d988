"""Plausibility limits and failed-request accounting, shared by every reader.

The limits are stated in docs/formats.md and the README: a value outside
them is a damaged file or a wrong clock, refused with one line naming the
file and line (exit 2), never a silently wrong number.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import numpy as np

from ..model import HeadroomError

#: Start times must fall between these (UTC ns): 2000-01-01 and 2200-01-01.
MIN_TIME_NS = 946_684_800 * 10**9
MAX_TIME_NS = 7_258_118_400 * 10**9
#: A start time further than this from the middle of its step is an error ...
SPAN_TOLERANCE_S = 600.0
#: ... or further than this many times the step's interquartile span, whichever is larger.
SPAN_TOLERANCE_IQR = 10.0
#: Relative offsets (hey, oha) above this many seconds are refused (115 days).
MAX_OFFSET_S = 1e7
#: Longest wait before a hey section's first request (hey sends its first at once): beyond, damaged offsets
MAX_FIRST_OFFSET_S = 3600.0
#: CPU percentages may exceed 100 % (x cores) by 5 % (sampling jitter: 101 % is seen in real runs).
CPU_TOLERANCE = 1.05


def fmt_ns(t: int) -> str:
    """UTC ns as ``2017-08-25T21:07:33Z`` (or ``N ns`` when out of range)."""
    try:
        return dt.datetime.fromtimestamp(t / 1e9, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        return f"{t} ns"


def fail(path, line: int | None, msg: str) -> HeadroomError:
    """A one-line error naming the file (and line when known)."""
    return HeadroomError(f"{path}{f':{line}' if line else ''}: {msg}")


def check_plausible(path, start_ns: np.ndarray, latency_s: np.ndarray, line_of, what: str = "step") -> None:
    """Refuse start times outside 2000-2200 or far from the rest of their step, and latencies
    longer than that tolerance: exit 2 naming the line (``line_of(i)`` gives row i's line or None)."""
    if len(start_ns) == 0:
        return

    def where(i):
        ln = line_of(int(i))
        return f"{path}:{ln}" if ln else f"{path}"

    lo, hi = int(start_ns.min()), int(start_ns.max())
    if lo < MIN_TIME_NS or hi >= MAX_TIME_NS:
        i = int(np.argmax((start_ns < MIN_TIME_NS) | (start_ns >= MAX_TIME_NS)))
        raise HeadroomError(
            f"{where(i)}: start time {fmt_ns(int(start_ns[i]))} is outside 2000-2200: "
            "a wrong clock or a damaged value"
        )
    # the tolerance is at least SPAN_TOLERANCE_S: a step spanning less has no far start, and
    # latencies under it are fine, so the percentiles are needed only beyond that (exact same verdicts)
    max_lat = float(np.max(latency_s))
    if hi - lo < SPAN_TOLERANCE_S * 1e9 - 4096 and max_lat <= SPAN_TOLERANCE_S:
        return
    q25, mid, q75 = np.percentile(start_ns, [25, 50, 75], method="inverted_cdf")
    tol_ns = max(SPAN_TOLERANCE_S * 1e9, SPAN_TOLERANCE_IQR * float(q75 - q25))
    # the distance from the middle is largest at the first or the last start: the rows are looked at
    # only when one of those is far (to name the first far one)
    if max(abs(float(lo) - float(mid)), abs(float(hi) - float(mid))) > tol_ns:
        far = np.abs(start_ns.astype(np.float64) - float(mid)) > tol_ns
        i = int(np.argmax(far))
        off = (float(start_ns[i]) - float(mid)) / 1e9
        raise HeadroomError(
            f"{where(i)}: start time {fmt_ns(int(start_ns[i]))} is {abs(off):,.0f} s "
            f"{'after' if off > 0 else 'before'} the middle of its {what} (tolerance {tol_ns / 1e9:,.0f} s): "
            "a moved or damaged timestamp"
        )
    lim = tol_ns / 1e9
    if not max_lat <= lim:  # (NaN too)
        i = int(np.argmax(~(latency_s <= lim)))
        raise HeadroomError(
            f"{where(i)}: latency {float(latency_s[i]):.6g} s is longer than its {what} could be "
            f"(limit {lim:,.0f} s): a damaged value"
        )


def check_finite(x: np.ndarray, path, header_line, col: str, hint: str = "") -> None:
    """Reject NaN, infinite and negative values, naming the line (``header_line()`` is lazy)."""
    if len(x) == 0 or (x.min() >= 0 and np.isfinite(x.max())):  # two reductions, no temporaries
        return
    bad = ~np.isfinite(x) | (x < 0)
    if bad.any():
        i = int(np.argmax(bad))
        raise HeadroomError(
            f"{path}:{header_line() + 1 + i}: bad {col} {float(x[i])!r} (must be a finite number >= 0){hint}"
        )


def check_offsets(path, st: np.ndarray, line0) -> None:
    """Relative offsets (ns) beyond MAX_OFFSET_S are damaged values."""
    big = st > MAX_OFFSET_S * 1e9
    if big.any():
        i = int(np.argmax(big))
        ln = line0()
        raise HeadroomError(
            f"{path}{'' if ln is None else f':{ln + 1 + i}'}: offset {st[i] / 1e9:.6g} s is beyond "
            f"{MAX_OFFSET_S:.0e} s since the start: a damaged value"
        )
    if len(st) and st.min() > MAX_FIRST_OFFSET_S * 1e9:
        i = int(np.argmin(st))
        ln = line0()
        first, span = st[i] / 1e9, (st.max() - st[i]) / 1e9
        raise HeadroomError(
            f"{path}{'' if ln is None else f':{ln + 1 + i}'}: this section's first request is at offset "
            f"{first:.6g} s ({first / 86400:.1f} days after hey started; hey sends its first request at "
            f"once), its last {span:.6g} s later: shifted or damaged offsets"
        )


def mtime_base(path, end_rel: int) -> int:
    """The wall-clock start of a run with relative times: its file's modification time minus its length."""
    base = os.stat(path).st_mtime_ns - end_rel
    if not MIN_TIME_NS <= base < MAX_TIME_NS - end_rel:
        raise HeadroomError(
            f"{path}: relative times anchored at the file's modification time would start at "
            f"{fmt_ns(base)}, outside 2000-2200: give the start with --hey-start TIME"
        )
    return base


def check_base(path, base: int, warnings: list | None = None) -> None:
    """``--hey-start`` must be a time between 1970 and 2200; before 2000 (an unset clock) is said."""
    if not 0 <= int(base) < MAX_TIME_NS:
        raise HeadroomError(f"{path}: --hey-start {fmt_ns(int(base))} is outside 1970-2200")
    if int(base) < MIN_TIME_NS and warnings is not None:
        warnings.append(
            f"{path}: --hey-start {fmt_ns(int(base))} puts the run before 2000 (an unset clock?): "
            "CPU samples and other runs will not line up with it"
        )


# --------------------------------------------------------------------------
# failed requests: one accounting, one wording


def code_name(v: int) -> str:
    """How a status code is named in messages (-1: the format records failure without a code)."""
    if v < 0:
        return "failed (no status code in the file)"
    return "no HTTP response" if v == 0 else f"HTTP {v}"


def failed_codes(codes: np.ndarray) -> dict[int, int]:
    """Count per status code of failed requests."""
    vals, cnts = np.unique(codes, return_counts=True)
    return {int(v): int(c) for v, c in zip(vals, cnts)}


def add_codes(total: dict[int, int], more: dict[int, int]) -> None:
    """Add error counts per code into ``total``."""
    for v, c in more.items():
        total[v] = total.get(v, 0) + c


def all_failed(path, n: int, error_codes: dict[int, int]) -> HeadroomError:
    """Every request failed: nothing to analyse."""
    parts = ", ".join(f"{c:,}x {code_name(v)}" for v, c in sorted(error_codes.items(), key=lambda kv: -kv[1]))
    return HeadroomError(f"{path}: all {n:,} requests failed: {parts}; no latency to analyse")


def failed_warning(path, errors: int, total: int, error_codes: dict[int, int]) -> str:
    """The warning for a run with some failed requests."""
    return (
        f"{path}: {errors:,} of {total:,} requests failed ("
        + ", ".join(f"{c:,}x {code_name(v)}" for v, c in sorted(error_codes.items()))
        + "); they are counted as errors, not used as latencies"
    )


def skipped_warning(path: Path, skipped: list[tuple[int | None, str]]) -> str:
    """The warning for rows dropped by --skip-bad-rows."""
    ln, why = skipped[0]
    return f"{path}: skipped {len(skipped)} bad row(s) (--skip-bad-rows); first: line {ln}: {why}"

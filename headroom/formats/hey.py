"""hey's raw CSV (``hey -o csv``), read a piece of a section at a time (:func:`scan_csv`).

Fidelity: exact per request; ``status-code`` tells failed requests (hey
writes no row for a request without a response).  Upstream hey writes
``offset``, seconds since the hey process started: runs appended one after
another (one per concurrency, as throughputramp does) are placed each where
the previous one ended, and the whole run is anchored at the file's
modification time unless ``--hey-start`` gives the start.  The Cloud
Foundry fork writes an absolute ``start-time`` instead.  The parser is the
throughputramp one (:mod:`headroom.formats.throughputramp`); this module
adds the relative times, the checks of every section and the failed-request
accounting.  :func:`scan_csv` yields record batches (the sections are the
steps: :class:`SectionPlan`): :class:`headroom.sources.HeySource` spools
and reduces them in bounded memory when offsets are relative, and
:class:`headroom.sources.CsvSource` streams absolute ones section by section.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..model import HeadroomError
from ._batch import CHUNK_BYTES, Batch, Scan
from ._checks import (
    MAX_TIME_NS,
    MIN_TIME_NS,
    SPAN_TOLERANCE_S,
    check_base,
    check_offsets,
    check_plausible,
    mtime_base,
    skipped_warning,
)
from ._common import EXACT
from ._protocol import Reader
from ._scan import BOM
from .throughputramp import CsvFile
from .throughputramp import guess_can_open as _tr_guess

NAME = "hey"
TOOL = "hey (hey -o csv, also the Cloud Foundry fork with start-time)"
FIDELITY = "exact per request"
EXPORT = "hey -o csv URL > results.csv"


def guess_can_open(head: bytes) -> bool:
    """A header with ``response-time`` and hey's other columns."""
    line = head.lstrip(BOM).split(b"\n", 1)[0].rstrip(b"\r")
    cols = [c.strip() for c in line.split(b",")]
    return b"response-time" in cols and cols != [b"start-time", b"response-time"]


def relative_offsets(path: Path) -> bool:
    """Whether a hey CSV has relative offsets (upstream hey's ``offset`` column), from its header."""
    from ._scan import head_bytes

    first = head_bytes(path, 4096).lstrip(BOM).split(b"\n", 1)[0]
    return b"offset" in [c.strip() for c in first.rstrip(b"\r").split(b",")]


def scan_csv(
    path: Path, *, chunk_bytes: int = CHUNK_BYTES, skip_bad_rows: bool = False, progress: bool | None = None
) -> Scan:
    """One pass over a hey (or throughputramp) CSV, a piece of a section at a time.

    Batches hold start (relative ns for hey's ``offset``, placed after the
    previous section's last response), latency, status (None without a
    ``status-code`` column) and the section as ``key`` (the step); no line
    numbers (counted only for a message).  Every section is checked as
    the whole file's reader always checked it (offsets, plausibility), when its
    last piece has been read.  After the pass: ``warnings`` (a truncated last
    line, rows skipped by ``skip_bad_rows``), ``side``: ``sections`` (steps,
    empty ones too), ``runs`` (sections with rows, placed one after another),
    ``kind`` (the layout) and ``status`` (whether rows have a status).
    """
    f = CsvFile(Path(path), skip_bad_rows=skip_bad_rows, stream=True, progress=progress)  # header errors now
    lay = f.layout
    scan = Scan(f.path, lay.kind, EXACT, key_kind="section", relative=lay.time_col == "offset")
    scan.side.update(kind=lay.kind, status=lay.status_col is not None)
    scan._gen = _batches(scan, f, chunk_bytes)
    return scan


def _batches(scan: Scan, f: CsvFile, chunk_bytes: int):
    path = scan.path
    skipped: list = []
    shift, runs = 0, 0
    with f:
        scan.warnings += f.warnings
        for k in range(len(f.sections)):
            if f.is_empty(k):
                continue
            sec = _Section()
            for c in f.chunks_of(k, chunk_bytes):
                skipped += c.bad_rows
                sec.add(c)
                if len(c.start_ns):
                    st = c.start_ns + np.int64(shift) if shift else c.start_ns
                    yield Batch(st, c.latency_s, c.status, None, np.full(len(st), k, np.int64), None)
            sec.check(f, k, scan.relative, chunk_bytes)
            if scan.relative and sec.n:
                # hey runs appended one after another (one per concurrency): each section's offsets
                # count from its own start, so it begins where the previous one ended
                shift, runs = shift + sec.end, runs + 1
            f.buf.done_with(*f.sections[k])
        scan.side.update(sections=len(f.sections), runs=runs)
    if skipped:
        scan.warnings.append(skipped_warning(path, skipped))


class _Section:
    """What the checks of one section need, gathered piece by piece: its rows' first and last start,
    the row of the first, the longest latency, the last response, and whether rows were skipped."""

    def __init__(self):
        self.n, self.lo, self.lo_row, self.hi, self.max_lat, self.end, self.skipped = (
            0,
            0,
            0,
            0,
            0.0,
            0,
            False,
        )

    def add(self, c) -> None:
        self.skipped |= bool(c.bad_rows)
        st = c.start_ns
        if not len(st):
            return
        i = int(np.argmin(st))
        if not self.n or st[i] < self.lo:
            self.lo, self.lo_row = int(st[i]), self.n + i
        self.hi = int(st.max()) if not self.n else max(self.hi, int(st.max()))
        self.max_lat = max(self.max_lat, float(c.latency_s.max()))
        self.end = max(self.end, int((st + np.rint(c.latency_s * 1e9).astype(np.int64)).max()))
        self.n += len(st)

    def check(self, f: CsvFile, k: int, relative: bool, chunk_bytes: int) -> None:
        """The checks of a whole section (parsed again when it is long)."""
        if not self.n:
            return
        s = f.sections[k][0]

        def line_of(i):  # rows match lines unless some were skipped
            return None if self.skipped else f.line_at(s) + 1 + i

        if relative:  # its first offset and span are all the check needs: [first, last] stand for the rows
            row = self.lo_row
            check_offsets(f.path, np.array([self.lo, self.hi], np.int64), lambda: _minus1(line_of(row)))
        shift = MIN_TIME_NS if relative else 0
        lo, hi = self.lo + shift, self.hi + shift
        short_step = self.hi - self.lo < SPAN_TOLERANCE_S * 1e9 - 4096 and self.max_lat <= SPAN_TOLERANCE_S
        if short_step and MIN_TIME_NS <= lo and hi < MAX_TIME_NS:
            return  # what check_plausible concludes without its percentiles
        parts = list(f.chunks_of(k, chunk_bytes))
        st = np.concatenate([c.start_ns for c in parts])
        lat = np.concatenate([c.latency_s for c in parts])
        check_plausible(f.path, st + np.int64(shift), lat, line_of)


def _minus1(line: int | None) -> int | None:
    return None if line is None else line - 1


def no_requests(path, kind: str) -> HeadroomError:
    """The error of a file without a request row."""
    if kind == "hey":
        return HeadroomError(
            f"{path}: no requests: hey wrote only its header line "
            "(it writes no row for a request that got no response: was every connection refused?)"
        )
    return HeadroomError(f"{path}: no requests (the file has a header but no data rows)")


def appended_warning(path, runs: int) -> str:
    """The warning of several hey runs in one file."""
    return (
        f"{path}: {runs} hey runs appended one after another are read as one ramp, "
        "each step starting when the previous one ended: the spacing between them is unknown"
    )


def anchor_warning(path, what: str) -> str:
    """The warning of a run anchored at its file's modification time."""
    return (
        f"{path}: {what}; wall-clock times are anchored at the file's modification time "
        "(--hey-start TIME sets it), so CPU alignment is approximate"
    )


#: What the anchor warning says of a hey CSV.
RELATIVE = "hey CSV has relative start offsets"


def anchor_base(path, end_rel: int, base_time_ns: int | None, warnings: list, what: str) -> int:
    """The wall-clock start of relative times: ``base_time_ns``, else the file's mtime minus ``end_rel``
    (the last response, relative)."""
    if base_time_ns is None:
        base_time_ns = mtime_base(path, end_rel)
        warnings.append(anchor_warning(path, what))
    check_base(path, base_time_ns, warnings)
    return int(base_time_ns)


class SectionPlan:
    """The step plan of a spooled hey file: every row in its section (the batches' ``key``)."""

    def __init__(self, scan: Scan, raw=None):
        self.scan = scan

    def assign(self, c: dict) -> np.ndarray:
        return c["key"]

    def found(self):
        from ._plans import Found

        n = self.scan.side["sections"]
        return Found([f"section {k + 1}" for k in range(n)], source=f"sections of the file ({n})",
                     warnings=list(self.scan.warnings))  # fmt: skip


# --------------------------------------------------------------------------
# the readers of the family (one scan, one plan: the sections are the steps)

#: throughputramp ``perfResults.csv``: sections of ``start-time,response-time``
THROUGHPUTRAMP = Reader(
    "throughputramp", "Cloud Foundry throughputramp (perfResults.csv)", EXACT, "throughputramp",
    "a first line 'start-time,response-time'", _tr_guess, scan_csv, SectionPlan, layout="sections",
    scan_options=("skip_bad_rows", "progress"),
)  # fmt: skip
READER = Reader(
    NAME, TOOL, EXACT, EXPORT, "hey's CSV header with response-time and offset (or start-time)", guess_can_open,
    scan_csv, SectionPlan, layout="sections", scan_options=("skip_bad_rows", "progress"),
)  # fmt: skip

"""Locust's own ``--csv`` stats history (``*_stats_history.csv``): steps and counts, fidelity declared.

Locust writes one row a second (per name with ``--csv-full-history``, else the ``Aggregated`` row
only): a whole-second ``Timestamp``, the ``User Count``, cumulative ``Total Request Count`` and
``Total Failure Count``, and percentiles that are either Locust's own over about its last 10 s
(``--csv-full-history``) or since the start of the run (without it), of response times rounded
to about 2 significant digits (whole ms under 100 ms).  There is no request in it.

What it can honestly give, per step (a ``User Count`` held for two rows or more; rows between
two held counts are counted in the step that follows, as every closed-loop reader here does):
the step's requests and failures (differences of the cumulative counts, so exact to the rows'
seconds, not to the step's true edges), its request rate, and with ``--csv-full-history`` Locust's
own 10 s window percentiles at the step's last row when the step held 10 s or more.  Anything
that needs the requests themselves (exact percentiles, throughput bins, capacity, objectives,
comparisons, reports) is refused in one line naming what to record instead
(:data:`RECORD_INSTEAD`).  Read with the csv module: the file is small (a row a second per name).
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

from ..model import HeadroomError
from ._common import fail, first_line, short, strip_bom

HEAD = b"Timestamp,User Count,Type,Name,Requests/s,Failures/s"
KIND = "locust-stats-history"
#: Locust's sliding window of "current" percentiles (locust.stats.CURRENT_RESPONSE_TIME_PERCENTILE_WINDOW).
WINDOW_S = 10
RECORD_INSTEAD = "record with headroom.locust (import it in the locustfile)"
FIDELITY = (
    "Locust's stats history: a row a second (whole-second times) of cumulative counts, so a step's "
    "requests are exact to those seconds; percentiles are Locust's own, over its last 10 s, of times "
    "rounded to 2 digits; no requests"
)
_PCTS = (("p50", "50%"), ("p95", "95%"), ("p99", "99%"))


def is_history(head: bytes) -> bool:
    return first_line(strip_bom(head)).startswith(HEAD)


#: The heads of Locust's other --csv files (one summary per run) and of locust-plugins' JmeterListener
_STATS = b"Type,Name,Request Count,Failure Count,"
_FAILURES = b"Method,Name,Error,Occurrences"
_EXCEPTIONS = b"Count,Message,Traceback,Nodes"
_JMETER_LISTENER = (b"timeStamp,elapsed,label,responseCode,responseMessage,threadName,dataType,success,"
                    b"failureMessage,bytes,sentBytes,grpThreads,allThreads,Latency,IdleTime,Connect")  # fmt: skip
_SECOND = re.compile(rb"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,")


def summary_only(head: bytes) -> str | None:
    """What a Locust file without requests is, and what to record instead (None: not one of them)."""
    text = strip_bom(head)
    line = first_line(text).rstrip(b"\r")
    if is_history(text):
        return f"looks like {what_it_is()}: only 'headroom summary FILE' reads it; else, {RECORD_INSTEAD}"
    if line.startswith(_STATS) or line.startswith(_FAILURES) or line.startswith(_EXCEPTIONS):
        return f"looks like Locust's --csv statistics (one summary per run, no requests): {RECORD_INSTEAD}"
    if line == _JMETER_LISTENER and _SECOND.match(text.split(b"\n", 2)[1] if text.count(b"\n") > 1 else b""):
        return ("looks like locust-plugins' JmeterListener output (each request's end to the second, one "
                f"worker's users): {RECORD_INSTEAD}")  # fmt: skip
    return None


def what_it_is() -> str:
    """The one-line description of a stats history, for refusals."""
    return "Locust's stats history (counts a second, percentiles of 10 s windows, no requests)"


def refused(path, what: str) -> HeadroomError:
    """One line: ``what`` needs every request, which a stats history does not hold."""
    return HeadroomError(f"{path}: {what} needs every request; {what_it_is()}: {RECORD_INSTEAD}")


@dataclass(frozen=True)
class HistoryStep:
    """One held user count: ``start_s``/``end_s`` from the history's first row, whole seconds."""

    users: int
    start_s: int
    end_s: int
    requests: int
    failures: int
    #: Locust's own window percentiles (ms) at the step's last row; None: not a window inside the step
    p50_ms: int | None
    p95_ms: int | None
    p99_ms: int | None

    @property
    def duration_s(self) -> int:
        return self.end_s - self.start_s

    @property
    def rps(self) -> float:
        return self.requests / self.duration_s if self.duration_s > 0 else 0.0

    def __repr__(self) -> str:
        return f"HistoryStep({self.users} users, {self.duration_s} s, {self.requests} req)"


@dataclass(frozen=True)
class History:
    """The steps of a Locust stats history, and what it cannot say (``notes``)."""

    path: str
    name: str
    full_history: bool
    steps: tuple[HistoryStep, ...]
    notes: tuple[str, ...]

    def __repr__(self) -> str:
        return f"History({self.path}, {self.name}, {len(self.steps)} steps)"

    def to_json(self) -> dict:
        return {
            "schema": 1,
            "kind": KIND,
            "source": self.path,
            "name": self.name,
            "fidelity": FIDELITY,
            "percentiles": "window" if self.full_history else "since the start (not per step)",
            "steps": [
                {
                    "index": k,
                    "users": s.users,
                    "start_s": s.start_s,
                    "duration_s": s.duration_s,
                    "requests": s.requests,
                    "failures": s.failures,
                    "rps": round(s.rps, 3),
                    "p50_ms": s.p50_ms,
                    "p95_ms": s.p95_ms,
                    "p99_ms": s.p99_ms,
                }
                for k, s in enumerate(self.steps)
            ],  # fmt: skip
            "warnings": list(self.notes),
        }

    def text(self) -> str:
        def ms(v):
            return "-" if v is None else f"{v:d}"

        lines = [
            f"headroom summary: {Path(self.path).name} ({self.name})",
            f"  source: {self.path} (Locust stats history)",
            f"  fidelity: {FIDELITY}",
            f"  for exact percentiles, bins, capacity and comparisons: {RECORD_INSTEAD}",
            "",
            "steps (Locust's own figures; percentiles in ms over its last 10 s at the step's end)",
            "  step  users  at s  dur s  requests  failures  req/s  p50  p95  p99",
        ]
        for k, s in enumerate(self.steps):
            lines.append(
                f"  {k:>4}  {s.users:>5}  {s.start_s:>4}  {s.duration_s:>5}  {s.requests:>8,}  {s.failures:>8,}"
                f"  {s.rps:>5,.0f}  {ms(s.p50_ms):>3}  {ms(s.p95_ms):>3}  {ms(s.p99_ms):>3}"
            )
        return "\n".join(lines) + "\n"


def _rows(path: Path, name: str) -> tuple[list[dict], bool]:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise fail(path, None, f"cannot read the file ({e.strerror or e})") from None
    text = strip_bom(data).decode("utf-8", "replace")
    reader = csv.DictReader(io.StringIO(text, newline=""))
    need = ("Timestamp", "User Count", "Name", "Total Request Count", "Total Failure Count")
    missing = [c for c in need if c not in (reader.fieldnames or [])]
    if missing:
        raise fail(path, 1, f"a Locust stats history without {', '.join(missing)}")
    out, names = [], set()
    for r in reader:
        ln = reader.line_num
        names.add(r["Name"])
        if r["Name"] != name:
            continue
        try:
            row = {
                k: int(r[k])
                for k in ("Timestamp", "User Count", "Total Request Count", "Total Failure Count")
            }
        except (TypeError, ValueError):
            raise fail(path, ln, f"bad row '{short(','.join(str(v) for v in r.values()), 80)}' (expected integers)") \
                from None  # fmt: skip
        row["pct"] = {key: r.get(col) for key, col in _PCTS}
        row["line"] = ln
        out.append(row)
    full = len(names - {"Aggregated"}) > 0
    if not out:
        if name != "Aggregated":
            raise fail(path, None, f"--name {short(name, 60)}: no rows of that name"
                       + ("" if full else " (Locust writes rows per name with --csv-full-history)"))  # fmt: skip
        raise fail(path, None, "a Locust stats history without rows")
    return out, full


def _pct(v) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def read_history(path, name: str | None = None) -> History:
    """The steps of a Locust stats history (``name``: one request name's rows, with ``--csv-full-history``)."""
    path = Path(path)
    name = name or "Aggregated"
    rows, full = _rows(path, name)
    rows.sort(key=lambda r: r["Timestamp"])
    t0 = rows[0]["Timestamp"]
    first_req = next((r["Timestamp"] for r in rows if r["Total Request Count"] > 0), None)
    runs = []  # [users, first row index, last row index]
    for i, r in enumerate(rows):
        if runs and runs[-1][0] == r["User Count"]:
            runs[-1][2] = i
        else:
            runs.append([r["User Count"], i, i])
    held = [x for x in runs if x[0] > 0 and x[2] > x[1]]
    notes, steps, prev_end = [], [], None
    for users, i0, i1 in held:
        last = rows[i1]
        before = rows[prev_end] if prev_end is not None else None
        start = before["Timestamp"] if before is not None else rows[i0]["Timestamp"]
        n0 = before["Total Request Count"] if before is not None else 0
        f0 = before["Total Failure Count"] if before is not None else 0
        in_window = full and first_req is not None and last["Timestamp"] - max(rows[i0]["Timestamp"], first_req) \
            >= WINDOW_S  # fmt: skip
        p = {k: _pct(last["pct"][k]) if in_window else None for k, _ in _PCTS}
        steps.append(HistoryStep(users, start - t0, last["Timestamp"] - t0, last["Total Request Count"] - n0,
                                 last["Total Failure Count"] - f0, p["p50"], p["p95"], p["p99"]))  # fmt: skip
        prev_end = i1
    if not steps:
        raise fail(path, None, "no user count held for two rows or more: no step")
    if not full:
        notes.append(f"{path}: written without --csv-full-history: Locust's percentiles are since the start, "
                     "not per step (not shown)")  # fmt: skip
    elif any(s.p50_ms is None for s in steps):
        notes.append(
            f"{path}: steps held less than Locust's 10 s window have no percentiles (hold steps 10 s or more)"
        )
    return History(str(path), name, full, tuple(steps), tuple(notes))

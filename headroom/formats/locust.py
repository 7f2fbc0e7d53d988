"""Locust, recorded by headroom's listener (:mod:`headroom.locust`): every request, exactly.

One CSV file per Locust process (``locust.csv``; ``locust-worker-N.csv`` in a distributed
run), rows in the order they happened (header :data:`HEADER`): ``request`` rows (start in
us since the epoch, latency in us, the stage in force when it completed, the process's
running users, status, ok, method, name, error), ``stage`` rows (the target user count
changed: a ``LoadTestShape`` tick, ``-u``), ``users`` rows (the process's running users
changed), ``run`` and ``stop``.  Exact per request to 1 us; errors known (``ok`` is
Locust's own success).

Steps are the stages: every request is in the stage in force when it completed (as Locust's
own statistics count it), the stage's concurrency the user count this process held longest
during it (from its ``users`` rows).  Several workers' files are load generators of one ramp
(:mod:`headroom.reading`): their stages are numbered alike by the master, their users add up.
``--name NAME`` keeps the requests of one Locust name (all methods) only.

Read in one pass, in blocks of whole lines parsed by pyarrow (the name column only when
``--name`` is given).  Locust's own ``--csv`` files hold no requests: see
:mod:`headroom.formats.locust_history`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..endpoints import NameCodes
from ..model import HeadroomError
from ._batch import CHUNK_BYTES, Batch, Scan
from ._blocks import blocks, read_block_csv, row_lines
from ._common import EXACT, fail, first_line, short
from ._plans import Found
from ._protocol import Reader
from ._scan import head_bytes, strip_bom

HEADER = b"event,time_us,stage,users,latency_us,status,ok,method,name,error"
COLUMNS = HEADER.decode().split(",")
#: The file layout this reader knows (the ``run`` row: ``headroom.locust N; ...``).
VERSION = 1
EVENTS = ("request", "users", "stage", "run", "stop")
_NUMERIC = ("time_us", "stage", "users", "latency_us", "status", "ok")


def guess(head: bytes) -> bool:
    return first_line(strip_bom(head)).rstrip(b"\r") == HEADER


def scan(path: Path, *, chunk_bytes: int = CHUNK_BYTES, name: str | None = None) -> Scan:
    """One pass over a headroom.locust file: the requests as batches (``key``: the stage), the
    stages and user counts on the side (``scan.side``)."""
    path = Path(path)
    data = strip_bom(head_bytes(path))
    head = first_line(data).rstrip(b"\r")
    if head != HEADER:
        raise fail(path, 1, f"not a headroom.locust file: header '{short(head)}'")
    role = _run_row(path, data)
    s = Scan(path=path, fmt="locust", fidelity=EXACT, key_kind="label")
    s._gen = _batches(s, chunk_bytes, name, role == "worker")
    return s


def _row_problem(row: list[str]) -> str | None:
    if row[0] not in EVENTS:
        return f"unknown event '{short(row[0], 40)}' (expected one of {', '.join(EVENTS)})"
    for i, col in enumerate(COLUMNS[1:7], start=1):
        if row[i] and not row[i].lstrip("-").isdigit():
            return f"bad {col} '{short(row[i], 40)}' (expected an integer)"
    return None


class _Side:
    """What the steps need besides the requests: stages, user counts, the stop (small)."""

    def __init__(self):
        self.stage_t, self.stage_k, self.stage_users = [], [], []
        self.users_t, self.users_n = [], []
        self.stop_t: int | None = None
        self.worker = False  # a worker's file of a distributed run (its run row)
        self.pairs: dict[tuple[int, int], int] = {}  # (stage, users) -> requests: the fallback level

    def count_pairs(self, stage: np.ndarray, users: np.ndarray) -> None:
        """Requests per (stage, users), by runs (rows come nearly in order: no sort)."""
        if not len(stage):
            return
        change = np.flatnonzero((stage[1:] != stage[:-1]) | (users[1:] != users[:-1])) + 1
        first = np.r_[0, change]
        n = np.diff(np.r_[first, len(stage)])
        for s, u, c in zip(stage[first].tolist(), users[first].tolist(), n.tolist()):
            self.pairs[(s, u)] = self.pairs.get((s, u), 0) + c

    def add(self, ev, t, k, u, lines, path) -> None:
        """The rows that are not requests (their event codes ``ev``, times, stages, users)."""
        for i, name in enumerate(EVENTS[1:], start=1):
            mask = ev == i
            if not mask.any():
                continue
            bad = mask & ((t < 0) | (k < 0) | (u < 0))
            if bad.any():
                j = int(np.argmax(bad))
                raise fail(path, int(lines[j]), f"a {name} row with a negative time, stage or users")
            if name == "stage":
                self.stage_t += t[mask].tolist()
                self.stage_k += k[mask].tolist()
                self.stage_users += u[mask].tolist()
            elif name == "users":
                self.users_t += t[mask].tolist()
                self.users_n += u[mask].tolist()
            elif name == "stop":
                self.stop_t = int(t[mask].max())


def _indices(col) -> np.ndarray:
    """The codes of a dictionary column (one chunk) as a numpy view (no conversion through pandas)."""
    ind = col.indices
    return np.frombuffer(ind.buffers()[1], np.int32, count=len(ind), offset=ind.offset * 4)


def _name_codes(codes: NameCodes, col) -> np.ndarray:
    """Every row's request-name code (:class:`headroom.endpoints.NameCodes`) from the name column."""
    if col.null_count:
        return codes.of_dictionary(col)
    return codes.of_values(col.dictionary.to_pylist())[_indices(col)]


def _column(t, col: str) -> tuple[np.ndarray, np.ndarray | None]:
    """An int64 column as a numpy view of its Arrow values, and its validity (None: no nulls); pyarrow's
    fill_null would import pandas for its scalar."""
    c = t.column(col)
    a = c.combine_chunks() if c.num_chunks != 1 else c.chunk(0)
    values = np.frombuffer(a.buffers()[1], np.int64, count=len(a), offset=a.offset * 8)
    if not a.null_count:
        return values, None
    bits = np.frombuffer(a.buffers()[0], np.uint8)
    return values, np.unpackbits(bits, bitorder="little")[a.offset : a.offset + len(a)].astype(bool)


def _batches(s: Scan, chunk_bytes: int, name: str | None, worker: bool):
    import pyarrow as pa

    path = s.path
    types = {"event": pa.dictionary(pa.int32(), pa.string())}
    types.update({c: pa.int64() for c in _NUMERIC})
    types["name"] = pa.dictionary(pa.int32(), pa.string())  # every request's name: an endpoint
    codes = NameCodes(s.names)
    side, total, kept = _Side(), 0, 0
    side.worker = worker
    for blk in blocks(path, chunk_bytes, s.warnings, header=True):
        t = read_block_csv(blk, path, columns=COLUMNS, types=types, row_problem=_row_problem)
        n = t.num_rows
        if n == 0:
            continue
        lines = row_lines(blk, n)
        ev_col = t.column("event").combine_chunks()
        values = ev_col.dictionary.to_pylist()
        code = np.array([EVENTS.index(v) if v in EVENTS else -1 for v in values], np.int8)
        ev = code[_indices(ev_col)]
        other = np.flatnonzero(ev != 0)  # few: stages, user counts, the run and stop rows
        if len(other) and ev[other].min() < 0:
            i = int(other[np.argmax(ev[other] < 0)])
            raise fail(path, int(lines[i]), _row_problem([values[int(ev_col.indices[i].as_py())]] + [""] * 9))
        cols = {c: _column(t, c) for c in ("time_us", "stage", "users")}
        for c, (_, valid) in cols.items():
            if valid is not None:
                i = int(np.argmax(~valid))
                what = EVENTS[int(ev[i])]
                raise fail(path, int(lines[i]), f"a {what} row without {c}")
        if len(other):
            side.add(
                ev[other], *(cols[c][0][other] for c in ("time_us", "stage", "users")), lines[other], path
            )
        req = None if not len(other) else np.flatnonzero(ev == 0)
        nreq = n if req is None else len(req)
        total += nreq
        if not nreq:
            continue
        pick = _picker(req)
        got = {}
        for c in ("time_us", "stage", "users", "latency_us", "status", "ok"):
            v, valid = cols[c] if c in cols else _column(t, c)
            if valid is not None and not pick(valid).all():
                i = int(pick(np.arange(n))[np.argmax(~pick(valid))])
                raise fail(path, int(lines[i]), f"a request row without {c}")
            got[c] = pick(v)
        line = pick(lines)
        _check_requests(path, got, line)
        got["name"] = pick(_name_codes(codes, t.column("name").combine_chunks()))
        if name is not None:
            m = got["name"] == (s.names.index(name) if name in s.names else -1)
            got, line = {c: v[m] for c, v in got.items()}, line[m]
        side.count_pairs(got["stage"], got["users"])
        kept += len(line)
        if not len(line):
            continue
        yield Batch(got["time_us"] * 1000, got["latency_us"] / 1e6, got["status"], got["ok"] == 1, got["stage"],
                    line, got["name"])  # fmt: skip
    s.side["locust"] = side
    if total == 0:
        raise fail(path, None, "no requests (the file has a header but no request rows)")
    if kept == 0:
        raise fail(path, None, f"--name {short(name, 60)}: no request of that name in this file")
    if name is not None:
        s.warnings.append(f"{path}: --name {short(name, 60)}: {kept:,} of its {total:,} requests")


def _picker(rows: np.ndarray | None):
    """``a -> a[rows]`` (all of ``a`` when ``rows`` is None)."""
    return (lambda a: a) if rows is None else (lambda a: a[rows])


#: the values a request row's columns may take: (lowest, highest or None)
_RANGES = {"time_us": (0, None), "latency_us": (0, None), "stage": (0, None), "users": (0, None),
           "status": (0, 999), "ok": (0, 1)}  # fmt: skip


def _check_requests(path: Path, got: dict, line: np.ndarray) -> None:
    """Every request row's values in range (by the columns' extremes: the rows only to name a bad one)."""
    for c, (lo, hi) in _RANGES.items():
        v = got[c]
        if v.min() < lo or (hi is not None and v.max() > hi):
            i = int(np.argmax((v < lo) | (v > hi if hi is not None else False)))
            want = f"{lo} to {hi}" if hi is not None else f">= {lo}"
            raise fail(path, int(line[i]), f"bad {c} {int(v[i])} in a request row (expected {want})")


def _held(ut: np.ndarray, un: np.ndarray, t0: int, t1: int) -> tuple[int | None, float]:
    """The user count a process held longest in [t0, t1) (us), and when it first reached it (s after t0),
    from its user-count changes (``ut`` sorted, ``un`` the counts)."""
    if not len(ut) or t1 <= t0:
        return None, 0.0
    i0 = int(np.searchsorted(ut, t0, side="right"))  # the count in force at t0 is the one before
    i1 = int(np.searchsorted(ut, t1, side="left"))
    times = [t0, *ut[i0:i1].tolist(), t1]
    counts = [int(un[i0 - 1]) if i0 > 0 else 0, *un[i0:i1].tolist()]
    held: dict[int, int] = {}
    first: dict[int, int] = {}
    for c, a, b in zip(counts, times, times[1:]):
        held[c] = held.get(c, 0) + (b - a)
        first.setdefault(c, a)
    level = max(held, key=lambda c: (held[c], c))  # the longest; a tie goes to the higher count
    return level, (first[level] - t0) / 1e6


class LocustPlan:
    """One step per stage that holds requests; its concurrency the user count held longest in it."""

    def __init__(self, scan: Scan, raw):
        self.scan = scan
        side: _Side = scan.side.get("locust") or _Side()
        found = {s for s, _ in side.pairs}  # the stages of the requests, counted while they were read
        if side.worker:  # every stage the master set (workers' files align stage by stage), even one
            found |= {k for k, u in zip(side.stage_k, side.stage_users) if u > 0}
        self.stages = np.array(sorted(found), np.int64)
        self.conc, self.notes = [], []
        st = sorted(zip(side.stage_t, side.stage_k, side.stage_users), key=lambda x: x[1])
        begins = {k: t for t, k, _ in st}
        target = {k: u for _, k, u in st}
        keys = sorted(begins)
        after = {k: begins[j] for k, j in zip(keys, keys[1:])}  # the next stage's start
        ut = np.asarray(side.users_t, np.int64)
        o = np.argsort(ut, kind="stable")
        ut, un = ut[o], np.asarray(side.users_n, np.int64)[o]
        for k in self.stages.tolist():
            t0 = begins.get(k)
            t1 = after.get(k, side.stop_t)
            level, ramp = (None, 0.0)
            if t0 is not None and t1 is not None:
                level, ramp = _held(ut, un, t0, t1)
                if level is not None and ramp > 0.1 * (t1 - t0) / 1e6 and ramp > 0.5:
                    self.notes.append(f"stage {k}: {level} users only {ramp:.1f} s into its {(t1 - t0) / 1e6:.1f} s "
                                      "(spawn rate); the requests of its ramp-up are in it")  # fmt: skip
            if level is None:  # no users rows: the count most of its requests completed at
                pairs = {u: c for (s, u), c in side.pairs.items() if s == k}
                level = max(pairs, key=lambda u: (pairs[u], u)) if pairs else None
            self.conc.append(level)
        self.targets = [target.get(k) for k in self.stages.tolist()]

    def assign(self, c: dict) -> np.ndarray:
        return np.searchsorted(self.stages, c["key"]).astype(np.int64)

    def ranks(self) -> np.ndarray:
        """Every stage number's step (-1: a stage without one), for ``Reader.keyed``."""
        out = np.full(int(self.stages[-1]) + 1 if len(self.stages) else 1, -1, np.int32)
        out[self.stages] = np.arange(len(self.stages), dtype=np.int32)
        return out

    def found(self) -> Found:
        n = len(self.stages)
        names = [
            f"concurrency {c}" if c is not None else f"stage {k}"
            for c, k in zip(self.conc, self.stages.tolist())
        ]
        conc = list(self.conc) if all(c is not None for c in self.conc) else None
        src = f"Locust stages (the target user count changed {n - 1} times): {n} steps" if n > 1 else \
            "one Locust stage (one target user count): one step"  # fmt: skip
        w = list(self.scan.warnings) + [f"{self.scan.path}: {x}" for x in self.notes]
        return Found(names, conc, None, src, w)


def _run_row(path: Path, head: bytes) -> str:
    """The process's role from the ``run`` row (``local`` or ``worker``); a file of a later layout of
    headroom.locust is refused naming both versions."""
    for line in head.split(b"\n")[1:4]:
        f = line.rstrip(b"\r").split(b",")
        if f[0] != b"run" or len(f) < 9:
            continue
        about = f[8].decode("utf-8", "replace")
        v = about.split("headroom.locust ", 1)[-1].split(";", 1)[0].strip()
        if v.isdigit() and int(v) > VERSION:
            raise HeadroomError(
                f"{path}: written by headroom.locust layout {int(v)}; this headroom reads layout {VERSION}: "
                "upgrade headroom"
            )
        return f[7].decode("utf-8", "replace")
    return "local"


READER = Reader(
    "locust", "Locust (headroom.locust)", EXACT,
    "import headroom.locust in the locustfile (or locust -f locustfile.py,$(python3 -m headroom.locust)); "
    "read the --headroom-dir folder",
    "a header 'event,time_us,stage,users,latency_us,...'", guess, scan, LocustPlan, keyed=True, scan_options=("name",),
)  # fmt: skip

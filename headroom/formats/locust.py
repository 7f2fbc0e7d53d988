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

from ..model import HeadroomError
from ._batch import CHUNK_BYTES, Batch, Scan
from ._blocks import blocks, read_block_csv, row_lines
from ._common import EXACT, fail, first_line, short
from ._plans import COLS, Found
from ._protocol import Reader
from ._scan import head_bytes, np_column, strip_bom

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

    def add(self, ev, t, k, u, lines, path) -> None:
        for name in EVENTS[1:]:
            mask = ev == EVENTS.index(name)
            if not mask.any():
                continue
            bad = mask & ((t < 0) | (k < 0) | (u < 0))
            if bad.any():
                i = int(np.argmax(bad))
                raise fail(path, int(lines[i]), f"a {name} row without its time, stage and users")
            if name == "stage":
                self.stage_t += t[mask].tolist()
                self.stage_k += k[mask].tolist()
                self.stage_users += u[mask].tolist()
            elif name == "users":
                self.users_t += t[mask].tolist()
                self.users_n += u[mask].tolist()
            elif name == "stop":
                self.stop_t = int(t[mask].max())


def _int(t, col: str, n: int, missing: int = -1) -> np.ndarray:
    """An int64 column with its nulls (empty fields) as ``missing``."""
    import pyarrow.compute as pc

    c = t.column(col)
    if c.null_count:
        c = pc.fill_null(c, missing)
    return np_column(c, np.int64) if n else np.zeros(0, np.int64)


def _batches(s: Scan, chunk_bytes: int, name: str | None, worker: bool):
    import pyarrow as pa
    import pyarrow.compute as pc

    path = s.path
    types = {"event": pa.dictionary(pa.int32(), pa.string())}
    types.update({c: pa.int64() for c in _NUMERIC})
    if name is not None:
        types["name"] = pa.string()
    side, rows, kept, events = _Side(), 0, 0, {}
    side.worker = worker
    for blk in blocks(path, chunk_bytes, s.warnings, header=True):
        t = read_block_csv(blk, path, columns=COLUMNS, types=types, row_problem=_row_problem)
        n = t.num_rows
        if n == 0:
            continue
        lines = row_lines(blk, n)
        ev_col = t.column("event").combine_chunks()
        values = ev_col.dictionary.to_pylist()
        code = np.array([EVENTS.index(v) if v in EVENTS else -1 for v in values], np.int64)
        ev = code[np.asarray(ev_col.indices, np.int64)]
        if (ev < 0).any():
            i = int(np.argmax(ev < 0))
            raise fail(path, int(lines[i]), _row_problem([values[int(ev_col.indices[i].as_py())]] + [""] * 9))
        t_us, stage, users = (_int(t, c, n) for c in ("time_us", "stage", "users"))
        req = ev == 0
        side.add(ev, t_us, stage, users, lines, path)
        rows += n
        events[0] = events.get(0, 0) + int(req.sum())
        if not req.any():
            continue
        lat, status, ok = (_int(t, c, n) for c in ("latency_us", "status", "ok"))
        bad = req & ((t_us < 0) | (lat < 0) | (stage < 0) | (users < 0) | (status < 0) | (status > 999)
                     | ((ok != 0) & (ok != 1)))  # fmt: skip
        if bad.any():
            i = int(np.argmax(bad))
            raise fail(
                path, int(lines[i]), _request_problem(t_us[i], lat[i], stage[i], users[i], status[i], ok[i])
            )
        if name is not None:
            req &= np.asarray(pc.equal(t.column("name"), name).combine_chunks().fill_null(False), bool)
        pair = stage[req] * (1 << 32) + users[req]
        vals, cnt = np.unique(pair, return_counts=True)
        for v, c in zip(vals.tolist(), cnt.tolist()):
            key = (v >> 32, v & 0xFFFFFFFF)
            side.pairs[key] = side.pairs.get(key, 0) + c
        kept += int(req.sum())
        if not req.any():
            continue
        yield Batch(t_us[req] * 1000, lat[req] / 1e6, status[req], ok[req] == 1, stage[req], lines[req])
    s.side["locust"] = side
    if events.get(0, 0) == 0:
        raise fail(path, None, "no requests (the file has a header but no request rows)")
    if kept == 0:
        raise fail(path, None, f"--name {short(name, 60)}: no request of that name in this file")
    if name is not None:
        s.warnings.append(f"{path}: --name {short(name, 60)}: {kept:,} of its {events[0]:,} requests")


def _request_problem(t, lat, stage, users, status, ok) -> str:
    for what, v, lo, hi in (("time_us", t, 0, None), ("latency_us", lat, 0, None), ("stage", stage, 0, None),
                            ("users", users, 0, None), ("status", status, 0, 999), ("ok", ok, 0, 1)):  # fmt: skip
        if v < lo or (hi is not None and v > hi):
            if v == -1:
                return f"a request row without {what}"
            return f"bad {what} {int(v)} in a request row (expected {lo} to {hi})" if hi is not None else \
                f"bad {what} {int(v)} in a request row (expected >= {lo})"  # fmt: skip
    return "a bad request row"


def _held(side: _Side, k: int, t0: int, t1: int) -> tuple[int | None, float]:
    """The user count this process held longest in [t0, t1) (us), and when it first reached it (s after t0)."""
    ut = np.asarray(side.users_t, np.int64)
    un = np.asarray(side.users_n, np.int64)
    if not len(ut) or t1 <= t0:
        return None, 0.0
    o = np.argsort(ut, kind="stable")
    ut, un = ut[o], un[o]
    i0 = int(np.searchsorted(ut, t0, side="right")) - 1  # the count in force at t0
    start_n = int(un[i0]) if i0 >= 0 else 0
    inside = (ut >= t0) & (ut < t1)
    times = np.concatenate([[t0], ut[inside], [t1]])
    counts = np.concatenate([[start_n], un[inside]])
    dur = np.diff(times)
    per: dict[int, int] = {}
    for c, d in zip(counts.tolist(), dur.tolist()):
        per[c] = per.get(c, 0) + d
    level = max(per, key=lambda c: (per[c], c))
    reached = times[:-1][counts == level]
    return level, (float(reached[0]) - t0) / 1e6 if len(reached) else 0.0


class LocustPlan:
    """One step per stage that holds requests; its concurrency the user count held longest in it."""

    def __init__(self, scan: Scan, raw):
        self.scan = scan
        side: _Side = scan.side.get("locust") or _Side()
        found = [np.unique(c["key"]) for c in raw.chunks(COLS)]
        if side.worker:  # every stage the master set (workers' files align stage by stage), even one
            found.append(np.asarray([k for k, u in zip(side.stage_k, side.stage_users) if u > 0], np.int64))
        self.stages = np.unique(np.concatenate(found)) if found else np.zeros(0, np.int64)
        self.conc, self.notes = [], []
        st = sorted(zip(side.stage_t, side.stage_k, side.stage_users), key=lambda x: x[1])
        begins = {k: t for t, k, _ in st}
        target = {k: u for _, k, u in st}
        ends_at = side.stop_t
        for k in self.stages.tolist():
            t0 = begins.get(k)
            later = [begins[j] for j in begins if j > k]
            t1 = min(later) if later else ends_at
            level, ramp = (None, 0.0)
            if t0 is not None and t1 is not None:
                level, ramp = _held(side, k, t0, t1)
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
    "a header 'event,time_us,stage,users,latency_us,...'", guess, scan, LocustPlan, scan_options=("name",),
)  # fmt: skip

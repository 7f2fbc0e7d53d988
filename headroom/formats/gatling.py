"""Gatling ``simulation.log``, the tab-separated text log of Gatling 3.0 up to 3.11.

Records used: ``REQUEST`` (start and end in ms since the epoch, ``OK``/``KO``)
and ``USER`` (``START``/``END`` of a virtual user).  Gatling 3.0-3.3 wrote
``REQUEST<TAB>scenario<TAB>userId<TAB>groups<TAB>name<TAB>start<TAB>end<TAB>status<TAB>message``,
3.4-3.11 ``REQUEST<TAB>groups<TAB>name<TAB>start<TAB>end<TAB>status<TAB>message``: the
reader finds the status field and takes the two times before it, so both
read.  Per request, millisecond times.  The binary log of Gatling 3.12+ is
not read (refused with a message).  Steps: one per level of active users
(USER START/END records, counted at each request's start), else one step.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ._common import COARSE_MS, Table, drop_truncated_tail, fail, short, steps_from_concurrency


def guess(head: bytes) -> bool:
    first = head.split(b"\n", 1)[0]
    return first.startswith(b"RUN\t") or (b"\tREQUEST\t" in head[:4096]) or head.startswith(b"REQUEST\t")


def looks_binary_gatling(head: bytes) -> bool:
    # 3.12+: a binary log that starts with a RUN record (header byte 0) and the Gatling version string
    return head[:1] == b"\x00" and b"simulation" in head[:512].lower()


def steps_of(st: np.ndarray, u_start: list[int], u_end: list[int]):
    """The steps of the requests (start ms): one per level of active users at each start.

    Returns (step of every request, step names, concurrency per step or None, how steps were found).
    """
    if not u_start:
        return np.zeros(len(st), np.int64), ["all"], None, "no USER records: one step"
    us = np.sort(np.array(u_start, np.int64))
    ue = np.sort(np.array(u_end, np.int64)) if u_end else np.zeros(0, np.int64)
    active = np.searchsorted(us, st, side="right") - np.searchsorted(ue, st, side="right")
    step, names, conc = steps_from_concurrency(np.maximum(active, 1))
    return step, names, conc, f"active users from USER START/END records ({len(names)} levels)"


def read(path: Path, data: bytes) -> Table:
    warnings: list[str] = []
    data = drop_truncated_tail(data, path, warnings)
    starts, ends, ok, lines = [], [], [], []
    u_start, u_end = [], []
    for ln, raw in enumerate(data.split(b"\n"), start=1):
        raw = raw.rstrip(b"\r")
        if not raw:
            continue
        f = raw.split(b"\t")
        kind = f[0]
        if kind == b"REQUEST":
            k = next((i for i in range(3, len(f)) if f[i] in (b"OK", b"KO")), None)
            try:
                if k is None:
                    raise ValueError
                s, e = int(f[k - 2]), int(f[k - 1])
                if s < 0 or e < s:
                    raise ValueError
            except ValueError:
                raise fail(
                    path, ln, f"a REQUEST record without start, end (ms) and OK/KO: '{short(raw)}'"
                ) from None
            starts.append(s)
            ends.append(e)
            ok.append(f[k] == b"OK")
            lines.append(ln)
        elif kind == b"USER":
            what = next((x for x in f[1:] if x in (b"START", b"END")), None)
            try:
                if what is None or len(f) < 4:
                    raise ValueError
                t = int(f[-1])
            except ValueError:
                raise fail(
                    path, ln, f"a USER record without START/END and a time (ms): '{short(raw)}'"
                ) from None
            (u_start if what == b"START" else u_end).append(t)
        elif kind in (b"RUN", b"GROUP", b"ERROR", b"ASSERTION"):
            continue
        else:
            raise fail(path, ln, f"not a Gatling simulation.log record: '{short(raw)}'")
    if not starts:
        raise fail(path, None, "no REQUEST records in this Gatling simulation.log")
    st = np.array(starts, np.int64)
    en = np.array(ends, np.int64)
    step, names, conc, src = steps_of(st, u_start, u_end)
    return Table(
        fmt="gatling",
        fidelity=COARSE_MS,
        start_ns=st * 1_000_000,
        latency_s=(en - st) / 1e3,
        ok=np.array(ok, bool),
        status=None,
        step=step,
        step_names=names,
        step_concurrency=conc,
        steps_source=src,
        line=np.array(lines, np.int64),
        warnings=warnings,
    )

"""Gatling ``simulation.log``, the tab-separated text log of Gatling 3.0 up to 3.11.

Records used: ``REQUEST`` (start and end in ms since the epoch, ``OK``/``KO``)
and ``USER`` (``START``/``END`` of a virtual user).  Gatling 3.0-3.3 wrote
``REQUEST<TAB>scenario<TAB>userId<TAB>groups<TAB>name<TAB>start<TAB>end<TAB>status<TAB>message``,
3.4-3.11 ``REQUEST<TAB>groups<TAB>name<TAB>start<TAB>end<TAB>status<TAB>message``: the
reader finds the status field and takes the two times before it, so both
read.  Per request, millisecond times.  The binary log of Gatling 3.12+ is
not read (refused with a message).  Steps: the held levels of active users
(USER START/END records around each request, headroom.levels); in an open
model the rates users were started at; else one step.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ._common import COARSE_MS, Table, drop_truncated_tail, fail, short


def guess(head: bytes) -> bool:
    first = head.split(b"\n", 1)[0]
    return first.startswith(b"RUN\t") or (b"\tREQUEST\t" in head[:4096]) or head.startswith(b"REQUEST\t")


def looks_binary_gatling(head: bytes) -> bool:
    # 3.12+: a binary log that starts with a RUN record (header byte 0) and the Gatling version string
    return head[:1] == b"\x00" and b"simulation" in head[:512].lower()


def steps_of(st: np.ndarray, en: np.ndarray, u_start: list[int], u_end: list[int]):
    """The steps of the requests (start, end ms) from the USER records (headroom.levels).

    Closed model: the held levels of active users around each request; when
    most requests are at levels never held (an open model,
    ``constantUsersPerSec``), rate steps from the users' arrivals.  Returns
    (step of every request, step names, concurrency per step or None, how
    steps were found, rate figures per step or None, notes for the warnings).
    """
    if not u_start:
        return np.zeros(len(st), np.int64), ["all"], None, "no USER records: one step", None, ()
    from ..levels import closed_loop, gatling_active_users, reader_steps, steps_from_arrivals

    users = gatling_active_users(u_start, u_end if u_end else [], st)
    inf = closed_loop(st * 1_000_000, users, end_ns=en * 1_000_000, source="active users (USER records)")
    src = "active users around each request (USER START/END records)"
    if inf.looks_open:
        arrivals = np.asarray(u_start, np.int64) * 1_000_000
        inf = steps_from_arrivals(st * 1_000_000, arrivals_ns=arrivals, transients="next",
                                  source="users started per second (open model)")  # fmt: skip
        src = "users started per second (open model: rate steps)"
    rs = reader_steps(inf)
    if rs is None:
        return np.zeros(len(st), np.int64), ["all"], None, "no level held: one step", None, inf.notes
    return rs.step, rs.names, rs.concurrency, f"{src}, {len(rs.names)} steps", rs.rates, rs.notes


def _read_lines(path: Path, data: bytes, only: set[int] | None = None):
    """The records line by line (only the lines in ``only`` when given):
    (starts, ends, ok, lines, user starts, user ends)."""
    starts, ends, ok, lines = [], [], [], []
    u_start, u_end = [], []
    for ln, raw in _lines(data, only):
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
            (u_start if _user(path, ln, f, raw) == b"START" else u_end).append(int(f[-1]))
        elif kind not in (b"RUN", b"GROUP", b"ERROR", b"ASSERTION"):
            raise fail(path, ln, f"not a Gatling simulation.log record: '{short(raw)}'")
    return starts, ends, ok, lines, u_start, u_end


def _lines(data: bytes, only: set[int] | None):
    """(line number, bytes) of every line, or of the lines in ``only`` (found by their line ends)."""
    if only is None:
        yield from enumerate(data.split(b"\n"), start=1)
        return
    ends = np.flatnonzero(np.frombuffer(data, np.uint8) == 10)
    for ln in sorted(only):
        a = int(ends[ln - 2]) + 1 if ln >= 2 else 0
        b = int(ends[ln - 1]) if ln - 1 < len(ends) else len(data)
        yield ln, data[a:b]


def _user(path: Path, ln: int, f: list[bytes], raw: bytes) -> bytes:
    what = next((x for x in f[1:] if x in (b"START", b"END")), None)
    if what is None or len(f) < 4 or not f[-1].strip().isdigit():
        raise fail(path, ln, f"a USER record without START/END and a time (ms): '{short(raw)}'")
    return what


def _read_fast(path: Path, data: bytes):
    """The 3.4-3.11 REQUEST records (7 tab-separated fields) parsed by pyarrow; the other records
    line by line.  None when pyarrow refuses the file (then everything goes line by line)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    if b"\n\n" in data:  # blank lines: rows would not match lines
        return None
    try:  # pyarrow hands invalid rows to Python as text: the bytes must be UTF-8
        pa.array([data], pa.binary()).cast(pa.string())
    except pa.ArrowInvalid:
        return None
    others: list[int] = []

    def handler(row):
        others.append(row.number)
        return "skip"

    names = [f"c{i}" for i in range(7)]
    try:
        t = pacsv.read_csv(
            pa.BufferReader(data),
            read_options=pacsv.ReadOptions(column_names=names, use_threads=False),
            parse_options=pacsv.ParseOptions(delimiter="\t", quote_char=False, invalid_row_handler=handler),
            convert_options=pacsv.ConvertOptions(
                column_types={n: pa.string() for n in names}, include_columns=["c0", "c3", "c4", "c5"],
                strings_can_be_null=False,
            ),
        )  # fmt: skip
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if any(n < 1 for n in others):
        return None
    n_lines = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    row_lines = np.setdiff1d(np.arange(1, n_lines + 1), np.asarray(others, np.int64))
    if len(row_lines) != t.num_rows:
        return None
    req = np.asarray(pc.equal(t.column("c0"), "REQUEST").to_numpy(zero_copy_only=False), bool)
    status = t.column("c5").filter(pa.array(req))
    try:
        st = np.asarray(t.column("c3").filter(pa.array(req)).cast(pa.int64()).to_numpy(), np.int64)
        en = np.asarray(t.column("c4").filter(pa.array(req)).cast(pa.int64()).to_numpy(), np.int64)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    ok = np.asarray(pc.equal(status, "OK").to_numpy(zero_copy_only=False), bool)
    good = ok | np.asarray(pc.equal(status, "KO").to_numpy(zero_copy_only=False), bool)
    if not good.all() or (st < 0).any() or (en < st).any():
        return None
    slow = set(others) | set(row_lines[~req].tolist())
    s2, e2, ok2, l2, u_start, u_end = _read_lines(path, data, slow)
    if not s2:  # only USER/RUN records went line by line: the rows are in file order already
        return st, en, ok, row_lines[req], u_start, u_end
    lines = np.concatenate([row_lines[req], np.asarray(l2, np.int64)])
    order = np.argsort(lines, kind="stable")
    cat = lambda a, b, dt: np.concatenate([a, np.asarray(b, dt)])[order]  # noqa: E731
    return cat(st, s2, np.int64), cat(en, e2, np.int64), cat(ok, ok2, bool), lines[order], u_start, u_end


def read(path: Path, data: bytes) -> Table:
    """A Gatling simulation.log: its REQUEST records, steps from its USER records."""
    warnings: list[str] = []
    data = drop_truncated_tail(data, path, warnings)
    fast = _read_fast(path, data)
    starts, ends, ok, lines, u_start, u_end = fast if fast is not None else _read_lines(path, data)
    if len(starts) == 0:
        raise fail(path, None, "no REQUEST records in this Gatling simulation.log")
    st = np.asarray(starts, np.int64)
    en = np.asarray(ends, np.int64)
    step, names, conc, src, rates, notes = steps_of(st, en, u_start, u_end)
    warnings += [f"{path}: {n}" for n in notes]
    return Table(
        fmt="gatling",
        fidelity=COARSE_MS,
        start_ns=st * 1_000_000,
        latency_s=(en - st) / 1e3,
        ok=np.asarray(ok, bool),
        status=None,
        step=step,
        step_names=names,
        step_concurrency=conc,
        step_rates=rates,
        steps_source=src,
        line=np.asarray(lines, np.int64),
        warnings=warnings,
    )

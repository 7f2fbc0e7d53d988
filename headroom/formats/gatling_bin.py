"""Gatling 3.13+ binary ``simulation.log``, read exactly in one pass of bounded memory.

The layout (the same from 3.13.0 to 3.16.0; facts from Gatling's
``LogFileDataWriter``/``RecordHeader`` and the charts module's
``LogFileReader``): big-endian, a header byte per record, then

- ``RUN`` (0, once, first): string Gatling version, string simulation class,
  int64 run start (ms since the epoch), string description, int32 n +
  n strings (the scenarios, by index), int32 n + n byte arrays (int32 length
  + bytes: pickled assertions);
- ``REQUEST`` (1): int32 g + g cached strings (the group path), cached name,
  int32 start and int32 end (ms since the run start), byte OK (1) / KO (0),
  cached message;
- ``USER`` (2): int32 scenario index, byte start (1) / end (0), int32 time;
- ``GROUP`` (3): int32 g + g cached strings, int32 start, int32 end, int32
  cumulated response time, byte OK/KO;
- ``ERROR`` (4): cached message, int32 time.

A string is int32 n (0: empty, nothing follows) then n bytes and a coder
byte (Java's internal value: 0 Latin-1, 1 UTF-16).  A cached string is
int32 i: i > 0 defines string i (the string follows), i < 0 refers to
string -i defined before.  Records carry no user id.

Fast path: in every block of bytes the positions where a record whose
strings are all references (all records but a string's first use) could
start are found with numpy, each with its length; the candidates that
another candidate's end points at are the chain, checked to be contiguous
from the block's first record; the gaps (records that define a string) are
read one by one in Python; a block where this does not add up is read one
record at a time (exact, slower).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..endpoints import NameCodes
from ._batch import CHUNK_BYTES, Batch, Scan
from ._blocks import raw_chunks
from ._common import COARSE_MS, fail

#: the binary layout read here: Gatling 3.13 to 3.16 (the writer is unchanged from 3.13.0 to 3.16.0)
FIRST, LAST = (3, 13), (3, 16)
RUN, REQUEST, USER, GROUP, ERROR = 0, 1, 2, 3, 4
_MAX_GROUPS = 64
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def looks_binary(head: bytes) -> bool:
    """A RUN record first: header byte 0, then a version string ``3.x`` (int32 length, Latin-1)."""
    if len(head) < 9 or head[0] != 0:
        return False
    n = int.from_bytes(head[1:5], "big")
    return 1 <= n <= 40 and head[5:6].isdigit() and b"." in head[5 : 5 + n]


class _Cut(Exception):
    """A record runs past the bytes at hand (more to come, or a truncated file)."""


class _Reader:
    """Records one at a time from a bytes buffer (the slow path, and the RUN record)."""

    def __init__(self, path: Path):
        self.path = path
        self.next_string = 1  # the index the next string defined must have
        self.strings: dict[int, str] = {}  # the strings defined so far, by index (request names among them)
        self.record = 0  # records read so far (the RUN record is record 1)
        self.scenarios = 0

    def _i32(self, b, p: int) -> int:
        if p + 4 > len(b):
            raise _Cut
        return _I32.unpack_from(b, p)[0]

    def string(self, b, p: int) -> int:
        n = self._i32(b, p)
        if n < 0 or n > 1 << 24:
            raise self.bad(f"a string of {n} bytes")
        end = p + 4 + (n + 1 if n else 0)
        if end > len(b):
            raise _Cut
        return end

    def cached(self, b, p: int) -> int:
        i = self._i32(b, p)
        if i > 0:
            if i != self.next_string:
                raise self.bad(f"string {i} defined where string {self.next_string} was expected")
            end = self.string(b, p + 4)  # cut off: read again whole with the next bytes
            n = self._i32(b, p + 4)
            raw = bytes(b[p + 8 : p + 8 + n])
            self.strings[i] = raw.decode("utf-16-le" if n and b[p + 8 + n] == 1 else "latin-1", "replace")
            self.next_string += 1
            return end
        if i == 0 or -i >= self.next_string:
            raise self.bad(f"a reference to string {-i}, which was not defined before")
        return p + 4

    def bad(self, what: str):
        return fail(
            self.path, None, f"record {self.record + 1:,}: not a Gatling 3.13+ binary log record ({what})"
        )

    def one(self, b, p: int):
        """(end, record) of the record at ``p``: ("req", start, end, ok, name's string index), ("user",
        is_start, t) or None."""
        if p >= len(b):
            raise _Cut
        h = b[p]
        q = p + 1
        if h == REQUEST or h == GROUP:
            g = self._i32(b, q)
            if not 0 <= g <= _MAX_GROUPS:
                raise self.bad(f"{g} groups")
            q += 4
            for _ in range(g):
                q = self.cached(b, q)
            if h == GROUP:
                if q + 13 > len(b):
                    raise _Cut
                return q + 13, None
            name = abs(self._i32(b, q))
            q = self.cached(b, q)
            if q + 9 > len(b):
                raise _Cut
            s, e = struct.unpack_from(">ii", b, q)
            ok = b[q + 8]
            if ok > 1:
                raise self.bad(f"status byte {ok}")
            q = self.cached(b, q + 9)
            return q, ("req", s, e, ok == 1, name)
        if h == USER:
            if q + 9 > len(b):
                raise _Cut
            if not 0 <= _I32.unpack_from(b, q)[0] < self.scenarios:
                raise self.bad(f"scenario {_I32.unpack_from(b, q)[0]} of {self.scenarios}")
            start = b[q + 4]
            if start > 1:
                raise self.bad(f"user start/end byte {start}")
            return q + 9, ("user", start == 1, _I32.unpack_from(b, q + 5)[0])
        if h == ERROR:
            q = self.cached(b, q)
            if q + 4 > len(b):
                raise _Cut
            return q + 4, None
        raise self.bad(f"record type {h}")

    def _count(self, b, p: int) -> int:
        n = self._i32(b, p)
        if not 0 <= n <= 1 << 20:
            raise self.bad(f"a count of {n}")
        return n


def _run_record(r: _Reader, b) -> tuple[int, str, int]:
    p = r.string(b, 1)
    version = bytes(b[5 : p - 1]).decode("latin-1") if p > 5 else ""
    p = r.string(b, p)  # simulation class name
    if p + 8 > len(b):
        raise _Cut
    start = _I64.unpack_from(b, p)[0]
    p = r.string(b, p + 8)  # run description
    n = r.scenarios = r._count(b, p)
    p += 4
    for _ in range(n):  # scenario names
        p = r.string(b, p)
    n = r._count(b, p)
    p += 4
    for _ in range(n):  # assertions: int32 length + bytes
        m = r._i32(b, p)
        if not 0 <= m <= 1 << 24:
            raise r.bad(f"an assertion of {m} bytes")
        p += 4 + m
        if p > len(b):
            raise _Cut
    return p, version, start


def _version_ok(path: Path, version: str) -> None:
    parts = version.split(".")
    try:
        mm = (int(parts[0]), int(parts[1]))
    except (ValueError, IndexError):
        raise fail(path, None, f"a binary log of Gatling {version!r}, not a version number") from None
    if not FIRST <= mm <= LAST:
        raise fail(
            path,
            None,
            f"a binary simulation.log of Gatling {version}: headroom reads the binary logs of Gatling "
            f"{FIRST[0]}.{FIRST[1]} to {LAST[0]}.{LAST[1]} (and the text logs of 3.0 to 3.12); "
            "record the run with one of those, or report the version (docs/formats.md)",
        )


# --------------------------------------------------------------------------
# the vectorized pass over a block


def _be32(a: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """int32 big-endian at byte positions ``pos`` of ``a`` (each with 4 bytes after it)."""
    v = a[pos].astype(np.uint32) << 24
    v |= a[pos + 1].astype(np.uint32) << 16
    v |= a[pos + 2].astype(np.uint32) << 8
    v |= a[pos + 3]
    return v.view(np.int32)


def _keep(p: np.ndarray, cond: np.ndarray) -> np.ndarray:
    return p if cond.all() else p[cond]


def _candidates(a: np.ndarray, scenarios: int):
    """Positions where a record with only string references could start, its length, kind, and (for
    requests) the offset of its times from the record start: byte tests first (cheap), then the
    int32 fields of what is left."""
    n = len(a)
    out = []  # (positions, length, kind, offset of the times)
    hdr = np.flatnonzero((a[: max(n - 8, 0)] - np.uint8(1)) < np.uint8(ERROR))  # bytes 1 to 4 (0 wraps)
    h = a[hdr]
    # USER: 10 bytes, a scenario index (< 65,536 here: its two high bytes 0), start byte 0/1
    u = hdr[h == USER]
    u = _keep(u, u + 10 <= n)
    u = _keep(u, (a[u + 1] == 0) & (a[u + 2] == 0) & (a[u + 5] <= 1))
    u = _keep(u, ((a[u + 3].astype(np.int64) << 8) | a[u + 4]) < scenarios)
    out.append((u, 10, USER, 0))
    # ERROR: 9 bytes, a referenced message (negative: high bit set)
    e = hdr[h == ERROR]
    e = _keep(e, e + 9 <= n)
    out.append((_keep(e, a[e + 1] >= 0x80), 9, ERROR, 0))
    # REQUEST and GROUP: g (0 to 8) referenced group names, then (REQUEST) a referenced name
    for kind in (REQUEST, GROUP):
        rg = hdr[h == kind]
        rg = _keep(rg, (a[rg + 1] == 0) & (a[rg + 2] == 0) & (a[rg + 3] == 0) & (a[rg + 4] <= 8))
        g = a[rg + 4]
        for gv in np.unique(g).tolist() if len(g) and g.max() > 0 else [0] if len(g) else []:
            p = rg if gv == 0 and not g.any() else rg[g == gv]
            size = 1 + 4 + 4 * gv + (4 + 8 + 1 + 4 if kind == REQUEST else 12 + 1)
            p = _keep(p, p + size <= n)
            for j in range(gv):
                p = _keep(p, a[p + 5 + 4 * j] >= 0x80)
            q = p + 5 + 4 * gv  # REQUEST: the name; GROUP: start
            if kind == REQUEST:
                p = _keep(p, (a[q] >= 0x80) & (a[q + 12] <= 1) & (a[q + 13] >= 0x80))
                toff = 9 + 4 * gv
            else:
                p = _keep(p, a[q + 12] <= 1)
                toff = 5 + 4 * gv
            p = _keep(p, _be32(a, p + toff) <= _be32(a, p + toff + 4))
            out.append((p, size, kind, toff))
    pos = np.concatenate([x[0] for x in out]).astype(np.int64)
    full = lambda i: np.concatenate([np.full(len(x[0]), x[i], np.int64) for x in out])  # noqa: E731
    order = np.argsort(pos, kind="stable")
    return pos[order], full(1)[order], full(2)[order], full(3)[order]


class _Block:
    """The records of one block: requests (start, end ms relative, ok), users (is start, time)."""

    def __init__(self):
        self.req: list[tuple] = []  # (position, start, end, ok, name's string index) from the slow path
        self.usr: list[tuple] = []  # (position, is_start, time)
        self.positions: list[int] = []  # every record's position, slow ones
        self.numbers: list[int] = []  # and its record number
        self.fast = None


def _slow_walk(r: _Reader, b, p: int, stop: int, blk: _Block) -> int:
    """Records one by one from ``p`` up to ``stop`` (exactly) or the end of ``b``; their end."""
    while p < stop:
        try:
            end, rec = r.one(b, p)
        except _Cut:
            return p
        blk.positions.append(p)
        blk.numbers.append(r.record + 1)
        if rec is not None:
            if rec[0] == "req":
                blk.req.append((p, *rec[1:]))
            else:
                blk.usr.append((p, rec[1], rec[2]))
        r.record += 1
        p = end
    return p


def _parse(r: _Reader, b: bytes, p0: int, final: bool):
    """The records of ``b[p0:]`` that are whole: (end of the last whole record, request columns in record
    order (start, end, ok, record number, name's string index), user columns (is_start, time))."""
    a = np.frombuffer(b, np.uint8)
    pos, ln, kind, toff = _candidates(a, r.scenarios)
    m = pos >= p0
    pos, ln, kind, toff = pos[m], ln[m], kind[m], toff[m]
    mark = np.zeros(len(a) + 1, bool)
    mark[np.minimum(pos + ln, len(a))] = True
    chain = mark[pos]
    if len(pos):
        chain[0] |= pos[0] == p0
    cpos, cln = pos[chain], ln[chain]
    blk = _Block()
    # walk: runs of contiguous candidates from the record at hand; a record that is not a candidate
    # (it defines a string) read on its own; candidates before the record at hand lie inside records
    # already read (false ones) and are passed over
    ends = cpos + cln
    breaks = np.flatnonzero(cpos[1:] != ends[:-1]) + 1
    take = np.zeros(len(cpos), bool)
    nums = np.zeros(len(cpos), np.int64)
    m, p, i = len(cpos), p0, 0
    while True:
        i = int(np.searchsorted(cpos, p)) if i < m and cpos[i] < p else i
        if i >= m:
            p = _slow_walk(r, b, p, len(b), blk)
            break
        if cpos[i] == p:
            k = int(np.searchsorted(breaks, i, "right"))
            j = int(breaks[k]) if k < len(breaks) else m
            take[i:j] = True
            nums[i:j] = np.arange(r.record + 1, r.record + 1 + j - i)
            r.record += j - i
            p, i = int(ends[j - 1]), j
            continue
        q = _slow_walk(r, b, p, p + 1, blk)  # one record
        if q == p:  # cut off at the end of the bytes at hand
            break
        p = q
    if p < len(b) and final:
        raise _Cut
    # the fast records' fields
    cpos, nums = cpos[take], nums[take]
    ck, ct = kind[chain][take], toff[chain][take]
    # a referenced string must have been defined (checked against the strings defined by the block's end)
    req = ck == REQUEST
    rp = cpos[req]
    st = _be32(a, rp + ct[req]).astype(np.int64)
    en = _be32(a, rp + ct[req] + 4).astype(np.int64)
    ok = a[rp + ct[req] + 8] == 1
    refs = _be32(a, rp + ct[req] - 4)
    if len(refs) and -int(refs.min()) >= r.next_string:
        raise r.bad(f"a reference to string {-int(refs.min())}, which was not defined before")
    rno = nums[req]
    nidx = -refs.astype(np.int64)
    us = ck == USER
    up = cpos[us]
    u_start = a[up + 5] == 1
    u_t = _be32(a, up + 6).astype(np.int64)
    u_pos = up
    if blk.req:
        sp, s2, e2, o2, n2 = (np.array(x) for x in zip(*blk.req))
        allp = np.concatenate([rp, sp])
        order = np.argsort(allp, kind="stable")
        slow_no = np.array(blk.numbers, np.int64)[np.searchsorted(blk.positions, sp)]
        nidx = np.concatenate([nidx, n2.astype(np.int64)])[order]
        st = np.concatenate([st, s2.astype(np.int64)])[order]
        en = np.concatenate([en, e2.astype(np.int64)])[order]
        ok = np.concatenate([ok, o2.astype(bool)])[order]
        rno = np.concatenate([rno, slow_no])[order]
    if blk.usr:
        sp, s2, t2 = (np.array(x) for x in zip(*blk.usr))
        allp = np.concatenate([u_pos, sp])
        order = np.argsort(allp, kind="stable")
        u_start = np.concatenate([u_start, s2.astype(bool)])[order]
        u_t = np.concatenate([u_t, t2.astype(np.int64)])[order]
    return p, (st, en, ok, rno, nidx), (u_start, u_t)


def _parse_slow(r: _Reader, b: bytes, p0: int, final: bool):
    """:func:`_parse` one record at a time (a block the fast pass could not account for)."""
    blk = _Block()
    base = r.record
    p = _slow_walk(r, b, p0, len(b), blk)
    if p < len(b) and final:
        raise _Cut
    nums = {q: base + 1 + i for i, q in enumerate(blk.positions)}
    if blk.req:
        sp, s2, e2, o2, n2 = zip(*blk.req)
        req = (np.array(s2, np.int64), np.array(e2, np.int64), np.array(o2, bool),
               np.array([nums[q] for q in sp], np.int64), np.array(n2, np.int64))  # fmt: skip
    else:
        z = np.zeros(0, np.int64)
        req = (z, z, np.zeros(0, bool), z, z)
    if blk.usr:
        _, s2, t2 = zip(*blk.usr)
        usr = (np.array(s2, bool), np.array(t2, np.int64))
    else:
        usr = (np.zeros(0, bool), np.zeros(0, np.int64))
    return p, req, usr


def _name_codes(r: _Reader, idx: np.ndarray, names: NameCodes) -> np.ndarray:
    """Every request's name code from its name's string index: each distinct name looked up once."""
    if not len(idx):
        return np.zeros(0, np.int32)
    u, inv = np.unique(idx, return_inverse=True)
    return names.of_values([r.strings.get(int(i), "") for i in u])[inv]


def _joined(parts: list) -> np.ndarray:
    """The offsets of ``parts`` (int32 ms since the run start) in one array, each part let go once
    copied (peak: the parts and the result, not twice the result)."""
    out = np.empty(sum(len(x) for x in parts), np.int32)
    i = 0
    for j, x in enumerate(parts):
        out[i : i + len(x)] = x
        i += len(x)
        parts[j] = None
    return out


def scan(path, *, chunk_bytes: int = CHUNK_BYTES, data: bytes | None = None) -> Scan:
    """One pass over a binary simulation.log (plain or gzip) in blocks of about ``chunk_bytes``.

    Batches of its REQUEST records (``ok``; ``line`` is the record number, the RUN record
    being 1); the USER records' times on the side as for the text log,
    ``side["user_start_ms"]``, ``side["user_end_ms"]``, but as the log keeps them: int32 ms
    since the run's start, ``side["user_base_ms"]`` (ms since the epoch; half the memory of
    absolute times, a user per request in a closed ramp); ``side["gatling_version"]``.
    """
    sc = Scan(Path(path), "gatling", COARSE_MS)
    sc._gen = _batches(sc, chunk_bytes, data)
    return sc


def _batches(sc: Scan, chunk_bytes: int, data: bytes | None) -> Iterator[Batch]:
    path = sc.path
    r = _Reader(path)
    us: list[np.ndarray] = []
    ue: list[np.ndarray] = []
    carry = b""
    run_start = None
    n = 0
    chunks = raw_chunks(path, data, max(int(chunk_bytes), 1 << 16))
    names = NameCodes(sc.names)
    done = False
    while not done:
        chunk = next(chunks, None)
        done = chunk is None
        b = carry + (chunk or b"")
        if run_start is None:
            if b[:1] != b"\x00":
                raise fail(
                    path,
                    None,
                    "not a Gatling 3.13+ binary simulation.log: it does not start with a RUN record",
                )
            try:
                p0, version, run_start = _run_record(r, b)
            except _Cut:
                if done:
                    raise fail(path, None, "record 1 (RUN) is cut off: the log is truncated") from None
                carry, run_start = b, None
                continue
            _version_ok(path, version)
            sc.side["gatling_version"] = version
            r.record = 1
        else:
            p0 = 0
        try:
            got = _parse(r, b, p0, done)
            if got is None:
                got = _parse_slow(r, b, p0, done)
        except _Cut:
            raise fail(
                path,
                None,
                f"record {r.record + 1:,} is cut off: the log is truncated (Gatling stopped before "
                "closing it?)",
            ) from None
        p, (st, en, ok, rno, nidx), (u_start, u_t) = got
        carry = b[p:]
        if len(u_t):  # kept as the log's own 4-byte offsets (a user per request: 8 B)
            us.append(u_t[u_start].astype(np.int32))
            ue.append(u_t[~u_start].astype(np.int32))
        if len(st):
            if (en < st).any():
                i = int(np.argmax(en < st))
                raise fail(path, None, f"record {int(rno[i]):,}: a REQUEST that ends before it starts")
            n += len(st)
            yield Batch(
                (st + run_start) * 1_000_000,
                (en - st) / 1e3,
                None,
                ok,
                None,
                rno,
                _name_codes(r, nidx, names),
            )
    sc.side["user_start_ms"], sc.side["user_end_ms"] = _joined(us), _joined(ue)
    sc.side["user_base_ms"] = int(run_start or 0)
    if n == 0:
        raise fail(path, None, "no REQUEST records in this Gatling simulation.log")

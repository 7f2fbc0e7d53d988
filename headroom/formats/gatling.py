"""Gatling ``simulation.log``: the tab-separated text log of Gatling 3.0 up to 3.12 (here), and the
binary log of 3.13 and later (:mod:`.gatling_bin`, chosen by :func:`scan` from the first bytes).

Records used: ``REQUEST`` (start and end in ms since the epoch, ``OK``/``KO``)
and ``USER`` (``START``/``END`` of a virtual user).  Gatling 3.0-3.3 wrote
``REQUEST<TAB>scenario<TAB>userId<TAB>groups<TAB>name<TAB>start<TAB>end<TAB>status<TAB>message``,
3.4-3.11 ``REQUEST<TAB>groups<TAB>name<TAB>start<TAB>end<TAB>status<TAB>message``: the
reader finds the status field and takes the two times before it, so both
read.  Per request, millisecond times.  Steps (both logs): the held levels of active users
(USER START/END records around each request, headroom.levels); in an open
model the rates users were started at; else one step.

Read in one pass of bounded memory (:mod:`._batch`): :func:`scan` cuts the
log into blocks of whole lines.  A block of 3.4-3.11 REQUEST records (and a
few others: USER, RUN) is parsed by pyarrow as 7 tab-separated fields, its
times checked to be digits (what ``int`` reads), the records of other shapes
read as below; any block where that could differ (a lone CR, an empty line,
bytes that are not UTF-8, a field it cannot read), and every block of a file
with many records of other shapes (a user per request), is parsed with numpy
on the raw bytes (record kind, tab positions, the digits of the times); only
lines of an unusual shape (and bad ones, to name them) go through Python
line by line.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..endpoints import NameCodes, only_name
from ._batch import CHUNK_BYTES, Batch, Scan
from ._blocks import TextBlocks, blocks, raw_chunks
from ._common import COARSE_MS, Table, fail, short
from ._plans import CachedLevels, Counted, Found, OneStep, TablePlan
from ._protocol import Reader
from ._scan import head_bytes, np_column
from .gatling_bin import looks_binary
from .gatling_bin import scan as scan_binary


def guess(head: bytes) -> bool:
    if looks_binary(head):
        return True
    first = head.split(b"\n", 1)[0]
    return first.startswith(b"RUN\t") or (b"\tREQUEST\t" in head[:4096]) or head.startswith(b"REQUEST\t")


def looks_open(u_start, u_end) -> bool:
    """An open model by its users: no user active for over a quarter of the run (a closed model starts a
    user as another ends, :func:`headroom.arrivals.idle_share`), even where the active users are few and
    steady enough to look held (low arrival rates, one request per user)."""
    from ..arrivals import OPEN_IDLE_SHARE, idle_share

    return idle_share(u_start, u_end) > OPEN_IDLE_SHARE


def steps_of(st: np.ndarray, en: np.ndarray, u_start, u_end):
    """The steps of the requests (start, end ms) from the USER records (headroom.levels).

    Closed model: the held levels of active users around each request; when
    most requests are at levels never held (an open model,
    ``constantUsersPerSec``), rate steps from the users' arrivals.  Returns
    (step of every request, step names, concurrency per step or None, how
    steps were found, rate figures per step or None, notes for the warnings).
    """
    if not len(u_start):
        return np.zeros(len(st), np.int64), ["all"], None, "no USER records: one step", None, ()
    from ..arrivals import steps_from_arrivals
    from ..levels import closed_loop, gatling_active_users, reader_steps

    users = gatling_active_users(u_start, u_end if len(u_end) else [], st)
    inf = closed_loop(st * 1_000_000, users, end_ns=en * 1_000_000, source="active users (USER records)")
    src = "active users around each request (USER START/END records)"
    if inf.looks_open or looks_open(u_start, u_end):
        arrivals = np.asarray(u_start, np.int64) * 1_000_000
        inf = steps_from_arrivals(st * 1_000_000, arrivals_ns=arrivals, transients="next", edges="events",
                                  source="users started per second (open model)")  # fmt: skip
        src = "users started per second (open model: rate steps)"
    rs = reader_steps(inf)
    if rs is None:
        return np.zeros(len(st), np.int64), ["all"], None, "no level held: one step", None, inf.notes
    return rs.step, rs.names, rs.concurrency, f"{src}, {len(rs.names)} steps", rs.rates, rs.notes


_MAX_MS = 2**63 - 1
_POW10 = 10 ** np.arange(17, -1, -1, dtype=np.int64)  # 10**17 ... 1


def _line(path: Path, ln: int, raw: bytes):
    """One record the slow way: ("req", start, end, ok, name), ("user", is_start, time), or None (skipped)."""
    raw = raw.rstrip(b"\r")
    if not raw:
        return None
    f = raw.split(b"\t")
    kind = f[0]
    if kind == b"REQUEST":
        k = next((i for i in range(3, len(f)) if f[i] in (b"OK", b"KO")), None)
        try:
            if k is None:
                raise ValueError
            s, e = int(f[k - 2]), int(f[k - 1])
            if s < 0 or e < s or e > _MAX_MS:
                raise ValueError
        except ValueError:
            raise fail(
                path, ln, f"a REQUEST record without start, end (ms) and OK/KO: '{short(raw)}'"
            ) from None
        return ("req", s, e, f[k] == b"OK", f[k - 3].decode("utf-8", "replace") if k > 3 else "")
    if kind == b"USER":
        what = _user(path, ln, f, raw)
        t = int(f[-1])
        if t > _MAX_MS:
            raise fail(path, ln, f"a USER record without START/END and a time (ms): '{short(raw)}'")
        return ("user", what == b"START", t)
    if kind not in (b"RUN", b"GROUP", b"ERROR", b"ASSERTION"):
        raise fail(path, ln, f"not a Gatling simulation.log record: '{short(raw)}'")
    return None


def _user(path: Path, ln: int, f: list[bytes], raw: bytes) -> bytes:
    what = next((x for x in f[1:] if x in (b"START", b"END")), None)
    if what is None or len(f) < 4 or not f[-1].strip().isdigit():
        raise fail(path, ln, f"a USER record without START/END and a time (ms): '{short(raw)}'")
    return what


class _Block:
    """The lines and tab-separated fields of one block of whole lines, found with numpy."""

    def __init__(self, buf, start: int, end: int):
        a = np.frombuffer(buf, np.uint8, count=end - start, offset=start)
        self.a = a
        nl = np.flatnonzero(a == 10)
        if len(nl) == 0 or nl[-1] != len(a) - 1:  # the file's last line, without a line end
            nl = np.append(nl, len(a))
            a = self.a = np.append(a, np.uint8(10))
        self.nl = nl
        self.ls = np.concatenate([[0], nl[:-1] + 1]).astype(np.int64)
        tp = np.flatnonzero(a == 9)
        self.tp = np.append(tp, len(a))  # a sentinel past the end: field ends of missing fields
        self.t0 = np.searchsorted(tp, self.ls)
        self.ntab = np.searchsorted(tp, nl) - self.t0

    def eq(self, pos: np.ndarray, word: bytes) -> np.ndarray:
        """Whether the bytes at ``pos`` (each within the block with ``len(word)`` bytes after) are ``word``."""
        out = np.ones(len(pos), bool)
        for j, c in enumerate(word):
            out &= self.a[pos + j] == c
        return out

    def field(self, rows: np.ndarray, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) of field ``i`` (0-based) of lines ``rows`` that have a tab after it."""
        t0 = self.t0[rows]
        s = self.ls[rows] if i == 0 else self.tp[t0 + i - 1] + 1
        return s, self.tp[t0 + i]

    def digits(self, s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The values of fields of 1 to 18 ASCII digits, and which fields are such."""
        w = e - s
        good = (w >= 1) & (w <= 18)
        val = np.zeros(len(s), np.int64)
        if not good.any():
            return val, good
        for width in np.flatnonzero(np.bincount(w[good])).tolist():  # a few widths (13: epoch ms)
            c = np.flatnonzero(w == width) if width != w[0] or not (w == width).all() else slice(None)
            d = sliding_window_view(self.a, width)[s[c]] - np.uint8(48)  # the fields' bytes, row by row
            good[c] &= (d < 10).all(axis=1)
            val[c] = d @ _POW10[18 - width :]
        return val, good

    def word_in(self, s: np.ndarray, e: np.ndarray, words: tuple[bytes, ...]) -> np.ndarray:
        """For each field: 1 + the index of the word of ``words`` it is, 0 for none."""
        out = np.zeros(len(s), np.int8)
        w = e - s
        for k, word in enumerate(words, start=1):
            c = np.flatnonzero((w == len(word)) & (out == 0))
            if len(c):
                out[c[self.eq(s[c], word)]] = k
        return out


def _slow_lines(path: Path, b, slow: np.ndarray, line0: int, req: tuple, usr: tuple, names: NameCodes):
    """The lines the vectorized pass could not read, read one by one and merged in line order."""
    req_lines, st_ms, en_ms, req_ok, req_name = req
    u_lines, u_start, u_ms = usr
    if len(slow):
        sr, su = [], []
        data = b.a
        for i in slow.tolist():
            r = _line(path, line0 + i, data[b.ls[i] : b.nl[i]].tobytes())
            if r is None:
                continue
            (sr if r[0] == "req" else su).append((i, *r[1:]))
        if sr:
            li, s2, e2, ok2, n2 = zip(*sr)
            order = np.argsort(np.concatenate([req_lines, li]), kind="stable")
            cat = lambda x, y, dt: np.concatenate([x, np.asarray(y, dt)])[order]  # noqa: E731
            req_lines, st_ms, en_ms, req_ok = (cat(req_lines, li, np.int64), cat(st_ms, s2, np.int64),
                                               cat(en_ms, e2, np.int64), cat(req_ok, ok2, bool))  # fmt: skip
            req_name = cat(req_name, names.of_values(n2), np.int32)
        if su:
            li, us2, t2 = zip(*su)
            order = np.argsort(np.concatenate([u_lines, li]), kind="stable")
            u_start = np.concatenate([u_start, np.asarray(us2, bool)])[order]
            u_ms = np.concatenate([u_ms, np.asarray(t2, np.int64)])[order]
    return (req_lines, st_ms, en_ms, req_ok, req_name), (u_lines, u_start, u_ms)


def _name_codes(b: _Block, s: np.ndarray, e: np.ndarray, names: NameCodes) -> np.ndarray:
    """Codes of the names in fields (``s``, ``e``) of a block: each distinct name decoded once."""
    raw, seen = b.a.tobytes(), {}
    out = np.empty(len(s), np.int32)
    for i, (x, y) in enumerate(zip(s.tolist(), e.tolist())):
        v = raw[x:y]
        c = seen.get(v)
        if c is None:
            c = seen[v] = int(names.of_values([v.decode("utf-8", "replace")])[0])
        out[i] = c
    return out


def _status_fields(b: _Block, req: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each REQUEST line's status (1 OK, 2 KO, 0 none) and the field it is in: the first of fields
    3, 4, ... that is OK or KO.  Gatling 3's field 5 is tried first on every line (fields 3 and 4 are
    its times, digits, so never OK or KO; a line where they are not digits is read one by one)."""
    status = np.zeros(len(req), np.int8)
    k_of = np.zeros(len(req), np.int64)
    for k in (5, 3, 4, 6, 7, 8):
        c = np.flatnonzero((k_of == 0) & (b.ntab[req] > k)) if k != 5 else np.flatnonzero(b.ntab[req] > k)
        if not len(c):
            continue
        st = b.word_in(*b.field(req[c], k), (b"OK", b"KO"))
        hit = st > 0
        if k == 5:  # kept only where fields 3 and 4 cannot be OK or KO (not two letters)
            s3, e3 = b.field(req[c], 3)
            s4, e4 = b.field(req[c], 4)
            hit &= (e3 - s3 != 2) & (e4 - s4 != 2)
        k_of[c[hit]] = k
        status[c[hit]] = st[hit]
    return status, k_of


def _parse_block(path: Path, buf, start: int, end: int, line0: int, names: NameCodes):
    """The REQUEST rows (start ms, end ms, OK, line) and USER records (line, is start, ms) of a block, and
    the REQUEST rows' name codes (the field before the two times: ``names``)."""
    b = _Block(buf, start, end)
    n = len(b.nl)
    flen = np.where(b.ntab > 0, b.tp[np.minimum(b.t0, len(b.tp) - 1)], b.nl) - b.ls
    kind = np.zeros(n, np.int8)  # 0 slow, 1 REQUEST, 2 USER, 3 skipped
    kind[b.nl == b.ls] = 3  # empty lines
    for word, k in (
        (b"REQUEST", 1),
        (b"USER", 2),
        (b"RUN", 3),
        (b"GROUP", 3),
        (b"ERROR", 3),
        (b"ASSERTION", 3),
    ):
        c = np.flatnonzero((flen == len(word)) & (kind == 0))
        if len(c):
            kind[c[b.eq(b.ls[c], word)]] = k
    # REQUEST: the status is the first of fields 3, 4, ... that is OK or KO, the two times before it
    req = np.flatnonzero(kind == 1)
    status, k_of = _status_fields(b, req)
    found = k_of > 0
    st_ms = np.zeros(len(req), np.int64)
    en_ms = np.zeros(len(req), np.int64)
    name_s, name_e = np.zeros(len(req), np.int64), np.zeros(len(req), np.int64)  # empty: no name field
    good = found.copy()
    for k in np.flatnonzero(np.bincount(k_of[found])).tolist():
        c = np.flatnonzero(k_of == k) if k_of[0] != k or not (k_of == k).all() else slice(None)
        v1, g1 = b.digits(*b.field(req[c], k - 2))
        v2, g2 = b.digits(*b.field(req[c], k - 1))
        st_ms[c], en_ms[c] = v1, v2
        good[c] &= g1 & g2 & (v2 >= v1)
        if k > 3:
            name_s[c], name_e[c] = b.field(req[c], k - 3)
    kind[req[~good]] = 0
    req_ok = status[good] == 1
    req_lines = req[good]
    st_ms, en_ms = st_ms[good], en_ms[good]
    req_name = _name_codes(b, name_s[good], name_e[good], names)
    # USER: START or END in field 1, 2 or 3 (the first), the time (digits) last
    usr = np.flatnonzero(kind == 2)
    what = np.zeros(len(usr), np.int8)  # 1 START, 2 END
    ugood = b.ntab[usr] >= 3
    for i in (1, 2, 3):
        c = np.flatnonzero(ugood & (what == 0) & (b.ntab[usr] > i))
        if len(c):
            what[c] = b.word_in(*b.field(usr[c], i), (b"START", b"END"))
    ugood &= what > 0
    last_s = b.tp[np.maximum(b.t0[usr] + b.ntab[usr] - 1, 0)] + 1
    last_e = b.nl[usr] - (b.a[np.maximum(b.nl[usr] - 1, 0)] == 13)
    u_ms, g = b.digits(last_s, last_e)
    ugood &= g
    kind[usr[~ugood]] = 0
    u_lines, u_start, u_ms = usr[ugood], what[ugood] == 1, u_ms[ugood]
    # everything else line by line (and bad lines named, the first of the block first)
    req = (req_lines, st_ms, en_ms, req_ok, req_name)
    (req_lines, st_ms, en_ms, req_ok, req_name), (u_lines, u_start, u_ms) = _slow_lines(
        path, b, np.flatnonzero(kind == 0), line0, req, (u_lines, u_start, u_ms), names
    )
    return st_ms, en_ms, req_ok, req_lines + line0, u_start, u_ms, req_name


# --------------------------------------------------------------------------
# the common block in one pyarrow pass: Gatling 3.4-3.11 REQUEST records (7 fields) and a few others

_FIELDS = [f"c{i}" for i in range(7)]
_REQUEST = np.frombuffer(b"REQUEST", np.uint8)
_OK, _KO = np.frombuffer(b"OKKO", np.uint16)


def _strings(a) -> tuple[np.ndarray, np.ndarray]:
    """(value lengths, bytes of all values) of a pyarrow binary array, without a copy."""
    if len(a) == 0:
        return np.zeros(0, np.int32), np.zeros(0, np.uint8)
    off = np.frombuffer(a.buffers()[1], np.int32, count=len(a) + 1, offset=a.offset * 4)
    data = a.buffers()[2]
    data = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    return np.diff(off), data[off[0] : off[-1]]


def _ms_values(a) -> np.ndarray | None:
    """The values of a binary array whose every value is 1 or more ASCII digits (what ``int`` reads
    the same), None for any other (pyarrow's own integers take more: ``0x1F``, spaces)."""
    import pyarrow as pa

    width, d = _strings(a)
    if width.min() < 1 or d.min() < 48 or d.max() > 57:
        return None
    w = int(width[0])
    if 9 <= w <= 16 and width.max() == w == width.min():  # e.g. 13 digits: ms since the epoch
        return _same_width_values(d, len(width), w)
    try:
        return np_column(pa.chunked_array([a.view(pa.string()).cast(pa.int64())]), np.int64)
    except pa.ArrowInvalid:  # over 2**63 - 1
        return None


_U8 = np.dtype("<u8")


def _eight_digits(v: np.ndarray) -> np.ndarray:
    """The values of 8 ASCII digits in each uint64 (``v``, changed in place), the first digit in its
    lowest byte (SWAR: pairs, then fours, then the eight, each step one multiply and one shift)."""
    v -= np.uint64(0x3030303030303030)
    t = np.empty_like(v)
    for shift, times, mask in (
        (8, 10, 0x00FF00FF00FF00FF),
        (16, 100, 0x0000FFFF0000FFFF),
        (32, 10000, 0xFFFFFFFF),
    ):
        np.right_shift(v, np.uint64(shift), out=t)
        v *= np.uint64(times)
        v += t
        v &= np.uint64(mask)
    return v


def _same_width_values(d: np.ndarray, n: int, w: int) -> np.ndarray:
    """int64 values of ``n`` numbers of ``w`` (9 to 16) ASCII digits each, back to back in ``d``."""
    low = np.ndarray((n,), _U8, d, w - 8, (w,)).copy()  # each number's last 8 digits
    high = np.ndarray((n,), _U8, d, 0, (w,)) << np.uint64(8 * (16 - w))  # its first w - 8, shifted up
    high |= np.uint64(int.from_bytes(b"0" * (16 - w) + bytes(w - 8), "little"))  # '0's shifted in
    high = _eight_digits(high)
    high *= np.uint64(10**8)
    high += _eight_digits(low)
    return high.view(np.int64)


def _request_columns(t, names: NameCodes) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """(start ms, end ms, OK, name code) of rows that are all ``REQUEST`` records with OK/KO in field 5
    and start <= end (ms, digits) in fields 3 and 4 (what :func:`_line` reads of them); else None."""
    if t.num_rows == 0:
        z = np.zeros(0, np.int64)
        return z, z.copy(), np.zeros(0, bool), np.zeros(0, np.int32)
    t = t.combine_chunks()
    width, d = _strings(t.column("c0").chunks[0])
    if (width != 7).any() or d.tobytes() != b"REQUEST" * len(width):
        return None
    width, d = _strings(t.column("c5").chunks[0])
    v = d.view(np.uint16) if not (width != 2).any() else None
    if v is None or not ((v == _OK) | (v == _KO)).all():
        return None
    st, en = _ms_values(t.column("c3").chunks[0]), _ms_values(t.column("c4").chunks[0])
    if st is None or en is None or st.min() < 0 or (en < st).any():
        return None
    return st, en, v == _OK, names.of_column(t.column("c2").chunks[0])


def _arrow_parse(data, limit: int):
    """pyarrow's parse of a block as 7 tab-separated fields (no quotes), records of other shapes
    (USER, RUN, ...) left out and listed as (index of their line, text); None when pyarrow refuses
    the block, ``"off"`` when more than ``limit`` records are of another shape."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    other = []

    def skip(row):  # one thread: rows come in order, with their numbers
        if row.number is None or len(other) >= limit:
            return "error"
        other.append((row.number - 1, row.text))
        return "skip"

    types = dict.fromkeys(("c0", "c2", "c3", "c4", "c5"), pa.binary())
    size = min(len(data) + 1, 1 << 30)  # the block in one piece: one chunk per column
    try:
        t = pacsv.read_csv(
            pa.BufferReader(data),
            read_options=pacsv.ReadOptions(column_names=_FIELDS, use_threads=False, block_size=size),
            parse_options=pacsv.ParseOptions(delimiter="\t", quote_char=False, invalid_row_handler=skip),
            convert_options=pacsv.ConvertOptions(
                column_types=types, include_columns=list(types), null_values=[],
                strings_can_be_null=False, quoted_strings_can_be_null=False,
            ),
        )  # fmt: skip
    except (pa.ArrowException, ValueError):
        return "off" if len(other) >= limit else None
    return t, sorted(other)


def _other_records(path: Path, other: list, names: NameCodes) -> tuple | None:
    """:func:`_parse_block` of the records pyarrow left out, as a block of their own, their lines
    mapped back to the block's; None when one is bad (the block is read again to name its line)."""
    from ..model import HeadroomError

    if not other:
        z = np.zeros(0, np.int64)
        return z, z, np.zeros(0, bool), z, np.zeros(0, bool), z, np.zeros(0, np.int32)
    mini = ("\n".join(text for _, text in other) + "\n").encode()
    try:
        st, en, ok, li, u_start, u_ms, nm = _parse_block(path, mini, 0, len(mini), 0, names)
    except HeadroomError:
        return None
    return st, en, ok, np.array([i for i, _ in other], np.int64)[li], u_start, u_ms, nm


def _plain_text(data) -> bool:
    """Whether a block is UTF-8 with CR only before LF: pyarrow ends a line at a lone CR (the numpy
    pass does not), and the text it gives of a record it leaves out is decoded."""
    a = np.frombuffer(data, np.uint8)
    if (a == 13).any():
        cr = np.flatnonzero(a == 13) + 1
        if cr[-1] >= len(a) or (a[cr] != 10).any():
            return False
    if not len(a) or a.max() < 128:
        return True
    try:
        str(memoryview(data), "utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _arrow_block(path: Path, data, line0: int, nlines: int, names: NameCodes):
    """:func:`_parse_block`'s result for a block (an Arrow buffer) from one pyarrow pass, or None where
    it may differ (a lone CR, an empty line, a record it cannot read: the numpy pass reads the block)
    and ``"off"`` when too many records are of another shape (the numpy pass is faster for the file)."""
    if not _plain_text(data):
        return None
    limit = max(16, len(data) >> 10)
    parsed = _arrow_parse(data, limit)
    if parsed is None or isinstance(parsed, str):
        return parsed
    t, other = parsed
    cols = _request_columns(t, names) if t.num_rows + len(other) == nlines else None  # else: empty lines
    more = _other_records(path, other, names) if cols is not None else None
    if more is None:
        return None
    st, en, ok, nm = cols
    if other:
        keep = np.ones(nlines, bool)
        keep[[i for i, _ in other]] = False
        lines = np.flatnonzero(keep)
    else:
        lines = np.arange(nlines, dtype=np.int64)
    if len(more[0]):  # REQUEST records of other shapes (3.0-3.3, a tab in the message): in line order
        order = np.argsort(np.concatenate([lines, more[3]]), kind="stable")
        st, en, ok, lines, nm = (
            np.concatenate([x, y])[order] for x, y in zip((st, en, ok, lines, nm), (*more[:4], more[6]))
        )
    return st, en, ok, lines + line0, more[4], more[5], nm


def _line_blocks(path: Path, data: bytes | None, chunk_bytes: int, warnings: list[str]):
    """(Arrow buffer of whole lines, the file line it starts at, its lines) for the file in blocks (or
    for ``data``, the file's bytes already read); the truncated-tail warning into ``warnings``."""
    import pyarrow as pa

    if data is None:
        for blk in blocks(path, chunk_bytes, warnings, read_errors=True):
            yield blk.data, blk.line0, blk.lines()
        return
    tb = TextBlocks(path, raw_chunks(path, data, chunk_bytes), chunk_bytes)
    for buf, start, end, line0 in tb:
        yield pa.py_buffer(buf).slice(start, end - start), line0, tb.line_after - line0 + (buf[end - 1] != 10)
    if tb.truncated:
        warnings.append(tb.truncated)


def scan(path, *, chunk_bytes: int = CHUNK_BYTES, name: str | None = None) -> Scan:
    """One pass over a simulation.log (plain or gzip) in blocks of about ``chunk_bytes``.

    Batches of its REQUEST records (``ok``; no status, no key); the USER records' times
    are collected on the side: ``side["user_start_ms"]``, ``side["user_end_ms"]`` (int64,
    in file order).  A bad record is named at its line; "no REQUEST records" at the end.
    A binary log (Gatling 3.13+) is read by :func:`.gatling_bin.scan` (``line``: record number).
    Every request is named by its request name (``name``: that name's requests only, ``--name``).
    """
    path = Path(path)
    if looks_binary(head_bytes(path)[:64]):
        return only_name(scan_binary(path, chunk_bytes=chunk_bytes), name)
    return only_name(_scan(path, chunk_bytes, None), name)


def _scan(path: Path, chunk_bytes: int, data: bytes | None) -> Scan:
    sc = Scan(path, "gatling", COARSE_MS)
    sc._gen = _batches(sc, chunk_bytes, data)
    return sc


def _batches(sc: Scan, chunk_bytes: int, data: bytes | None) -> Iterator[Batch]:
    path = sc.path
    us: list[np.ndarray] = []
    ue: list[np.ndarray] = []
    n = 0
    arrow = True  # pyarrow reads the blocks, until one has many records of other shapes
    names = NameCodes(sc.names)
    for buf, line0, nlines in _line_blocks(path, data, chunk_bytes, sc.warnings):
        got = _arrow_block(path, buf, line0, nlines, names) if arrow else None
        if isinstance(got, str):  # "off"
            arrow, got = False, None
        if got is None:
            got = _parse_block(path, buf, 0, len(buf), line0, names)
        st, en, ok, lines, u_start, u_ms, nm = got
        if len(u_ms):
            us.append(u_ms[u_start])
            ue.append(u_ms[~u_start])
        if len(st):
            n += len(st)
            yield Batch(st * 1_000_000, (en - st) / 1e3, None, ok, None, lines, nm)
    cat = lambda parts: np.concatenate(parts) if parts else np.zeros(0, np.int64)  # noqa: E731
    sc.side = {"user_start_ms": cat(us), "user_end_ms": cat(ue)}
    if n == 0:
        raise fail(path, None, "no REQUEST records in this Gatling simulation.log")


def steps_of_rows(sc: Scan, rows: Batch):
    """The steps of a scan's joined rows: (step of every row, step names, concurrency per step or None,
    how steps were found, rate figures per step or None, notes for the warnings)."""
    st = rows.start_ns // 1_000_000
    en = st + np.rint(rows.latency_s * 1e3).astype(np.int64)
    us, ue, base = user_times(sc.side)
    if base:  # the binary log's offsets: steps_of takes ms since the epoch
        us, ue = (None if x is None else x.astype(np.int64) + base for x in (us, ue))
    return steps_of(st, en, () if us is None else us, () if ue is None else ue)


def user_times(side: dict) -> tuple[np.ndarray | None, np.ndarray | None, int]:
    """A scan's USER START and END times as kept (ms: since the epoch from the text log, since the run's
    start from the binary log) and what to add to make them ms since the epoch."""
    return side.get("user_start_ms"), side.get("user_end_ms"), int(side.get("user_base_ms", 0))


def finish(sc: Scan, rows: Batch) -> Table:
    """The request table of a finished scan and its joined rows (``_batch.join``)."""
    if len(rows) == 0:
        raise fail(sc.path, None, "no REQUEST records in this Gatling simulation.log")
    step, names, conc, src, rates, notes = steps_of_rows(sc, rows)
    return Table(
        fmt="gatling",
        fidelity=COARSE_MS,
        start_ns=rows.start_ns,
        latency_s=rows.latency_s,
        ok=rows.ok,
        status=None,
        step=step,
        step_names=names,
        step_concurrency=conc,
        step_rates=rates,
        steps_source=src,
        line=rows.line,
        warnings=[*sc.warnings, *(f"{sc.path}: {n}" for n in notes)],
    )


# --------------------------------------------------------------------------
# the step plan of a spooled file (headroom.spooled): the same steps as finish()


class GatlingPlan:
    """Gatling: held levels of active users (USER records); an open model: the whole-table reader."""

    def __init__(self, scan, raw):
        from ..levels import gatling_active_users

        self.scan, self.notes, self.fallback = scan, (), None
        us, ue, base = user_times(scan.side)
        if us is None or not len(us):
            self.plan, self.names, self.src = OneStep(scan, ""), ["all"], "no USER records: one step"
            return
        ue = ue if ue is not None else np.zeros(0, us.dtype)
        us.sort(), ue.sort()  # once, in place (no copy): every chunk counts against them
        level = CachedLevels(  # (request times counted as the user times are kept: from ``base``)
            raw, lambda c: gatling_active_users(us, ue, c["start_ns"] // 1_000_000 - base, presorted=True)
        )
        if looks_open(us, ue):  # the users alone say it: rate steps from their arrivals (whole-table reader)
            self.fallback = TablePlan(scan, raw, finish)
            return
        counted = Counted(raw, level)
        if counted.looks_open:  # rate steps from the users' arrivals: the whole-table reader
            self.fallback = TablePlan(scan, raw, finish)
            return
        self.notes = counted.notes
        src = "active users around each request (USER START/END records)"
        if counted.held:
            self.plan = counted.plan
            lv = self.plan.steps.levels
            self.names = [f"concurrency {float(v):g}" for v in lv]
            self.conc = [int(v) for v in lv]
            self.src = f"{src}, {len(lv)} steps"
        else:
            self.plan, self.names, self.src = OneStep(scan, ""), ["all"], "no level held: one step"

    def assign(self, c: dict) -> np.ndarray:
        return (self.fallback or self.plan).assign(c)

    def found(self) -> Found:
        if self.fallback is not None:
            return self.fallback.found()
        w = list(self.scan.warnings) + [f"{self.scan.path}: {n}" for n in self.notes]
        return Found(self.names, getattr(self, "conc", None), None, self.src, w)


# --------------------------------------------------------------------------
# the reader

READER = Reader(
    "gatling", "Gatling", COARSE_MS, "simulation.log of Gatling (3.0-3.12: text; 3.13-3.16: binary)",
    "tab-separated RUN/USER/REQUEST records, or a binary log starting with a RUN record", guess, scan,
    GatlingPlan, scan_options=("name",),
)  # fmt: skip

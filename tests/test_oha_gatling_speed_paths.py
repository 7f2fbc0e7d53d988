"""The fast paths of the Gatling reader and of the block cutter give what the slower ones give.

Gatling: a block is read by one pyarrow pass (``gatling._arrow_block``) where it can be sure to read
what the numpy pass (``gatling._parse_block``) reads, and by the numpy pass elsewhere.  Every case here
is read both ways (the pyarrow pass switched off) and compared: rows, lines, USER times, warnings, or
the one-line error naming file and line.  The clean case is also checked against ``str.split``.
"""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from stream_helpers import GZ, same_rows, scan_all, write

from headroom.formats import gatling
from headroom.model import HeadroomError

T0 = 1_795_430_000_000
CHUNKS = (64, 700, 4096, 1 << 20)


def _log(n: int = 3000, users_every: int = 97, seed: int = 3) -> list[bytes]:
    """A Gatling 3.4+ log: RUN, REQUEST records (OK/KO, names, messages), USER START/END now and then."""
    rng = np.random.default_rng(seed)
    out = [b"RUN\tdemo.Sim\tsim\t%d\t \t3.9.5" % T0]
    t = T0
    for i in range(n):
        t += int(rng.integers(0, 5))
        if i % users_every == 0:
            out.append(b"USER\tscn\t%s\t%d" % (b"START" if i % 2 else b"END", t))
        lat = int(rng.integers(0, 3000))
        ok = rng.random() < 0.9
        msg = b" " if ok else b"status.find.in(200,304), but actually found 503"
        out.append(b"REQUEST\t%s\tpage %d\t%d\t%d\t%s\t%s" % (b"" if i % 3 else b"grp", i % 7, t, t + lat,
                                                             b"OK" if ok else b"KO", msg))  # fmt: skip
    return out


def _reference(lines: list[bytes]):
    """Independent: str.split per line (only for logs of plain REQUEST and USER records)."""
    st, en, ok, at, us, ue = [], [], [], [], [], []
    for i, ln in enumerate(lines, start=1):
        f = ln.decode().rstrip("\r").split("\t")
        if f[0] == "REQUEST":
            st.append(int(f[3]))
            en.append(int(f[4]))
            ok.append(f[5] == "OK")
            at.append(i)
        elif f[0] == "USER":
            (us if f[2] == "START" else ue).append(int(f[3]))
    st, en = np.array(st, np.int64), np.array(en, np.int64)
    return st * 1_000_000, (en - st) / 1e3, np.array(ok), np.array(at), np.array(us), np.array(ue)


def _read(p, chunk):
    """(rows, USER times, warnings) of a scan, or its error message."""
    try:
        sc, _, rows = scan_all(gatling.scan(p, chunk_bytes=chunk))
    except HeadroomError as e:
        assert "\n" not in str(e)
        return str(e)
    return rows, sc.side, sc.warnings


def _same(fast, slow):
    assert type(fast) is type(slow), (fast, slow)
    if isinstance(fast, str):
        assert fast == slow
        return
    same_rows(fast[0], slow[0])
    for k in ("user_start_ms", "user_end_ms"):
        assert np.array_equal(fast[1][k], slow[1][k]) and fast[1][k].dtype == slow[1][k].dtype
    assert fast[2] == slow[2]


def _both(p, chunk, monkeypatch, fast_blocks: bool = False, tries: list | None = None):
    """The file read with and without the pyarrow pass: the same; (the result, blocks pyarrow read).
    ``tries``: what the pyarrow pass gave for each block it was asked for."""
    used = []
    tries = [] if tries is None else tries
    arrow_block = gatling._arrow_block

    def counted(*a):
        got = arrow_block(*a)
        used.append(got is not None and not isinstance(got, str))
        tries.append(got if got is None or isinstance(got, str) else "rows")
        return got

    with monkeypatch.context() as m:
        m.setattr(gatling, "_arrow_block", counted)
        fast = _read(p, chunk)
    with monkeypatch.context() as m:
        m.setattr(gatling, "_arrow_block", lambda *a: None)
        slow = _read(p, chunk)
    _same(fast, slow)
    if fast_blocks:
        assert any(used), "the pyarrow pass read no block"
    return fast, sum(used)


@GZ
@pytest.mark.parametrize("chunk", CHUNKS)
def test_clean_log_fast_equals_numpy_and_split(tmp_path, monkeypatch, gz, chunk):
    lines = _log()
    data = b"\n".join(lines) + b"\n"
    p = write(tmp_path, "simulation.log", data, gz)
    (rows, side, warnings), n_fast = _both(p, chunk, monkeypatch, fast_blocks=True)
    start, lat, ok, at, us, ue = _reference(lines)
    assert np.array_equal(rows.start_ns, start) and np.array_equal(rows.latency_s, lat)
    assert np.array_equal(rows.ok, ok) and np.array_equal(rows.line, at) and rows.status is None
    assert np.array_equal(side["user_start_ms"], us) and np.array_equal(side["user_end_ms"], ue)
    assert warnings == []
    if chunk == 1 << 20:
        assert n_fast == 1


# one line of the clean log replaced (or lines added) at a line in the middle: kept or named the same
ODD = {
    "crlf": None,
    "lone CR": b"REQUEST\t\tindex\t1795430000000\t1795430000003\tKO\ta\rb",
    "empty line": b"",
    "blank line": b"   ",
    "hex start": b"REQUEST\t\tindex\t0x1F\t1795430000003\tOK\t ",
    "spaced start": b"REQUEST\t\tindex\t 1795430000000 \t1795430000003\tOK\t ",
    "plus start": b"REQUEST\t\tindex\t+1795430000000\t1795430000003\tOK\t ",
    "minus start": b"REQUEST\t\tindex\t-5\t1795430000003\tOK\t ",
    "minus zero": b"REQUEST\t\tindex\t-0\t5\tOK\t ",
    "leading zeros": b"REQUEST\t\tindex\t001795430000000\t1795430000003\tOK\t ",
    "short times": b"REQUEST\t\tindex\t5\t12\tOK\t ",
    "19 digits": b"REQUEST\t\tindex\t1000000000000000000\t9223372036854775807\tOK\t ",
    "over int64": b"REQUEST\t\tindex\t1795430000000\t9223372036854775808\tOK\t ",
    "underscore": b"REQUEST\t\tindex\t1_795_430_000_000\t1795430000003\tOK\t ",
    "empty time": b"REQUEST\t\tindex\t\t1795430000003\tOK\t ",
    "ends before it starts": b"REQUEST\t\tindex\t1795430000004\t1795430000003\tOK\t ",
    "bad status": b"REQUEST\t\tindex\t1795430000000\t1795430000003\tMAYBE\t ",
    "status later": b"REQUEST\ta\tb\tc\t1795430000000\t1795430000003\tOK",
    "tab in message": b"REQUEST\t\tindex\t1795430000000\t1795430000003\tKO\ta\tb",
    "gatling 3.0": b"REQUEST\tscn\t7\t\tindex\t1795430000000\t1795430000003\tOK\t ",
    "USER of 7 fields": b"USER\tscn\t7\tSTART\t1\t2\t1795430000002",
    "GROUP of 7 fields": b"GROUP\tg\t1\t2\t3\tOK\t5",
    "ERROR": b"ERROR\tsomething\t1795430000000",
    "not UTF-8 in a name": b"REQUEST\t\tind\xffex\t1795430000000\t1795430000003\tOK\t ",
    "not UTF-8 in a USER": b"USER\tsc\xfe\xffn\tSTART\t1795430000002",
    "not UTF-8 in a status": b"REQUEST\t\tindex\t1795430000000\t1795430000003\tO\xff\t ",
    "not UTF-8 in a time": b"REQUEST\t\tindex\t17954\xd9\xa1\t1795430000003\tOK\t ",
    "NUL": b"REQUEST\t\tindex\t1795430000000\t1795430000003\tOK\t\x00",
    "quote": b'REQUEST\t"a\tindex\t1795430000000\t1795430000003\tOK\t "',
    "lower case": b"request\t\tindex\t1795430000000\t1795430000003\tOK\t ",
    "USER without time": b"USER\tscn\tSTART\t",
    "USER time not digits": b"USER\tscn\tEND\t17954x",
    "unknown record": b"SOMETHING\telse",
}


@pytest.mark.parametrize("name", list(ODD))
@pytest.mark.parametrize("chunk", [c for c in CHUNKS if c != 700])  # 64 and 4096 both cut lines
def test_odd_lines_fast_equals_numpy(tmp_path, monkeypatch, name, chunk):
    lines = _log(1200)
    if ODD[name] is None:
        data = b"\r\n".join(lines) + b"\r\n"
    else:
        lines[700:700] = [ODD[name]]
        data = b"\n".join(lines) + b"\n"
    p = write(tmp_path, "simulation.log", data)
    got, _ = _both(p, chunk, monkeypatch)
    if isinstance(got, str):
        assert got.startswith(f"{p}:701: "), got


@pytest.mark.parametrize(
    "tail",
    [b"REQUEST\t\tindex\t1795430", b"REQUEST\t\tindex\t1795430000000\t1795430000003\tOK\t \r", b"  ",
     b"\r", b" \t\r", b"\n\n", b"\n \n"],
)  # fmt: skip
@pytest.mark.parametrize("chunk", CHUNKS)
def test_file_ends_fast_equals_numpy(tmp_path, monkeypatch, tail, chunk):
    data = b"\n".join(_log(400)) + b"\n" + tail
    p = write(tmp_path, "simulation.log", data)
    _both(p, chunk, monkeypatch)
    q = write(tmp_path, "one.log", b"REQUEST\t\tindex\t1795430000000\t1795430000003\tOK\t " + tail)
    _both(q, chunk, monkeypatch)


@GZ
def test_many_user_records_hand_the_file_to_the_numpy_pass(tmp_path, monkeypatch, gz):
    # a user per request (an open model): pyarrow would skip most lines; the numpy pass reads them
    lines = _log(6000, users_every=1)
    p = write(tmp_path, "simulation.log", b"\n".join(lines) + b"\n", gz)
    tries = []
    (rows, side, _), n_fast = _both(p, 1 << 16, monkeypatch, tries=tries)
    assert n_fast == 0 and tries == ["off"]  # asked once: the file's next blocks go to the numpy pass
    start, _, _, at, us, ue = _reference(lines)
    assert np.array_equal(rows.start_ns, start) and np.array_equal(rows.line, at)
    assert np.array_equal(side["user_start_ms"], us) and np.array_equal(side["user_end_ms"], ue)


def test_bad_record_named_at_its_line_by_the_fast_path(tmp_path):
    lines = _log(2000)
    lines[1500] = b"REQUEST\t\tindex\t0x10\t1795430000003\tOK\t "
    p = write(tmp_path, "simulation.log", b"\n".join(lines) + b"\n")
    for chunk in CHUNKS:
        with pytest.raises(HeadroomError) as e:
            list(gatling.scan(p, chunk_bytes=chunk).batches())
        assert str(e.value) == (
            f"{p}:1501: a REQUEST record without start, end (ms) and OK/KO: "
            "'REQUEST\\t\\tindex\\t0x10\\t1795430000003\\tOK\\t '"
        )


def test_gzip_log_same_as_plain(tmp_path, monkeypatch):
    data = b"\n".join(_log(2500)) + b"\n"
    a = _both(write(tmp_path, "a.log", data), 4096, monkeypatch)[0]
    (tmp_path / "b.log").write_bytes(gzip.compress(data))
    b = _both(tmp_path / "b.log", 4096, monkeypatch)[0]
    _same(a, b)


@pytest.mark.parametrize("tail", [b"", b"REQUEST\t\tindex\t17954"])
def test_read_of_bytes_same_as_of_the_file(tmp_path, tail):
    # the file read in Arrow blocks, its bytes (``data``) in blocks of bytes: the same table and warning
    p = write(tmp_path, "simulation.log", b"\n".join(_log(1500)) + b"\n" + tail)
    from headroom.formats._batch import CHUNK_BYTES, join
    from headroom.formats._protocol import table_of

    of_bytes = gatling._scan(p, CHUNK_BYTES, p.read_bytes())
    a, b = gatling.READER.table(p), table_of(gatling.READER, of_bytes, join(list(of_bytes.batches())))
    for name in ("start_ns", "latency_s", "ok", "line", "step"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert a.warnings == b.warnings and a.steps_source == b.steps_source
    assert len(a.warnings) == (1 if tail else 0)


def test_read_error_of_a_plain_file_worded_as_before(tmp_path, monkeypatch):
    # an I/O error in the middle of a plain file: "cannot read", as raw_chunks says, not "damaged gzip"
    from headroom.formats import _blocks

    p = write(tmp_path, "simulation.log", b"\n".join(_log(100)) + b"\n")
    real_open = open

    class Failing:
        def __init__(self, f):
            self.f, self.n = f, 0

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.f.close()

        def _count(self):
            self.n += 1
            if self.n > 2:
                raise OSError(5, "Input/output error")

        def read(self, *a):
            self._count()
            return self.f.read(*a)

        def readinto(self, b):
            self._count()
            return self.f.readinto(b)

    monkeypatch.setattr(_blocks, "open", lambda *a: Failing(real_open(*a)), raising=False)
    with pytest.raises(HeadroomError) as before:
        list(_blocks.raw_chunks(p, None, 64))
    with pytest.raises(HeadroomError) as now:
        list(gatling.scan(p, chunk_bytes=64).batches())
    assert str(now.value) == str(before.value) == f"{p}: cannot read (Input/output error)"
    with pytest.raises(HeadroomError, match="damaged or truncated gzip file"):  # the default, kept
        list(_blocks.blocks(p, 64, []))


# --------------------------------------------------------------------------
# oha and the Arrow blocks


def _oha(n: int = 3000) -> list[bytes]:
    rng = np.random.default_rng(5)
    rows = [b"request-start,DNS,DNS+dialup,Response-delay,request-duration,bytes,status"]
    for i in range(n):
        t, d = i * 0.001 + float(rng.random()) * 1e-4, float(rng.random()) * 0.03
        rows.append(b"%.9f,0.000001,0.00002,%.9f,%.9f,6,%d" % (t, d, d, 503 if i % 50 == 0 else 200))
    return rows


@GZ
@pytest.mark.parametrize("chunk", (700, 4096, 1 << 20))
def test_oha_rows_as_the_csv_module_reads_them(tmp_path, gz, chunk):
    import csv
    import io

    from headroom.formats import oha

    lines = _oha()
    data = b"\n".join(lines) + b"\n"
    sc, _, rows = scan_all(oha.scan_csv(write(tmp_path, "oha.csv", data, gz), chunk_bytes=chunk))
    ref = list(csv.DictReader(io.StringIO(data.decode())))
    assert np.array_equal(rows.start_ns, [int(np.rint(float(r["request-start"]) * 1e9)) for r in ref])
    assert np.array_equal(rows.latency_s, [float(r["request-duration"]) for r in ref])
    assert np.array_equal(rows.status, [int(r["status"]) for r in ref])
    assert np.array_equal(rows.line, np.arange(2, len(ref) + 2)) and sc.warnings == []


@pytest.mark.parametrize(
    ("col", "value", "shown"),
    [(0, b"nan", "nan"), (0, b"-0.5", "-0.5"), (4, b"inf", "inf"), (4, b"-inf", "-inf"),
     (4, b"10000001", "10000001.0"), (4, b"NaN", "nan"), (0, b"1e8", "100000000.0")],
)  # fmt: skip
@pytest.mark.parametrize("chunk", (700, 1 << 20))
def test_oha_value_out_of_range_named_at_its_line(tmp_path, col, value, shown, chunk):
    from headroom.formats import oha

    lines = _oha()
    f = lines[2001].split(b",")
    f[col] = value
    lines[2001] = b",".join(f)
    p = write(tmp_path, "oha.csv", b"\n".join(lines) + b"\n")
    name = "request-start" if col == 0 else "request-duration"
    with pytest.raises(HeadroomError) as e:
        list(oha.scan_csv(p, chunk_bytes=chunk).batches())
    assert str(e.value) == f"{p}:2002: bad {name} {shown} (must be a finite number of seconds, 0 to 1e7)"


def test_line_ends_counted_in_windows():
    from headroom.formats._blocks import _count_nl

    rng = np.random.default_rng(7)
    for n in (0, 1, (1 << 18) - 1, 1 << 18, (1 << 18) + 1, 3 * (1 << 18) + 5):
        a = rng.choice(np.array([10, 65, 44], np.uint8), n)
        assert _count_nl(a) == a.tobytes().count(b"\n")


def test_col_np_is_a_compact_copy_of_one_chunk_or_many():
    import pyarrow as pa

    from headroom.formats._blocks import col_np

    for col in (pa.chunked_array([pa.array([1.5, 2.5])]), pa.chunked_array([[1.5], [], [2.5]]),
                pa.array([1.5, 2.5]), pa.chunked_array([pa.array([0.5, 1.5, 2.5]).slice(1)])):  # fmt: skip
        out = col_np(col, np.float64)
        assert out.tolist() == [1.5, 2.5] and out.dtype == np.float64 and out.flags.owndata
        out[0] = 9  # its own memory: the column is unchanged
        assert col.to_pylist()[0] == 1.5


@pytest.mark.parametrize("width", [1, 8, 9, 12, 13, 16, 17, 19])
def test_times_of_one_width_read_as_int_reads_them(tmp_path, monkeypatch, width):
    # every start and end of the same width (leading zeros too): SWAR for 9 to 16 digits, else pyarrow
    rng = np.random.default_rng(width)
    lines, want = [], []
    for i in range(800):
        s = int(rng.integers(0, 10 ** min(width, 18) // 2))
        e = s + int(rng.integers(0, 10 ** min(width, 18) // 2))
        lines.append(b"REQUEST\t\tindex\t%s\t%s\t%s\t " % (str(s).zfill(width).encode(),
                                                          str(e).zfill(width).encode(), b"OK" if i % 9 else b"KO"))  # fmt: skip
        want.append((s, e))
    p = write(tmp_path, "simulation.log", b"\n".join(lines) + b"\n")
    (rows, _, _), n_fast = _both(p, 1 << 20, monkeypatch)
    assert n_fast == 1
    s, e = np.array(want).T
    assert np.array_equal(rows.start_ns, s * 1_000_000) and np.array_equal(rows.latency_s, (e - s) / 1e3)


def test_same_width_digits_as_int():
    rng = np.random.default_rng(11)
    for w in range(9, 17):
        vals = [str(v).zfill(w) for v in rng.integers(0, 10**w, 500).tolist()] + ["9" * w, "0" * w]
        d = np.frombuffer("".join(vals).encode(), np.uint8)
        out = gatling._same_width_values(d, len(vals), w)
        assert out.dtype == np.int64 and out.tolist() == [int(v) for v in vals]

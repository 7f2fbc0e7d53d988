"""The streaming JMeter (CSV, XML JTL) and Gatling readers: block by block equals whole, and both equal
an independent parse (csv module, ElementTree, str.split) of the same bytes.

Blocks are made tiny (``chunk_bytes=4096``) so that a file of a few hundred kB is read in dozens of
batches: quoted line ends, transaction parents, bad lines and truncated tails fall in later blocks.
"""

from __future__ import annotations

import csv
import io
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from stream_helpers import (
    GZ,
    REAL,
    SMALL,
    check_truncated_warning,
    head_lines,
    line_after,
    same_rows,
    scan_all,
    write,
)

from headroom.formats import gatling, jmeter
from headroom.model import HeadroomError

TC = "Number of samples in transaction"


# --------------------------------------------------------------------------
# JMeter CSV


def _csv_reference(data: bytes):
    """Independent: the csv module, rows of the JTL; transaction parents left out."""
    rows = list(csv.DictReader(io.StringIO(data.decode("utf-8"), newline="")))
    keep = [(i, r) for i, r in enumerate(rows) if not r["responseMessage"].startswith(TC)]
    return {
        "start_ns": np.array([int(r["timeStamp"]) * 1_000_000 for _, r in keep], np.int64),
        "latency_s": np.array([int(r["elapsed"]) / 1e3 for _, r in keep]),
        "status": np.array([int(r["responseCode"]) if r["responseCode"].isdigit() else 0 for _, r in keep]),
        "ok": np.array([r["success"] == "true" for _, r in keep]),
        "key": np.array([int(r["allThreads"]) for _, r in keep]),
        "line": np.array([i + 2 for i, _ in keep]),  # rows are numbered as lines after the header
        "parents": len(rows) - len(keep),
    }


def _check_csv(rows, ref):
    assert len(rows) == len(ref["start_ns"]) > 0
    for name in ("start_ns", "latency_s", "status", "ok", "key", "line"):
        assert np.array_equal(getattr(rows, name), ref[name]), name


@pytest.fixture(scope="module")
def real_csv() -> bytes:
    """The first 6,000 samples of the real stacked JMeter run (about 700 kB)."""
    return b"".join(head_lines(REAL / "jmeter-stacked.csv.gz", 6001))


@GZ
def test_jmeter_csv_tiny_blocks_equal_the_whole_and_the_csv_module(tmp_path, real_csv, gz):
    p = write(tmp_path, "r.jtl", real_csv, gz)
    small, batches, rows = scan_all(jmeter.scan_csv(p, chunk_bytes=SMALL))
    assert len(batches) > len(real_csv) // SMALL - 2  # many batches, each from one small block
    _, whole_batches, whole = scan_all(jmeter.scan_csv(p))
    assert len(whole_batches) == 1
    same_rows(rows, whole)
    _check_csv(rows, _csv_reference(real_csv))
    assert small.key_kind == "level" and small.fmt == "jmeter-csv" and small.warnings == []
    # the in-memory table is the scan as one batch: same rows, steps from allThreads
    t = jmeter.CSV_READER.table(p)
    assert np.array_equal(t.start_ns, rows.start_ns) and t.step_names[0].startswith("concurrency")


def _quoted_csv(n: int) -> bytes:
    """A JTL whose responseMessage holds quoted line ends (and quotes) every few rows, and a transaction
    parent every 37 rows: some of each land on block edges."""
    head = "timeStamp,elapsed,label,responseCode,responseMessage,threadName,dataType,success,allThreads"
    out = [head]
    for i in range(n):
        msg = "OK"
        if i % 7 == 3:
            msg = '"line one\nline ""two"",\r\nthree"'
        if i % 37 == 5:
            msg = f'"{TC} 2, number of failing samples : 0"'
        code = "503" if i % 11 == 0 else "200"
        out.append(f"{1795430000000 + i * 3},{i % 50},idx,{code},{msg},g 1-1,text,"
                   f"{'false' if code == '503' else 'true'},{1 + i // 400}")  # fmt: skip
    return ("\n".join(out) + "\n").encode()


@GZ
def test_jmeter_csv_quoted_line_ends_and_parents_across_blocks(tmp_path, gz):
    data = _quoted_csv(3000)
    p = write(tmp_path, "q.jtl", data, gz)
    scan, batches, rows = scan_all(jmeter.scan_csv(p, chunk_bytes=SMALL))
    assert len(batches) > 20
    ref = _csv_reference(data)
    _check_csv(rows, ref)
    # the parents of every block counted in one warning
    assert ref["parents"] == len(range(5, 3000, 37))
    assert scan.warnings == [
        f"{p}: left out {ref['parents']} transaction-controller parent sample(s) "
        "(their requests are counted on their own rows)"
    ]
    assert jmeter.CSV_READER.table(p).warnings[0] == scan.warnings[0]


def test_jmeter_csv_bad_line_in_the_third_block_is_named(tmp_path, real_csv):
    lines = real_csv.split(b"\n")
    at = line_after(lines, 2.5 * SMALL)  # in the third block
    f = lines[at].split(b",")
    f[1] = b"12ms"
    lines[at] = b",".join(f)
    p = write(tmp_path, "bad.jtl", b"\n".join(lines))
    for chunk in (SMALL, 1 << 24):
        with pytest.raises(HeadroomError) as e:
            list(jmeter.scan_csv(p, chunk_bytes=chunk).batches())
        assert str(e.value) == f"{p}:{at + 1}: bad elapsed '12ms' (expected milliseconds >= 0)"
    # a row pyarrow takes but the reader refuses: named after the whole pass, at its own line
    lines[at] = b",".join([f[0], b"-4", *f[2:]])
    p.write_bytes(b"\n".join(lines))
    with pytest.raises(HeadroomError, match=rf":{at + 1}: bad elapsed -4 \(must be >= 0\)$"):
        list(jmeter.scan_csv(p, chunk_bytes=SMALL).batches())


@GZ
def test_jmeter_csv_truncated_tail_is_dropped_with_the_warning(tmp_path, real_csv, gz):
    cut = real_csv[: len(real_csv) - 40]  # the last line loses its end
    p = write(tmp_path, "cut.jtl", cut, gz)
    scan, _, rows = scan_all(jmeter.scan_csv(p, chunk_bytes=SMALL))
    check_truncated_warning(scan.warnings, p, cut, 20)
    _check_csv(rows, _csv_reference(cut[: cut.rindex(b"\n") + 1]))


# --------------------------------------------------------------------------
# JMeter XML


@pytest.fixture(scope="module")
def real_xml() -> bytes:
    """The first 4,000 samples of the real stacked JMeter XML JTL (3 lines each), closed."""
    lines = head_lines(REAL / "jmeter-stacked.xml.gz", 2 + 3 * 4000)
    return b"".join(lines) + b"</testResults>\n"


def _xml_reference(data: bytes):
    """Independent: ElementTree, with each sample's line from its position in the text."""
    root = ET.fromstring(data)
    text_lines = data.split(b"\n")
    line_of = {}  # a sample's line: where its element ends
    for i, ln in enumerate(text_lines, start=1):
        if ln.startswith((b"</httpSample>", b"</sample>")) or (
            ln.startswith((b"<httpSample", b"<sample")) and ln.endswith(b"/>")
        ):
            line_of[len(line_of)] = i
    rows = []
    k = 0
    for el in root:
        if el.tag in ("httpSample", "sample"):
            rows.append((el.attrib, line_of[k]))
        k += 1
    a = [r for r, _ in rows]
    return {
        "start_ns": np.array([int(r["ts"]) * 1_000_000 for r in a], np.int64),
        "latency_s": np.array([int(r["t"]) / 1e3 for r in a]),
        "status": np.array([int(r["rc"]) if r["rc"].isdigit() else 0 for r in a]),
        "ok": np.array([r["s"] == "true" for r in a]),
        "key": np.array([int(r["na"]) for r in a]),
        "line": np.array([ln for _, ln in rows]),
    }


@GZ
def test_jmeter_xml_tiny_blocks_equal_the_whole_and_elementtree(tmp_path, real_xml, gz):
    assert real_xml.count(b"\n</httpSample>") == 4000
    p = write(tmp_path, "r.xml", real_xml, gz)
    scan, batches, rows = scan_all(jmeter.scan_xml(p, chunk_bytes=SMALL))
    assert len(batches) > len(real_xml) // SMALL - 2
    _, _, whole = scan_all(jmeter.scan_xml(p))
    same_rows(rows, whole)
    ref = _xml_reference(real_xml)
    for name, want in ref.items():
        assert np.array_equal(getattr(rows, name), want), name
    assert scan.key_kind == "level"


def test_jmeter_xml_bad_sample_in_a_later_block_is_named(tmp_path, real_xml):
    lines = real_xml.split(b"\n")
    at = line_after(lines, 2.5 * SMALL, b"<httpSample ")
    assert b' ts="' in lines[at]
    lines[at] = lines[at].replace(b' ts="', b' ts="x', 1)
    assert lines[at + 2] == b"</httpSample>"
    p = write(tmp_path, "bad.xml", b"\n".join(lines))
    # named at the line where the sample ends (as the ElementTree reader did)
    with pytest.raises(HeadroomError, match=rf"^{p}:{at + 3}: a sample without integer ts and t attributes"):
        list(jmeter.scan_xml(p, chunk_bytes=SMALL).batches())
    # an element cut off: bad XML at the end, with the line expat found it at
    cut = real_xml[: real_xml.rindex(b"<httpSample") + 20]
    p.write_bytes(cut)
    n_lines = cut.count(b"\n")
    with pytest.raises(HeadroomError, match=rf"^{p}:{n_lines + 1}: bad XML \(unclosed token"):
        list(jmeter.scan_xml(p, chunk_bytes=SMALL).batches())


def test_jmeter_xml_entities_refused_in_any_block(tmp_path, real_xml):
    late = real_xml.replace(b"</testResults>", b'<!ENTITY x "y">\n</testResults>')
    p = write(tmp_path, "e.xml", late)
    with pytest.raises(HeadroomError, match="DOCTYPE or entity definitions is refused"):
        list(jmeter.scan_xml(p, chunk_bytes=SMALL).batches())


def test_jmeter_xml_transaction_parent_gives_its_children(tmp_path):
    data = (
        b'<?xml version="1.0"?>\n<testResults version="1.2">\n'
        b'<httpSample t="5" ts="1795430000000" s="true" rc="200" na="1"/>\n'
        b'<sample t="9" ts="1795430000010" s="true" rc="200" rm="' + TC.encode() + b' 2" na="1">\n'
        b'  <httpSample t="4" ts="1795430000010" s="true" rc="200" na="1"/>\n'
        b'  <httpSample t="5" ts="1795430000014" s="false" rc="503" na="1"/>\n'
        b"</sample>\n</testResults>\n"
    )
    p = write(tmp_path, "tc.xml", data)
    _, _, rows = scan_all(jmeter.scan_xml(p, chunk_bytes=16))
    assert rows.latency_s.tolist() == [0.005, 0.004, 0.005]
    assert rows.status.tolist() == [200, 200, 503] and rows.ok.tolist() == [True, True, False]
    assert rows.line.tolist() == [3, 7, 7]  # children at their parent's end, as ElementTree's reader had it


# --------------------------------------------------------------------------
# Gatling


@pytest.fixture(scope="module")
def real_log() -> bytes:
    """The first 9,000 records of the real closed-ramp Gatling log (USER and REQUEST records)."""
    return b"".join(head_lines(REAL / "gatling-ClosedRampSimulation.log.gz", 9000))


def _log_reference(data: bytes):
    """Independent: str.split per line (3.4-3.11 layout)."""
    st, en, ok, line, us, ue = [], [], [], [], [], []
    for i, ln in enumerate(data.decode().split("\n"), start=1):
        f = ln.rstrip("\r").split("\t")
        if f[0] == "REQUEST":
            st.append(int(f[3]))
            en.append(int(f[4]))
            ok.append(f[5] == "OK")
            line.append(i)
        elif f[0] == "USER":
            (us if f[2] == "START" else ue).append(int(f[3]))
    st, en = np.array(st, np.int64), np.array(en, np.int64)
    return st * 1_000_000, (en - st) / 1e3, np.array(ok), np.array(line), np.array(us), np.array(ue)


def _check_log(scan, rows, data):
    start, lat, ok, line, us, ue = _log_reference(data)
    assert len(rows) == len(start) > 0
    assert np.array_equal(rows.start_ns, start) and np.array_equal(rows.latency_s, lat)
    assert np.array_equal(rows.ok, ok) and np.array_equal(rows.line, line)
    assert rows.status is None and rows.key is None
    assert np.array_equal(scan.side["user_start_ms"], us) and np.array_equal(scan.side["user_end_ms"], ue)


@GZ
def test_gatling_tiny_blocks_equal_the_whole_and_split(tmp_path, real_log, gz):
    p = write(tmp_path, "simulation.log", real_log, gz)
    scan, batches, rows = scan_all(gatling.scan(p, chunk_bytes=SMALL))
    assert len(batches) > len(real_log) // SMALL - 2
    whole_scan, _, whole = scan_all(gatling.scan(p))
    same_rows(rows, whole)
    _check_log(scan, rows, real_log)
    _check_log(whole_scan, whole, real_log)
    assert len(scan.side["user_start_ms"]) > 1000
    t = gatling.READER.table(p)
    assert np.array_equal(t.line, rows.line) and t.steps_source.startswith("active users")


def test_gatling_odd_lines_go_line_by_line_with_the_same_result(tmp_path, real_log):
    # CRLF line ends, blank lines, GROUP/ERROR records, a 3.0-3.3 REQUEST (9 fields), a message with a tab
    lines = real_log.split(b"\n")[:-1]
    req = next(i for i, ln in enumerate(lines) if ln.startswith(b"REQUEST\t"))
    f = lines[req].split(b"\t")
    odd = [
        b"GROUP\tg\t1\t2\t3\tOK",
        b"ERROR\tsomething\t1795430000000",
        b"",
        b"\t".join([b"REQUEST", b"scn", b"7", *f[1:]]),  # 3.0-3.3: scenario and user id first
        b"\t".join([*f[:6], b"a\tmessage with a tab"]),
        b"\t".join([b"USER", b"START", b"scn", b"END", f[3]]),  # START is the first of START/END
    ]
    data = b"\r\n".join(lines[:3000] + odd + lines[3000:]) + b"\r\n"
    p = write(tmp_path, "odd.log", data)
    scan, _, rows = scan_all(gatling.scan(p, chunk_bytes=SMALL))
    base = 3000 + 1  # line of the first odd record
    want_lines = [*[i + 1 for i, ln in enumerate(lines[:3000]) if ln.startswith(b"REQUEST\t")], base + 3, base + 4,
                  *[base + len(odd) + i for i, ln in enumerate(lines[3000:]) if ln.startswith(b"REQUEST\t")]]  # fmt: skip
    assert rows.line.tolist() == want_lines
    # the two odd REQUESTs read as the one they were made from
    k = want_lines.index(base + 3)
    assert rows.start_ns[k] == rows.start_ns[k + 1] == int(f[3]) * 1_000_000
    assert rows.latency_s[k] == rows.latency_s[k + 1] == (int(f[4]) - int(f[3])) / 1e3
    _, _, _, _, us, ue = _log_reference(b"\n".join(lines) + b"\n")
    assert len(scan.side["user_start_ms"]) == len(us) + 1 and len(scan.side["user_end_ms"]) == len(ue)


def test_gatling_bad_record_in_the_third_block_is_named(tmp_path, real_log):
    lines = real_log.split(b"\n")
    at = line_after(lines, 2.5 * SMALL, b"REQUEST\t")
    f = lines[at].split(b"\t")
    f[4] = str(int(f[3]) - 1).encode()  # ends before it starts
    lines[at] = b"\t".join(f)
    p = write(tmp_path, "bad.log", b"\n".join(lines))
    for chunk in (SMALL, 1 << 24):
        with pytest.raises(HeadroomError) as e:
            list(gatling.scan(p, chunk_bytes=chunk).batches())
        assert str(e.value).startswith(
            f"{p}:{at + 1}: a REQUEST record without start, end (ms) and OK/KO: 'REQUEST"
        )
    lines[at] = b"SOMETHING\telse"
    p.write_bytes(b"\n".join(lines))
    with pytest.raises(
        HeadroomError, match=rf"^{p}:{at + 1}: not a Gatling simulation.log record: 'SOMETHING"
    ):
        list(gatling.scan(p, chunk_bytes=SMALL).batches())


@GZ
def test_gatling_truncated_tail_is_dropped_with_the_warning(tmp_path, real_log, gz):
    cut = real_log[: len(real_log) - 9]
    p = write(tmp_path, "cut.log", cut, gz)
    scan, _, rows = scan_all(gatling.scan(p, chunk_bytes=SMALL))
    check_truncated_warning(scan.warnings, p, cut, 7)
    last = cut[cut.rindex(b"\n") + 1 :]
    assert f"'{last[:7].decode()}\\t" in scan.warnings[0]  # the tab after the record kind shown escaped
    _check_log(scan, rows, cut[: cut.rindex(b"\n") + 1])


def test_gatling_no_requests(tmp_path):
    p = write(
        tmp_path, "s.log", b"RUN\tdemo.Sim\tsim\t1795430000000\t \t3.9.5\nUSER\tscn\tSTART\t1795430000001\n"
    )
    with pytest.raises(HeadroomError, match="no REQUEST records in this Gatling simulation.log"):
        list(gatling.scan(p, chunk_bytes=SMALL).batches())

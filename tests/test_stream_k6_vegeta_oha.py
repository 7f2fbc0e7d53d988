"""vegeta, k6 and oha readers in blocks: the same rows whatever the block size, gzip or not, and
against an independent parse of the real samples with the csv / json modules."""

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
from stream_helpers import BLOCK_SIZES, DATA, REAL, SMALL, WHOLE, plain_copy, same_rows, scan_all, write

from headroom.formats import k6, oha, vegeta
from headroom.formats._batch import join
from headroom.formats._protocol import table_of
from headroom.formats._scan import drop_truncated_tail, read_bytes
from headroom.model import HeadroomError

SCANS = {
    "vegeta-csv": vegeta.scan_csv,
    "vegeta-json": vegeta.scan_json,
    "k6-csv": k6.scan_csv,
    "k6-json": k6.scan_json,
    "oha-csv": oha.scan_csv,
}
READERS = {"vegeta-csv": vegeta.CSV_READER, "vegeta-json": vegeta.JSON_READER, "k6-csv": k6.CSV_READER,
           "k6-json": k6.JSON_READER, "oha-csv": oha.READER}  # fmt: skip


def scan(fmt, path, chunk_bytes=WHOLE):
    return scan_all(SCANS[fmt](path, chunk_bytes=chunk_bytes))


# ---- independent readers: the csv and json modules, numpy's datetime64 -----------------------


def _ns(rfc3339: str) -> int:
    assert rfc3339.endswith("Z")
    return int(np.datetime64(rfc3339[:-1], "ns").astype(np.int64))


def _text(path):
    return read_bytes(path).decode("utf-8")


def ref_vegeta_csv(path):
    out = []
    for ln, row in enumerate(csv.reader(io.StringIO(_text(path), newline="")), start=1):
        out.append((int(row[0]), int(row[2]) / 1e9, int(row[1]), None, row[7], ln))
    return out


def ref_vegeta_json(path):
    out = []
    for ln, line in enumerate(_text(path).split("\n"), start=1):
        if line.strip():
            r = json.loads(line)
            out.append((_ns(r["timestamp"]), r["latency"] / 1e9, r["code"], None, r["attack"] or "", ln))
    return out


def _k6_row(end_ns, ms, tags, ln, expected_given):
    lat = ms / 1e3
    status = int(tags.get("status") or 0)
    exp = tags.get("expected_response", "")
    ok = (exp == "true") if exp else 200 <= status <= 299
    return (end_ns - int(np.rint(lat * 1e9)), lat, status, ok if expected_given else None,
            tags.get("scenario", ""), ln)  # fmt: skip


def ref_k6_csv(path):
    rows = list(csv.reader(io.StringIO(_text(path), newline="")))
    head = rows[0]
    out = []
    for ln, r in enumerate(rows[1:], start=2):
        d = dict(zip(head, r))
        if d["metric_name"] == "http_req_duration":
            out.append(_k6_row(_ns(d["timestamp"]), float(d["metric_value"]), d, ln, True))
    return out


def ref_k6_json(path):
    out = []
    for ln, line in enumerate(_text(path).split("\n"), start=1):
        if not line.strip():
            continue
        r = json.loads(line)
        if r.get("type") == "Point" and r.get("metric") == "http_req_duration":
            d = r["data"]
            out.append(_k6_row(_ns(d["time"]), float(d["value"]), d.get("tags", {}), ln, True))
    return out


def ref_oha(path):
    rows = list(csv.reader(io.StringIO(_text(path), newline="")))
    head = rows[0]
    out = []
    for ln, r in enumerate(rows[1:], start=2):
        d = dict(zip(head, r))
        rel, dur = float(d["request-start"]), float(d["request-duration"])
        out.append((int(np.rint(rel * 1e9)), dur, int(d["status"]), None, None, ln))
    return out


#: the block tests that need no whole sample read the first lines of one
HEAD_LINES = 3000

REAL_CASES = [
    ("vegeta-csv", REAL / "vegeta-rates.csv.gz", ref_vegeta_csv),
    ("vegeta-json", DATA / "vegeta.json", ref_vegeta_json),
    ("k6-csv", REAL / "k6-ramping-vus.csv.gz", ref_k6_csv),
    ("k6-csv", REAL / "k6-ramping-arrival-rate.csv.gz", ref_k6_csv),
    ("k6-json", REAL / "k6-ramping-vus.json.gz", ref_k6_json),
    ("k6-json", REAL / "k6-ramping-arrival-rate.json.gz", ref_k6_json),
    ("oha-csv", REAL / "oha-rates" / "oha-q2000.csv.gz", ref_oha),
    ("oha-csv", REAL / "oha-rates" / "oha-q250.csv.gz", ref_oha),
]


@pytest.mark.parametrize(("fmt", "path", "ref"), REAL_CASES, ids=[f"{c[0]}:{c[1].name}" for c in REAL_CASES])
def test_small_blocks_give_the_whole_file_rows_and_the_independent_parse(fmt, path, ref):
    whole_scan, whole_batches, whole = scan(fmt, path)
    small_scan, small_batches, small = scan(fmt, path, SMALL)
    assert len(whole_batches) == 1 and len(small_batches) >= 10
    same_rows(whole, small)
    assert small_scan.labels == whole_scan.labels and small_scan.warnings == whole_scan.warnings
    assert small_scan.rows == len(small) == len(ref(path))
    for k in small_scan.side:
        a, b = whole_scan.side[k], small_scan.side[k]
        assert all(np.array_equal(x, y) for x, y in zip(a, b)) if isinstance(a, tuple) else a == b, k

    expect = ref(path)
    start, lat, status, ok, label, line = (list(c) for c in zip(*expect))
    assert np.array_equal(small.start_ns, np.array(start, np.int64))
    assert np.array_equal(small.latency_s, np.array(lat))
    assert np.array_equal(small.status, np.array(status, np.int64))
    assert np.array_equal(small.line, np.array(line, np.int64))
    if ok[0] is not None:
        assert np.array_equal(small.ok, np.array(ok, bool))
    if label[0] is not None:
        assert [small_scan.labels[k] for k in small.key] == label

    # the in-memory table is the same scan as one batch, its steps by the same plan
    t = READERS[fmt].table(path)
    t2 = table_of(READERS[fmt], small_scan, small)
    assert np.array_equal(t.start_ns, t2.start_ns) and np.array_equal(t.step, t2.step)
    assert t.step_names == t2.step_names and t.step_rates == t2.step_rates and t.warnings == t2.warnings
    assert t.step_concurrency == t2.step_concurrency


@pytest.mark.parametrize(
    ("fmt", "path", "ref"), REAL_CASES[:1] + REAL_CASES[2:3] + REAL_CASES[4:5] + REAL_CASES[6:7]
)
def test_gzip_and_plain_give_the_same_rows(tmp_path, fmt, path, ref):
    # the sample's first HEAD_LINES lines, plain and gzip-compressed: tens of SMALL blocks each
    data = b"".join(read_bytes(path).splitlines(keepends=True)[:HEAD_LINES])
    name = path.name.removesuffix(".gz")
    path, plain = write(tmp_path, name, data, gz=True), write(tmp_path, name, data)
    for chunk in BLOCK_SIZES:
        a_scan, _, a = scan(fmt, path, chunk)
        b_scan, _, b = scan(fmt, plain, chunk)
        same_rows(a, b)
        assert len(a) == len(ref(plain)) > 100
        assert a_scan.labels == b_scan.labels and a_scan.side.keys() == b_scan.side.keys()


def _replace_line(p: Path, line: int, fn) -> str:
    lines = p.read_bytes().split(b"\n")
    lines[line - 1] = fn(lines[line - 1])
    p.write_bytes(b"\n".join(lines))
    return lines[line - 1].decode()


BAD_LINES = [  # (format, sample, line to spoil, how, message)
    ("vegeta-csv", REAL / "vegeta-rates.csv.gz", 50_001,
     lambda b: b",".join([*b.split(b",", 3)[:2], b"12ms", b.split(b",", 3)[3]]), "bad latency '12ms'"),
    ("vegeta-csv", REAL / "vegeta-rates.csv.gz", 40_000, lambda b: b.rsplit(b",", 3)[0], "expected 12 fields"),
    ("k6-csv", REAL / "k6-ramping-vus.csv.gz", 50_002, None, "bad metric_value 'fast'"),
    ("k6-json", REAL / "k6-ramping-vus.json.gz", 40_001, lambda b: b[: len(b) // 2], "not a JSON line"),
    ("oha-csv", REAL / "oha-rates" / "oha-q2000.csv.gz", 15_000, lambda b: b"-" + b[b.index(b",") :],
     "bad request-start '-'"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("fmt", "path", "line", "how", "msg"), BAD_LINES, ids=[f"{b[0]}:{b[2]}" for b in BAD_LINES]
)
def test_a_bad_line_in_a_later_block_is_named_at_its_line(tmp_path, fmt, path, line, how, msg):
    p = plain_copy(tmp_path, path)
    if how is None:  # an http_req_duration row's value
        lines = p.read_bytes().split(b"\n")
        line = next(i for i in range(line, len(lines)) if lines[i - 1].startswith(b"http_req_duration,"))
        how = lambda b: b.replace(b"," + b.split(b",")[2] + b",", b",fast,", 1)  # noqa: E731
    _replace_line(p, line, how)
    for chunk in (SMALL, 1 << 16, WHOLE):
        s = SCANS[fmt](p, chunk_bytes=chunk)
        got = []
        with pytest.raises(HeadroomError) as e:
            for b in s.batches():
                got.append(b)
        assert str(e.value).startswith(f"{p}:{line}: ") and msg in str(e.value), str(e.value)
        assert "\n" not in str(e.value)
        if chunk == SMALL:  # the blocks before the bad one were read and yielded: no re-scan
            assert len(got) > 5 and int(join(got).line.max()) < line


def test_k6_csv_rows_spread_over_many_blocks_keep_their_status_and_scenario(tmp_path):
    # the real ramping-vus file with its scenario tag made to vary by the second (three scenarios
    # interleaved row by row) and its status set from the line number: every http_req_duration
    # row (one in 13) lands in a block of its own metric rows
    src = read_bytes(REAL / "k6-ramping-vus.csv.gz").decode()
    rows = list(csv.reader(io.StringIO(src, newline="")))
    head = rows[0]
    si, ci, ei = head.index("scenario"), head.index("status"), head.index("expected_response")
    for ln, r in enumerate(rows[1:], start=2):
        if r[0] == "http_req_duration":
            r[si] = f"s{ln % 3}"
            r[ci] = str(200 + ln % 7)
            r[ei] = "true" if ln % 5 else "false"
    out = io.StringIO(newline="")
    csv.writer(out, lineterminator="\n").writerows(rows)
    p = tmp_path / "k6.csv"
    p.write_text(out.getvalue())
    s, batches, got = scan("k6-csv", p, 2048)
    assert len(batches) > 100
    expect = ref_k6_csv(p)
    assert [s.labels[k] for k in got.key] == [e[4] for e in expect]
    assert got.status.tolist() == [e[2] for e in expect]
    assert got.ok.tolist() == [e[3] for e in expect]
    assert got.line.tolist() == [e[5] for e in expect]
    assert s.key_kind == "label" and sorted(s.labels) == ["s0", "s1", "s2"]
    t = table_of(k6.CSV_READER, s, got)
    assert t.step_names == sorted(
        t.step_names, key=lambda n: got.start_ns[got.key == s.labels.index(n)].min()
    )
    assert len(t.step_names) == 3 and t.steps_source == "the scenario tag (3 scenarios)"


@pytest.mark.parametrize(("fmt", "path", "ref"), REAL_CASES, ids=[f"{c[0]}:{c[1].name}" for c in REAL_CASES])
def test_a_truncated_last_line_is_dropped_with_the_warning(tmp_path, fmt, path, ref):
    # the sample's first HEAD_LINES lines (its header with them): still tens of SMALL blocks
    data = b"".join(read_bytes(path).splitlines(keepends=True)[:HEAD_LINES])
    assert data.endswith(b"\n") and len(data) > 10 * SMALL
    whole = write(tmp_path, "head-" + path.name.removesuffix(".gz"), data)
    cut = data[: len(data) - 1 - len(data[:-1].rsplit(b"\n", 1)[1]) // 2]  # half of the last line
    p = write(tmp_path, "cut-" + path.name.removesuffix(".gz"), cut)
    expect_warn = []
    drop_truncated_tail(cut, p, expect_warn)
    assert len(expect_warn) == 1
    full_scan, _, full = scan(fmt, whole)
    assert len(full) == len(ref(whole))  # the head read whole: every row the independent parse finds
    for chunk in BLOCK_SIZES:
        s, _, got = scan(fmt, p, chunk)
        assert s.warnings == expect_warn
        last_line = cut.count(b"\n") + 1
        assert expect_warn[0].startswith(f"{p}:{last_line}: dropped a truncated last line")
        keep = full.line < last_line
        same_rows(got, full.take(keep))
    gz = write(tmp_path, "cut-" + path.name.removesuffix(".gz"), cut, gz=True)
    s, _, got = scan(fmt, gz, SMALL)
    assert [w.replace(str(gz), "P") for w in s.warnings] == [w.replace(str(p), "P") for w in expect_warn]


def test_blank_lines_and_crlf_keep_true_line_numbers(tmp_path):
    src = read_bytes(DATA / "vegeta.csv").split(b"\n")
    p = tmp_path / "v.csv"
    p.write_bytes(b"\r\n".join(src[:5]) + b"\r\n\r\n\n" + b"\n".join(src[5:]))
    s, _, got = scan("vegeta-csv", p, 256)
    assert got.line[:6].tolist() == [1, 2, 3, 4, 5, 8]
    assert len(got) == len(ref_vegeta_csv(DATA / "vegeta.csv"))


def test_a_vegeta_error_field_with_a_line_end_inside_quotes(tmp_path):
    rows = list(csv.reader(io.StringIO(_text(DATA / "vegeta.csv"), newline="")))
    for r in rows[::7]:
        r[5] = 'Get "http://x/":\ndial tcp: connection refused'
    out = io.StringIO(newline="")
    csv.writer(out, lineterminator="\n").writerows(rows)
    p = tmp_path / "v.csv"
    p.write_text(out.getvalue())
    for chunk in (200, SMALL, WHOLE):
        s, _, got = scan("vegeta-csv", p, chunk)
        assert np.array_equal(got.start_ns, np.array([int(r[0]) for r in rows]))
        assert [s.labels[k] for k in got.key] == [r[7] for r in rows]
        # a quoted line end makes a row two lines: its line is where it starts
        expect_lines = np.cumsum([1] + [2 if i % 7 == 0 else 1 for i in range(len(rows) - 1)])
        assert got.line.tolist() == expect_lines.tolist()


def test_memory_follows_the_rows_not_the_blocks(tmp_path):
    # a batch's arrays are compact copies: nothing keeps a block's pyarrow buffers alive
    s, batches, _ = scan("k6-csv", REAL / "k6-ramping-vus.csv.gz", SMALL)
    for b in batches:
        for a in (b.start_ns, b.latency_s, b.status, b.ok, b.key, b.line):
            assert a.base is None or isinstance(a.base, np.ndarray) and a.base.base is None
    assert (
        sum(a.nbytes for b in batches for a in (b.start_ns, b.latency_s, b.status, b.key, b.line))
        == 40 * s.rows + 0
    )


def test_vegeta_json_blank_lines_keep_true_line_numbers(tmp_path):
    src = (DATA / "vegeta.json").read_bytes().split(b"\n")
    p = tmp_path / "v.json"
    p.write_bytes(b"\n".join(src[:3]) + b"\n\n   \n" + b"\n".join(src[3:]) + b"\n\n")
    expect = ref_vegeta_json(p)
    for chunk in (512, WHOLE):
        s, _, got = scan("vegeta-json", p, chunk)
        assert got.line.tolist() == [e[5] for e in expect]
        assert got.line[:5].tolist() == [1, 2, 3, 6, 7]
        assert np.array_equal(got.start_ns, np.array([e[0] for e in expect]))

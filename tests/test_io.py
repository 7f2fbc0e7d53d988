import gzip
import os

import numpy as np
import pytest
import reference
from conftest import BASE_NS, RUN_NAMES, RUNS, ts, write_run

from headroom import HeadroomError, load_run


@pytest.mark.parametrize("name", RUN_NAMES)
def test_bundled_runs_match_reference_reader(name):
    run = load_run(RUNS / name)
    ref = reference.read_perf(RUNS / name / "perfResults.csv.gz")
    assert run.requests.n_steps == len(ref) == 8
    for k, sec in enumerate(ref):
        a, b = run.requests.step_offsets[k], run.requests.step_offsets[k + 1]
        assert b - a == len(sec)
        st, _ = run.requests.sorted_step(k)
        np.testing.assert_array_equal(st, [r[0] for r in sec])
        # same start can occur twice; compare latencies as multisets per start
        got = sorted(zip(run.requests.start_ns[a:b].tolist(), run.requests.latency_s[a:b].tolist()))
        assert got == sorted(sec)
    cpu = reference.read_cpu(RUNS / name / "cpuStats.csv")
    np.testing.assert_array_equal(run.cpu.time_ns, [r[0] for r in cpu])
    np.testing.assert_array_equal(run.cpu.pct, [r[1][0] for r in cpu])
    assert run.meta.fields["lower_concurrency"] == 1
    assert run.meta.label == run.meta.fields["sha"]
    assert run.meta.concurrency(3) == 1 + 3 * 4


def test_quirks_repeated_headers_digits_order_gz(tmp_path):
    # 0..9 fractional digits, rows in completion (not start) order, two sections
    s0 = [
        (ts(1.5, 1), "0.0100"),
        (ts(0, 0), "0.0200"),
        (ts(1.123456789, 9), "0.0300"),
        (ts(0.25, 2), "0.0001"),
    ]
    s1 = [(ts(3.000001, 6), "0.5"), (ts(2.5, 3), "1e-3")]
    folder = write_run(tmp_path / "r", [s0, s1], gz=True)
    run = load_run(folder)
    assert run.requests.n_steps == 2
    np.testing.assert_array_equal(run.requests.step_offsets, [0, 4, 6])
    # file (completion) order is kept; sorted_step gives start order
    expect = [1_500_000_000, 0, 1_123_456_789, 250_000_000, 3_000_001_000, 2_500_000_000]
    np.testing.assert_array_equal(run.requests.start_ns - BASE_NS, expect)
    st, lat = run.requests.sorted_step(0)
    np.testing.assert_array_equal(st - BASE_NS, [0, 250_000_000, 1_123_456_789, 1_500_000_000])
    np.testing.assert_array_equal(lat, [0.02, 0.0001, 0.03, 0.01])
    np.testing.assert_array_equal(run.requests.sorted_step(1)[1], [0.001, 0.5])
    assert run.cpu is None and run.meta.label == "r"


def test_bom_and_crlf(tmp_path):
    rows = [(ts(0.1 * i), "0.0010") for i in range(30)]
    a = load_run(write_run(tmp_path / "a", [rows, rows], crlf=True, bom=True))
    b = load_run(write_run(tmp_path / "b", [rows, rows]))
    np.testing.assert_array_equal(a.requests.start_ns, b.requests.start_ns)
    np.testing.assert_array_equal(a.requests.step_offsets, [0, 30, 60])


def test_old_prefix_layout_and_prefix_path(tmp_path):
    new = [(ts(0.1 * i), "0.0010") for i in range(20)]
    old = [(ts(0.1 * i), "0.0020") for i in range(10)]
    folder = tmp_path / "cmp"
    write_run(folder, [new], meta='sha: "new1"\n')
    write_run(
        folder, [old], prefix="old_", meta='sha: "old1"\n', cpu="timestamp,percentage\n" + ts(1) + ",5\n"
    )
    assert len(load_run(folder).requests) == 20
    r_old = load_run(folder / "old_perfResults.csv")
    assert len(r_old.requests) == 10 and r_old.label == "old1" and r_old.cpu is not None
    r_pre = load_run(str(folder / "old_"))
    assert r_pre.label == "old1"
    # a folder holding only old_ files is read as that run
    only_old = tmp_path / "only"
    write_run(only_old, [old], prefix="old_")
    assert len(load_run(only_old).requests) == 10


def test_per_cpu_columns_and_cores(tmp_path):
    cpu = "timestamp,percentage,percentage\n" + "".join(
        f"{ts(i)},{10 + i:.6f},{30 + i:.6f}\n" for i in range(5)
    )
    run = load_run(write_run(tmp_path / "r", [[(ts(0.1 * i), "0.001") for i in range(40)]], cpu=cpu))
    assert run.cpu.per_cpu.shape == (5, 2)
    np.testing.assert_allclose(run.cpu.pct, [(10 + i + 30 + i) / 2 for i in range(5)])
    assert run.cpu.cores == 2.0


def test_old_go_time_string_cpu_format(tmp_path):
    cpu = (
        "timestamp,percentage\n"
        "2016-12-15 15:00:47.575579693 -0800 PST,12.358514\n"
        "2016-12-15 15:00:48 -0800 PST m=+1.000000001,20.5\n"
        "2016-12-15 23:00:49.5 +0000 UTC,30\n"
    )
    run = load_run(write_run(tmp_path / "r", [[(ts(0.1 * i), "0.001") for i in range(4)]], cpu=cpu))
    expect = [
        reference.parse_time_ns("2016-12-15T23:00:47.575579693Z"),
        reference.parse_time_ns("2016-12-15T23:00:48Z"),
        reference.parse_time_ns("2016-12-15T23:00:49.5Z"),
    ]
    np.testing.assert_array_equal(run.cpu.time_ns, expect)
    np.testing.assert_array_equal(run.cpu.pct, [12.358514, 20.5, 30.0])


def test_hey_upstream_csv_counts_errors(tmp_path):
    head = "response-time,DNS+dialup,DNS,Request-write,Response-delay,Response-read,status-code,offset\n"
    rows = [
        "0.0775,0.0012,0.0003,0.0000,0.0761,0.0001,200,0.1734",
        "0.0100,0.0012,0.0003,0.0000,0.0761,0.0001,503,0.2000",
        "0.0200,0.0012,0.0003,0.0000,0.0761,0.0001,204,0.0500",
        "0.0300,0.0012,0.0003,0.0000,0.0761,0.0001,500,0.3000",
        "0.0400,0.0012,0.0003,0.0000,0.0761,0.0001,503,0.4000",
    ]
    p = tmp_path / "hey.csv"
    p.write_text(head + "\n".join(rows) + "\n")
    os.utime(p, ns=(BASE_NS + 10**9, BASE_NS + 10**9))
    run = load_run(p)
    assert run.format == "hey"
    assert run.errors == 3 and run.error_codes == {500: 1, 503: 2}
    assert any("3 of 5 requests failed" in w for w in run.warnings)
    np.testing.assert_array_equal(run.requests.latency_s, [0.0775, 0.02])
    # anchored so the last response (0.1734 + 0.0775 s) ends at the file's mtime
    end = BASE_NS + 10**9
    base = end - round((0.1734 + 0.0775) * 1e9)
    np.testing.assert_array_equal(run.requests.start_ns, [base + 173_400_000, base + 50_000_000])
    assert load_run(p, base_time_ns=0).requests.start_ns.min() == 50_000_000


def test_hey_fork_start_time_column(tmp_path):
    head = "response-time,DNS+dialup,DNS,Request-write,Response-delay,Response-read,start-time\n"
    p = tmp_path / "fork.csv"
    p.write_text(head + f"0.5,0,0,0,0.5,0,{ts(1)}\n0.25,0,0,0,0.25,0,{ts(0.5, 1)}\n")
    run = load_run(p)
    assert run.format == "hey-fork" and run.errors == 0
    np.testing.assert_array_equal(run.requests.start_ns - BASE_NS, [1_000_000_000, 500_000_000])
    np.testing.assert_array_equal(run.requests.latency_s, [0.5, 0.25])


def _err(path) -> str:
    with pytest.raises(HeadroomError) as e:
        load_run(path)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


def test_errors_name_file_line_and_value(tmp_path):
    rows = [(ts(0.1 * i), "0.001") for i in range(10)]
    bad = rows[:3] + [("not-a-time", "0.001")] + rows[3:]
    folder = write_run(tmp_path / "t", [rows, bad])
    # section 2 header is line 12; the bad row is its 4th data row: line 16
    assert _err(folder).startswith(
        str(folder / "perfResults.csv") + ":16: bad start-time 'not-a-time' "
        "(expected RFC 3339 UTC, e.g. 2017-08-25T21:07:33.008Z)"
    )
    neg = write_run(tmp_path / "n", [rows[:5] + [(ts(9), "-0.5")]])
    assert _err(neg).startswith(f"{neg / 'perfResults.csv'}:7: bad response-time -0.5")
    nan = write_run(tmp_path / "nan", [rows[:2] + [(ts(9), "nan")]])
    assert _err(nan).startswith(f"{nan / 'perfResults.csv'}:4: bad response-time nan")
    empty = write_run(tmp_path / "e", [rows[:2] + [(ts(9), "")]])
    assert _err(empty).startswith(f"{empty / 'perfResults.csv'}:4: empty response-time value")
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "perfResults.csv").write_text("start-time,response-time\n" + ts(0) + ",0.1,7\n")
    assert _err(tmp_path / "x").startswith(f"{tmp_path / 'x' / 'perfResults.csv'}:2: expected 2 fields")


def test_errors_for_missing_and_empty(tmp_path):
    assert _err(tmp_path / "nothing-here") == f"{tmp_path / 'nothing-here'}: no such file or folder"
    (tmp_path / "empty").mkdir()
    assert "no perfResults.csv" in _err(tmp_path / "empty")
    (tmp_path / "e2").mkdir()
    (tmp_path / "e2" / "perfResults.csv").write_text("")
    assert _err(tmp_path / "e2") == f"{tmp_path / 'e2' / 'perfResults.csv'}: the file is empty"
    (tmp_path / "e3").mkdir()
    (tmp_path / "e3" / "perfResults.csv").write_text("start-time,response-time\n")
    assert "no requests" in _err(tmp_path / "e3")
    (tmp_path / "e4").mkdir()
    (tmp_path / "e4" / "perfResults.csv.gz").write_bytes(
        gzip.compress(b"start-time,response-time\n" * 50)[:30]
    )
    assert "truncated gzip" in _err(tmp_path / "e4")
    (tmp_path / "e5").mkdir()
    (tmp_path / "e5" / "perfResults.csv").write_text("when,latency\n1,2\n")
    assert _err(tmp_path / "e5").startswith(
        f"{tmp_path / 'e5' / 'perfResults.csv'}:1: unexpected header 'when,latency'"
    )


def test_yaml_safe_and_errors(tmp_path):
    marker = tmp_path / "pwned"
    meta = f"sha: !!python/object/apply:os.system ['touch {marker}']\n"
    folder = write_run(tmp_path / "r", [[(ts(0.1 * i), "0.001") for i in range(5)]], meta=meta)
    msg = _err(folder)
    assert msg.startswith(f"{folder / 'metadata.yml'}:1: bad YAML") and not marker.exists()
    (folder / "metadata.yml").write_text("sha: [unclosed\nversion: 2\n")
    assert _err(folder).startswith(f"{folder / 'metadata.yml'}:")

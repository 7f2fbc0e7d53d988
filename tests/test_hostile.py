"""Issue 14's cases, one test each: damaged and hostile input gives exit 2 and one short line
naming the file (and line), or a result with a warning that says what was dropped; never a
traceback, a hang or a silently wrong number."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

T0 = "2024-01-02T03:04:"


def cli(*args, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "headroom", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
    )


def make_run(
    folder: Path, *, rows=None, cpu=None, meta="sha: abc\nlower_concurrency: 1\nconcurrency_step: 1\n"
):
    """A small valid throughputramp run: 3 steps of 150 requests over 3 s each, CPU every second."""
    folder.mkdir(parents=True, exist_ok=True)
    if rows is None:
        rows = []
        for k in range(3):
            rows.append("start-time,response-time")
            for i in range(150):
                ms = k * 4000 + i * 20
                rows.append(f"2024-01-02T03:04:{ms // 1000:02d}.{ms % 1000:03d}Z,0.00{1 + i % 9}0")
    (folder / "perfResults.csv").write_text("\n".join(rows) + "\n")
    if cpu is None:
        cpu = ["timestamp,percentage"] + [f"2024-01-02T03:04:{s:02d}.5Z,{40 + s}.0" for s in range(14)]
    (folder / "cpuStats.csv").write_text("\n".join(cpu) + "\n")
    (folder / "metadata.yml").write_text(meta)
    return folder


def rows_of(folder):
    return (folder / "perfResults.csv").read_text().splitlines()


def error(p, *fragments, line=None):
    assert p.returncode == 2, (p.returncode, p.stdout[-300:], p.stderr[-600:])
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr[:600]
    assert len(p.stderr) < 400, p.stderr[:600]
    for f in fragments:
        assert f in p.stderr, p.stderr
    if line is not None:
        assert f":{line}:" in p.stderr, p.stderr


def test_valid_run_is_clean(tmp_path):
    p = cli("summary", make_run(tmp_path / "r"), "--cpu-cores", "1")
    assert p.returncode == 0 and p.stderr == "", p.stderr


def test_hey_file_time_after_2262(tmp_path):
    p = tmp_path / "hey.csv"
    p.write_text(
        "response-time,DNS+dialup,DNS,Request-write,Response-delay,Response-read,status-code,offset\n"
        + "".join(f"0.0010,0,0,0,0,0,200,{i / 100:.4f}\n" for i in range(300))
    )
    os.utime(p, (1e10, 1e10))  # year 2286
    error(cli("summary", p), "outside 2000-2200", "--hey-start")


def test_go_cpu_timestamp_with_impossible_zone(tmp_path):
    cpu = ["timestamp,percentage"] + [f"2024-01-02 03:04:{s:02d}.5 +0000 UTC,40.0" for s in range(14)]
    cpu[5] = "2024-01-02 03:04:04.5 -9999 XST,40.0"
    error(cli("summary", make_run(tmp_path / "r", cpu=cpu)), "cpuStats.csv:6:", "bad timestamp")


def test_metadata_nested_ten_thousand_levels(tmp_path):
    meta = "sha: abc\nx: " + "[" * 10000 + "]" * 10000 + "\n"
    error(cli("summary", make_run(tmp_path / "r", meta=meta)), "metadata.yml:2:", "nested deeper than 32")


def test_metadata_alias_bomb(tmp_path):
    lines = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, 10):
        lines.append(f"{chr(97 + i)}: &{chr(97 + i)} [" + ", ".join([f"*{chr(96 + i)}"] * 9) + "]")
    error(cli("summary", make_run(tmp_path / "r", meta="\n".join(lines) + "\n"), timeout=20), "aliases")


def test_metadata_too_large(tmp_path):
    meta = "sha: abc\nnote: '" + "x" * (2 << 20) + "'\n"
    error(cli("summary", make_run(tmp_path / "r", meta=meta)), "metadata is limited")


@pytest.mark.parametrize("value", [".nan", ".inf", "0", "-2", "1e-300", "yes"])
def test_bad_cpu_cores_in_metadata(tmp_path, value):
    meta = f"sha: abc\ncpu_cores: {value}\n"
    error(cli("summary", make_run(tmp_path / "r", meta=meta)), "metadata.yml:2:", "cpu_cores")


@pytest.mark.parametrize(("key", "value"), [("lower_concurrency", "-5"), ("concurrency_step", "-1")])
def test_negative_concurrency_in_metadata(tmp_path, key, value):
    meta = f"sha: abc\n{key}: {value}\n"
    error(cli("summary", make_run(tmp_path / "r", meta=meta)), f"metadata.yml:2: {key}")


def test_cpu_cores_option_must_be_finite(tmp_path):
    p = cli("summary", make_run(tmp_path / "r"), "--cpu-cores", "inf")
    assert p.returncode == 2 and "positive finite" in p.stderr


@pytest.mark.parametrize("stamp", ["1970-01-01T00:00:01Z", "2200-06-01T00:00:00Z"])
def test_one_start_time_far_away(tmp_path, stamp):
    r = make_run(tmp_path / "r")
    rows = rows_of(r)
    rows[40] = f"{stamp},0.0020"
    (r / "perfResults.csv").write_text("\n".join(rows) + "\n")
    error(cli("summary", r, timeout=30), "perfResults.csv:41:", "outside 2000-2200")
    error(cli("compare", r, r, timeout=30), "perfResults.csv:41:")


@pytest.mark.parametrize("shift", ["03:04:", "04:04:", "2024-01-03T03:04:"])
def test_one_start_time_moved_an_hour_or_a_day(tmp_path, shift):
    r = make_run(tmp_path / "r")
    rows = rows_of(r)
    if shift == "03:04:":
        return  # unchanged: the control
    rows[40] = rows[40].replace(
        "2024-01-02T03:04:", shift if shift.startswith("2024") else "2024-01-02T" + shift
    )
    (r / "perfResults.csv").write_text("\n".join(rows) + "\n")
    error(cli("summary", r, timeout=30), "perfResults.csv:41:", "the middle of its step")


def test_one_hey_offset_of_1e12_seconds(tmp_path):
    p = tmp_path / "hey.csv"
    lines = [f"0.0010,0,0,0,0,0,200,{i / 100:.4f}" for i in range(300)]
    lines[100] = "0.0010,0,0,0,0,0,200,1000000000000"
    p.write_text(
        "response-time,DNS+dialup,DNS,Request-write,Response-delay,Response-read,status-code,offset\n"
        + "\n".join(lines)
        + "\n"
    )
    error(cli("summary", p, timeout=30), "hey.csv:102:", "offset")


@pytest.mark.parametrize("lat", ["99999999999", "1e308"])
def test_absurd_latency(tmp_path, lat):
    r = make_run(tmp_path / "r")
    rows = rows_of(r)
    rows[40] = rows[40].split(",")[0] + "," + lat
    (r / "perfResults.csv").write_text("\n".join(rows) + "\n")
    p = cli("summary", r)
    error(p, "perfResults.csv:41:", "latency")
    assert "overflow" not in p.stderr


def test_cut_line_that_still_parses_is_dropped(tmp_path):
    r = make_run(tmp_path / "r")
    data = (r / "perfResults.csv").read_bytes().rstrip(b"\n")
    data = data[:-2]  # "...Z,0.0090" -> "...Z,0.00": still a number
    (r / "perfResults.csv").write_bytes(data)
    p = cli("summary", r, "--cpu-cores", "1")
    assert p.returncode == 0, p.stderr
    assert "dropped a truncated last line of" in p.stderr and "bytes without a line end" in p.stderr


@pytest.mark.parametrize("value", ["1000000", "-1", "nan"])
def test_impossible_cpu(tmp_path, value):
    cpu = ["timestamp,percentage"] + [f"2024-01-02T03:04:{s:02d}.5Z,40.0" for s in range(14)]
    cpu[4] = f"2024-01-02T03:04:03.5Z,{value}"
    error(cli("summary", make_run(tmp_path / "r", cpu=cpu)), "cpuStats.csv")


def test_cpu_above_cores(tmp_path):
    cpu = ["timestamp,percentage"] + [f"2024-01-02T03:04:{s:02d}.5Z,40.0" for s in range(14)]
    cpu[4] = "2024-01-02T03:04:03.5Z,350.0"
    r = make_run(tmp_path / "r", cpu=cpu)
    error(cli("summary", r), "cpuStats.csv:5:", "--cpu-cores")
    assert cli("summary", r, "--cpu-cores", "4").returncode == 0


def test_empty_cpu_timestamp(tmp_path):
    cpu = ["timestamp,percentage"] + [f"2024-01-02T03:04:{s:02d}.5Z,40.0" for s in range(14)]
    cpu[4] = ",40.0"
    error(cli("summary", make_run(tmp_path / "r", cpu=cpu)), "cpuStats.csv:5:", "empty timestamp")


def test_single_cpu_column_without_cores_warns(tmp_path):
    p = cli("summary", make_run(tmp_path / "r"))
    assert p.returncode == 0
    assert "100 % taken as one core" in p.stderr and "--cpu-cores" in p.stderr


def test_both_plain_and_gzipped_perf_files(tmp_path):
    r = make_run(tmp_path / "r")
    (r / "perfResults.csv.gz").write_bytes(gzip.compress((r / "perfResults.csv").read_bytes()))
    error(cli("summary", r), "both perfResults.csv and perfResults.csv.gz")


@pytest.mark.parametrize(
    "stamp",
    [
        "2024-01-02T25:04:01Z",  # hour 25
        "2024-13-02T03:04:01Z",  # month 13
        "2024-02-30T03:04:01Z",  # Feb 30
        "2024-01-02T03:04:\u0660\u0661Z",  # Arabic-Indic digits
    ],
)
def test_impossible_dates_named_at_their_line(tmp_path, stamp):
    r = make_run(tmp_path / "r")
    rows = rows_of(r)
    rows[200] = f"{stamp},0.0020"
    (r / "perfResults.csv").write_text("\n".join(rows) + "\n")
    p = cli("summary", r)
    error(p, "perfResults.csv:201:", "bad start-time")
    assert p.stderr.isascii()


def test_twenty_digit_status_named_at_its_line(tmp_path):
    p = tmp_path / "hey.csv"
    lines = [f"0.0010,0,0,0,0,0,200,{i / 100:.4f}" for i in range(300)]
    lines[100] = "0.0010,0,0,0,0,0,20000000000000000000,1.0"
    p.write_text(
        "response-time,DNS+dialup,DNS,Request-write,Response-delay,Response-read,status-code,offset\n"
        + "\n".join(lines)
        + "\n"
    )
    error(cli("summary", p), "hey.csv:102:", "status-code")


def test_cr_only_line_ends_give_a_short_message(tmp_path):
    r = make_run(tmp_path / "r")
    (r / "perfResults.csv").write_bytes((r / "perfResults.csv").read_bytes().replace(b"\n", b"\r"))
    p = cli("summary", r)
    assert p.returncode == 2 and len(p.stderr) < 400, p.stderr[:500]


def test_megabyte_header_gives_a_short_message(tmp_path):
    r = make_run(tmp_path / "r")
    (r / "perfResults.csv").write_text("x" * (1 << 20) + "\n2024-01-02T03:04:01Z,0.001\n")
    p = cli("summary", r)
    assert p.returncode == 2 and len(p.stderr) < 400, p.stderr[:500]


def test_report_takes_hey_start_as_summary_does(tmp_path):
    # issue 14 asked that report not drop --hey-start silently: it now reads with it, as summary does
    run = make_run(tmp_path / "r")
    opts = ["--hey-start", "2024-01-02T03:04:00Z"]
    assert cli("summary", run, *opts).returncode == 0
    p = cli("report", run, "-o", tmp_path / "o.html", *opts)
    assert p.returncode == 0 and (tmp_path / "o.html").exists(), p.stderr

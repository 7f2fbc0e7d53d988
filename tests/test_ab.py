"""ApacheBench ``ab -g``: the real samples of tests/data/formats/real/ab-steps (Debian apache2-utils
2.4.71, ab 2.3, against testserver on 127.0.0.1) read exactly, against the independent reader in
reference.py and against ab's own text summary of the same runs; bad input in one line, exit 2."""

from __future__ import annotations

import gzip
import subprocess
import sys

import numpy as np
import pytest
import reference as R
from conftest import ROOT

from headroom import formats as F

REAL = ROOT / "tests" / "data" / "formats" / "real"
STEPS = REAL / "ab-steps"
LEVELS = (1, 2, 4, 8, 16)


def cli(*args, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", "headroom", *map(str, args)], capture_output=True, text=True, cwd=cwd
    )


def ab_index(sorted_ms: list[int], p: int) -> int:
    """ab's own percentile: stats[done * p / 100] of the results sorted by total time (ab.c)."""
    return sorted_ms[len(sorted_ms) * p // 100] if p < 100 else sorted_ms[-1]


@pytest.mark.parametrize("c", LEVELS)
def test_every_request_read_exactly(c):
    path = STEPS / f"ab-c{c}.tsv.gz"
    assert F.detect(path) == "ab"
    t = F.read_table(path, "ab")
    ref = R.read_ab(path)
    assert sorted(zip(t.start_ns.tolist(), np.rint(t.latency_s * 1e3).astype(int).tolist())) == sorted(ref)
    assert t.ok is None and t.status is None  # errors unknown: no status column
    assert t.fidelity == "per request, start time to 1 s, latency to 1 ms"
    assert (t.start_ns % 1_000_000_000 == 0).all()


def test_counts_and_percentiles_equal_abs_own_summary():
    # ab prints, per run, the complete requests and stats[n * p / 100] of the total times: the -g
    # file of the same run gives the same numbers (ms, both rounded by ab the same way)
    runs = R.ab_summary(REAL / "ab-summary.txt")
    assert [r["concurrency"] for r in runs] == list(LEVELS)
    for r in runs:
        ms = sorted(v for _, v in R.read_ab(STEPS / f"ab-c{r['concurrency']}.tsv.gz"))
        assert len(ms) == r["requests"]
        assert {p: ab_index(ms, p) for p in r["pct"]} == r["pct"]


def test_a_folder_of_ab_files_is_a_ramp_by_concurrency():
    p = cli("summary", STEPS)
    assert p.returncode == 0, p.stderr
    assert "errors unknown" in p.stdout
    rows = [ln.split() for ln in p.stdout.splitlines() if ln.strip()[:1].isdigit() and len(ln.split()) > 10]
    steps = [r for r in rows if r[0] in "12345" and len(r) >= 9][:5]  # steps numbered from 1
    assert [int(r[1]) for r in steps] == list(LEVELS)
    # requests per step: the files' rows; p50 and p99 (nearest rank, ms) from the independent reader
    for r, c in zip(steps, LEVELS):
        ms = sorted(v for _, v in R.read_ab(STEPS / f"ab-c{c}.tsv.gz"))
        assert int(r[4].replace(",", "")) == len(ms)
        assert r[5] == "?"
        n = len(ms)
        assert float(r[7]) == ms[max(1, -(-50 * n // 100)) - 1]
        assert float(r[8]) == ms[max(1, -(-99 * n // 100)) - 1]


def test_abs_text_summary_is_refused_with_the_hint_to_use_g():
    p = cli("summary", REAL / "ab-summary.txt")
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "ApacheBench's text summary" in p.stderr and "-g FILE" in p.stderr


def _write(tmp_path, name, text, gz=False):
    p = tmp_path / name
    data = text.encode()
    p.write_bytes(gzip.compress(data) if gz else data)
    return p


HEAD = "starttime\tseconds\tctime\tdtime\tttime\twait\n"
ROW = "Wed Nov 25 16:32:00 2026\t1795624320\t0\t1\t1\t1\n"


@pytest.mark.parametrize(
    ("body", "line", "fragment"),
    [
        (ROW * 3 + "Wed Nov 25 16:32:00 2026\t1795624320\t0\t1\t1\n" + ROW, 5, "expected 6 fields, got 5"),
        (ROW * 2 + "Wed Nov 25 16:32:00 2026\t1795624320\t0\t1\t-1\t1\n", 4, "bad ttime -1"),
        (ROW + "Wed Nov 25 16:32:00 2026\tsoon\t0\t1\t1\t1\n", 3, "bad seconds 'soon'"),
        (ROW + "Wed Nov 25 16:32:00 2026\t17956243\t0\t1\t1\t1\n", 3, "bad seconds 17956243"),
        ("", None, "no requests"),
    ],
    ids=["missing-column", "negative-ttime", "text-seconds", "seconds-out-of-range", "header-only"],
)
def test_bad_ab_files_one_line_naming_file_and_line(tmp_path, body, line, fragment):
    p = _write(tmp_path, "ab-c4.tsv", HEAD + body)
    r = cli("summary", p)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    where = f"{p}:{line}:" if line else f"{p}:"
    assert r.stderr.startswith(f"headroom: error: {where}"), r.stderr
    assert fragment in r.stderr, r.stderr


def test_forced_format_names_what_the_file_is(tmp_path):
    p = _write(tmp_path, "x.tsv", HEAD + ROW * 3)
    assert F.detect(p) == "ab"
    r = cli("summary", p, "--format", "oha-csv")
    assert r.returncode == 2 and "ApacheBench" in r.stderr and "--format ab" in r.stderr, r.stderr


def test_back_to_back_runs_that_share_every_boundary_second_are_still_steps(tmp_path):
    for c in LEVELS:
        rows = gzip.decompress((STEPS / f"ab-c{c}.tsv.gz").read_bytes()).decode().splitlines()
        if c == 16:  # c16 started in the second c8 ended in (in the sample it started one later)
            rows = rows[:1] + [
                "\t".join([f[0], str(int(f[1]) - 1), *f[2:]]) for f in (r.split("\t") for r in rows[1:])
            ]
        (tmp_path / f"ab-c{c}.tsv").write_text("\n".join(rows) + "\n")
    p = cli("summary", tmp_path)
    assert p.returncode == 0, p.stderr
    assert "in 5 steps" in p.stdout, p.stdout[:400]


@pytest.mark.parametrize(
    "folder, why",
    [
        ("ab-steps", "errors unknown (ab -g writes no status)"),
        ("ycsb-hlog", "errors unknown (no READ-FAILED log beside it)"),
    ],
)
def test_unknown_errors_say_why_for_the_tool(folder, why):
    """The summary says why a format cannot count failures in the tool's own terms (the reader's
    ``errors_unknown``), in the terminal and on the HTML page alike."""
    import headroom

    out = cli("summary", f"tests/data/formats/real/{folder}")
    assert out.returncode == 0, out.stderr
    assert why in " ".join(out.stdout.split()), out.stdout[:400]
    run = headroom.reduce_run(ROOT / "tests/data/formats/real" / folder)
    assert why.removeprefix("errors ") in run._repr_html_()

"""Locust runs recorded by headroom.locust, read exactly: the real samples of
tests/data/formats/real/locust (Locust 2.47.0 against the Go test server and nginx, one process
and a master with two workers; scripts/locust/record.sh) checked against Locust's own view of
the same runs (its per-stage statistics snapshot inside Locust, its --json-file, its --csv) and
against an independent reading of the files with the csv module.  Bad input: one line, exit 2."""

from __future__ import annotations

import csv
import gzip
import json
import math
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT

import headroom
from headroom import formats as F
from headroom.model import HeadroomError
from headroom.options import ReadOptions

SAMPLES = ROOT / "tests" / "data" / "formats" / "real" / "locust"
RUNS = ["goserver-single", "goserver-distributed", "nginx-single", "nginx-distributed"]
STAGE_USERS = [1, 2, 4, 8]


def run_files(run: str) -> list[Path]:
    return sorted((SAMPLES / run / "run").glob("*.csv.gz"))


def own(run: str) -> dict:
    """Locust's per-stage figures (scripts/locust/own_stats.py over its snapshots)."""
    return json.loads((SAMPLES / run / "locust-own" / "stages.json").read_text())["stages"]


def rows(path: Path) -> list[dict]:
    """The request rows of a file, read with the csv module (independent of headroom's reader)."""
    with gzip.open(path, "rt", newline="") as f:
        return [r for r in csv.DictReader(f) if r["event"] == "request"]


def all_rows(run: str) -> list[dict]:
    return [r for p in run_files(run) for r in rows(p)]


def summary(path, name: str | None = None) -> dict:
    run = headroom.reduce_run(path, options=ReadOptions(name=name))
    return headroom.to_json(headroom.analyze(run))


def nearest_rank(values, p: float) -> float:
    """headroom's exact percentile: the ceil(n p)-th smallest value."""
    v = sorted(values)
    return v[max(math.ceil(len(v) * p), 1) - 1]


def locust_bucket(ms: float) -> int:
    """Locust 2.47's rounding of a response time (locust.stats.bucket_response_time)."""
    if ms < 100:
        return round(ms)
    if ms < 1000:
        return int(round(ms, -1))
    if ms < 10000:
        return int(round(ms, -2))
    return int(round(ms, -3))


def locust_rank_value(rounded: list[int], p: float) -> int:
    """The percentile as Locust defines it (calculate_response_time_percentile): the smallest
    rounded time with at most int(n p) requests below it, i.e. the (int(n p) + 1)-th smallest."""
    v = sorted(rounded)
    return v[min(int(len(v) * p), len(v) - 1)]


def test_every_file_is_detected_and_locusts_own_files_are_not_requests():
    for run in RUNS:
        for p in run_files(run):
            assert F.detect(p) == "locust"
        with pytest.raises(HeadroomError, match="stats history"):
            F.detect(SAMPLES / run / "locust-own" / "run_stats_history.csv")


@pytest.mark.parametrize("run", RUNS)
def test_per_stage_counts_equal_locusts_own(run):
    """Every step is a stage: its requests and errors are Locust's own count and failures of that stage
    (Locust's statistics snapshot at the stage change, every process added up), and its concurrency the
    stage's users."""
    s = summary(SAMPLES / run / "run")
    stages = own(run)
    assert len(s["steps"]) == len(stages) == 4
    for step, (k, st) in zip(s["steps"], sorted(stages.items(), key=lambda kv: int(kv[0]))):
        assert step["requests"] + step["errors"] == st["all"]["requests"]
        assert step["errors"] == st["all"]["failures"]
        assert step["concurrency"] == st["users"] == STAGE_USERS[int(k)]


@pytest.mark.parametrize("run", RUNS)
def test_per_name_counts_and_percentiles_within_locusts_rounding(run):
    """--name home: only that endpoint's requests, per stage as many as Locust counted; the exact
    percentiles equal an independent nearest rank over the file's rows; Locust's own percentile is the
    (int(n p) + 1)-th of the same times rounded its way, so it is headroom's within one rounding step."""
    s = summary(SAMPLES / run / "run", name="home")
    stages = own(run)
    by_stage = defaultdict(list)
    for r in all_rows(run):
        if r["name"] == "home":
            by_stage[int(r["stage"])].append(int(r["latency_us"]))
    for k, step in enumerate(s["steps"]):
        locusts = stages[str(k)]["names"]["GET home"]
        assert step["requests"] == locusts["requests"] == len(by_stage[k])
        assert step["errors"] == locusts["failures"] == 0
        lat = by_stage[k]
        for key, p in (("p50_s", 0.5), ("p90_s", 0.9), ("p99_s", 0.99)):
            exact = nearest_rank(lat, p) / 1e6
            assert step[key] == pytest.approx(exact, abs=1e-9)
            theirs = locusts["percentiles_ms"][f"{p:g}"]
            assert theirs == locust_rank_value([locust_bucket(x / 1000) for x in lat], p)
            # rounding: whole ms under 100 ms (10 ms steps to 1 s); the ranks differ by at most one
            step_ms = 1 if theirs < 100 else 10
            lo = locust_bucket(exact * 1000)
            hi = locust_bucket(sorted(lat)[min(int(len(lat) * p), len(lat) - 1)] / 1000)
            assert lo - step_ms <= theirs <= hi + step_ms


@pytest.mark.parametrize("run", ["goserver-distributed", "nginx-distributed"])
def test_merged_distributed_run_is_the_sum_of_its_workers(run):
    """The workers' files are load generators of one ramp: every step's requests, errors and
    concurrency are the sum of each worker's own, and the merged percentiles are those of all the
    workers' rows together (histograms added, not percentiles averaged)."""
    merged = summary(SAMPLES / run / "run")
    parts = [summary(p) for p in run_files(run)]
    assert len(parts) == 2
    rows_of = defaultdict(list)
    for r in all_rows(run):
        if r["ok"] == "1":
            rows_of[int(r["stage"])].append(int(r["latency_us"]))
    for k, step in enumerate(merged["steps"]):
        for key in ("requests", "errors", "concurrency"):
            assert step[key] == sum(p["steps"][k][key] for p in parts)
        assert step["requests"] == len(rows_of[k])
        assert step["p99_s"] == pytest.approx(nearest_rank(rows_of[k], 0.99) / 1e6, abs=1e-9)
    # the first stage's one user ran on one worker: the other's file has that stage empty
    assert sorted(p["steps"][0]["requests"] for p in parts)[0] == 0


@pytest.mark.parametrize("run", RUNS)
def test_totals_against_locusts_json_and_its_csv(run):
    """Locust's --json-file (written at exit) holds every request: per name, its count and failures are
    the file's rows.  Its --csv stats are rewritten every second and not at exit: never more, and at
    most the last second's requests fewer."""
    stats = json.loads((SAMPLES / run / "locust-own" / "stats.json").read_text())
    mine = Counter((r["method"], r["name"]) for r in all_rows(run))
    failed = Counter((r["method"], r["name"]) for r in all_rows(run) if r["ok"] == "0")
    assert {(e["method"], e["name"]): e["num_requests"] for e in stats} == dict(mine)
    assert {(e["method"], e["name"]): e["num_failures"] for e in stats} == {k: failed[k] for k in mine}
    with open(SAMPLES / run / "locust-own" / "run_stats.csv", newline="") as f:
        agg = next(r for r in csv.DictReader(f) if r["Name"] == "Aggregated")
    total = sum(mine.values())
    ends = sorted(int(r["time_us"]) + int(r["latency_us"]) for r in all_rows(run))
    last_second = sum(1 for e in ends if e > ends[-1] - 1_500_000)
    assert total - last_second <= int(agg["Request Count"]) <= total


def test_errors_are_known_and_named():
    """Failures keep their status: 404 for /missing, 0 (no response) for the refused port."""
    run = headroom.reduce_run(SAMPLES / "nginx-single" / "run")
    rs = all_rows("nginx-single")
    expect = Counter(int(r["status"]) for r in rs if r["ok"] == "0")
    assert run.error_codes == dict(expect)
    assert set(expect) == {0, 404}


def test_a_worker_file_alone_reads_as_that_worker_with_its_empty_stage():
    p = run_files("goserver-distributed")
    one = [summary(x) for x in p]
    empty = [s for s in one if s["steps"][0]["requests"] == 0]
    assert len(empty) == 1 and empty[0]["steps"][0]["concurrency"] == 0


# --------------------------------------------------------------------------
# bad input: one line naming the file (and line), exit 2


def cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "headroom", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd)  # fmt: skip


HEAD = "event,time_us,stage,users,latency_us,status,ok,method,name,error\n"
RUN = "run,1795825688252134,0,0,,,,local,headroom.locust 1; locust 2.47.0,\n"
STAGE = "stage,1795825688251745,0,2,,,,,,\n"


def req(t=1795825688268307, lat=8624, stage=0, users=2, status=200, ok=1, name="home"):
    return f"request,{t},{stage},{users},{lat},{status},{ok},GET,{name},\n"


BAD = [
    (HEAD, "no request rows"),
    (HEAD + RUN + STAGE + req(lat=-5), ":4: bad latency_us -5"),
    (HEAD + RUN + STAGE + req(ok=2), ":4: bad ok 2"),
    (HEAD + RUN + STAGE + req(status=1000), ":4: bad status 1000"),
    (HEAD + RUN + STAGE + "reqest,1,0,2,5,200,1,GET,home,\n", ":4: unknown event 'reqest'"),
    (HEAD + RUN + STAGE + req().replace(",8624,", ",8x24,"), ":4: bad latency_us '8x24'"),
    (HEAD + RUN + STAGE + "request,,0,2,5,200,1,GET,home,\n", ":4: a request row without time_us"),
    (HEAD + "run,1,0,0,,,,local,headroom.locust 7; locust 3.0,\n" + STAGE + req(), "layout 7"),
]


@pytest.mark.parametrize("text,want", BAD)
def test_bad_files_one_line(tmp_path, text, want):
    p = tmp_path / "locust.csv"
    p.write_text(text)
    r = cli("summary", p)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(p) in lines[0] and want in lines[0], lines
    assert len(lines[0]) <= 300


def test_a_run_cut_mid_write_drops_its_last_line_with_a_warning(tmp_path):
    p = tmp_path / "locust.csv"
    body = "".join(req(t=1795825688268307 + 1000 * i) for i in range(3000))
    p.write_text(HEAD + RUN + STAGE + body + "request,17958256882")
    run = headroom.reduce_run(p)
    s = headroom.to_json(headroom.analyze(run))
    assert sum(x["requests"] for x in s["steps"]) == 3000
    assert any(f"{p}:3004: dropped a truncated last line" in w for w in run.warnings), run.warnings


def test_name_of_no_request_and_name_on_a_format_without_names(tmp_path):
    r = cli("summary", SAMPLES / "goserver-single" / "run", "--name", "nope")
    assert r.returncode == 2 and "--name nope: no request of that name" in r.stderr
    r = cli("summary", ROOT / "tests" / "data" / "formats" / "oha.csv", "--name", "x")
    assert r.returncode == 2 and "holds no request names" in r.stderr and len(r.stderr.strip()) <= 300


# --------------------------------------------------------------------------
# Locust's own --csv stats history: steps and counts with their fidelity said; the rest refused

HISTORY = SAMPLES / "goserver-single-history"


def test_stats_history_steps_and_counts_to_the_second():
    """A stats history written with --csv-full-history (stages of 12 s) is read: one step per held user
    count, its requests within one second's worth of Locust's exact per-stage count, Locust's own window
    percentiles at the step's end, and what it cannot do said."""
    from headroom.formats.locust_history import read_history

    h = read_history(HISTORY / "locust-own" / "run_stats_history.csv")
    stages = own("goserver-single-history")
    assert [s.users for s in h.steps] == STAGE_USERS
    ends = defaultdict(list)
    for r in rows(HISTORY / "run" / "locust.csv.gz"):
        ends[int(r["stage"])].append(int(r["time_us"]) + int(r["latency_us"]))
    for k, s in enumerate(h.steps):
        exact = stages[str(k)]["all"]["requests"]
        per_second = exact / 12
        assert abs(s.requests - exact) <= per_second
        assert len(ends[k]) == exact  # the listener's rows are Locust's count
        assert s.p50_ms is not None and s.p99_ms is not None
    doc = h.to_json()
    assert doc["kind"] == "locust-stats-history" and "no requests" in doc["fidelity"]


def test_stats_history_window_percentiles_are_locusts_of_its_last_10_s():
    """Locust's window percentile at a step's last row is its own percentile (rank int(n p) + 1 of times
    rounded its way) of the requests that completed in about the 10 s before that row: within one ms of
    it computed from the listener's rows of every 10-12 s window ending at that second."""
    from headroom.formats.locust_history import read_history

    h = read_history(HISTORY / "locust-own" / "run_stats_history.csv")
    rs = rows(HISTORY / "run" / "locust.csv.gz")
    done = np.array([int(r["time_us"]) + int(r["latency_us"]) for r in rs], np.int64)
    rounded = np.array([locust_bucket(int(r["latency_us"]) / 1000) for r in rs])
    t0 = int(next(csv.DictReader(open(HISTORY / "locust-own" / "run_stats_history.csv")))["Timestamp"])
    for s in h.steps:
        end_us = (t0 + s.end_s) * 1_000_000
        got = []
        for back in (10, 11, 12):
            pick = rounded[(done >= end_us - back * 1_000_000) & (done < end_us + 1_000_000)].tolist()
            got += [locust_rank_value(pick, 0.5)]
        assert min(got) - 1 <= s.p50_ms <= max(got) + 1


def test_stats_history_without_full_history_has_no_step_percentiles(tmp_path):
    r = cli("summary", SAMPLES / "goserver-single" / "locust-own" / "run_stats_history.csv", "--json", "-")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout[r.stdout.index("{") :])
    assert [s["users"] for s in doc["steps"]] == STAGE_USERS
    assert all(s["p50_ms"] is None for s in doc["steps"])
    assert "without --csv-full-history" in r.stderr


@pytest.mark.parametrize(
    "args,want",
    [
        (["summary", "{h}", "--objective", "p99<=20ms"], "--objective needs every request"),
        (["summary", "{h}", "--bins", "4"], "--bins needs every request"),
        (["compare", "{h}", "{h}"], "only 'headroom summary FILE' reads it"),
        (
            ["summary", str(SAMPLES / "goserver-single" / "locust-own" / "run_stats.csv")],
            "Locust's --csv statistics",
        ),
        (
            ["summary", str(SAMPLES / "goserver-single" / "locust-own" / "run_exceptions.csv")],
            "--csv statistics",
        ),
        (["summary", str(SAMPLES / "jmeter-listener" / "jmeter-listener.csv")], "JmeterListener"),
    ],
)
def test_what_needs_requests_is_refused_in_one_line(args, want):
    h = str(HISTORY / "locust-own" / "run_stats_history.csv")
    r = cli(*[a.format(h=h) for a in args])
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and want in lines[0] and "headroom.locust" in lines[0], lines
    assert len(lines[0].split(": ", 3)[-1]) <= 200  # besides "headroom: error: PATH: "

"""Rate steps, a stated concurrency plan and the input messages of issue 20, end to end.

Figures are checked against the independent reader (plan_reader.py) or the
tools' own summaries in tests/data/formats/real/, never against headroom.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import plan_reader as P
import pytest
from conftest import ROOT

import headroom
from headroom import formats as F
from headroom.io import load_run, reduce_run
from headroom.model import HeadroomError
from headroom.tables import parse_concurrency

DATA = ROOT / "tests" / "data" / "formats"


def cli(*args, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", "headroom", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


def one_line_error(p, *fragments):
    assert p.returncode == 2, (p.returncode, p.stderr)
    err = p.stderr.strip()
    assert "\n" not in err and "Traceback" not in err, err
    for f in fragments:
        assert f in err, (f, err)
    return err


# --------------------------------------------------------------------------
# rate steps: intended, sent, fell behind


def _vegeta_own_rates() -> dict[str, float]:
    text = (P.REAL / "vegeta-summary.txt").read_text()
    return {
        b.split()[0]: float(re.search(r"\[total, rate, throughput\]\s+\d+, ([\d.]+),", b).group(1))
        for b in text.split("== ")[1:]
    }


def test_vegeta_attacks_carry_the_intended_and_vegetas_own_sent_rate():
    t = F.read_table(P.REAL / "vegeta-rates.csv.gz", "vegeta-csv")
    own = _vegeta_own_rates()
    assert [r["intended_rps"] for r in t.step_rates] == [float(q) for q in P.VEGETA_RATES]
    for name, r in zip(t.step_names, t.step_rates):
        assert abs(r["sent_rps"] - own[name]) <= 0.006, (name, r, own[name])  # vegeta prints 2 decimals
        assert r["fell_behind"] is False and r["dropped"] is None
    assert t.step_concurrency is None


def test_oha_folder_of_rate_files_gives_rate_steps():
    run = load_run(P.REAL / "oha-rates")
    rates = run.meta.step_rates
    assert [r["intended_rps"] for r in rates] == [float(q) for q in P.OHA_RATES]
    for r, q in zip(rates, P.OHA_RATES):
        own = P.oha_csv(P.REAL / "oha-rates" / f"oha-q{q}.csv.gz")
        sent = len(own.start_ns) / ((max(own.start_ns) - min(own.start_ns)) / P.NS)
        assert abs(r["sent_rps"] - sent) <= 1e-6 * sent
        assert r["fell_behind"] is False
    s = headroom.analyze(run)
    assert s.table.kind == "rate" and not any("fell behind" in s.table.flags(k) for k in range(len(s.table)))


def test_k6_arrival_rate_summary_json_says_which_step_fell_behind(tmp_path):
    name = "k6-ramping-arrival-rate.json.gz"
    out = tmp_path / "s.json"
    p = cli("summary", P.REAL / name, "--json", out)
    assert p.returncode == 0, p.stderr
    steps = json.loads(out.read_text())["steps"]
    run = P.k6_json(P.REAL / name)
    windows = P.plan_windows(run.requests, P.K6_ARRIVAL_RATES)
    assert [s["kind"] for s in steps] == ["rate"] * 5
    assert [s["dropped"] for s in steps] == P.count_in_windows(run.dropped_ns, windows)
    assert [s["fell_behind"] for s in steps] == [False, False, False, False, True]
    assert ["fell behind" in s["flags"] for s in steps] == [False, False, False, False, True]
    for s, rate in zip(steps, P.K6_ARRIVAL_RATES):
        assert abs(s["intended_rps"] - rate) <= 0.05 * rate
        assert s["concurrency"] is None
    assert "coordinated omission" in p.stderr
    text = cli("summary", P.REAL / name).stdout
    assert "rate steps (open loop)" in text and "no model: the steps are request rates" in text


def test_rate_steps_survive_a_saved_reduced_run(tmp_path):
    from headroom.reduce import load_run_file, save_run

    run = reduce_run(P.REAL / "vegeta-rates.csv.gz")
    save_run(run, tmp_path / "r.npz")
    back = load_run_file(tmp_path / "r.npz")
    assert back.meta.step_rates == run.meta.step_rates
    assert [r["intended_rps"] for r in back.meta.step_rates] == [float(q) for q in P.VEGETA_RATES]


# --------------------------------------------------------------------------
# --concurrency: a stated plan


@pytest.mark.parametrize(
    ("text", "levels"),
    [("1:40:3", tuple(range(1, 41, 3))), ("1:4", (1, 2, 3, 4)), ("1,2,4,8", (1, 2, 4, 8)), (" 5 ", (5,))],
)
def test_concurrency_plan_syntax(text, levels):
    assert parse_concurrency(text) == levels
    assert parse_concurrency("1:40:3")[-1] == 40


@pytest.mark.parametrize("text", ["1:x", "0,1,2", "4:1", "1:10:0", "", "1:2:3:4", "1.5,2"])
def test_bad_concurrency_plan_is_one_line(text):
    with pytest.raises(HeadroomError, match="bad --concurrency"):
        parse_concurrency(text)


def test_hey_ramp_with_a_stated_plan_gets_a_model():
    path = DATA / "hey-ramp.csv"
    bare = cli("summary", path)
    assert "--concurrency 1:40:3" in bare.stdout  # the note says how to state it
    run = reduce_run(path, concurrency="1:3")
    assert run.meta.step_concurrency == (1, 2, 3)
    s = headroom.analyze(run)
    assert list(s.table.concurrency) == [1.0, 2.0, 3.0] and s.table.known_concurrency
    assert load_run(path, concurrency="1,2,3").meta.step_concurrency == (1, 2, 3)
    one_line_error(cli("summary", path, "--concurrency", "1,2"), "hey-ramp.csv", "states 2 levels", "3 steps")
    one_line_error(cli("summary", path, "--concurrency", "a:b"), "bad --concurrency")


def test_steps_option_with_a_stated_plan_matches_the_plan_windows():
    # k6's own VU levels thrown away (--steps cuts from the first request), the plan stated instead
    name = "k6-ramping-vus.csv.gz"
    run = reduce_run(P.REAL / name, steps="8s", concurrency="1,2,4,8,16")
    s = headroom.analyze(run)
    assert list(s.table.concurrency) == [1.0, 2.0, 4.0, 8.0, 16.0]
    windows = P.plan_windows(P.k6_csv(P.REAL / name).requests, P.CLOSED_LEVELS)
    assert [int(s.table.requests[k] + s.table.errors[k]) for k in range(5)] == [w.n for w in windows]
    assert [int(s.table.errors[k]) for k in range(5)] == [w.errors for w in windows]


def test_a_stated_plan_is_not_for_rate_steps(tmp_path):
    one_line_error(cli("summary", P.REAL / "vegeta-rates.csv.gz", "--concurrency", "1:5"), "request rates")
    p = cli("report", P.REAL / "vegeta-rates.csv.gz", "-o", tmp_path / "r.html", "--concurrency", "1:5")
    one_line_error(p, "request rates")  # the report reads with the same options, and refuses the same way


def test_a_stated_plan_that_differs_from_the_file_is_said():
    run = reduce_run(DATA / "jmeter.csv", concurrency="2,4,8")
    assert run.meta.step_concurrency == (2, 4, 8)
    assert any("replaces the file's own 1,2,4" in w for w in run.warnings)


# --------------------------------------------------------------------------
# messages


def test_hey_text_summary_is_named_as_heys(tmp_path):
    p = tmp_path / "hey.txt"
    p.write_text(
        "\nSummary:\n  Total:\t8.0040 secs\n  Slowest:\t0.0321 secs\n  Fastest:\t0.0002 secs\n"
        "  Average:\t0.0012 secs\n  Requests/sec:\t12345.6789\n\n  Total data:\t123456 bytes\n"
    )
    err = one_line_error(cli("summary", p), "hey.txt", "hey's text summary", "-o csv")
    assert "wrk" not in err


@pytest.mark.parametrize(
    ("sample", "forced", "found"),
    [("gatling-simulation.log", "jmeter-csv", "gatling"), ("k6.json", "gatling", "k6-json"),
     ("vegeta.csv", "k6", "vegeta-csv"), ("jmeter.xml", "oha-csv", "jmeter-xml")],
)  # fmt: skip
def test_a_forced_format_of_another_tool_names_that_tool_briefly(sample, forced, found):
    err = one_line_error(cli("summary", DATA / sample, "--format", forced), sample, f"--format {found}")
    assert len(err.split(f"{sample}: ", 1)[1]) <= 200, err  # besides the path


def test_hey_offsets_all_shifted_by_a_million_seconds_are_refused_naming_the_line(tmp_path):
    lines = (DATA / "hey-ramp.csv").read_text().splitlines()
    out = []
    for ln in lines:
        f = ln.split(",")
        if f[0] != "response-time":
            f[7] = f"{float(f[7]) + 1e6:.4f}"
        out.append(",".join(f))
    p = tmp_path / "hey.csv"
    p.write_text("\n".join(out) + "\n")
    one_line_error(cli("summary", p), "hey.csv:2:", "days after hey started")


def test_a_gatling_run_in_1970_names_the_file_and_line(tmp_path):
    text = (DATA / "gatling-simulation.log").read_text()
    first = int(re.search(r"\t(1\d{12})\t", text).group(1))
    moved = re.sub(r"\b1\d{12}\b", lambda m: str(int(m.group()) - first + 5000), text)
    p = tmp_path / "simulation.log"
    p.write_text(moved)
    one_line_error(cli("summary", p), "simulation.log:", "1970-01-01", "outside 2000-2200")


def test_hey_start_in_1970_is_said_naming_the_file():
    p = cli("summary", DATA / "oha.csv", "--hey-start", "1970-01-01T00:00:00Z")
    assert p.returncode == 0, p.stderr
    said = [ln for ln in p.stderr.splitlines() if "--hey-start 1970-01-01" in ln]
    assert len(said) == 1 and "oha.csv" in said[0] and "before 2000" in said[0], p.stderr

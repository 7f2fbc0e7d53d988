"""Gatling's open model at low arrival rates: real logs recorded here (tests/data/formats/real/gatling-open,
scripts/gatling/record_open.sh; Gatling 3.12.0 text, 3.13.5 and 3.16.0 binary; constantUsersPerSec 20, 40,
60, 80 for 8 s each, one request per user, against nginx).  Steps come from the users' arrival rate (USER
START records): 4 of 4, each within 5 % of its plan window, checked against the plan and against the logs
read independently (tests/reference.py for the binary log, a tab split for the text log)."""

from __future__ import annotations

import gzip
import re

import numpy as np
import pytest
from conftest import ROOT
from reference import read_gatling_binary

import headroom
from headroom import arrivals as A

OPEN = ROOT / "tests" / "data" / "formats" / "real" / "gatling-open"
REAL = ROOT / "tests" / "data" / "formats" / "real"
VERSIONS = ["3_16_0", "3_13_5", "3_12_0"]
RATES = [20, 40, 60, 80]
STEP_S = 8


def log(v: str):
    return OPEN / f"gatling{v}-OpenStagesSimulation.log.gz"


def users_and_requests(path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """USER START and END times and REQUEST starts (ms since the epoch), read without headroom."""
    with gzip.open(path, "rb") as f:
        head = f.read(1)
    if head == b"\x00":
        d = read_gatling_binary(path)  # times in ms since the run's start
        base = d["run_start_ms"]
        us = [base + t for _, s, t in d["users"] if s]
        ue = [base + t for _, s, t in d["users"] if not s]
        rq = [base + s for _, s, _, _, _ in d["requests"]]
    else:
        us, ue, rq = [], [], []
        with gzip.open(path, "rt") as f:
            for line in f:
                x = line.rstrip("\n").split("\t")
                if x[0] == "USER":
                    (us if x[2] == "START" else ue).append(int(x[3]))
                elif x[0] == "REQUEST":
                    rq.append(int(x[3]))
    return np.array(sorted(us)), np.array(sorted(ue)), np.array(sorted(rq))


def gatling_total(v: str) -> int:
    """Gatling's own count of requests (its console's last Global line)."""
    text = (OPEN / f"gatling{v}-OpenStagesSimulation-summary.txt").read_text()
    last = [ln for ln in text.splitlines() if ln.startswith("> Global")][-1]
    m = re.search(r"OK=(\d+)\s+KO=(\d+)", last)
    if m:
        return int(m[1]) + int(m[2])
    return int(last.split("|")[1].replace(",", ""))


@pytest.mark.parametrize("v", VERSIONS)
def test_four_of_four_rate_steps_within_5_percent_of_the_plan(v):
    s = headroom.to_json(headroom.analyze(headroom.reduce_run(log(v))))
    steps = s["steps"]
    assert len(steps) == 4
    total = 0
    for step, rate in zip(steps, RATES):
        n = step["requests"] + step["errors"]
        total += n
        assert abs(n - rate * STEP_S) <= 0.05 * rate * STEP_S, (v, step, rate)
        assert step["concurrency"] is None
    assert total == gatling_total(v) == sum(RATES) * STEP_S


@pytest.mark.parametrize("v", VERSIONS)
def test_steps_are_the_requests_between_their_edges_read_independently(v):
    """Every step holds exactly the requests that started between its start and the next step's start
    (the log read without headroom), and its rate is the users that arrived there per second."""
    run = headroom.reduce_run(log(v))
    s = headroom.to_json(headroom.analyze(run))
    us, _, rq = users_and_requests(log(v))
    edges = [np.datetime64(x["start"].rstrip("Z"), "ms").astype(np.int64) for x in s["steps"]]
    edges.append(np.iinfo(np.int64).max)
    for k, step in enumerate(s["steps"]):
        n = int(((rq >= edges[k]) & (rq < edges[k + 1])).sum())
        assert step["requests"] + step["errors"] == n
    rates = run.meta.step_rates
    for k, r in enumerate(rates[:-1]):
        dur_s = (edges[k + 1] - edges[k]) / 1000
        arrived = int(((us >= edges[k]) & (us < edges[k + 1])).sum())
        assert r["sent_rps"] == pytest.approx(arrived / dur_s, rel=0.02)
        assert abs(r["intended_rps"] - RATES[k]) <= 0.05 * RATES[k]


def idle(us: np.ndarray, ue: np.ndarray) -> float:
    """Share of the span with no user active, counted ms by ms (independent of arrivals.idle_share)."""
    lo, hi = int(us.min()), int(ue.max())
    active = np.zeros(hi - lo + 1, np.int64)
    np.add.at(active, us - lo, 1)
    np.add.at(active, ue - lo, -1)
    return float((np.cumsum(active)[:-1] <= 0).mean())


@pytest.mark.parametrize(
    "path,is_open",
    [(log(v), True) for v in VERSIONS]
    + [(REAL / f"gatling{v}-OpenRampSimulation.log.gz", True) for v in ("3_16_0", "3_13_5")]
    + [(REAL / f"gatling{v}-ClosedRampSimulation.log.gz", False) for v in ("3_16_0", "3_13_5")],
)
def test_open_and_closed_models_told_apart_by_their_users(path, is_open):
    """A closed model starts a user as another ends: its users are almost never all gone; an open
    model's are most of the time at these rates.  arrivals.idle_share against a ms-by-ms count."""
    us, ue, _ = users_and_requests(path)
    mine = A.idle_share(us, ue)
    assert mine == pytest.approx(idle(us, ue), abs=0.01)
    assert (mine > A.OPEN_IDLE_SHARE) == is_open
    assert mine > 0.5 if is_open else mine < 0.1


def test_without_the_event_edges_the_warm_up_misplaces_the_steps():
    """Planted: the whole-second bins (edges="bins") on the 3.16.0 log put a step's edge a bin off (the
    first users started late): some step is then more than 5 % off its plan window."""
    us, _, rq = users_and_requests(log("3_16_0"))
    inf = A.steps_from_arrivals(rq * 1_000_000, arrivals_ns=us * 1_000_000, transients="next")
    got = [s.n_requests for s in inf.steps]
    assert len(got) != 4 or any(abs(n - r * STEP_S) > 0.05 * r * STEP_S for n, r in zip(got, RATES))

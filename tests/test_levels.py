"""headroom.levels on what real tools wrote (tests/data/formats/real/).

Every check holds the steps levels.py infers against an independent reading
of the same file and of the plan that was run (plan_reader.py: standard
library only, plan windows from the first request + the planned durations),
or against the tool's own summary.  The arrays levels.py is fed are extracted
here by plan_reader, not by headroom's readers.
"""

from __future__ import annotations

import functools
import re

import numpy as np
import plan_reader as P
import pytest

from headroom import arrivals as A
from headroom import levels as L
from headroom import plan_steps as S

#: tolerance of per-step req/s and percentiles against the plan windows
TOL = 0.05
#: p99 is compared only for steps with this many successful requests (>= 20 above it)
P99_MIN = 2000


@functools.cache
def jmeter():
    return P.jmeter_csv(P.REAL / "jmeter-stacked.csv.gz")


@functools.cache
def gatling(name):
    return P.gatling(P.REAL / f"gatling-{name}.log.gz")


@functools.cache
def k6(name):
    reader = P.k6_json if name.endswith(".json.gz") else P.k6_csv
    return reader(P.REAL / name)


def step_windows(r: P.Requests, inf: L.StepInference) -> list[P.Window]:
    """Independent per-step figures over the requests levels.py put in each step."""
    members: list[list[int]] = [[] for _ in inf.steps]
    for i, k in enumerate(inf.step_id.tolist()):
        if k >= 0:
            members[k].append(i)
    bounds = [(s.start_ns, s.end_ns) for s in inf.steps]
    return P.stats(r, members, bounds, [s.level for s in inf.steps])


def close(a, b, unit) -> bool:
    """Within TOL of b, or within one unit of the file's resolution (integer-ms files)."""
    return abs(a - b) <= max(TOL * abs(b), unit)


def check_against_plan(
    r: P.Requests, inf: L.StepInference, levels, unit, durations_s=None, t0_ns=None
) -> None:
    plan = P.plan_windows(r, levels, durations_s=durations_s, t0_ns=t0_ns)
    got = step_windows(r, inf)
    assert inf.levels == tuple(float(v) for v in levels)
    for g, w in zip(got, plan):
        assert abs(g.rps - w.rps) <= TOL * w.rps, (g, w)
        assert close(g.p50, w.p50, unit), (g, w)
        if w.n - w.errors >= P99_MIN:
            assert close(g.p99, w.p99, unit), (g, w)
        # a step starts when its level is reached: JMeter threads start within 0.3 s, Gatling's
        # closed model adds its users over about 0.5 s
        # (the plan windows start at the first request, not at the tool's own start)
        assert abs(g.start_ns - w.start_ns) < 1 * P.NS, (g, w)


def arrays(r: P.Requests):
    return np.array(r.start_ns, np.int64), np.array(r.latency)


def test_jmeter_stacked_groups_give_the_planned_steps():
    r = jmeter()
    start, lat = arrays(r)
    inf = L.steps_from_levels(start, np.array(r.level), end_ns=start + lat.astype(np.int64) * 1_000_000)
    check_against_plan(r, inf, P.CLOSED_LEVELS, unit=1)
    # the shut-down walks allThreads down through 15 ... 1: no step stretches to the end
    for s in inf.steps:
        assert abs(s.duration_s - P.STEP_S) < 0.05 * P.STEP_S, s
    # every request is in a step or counted as a transient, and the note says how many
    assert inf.n_transient + sum(s.n_requests for s in inf.steps) == len(r.start_ns)
    assert 0 < inf.n_transient < 0.01 * len(r.start_ns)
    assert (
        inf.notes[0].startswith(f"{inf.n_transient} of {len(r.start_ns)} requests")
        and "left out" in inf.notes[0]
    )


def test_jmeter_concurrency_thread_group_steps():
    # jmeter-plugins' Concurrency Thread Group (a stepping plan in one thread group)
    r = P.jmeter_csv(P.REAL / "jmeter-stepping.csv.gz")
    start, lat = arrays(r)
    inf = L.steps_from_levels(start, np.array(r.level), end_ns=start + lat.astype(np.int64) * 1_000_000)
    # the thread group's schedule runs from its own marker in jmeter.log
    t0 = P.jmeter_log_time_ns(P.REAL / "jmeter-stepping.log", "Start supplying threads")
    started = P.jmeter_test_start_ns(P.REAL / "jmeter-stepping-summary.txt")
    assert 0 <= t0 - started < 2 * P.NS  # the log's clock agrees with the summary's
    check_against_plan(r, inf, P.STEPPING_LEVELS, 1, durations_s=P.STEPPING_DURATIONS_S, t0_ns=t0)
    assert 0 < inf.n_transient < 0.01 * len(start)


@pytest.mark.parametrize("tool", ["jmeter", "gatling"])
def test_transients_given_to_the_next_step_match_the_plan_counts(tool):
    if tool == "jmeter":
        r = jmeter()
        level = np.array(r.level)
    else:
        g = gatling("ClosedRampSimulation")
        r = g.requests
        level = L.gatling_active_users(g.user_start_ms, g.user_end_ms, np.array(r.start_ns) // 1_000_000)
    start, _ = arrays(r)
    inf = L.steps_from_levels(start, level, transients="next")
    plan = P.plan_windows(r, P.CLOSED_LEVELS)
    assert inf.n_transient == 0 and inf.levels == tuple(float(v) for v in P.CLOSED_LEVELS)
    moved = L.steps_from_levels(start, level).n_transient
    assert (
        inf.notes[0].startswith(f"{moved} of {len(start)} requests") and "step that follows" in inf.notes[0]
    )
    assert sum(s.n_requests for s in inf.steps) == len(r.start_ns)
    for a, b in zip(inf.steps, inf.steps[1:]):
        assert a.end_ns == b.start_ns  # the steps tile the run
    for s, w in zip(inf.steps, plan):
        assert abs(s.n_requests - w.n) <= TOL * w.n, (s, w)
        assert abs(s.rps - w.rps) <= TOL * w.rps, (s, w)


def test_gatling_closed_model_users_give_the_planned_steps():
    g = gatling("ClosedRampSimulation")
    start, lat = arrays(g.requests)
    ms = start // 1_000_000
    users = L.gatling_active_users(g.user_start_ms, g.user_end_ms, ms)
    inf = L.steps_from_levels(start, users, end_ns=start + lat.astype(np.int64) * 1_000_000)
    check_against_plan(g.requests, inf, P.CLOSED_LEVELS, unit=1)


def test_gatling_naive_user_count_does_not_find_the_plan():
    # the failure of issue 20: counting START <= t < END at each request's start
    g = gatling("ClosedRampSimulation")
    start, _ = arrays(g.requests)
    naive = L.gatling_active_users(g.user_start_ms, g.user_end_ms, start // 1_000_000, window_ms=0)
    plan = P.plan_windows(g.requests, P.CLOSED_LEVELS)
    in_16 = [i for i, t in enumerate(g.requests.start_ns) if t >= plan[4].start_ns]
    assert np.mean(naive[in_16] == 16) < 0.5  # most requests of the 16-user window see fewer
    robust = L.gatling_active_users(g.user_start_ms, g.user_end_ms, start // 1_000_000)
    assert robust.max() == 16 and np.all(robust <= 16)


@pytest.mark.parametrize("name", ["k6-ramping-vus.json.gz", "k6-ramping-vus.csv.gz"])
def test_k6_ramping_vus_from_the_vus_metric(name):
    run = k6(name)
    start, lat = arrays(run.requests)
    level = L.levels_from_samples(start, np.array(run.vus_ns), np.array(run.vus))
    end = start + np.rint(lat * 1e6).astype(np.int64)
    inf = L.steps_from_levels(start, level, end_ns=end)
    check_against_plan(run.requests, inf, P.CLOSED_LEVELS, unit=0.0)


def test_k6_vus_boundaries_refined_by_rate_are_closer_to_the_plan():
    run = k6("k6-ramping-vus.json.gz")
    start, _ = arrays(run.requests)
    plan = P.plan_windows(run.requests, P.CLOSED_LEVELS)
    err = {}
    for refine in (False, True):
        level = L.levels_from_samples(start, np.array(run.vus_ns), np.array(run.vus), refine=refine)
        inf = L.steps_from_levels(start, level)
        err[refine] = max(abs(s.start_ns - w.start_ns) for s, w in zip(inf.steps[1:], plan[1:]))
    assert err[True] < err[False]
    assert err[True] < 0.25 * P.NS


def _tool_total(summary: str, metric: str) -> int:
    m = re.search(rf"^\s*{metric}\.*:\s*(\d+)\s", summary, re.M)
    assert m, f"{metric} not in the tool's summary"
    return int(m.group(1))


@pytest.mark.parametrize("name", ["k6-ramping-arrival-rate.json.gz", "k6-ramping-arrival-rate.csv.gz"])
def test_k6_arrival_rate_steps_say_when_k6_fell_behind(name):
    run = k6(name)
    start, _ = arrays(run.requests)
    inf = S.steps_from_plan(
        start, [P.STEP_S] * 5, list(P.K6_ARRIVAL_RATES), kind="rate", dropped_ns=np.array(run.dropped_ns)
    )
    summary = (P.REAL / "k6-ramping-arrival-rate-summary.txt").read_text()
    assert len(run.dropped_ns) == _tool_total(summary, "dropped_iterations")
    assert sum(s.dropped for s in inf.steps) == len(run.dropped_ns)
    assert _tool_total(summary, "http_reqs") == len(run.requests.start_ns)
    plan = P.plan_windows(run.requests, P.K6_ARRIVAL_RATES)
    dropped = P.count_in_windows(run.dropped_ns, plan)
    for s, w, d in zip(inf.steps, plan, dropped):
        assert s.n_requests == w.n
        assert s.dropped == d
        assert abs(s.sent_rps - w.rps) <= 1e-9 * w.rps
    # the last step (400/s with maxVUs 8) is far behind; the first two are not
    assert dropped[-1] > 0.2 * 400 * P.STEP_S and inf.steps[-1].fell_behind
    assert dropped[0] == dropped[1] == 0 and inf.steps[0].fell_behind is inf.steps[1].fell_behind is False
    assert "fell behind schedule" in inf.notes[-1]


def test_gatling_open_model_arrivals_hold_the_planned_rates():
    g = gatling("OpenRampSimulation")
    start, _ = arrays(g.requests)
    arrivals = np.array(g.user_start_ms, np.int64) * 1_000_000
    inf = S.steps_from_plan(
        start, [P.STEP_S] * 5, list(P.GATLING_OPEN_RATES), kind="rate", arrivals_ns=arrivals,
        t0_ns=int(arrivals.min()),
    )  # fmt: skip
    assert len(g.user_start_ms) == len(g.requests.start_ns)  # one request per user
    for s in inf.steps:
        assert abs(s.sent_rps - s.intended_rps) <= TOL * s.intended_rps, s
        assert s.fell_behind is False and s.dropped is None


def _vegeta_report() -> dict[str, tuple[int, float]]:
    """vegeta's own report per attack: (requests, rate)."""
    text = (P.REAL / "vegeta-summary.txt").read_text()
    out = {}
    for block in text.split("== ")[1:]:
        name = block.split()[0]
        m = re.search(r"Requests\s+\[total, rate, throughput\]\s+(\d+), ([\d.]+),", block)
        out[name] = (int(m.group(1)), float(m.group(2)))
    return out


def test_vegeta_attacks_are_rate_steps_with_vegetas_own_rate():
    r = P.vegeta_csv(P.REAL / "vegeta-rates.csv.gz")
    names = sorted(set(r.group), key=lambda n: min(t for t, g in zip(r.start_ns, r.group) if g == n))
    code = {n: k for k, n in enumerate(names)}
    inf = S.steps_from_groups(
        np.array(r.start_ns), np.array([code[g] for g in r.group]),
        intended_rps=[S.rate_from_name(n) for n in names],
    )  # fmt: skip
    report = _vegeta_report()
    assert [s.intended_rps for s in inf.steps] == [float(v) for v in P.VEGETA_RATES]
    for s, n in zip(inf.steps, names):
        total, rate = report[n]
        assert s.n_requests == total
        assert abs(s.sent_rps - rate) <= 0.001 * rate, (s, rate)
        assert s.fell_behind == (rate < (1 - TOL) * s.intended_rps)


def test_a_level_interrupted_by_a_transient_is_still_one_step():
    # real JMeter levels with 0.2 s of the 4-thread step read as 5 threads (a thread restarting)
    r = jmeter()
    start, _ = arrays(r)
    level = np.array(r.level)
    base = L.steps_from_levels(start, level)
    s4 = base.steps[2]
    hit = (start >= s4.start_ns + 3 * P.NS) & (start < s4.start_ns + 3 * P.NS + P.NS // 5)
    assert hit.sum() > 1000
    level[hit] = 5
    inf = L.steps_from_levels(start, level)
    assert inf.levels == base.levels
    assert inf.steps[2].n_requests == s4.n_requests  # the interruption's requests stay in the step
    assert (inf.steps[2].start_ns, inf.steps[2].end_ns) == (s4.start_ns, s4.end_ns)


def test_a_ramp_up_and_down_holds_each_level_twice():
    # the real JMeter ramp followed by its mirror image in time: 1 2 4 8 16 8 4 2 1
    r = jmeter()
    start, _ = arrays(r)
    level = np.array(r.level)
    t_max = int(start.max())
    both_t = np.concatenate((start, 2 * t_max - start[::-1] + P.NS // 10))
    both_l = np.concatenate((level, level[::-1]))
    inf = L.steps_from_levels(both_t, both_l)
    assert inf.levels == (1, 2, 4, 8, 16, 8, 4, 2, 1)
    assert any("held at two separate times" in n for n in inf.notes)
    first, second = inf.steps[1], inf.steps[-2]
    assert abs(first.n_requests - second.n_requests) <= 0.01 * first.n_requests


def test_too_short_a_dwell_gives_no_steps_and_says_so():
    r = jmeter()
    start, _ = arrays(r)
    inf = L.steps_from_levels(start, np.array(r.level), min_dwell_s=2 * P.STEP_S)
    assert inf.steps == () and inf.n_transient == len(start)
    assert any("no level held" in n for n in inf.notes)


def test_open_model_read_as_concurrency_says_it_looks_open():
    g = gatling("OpenRampSimulation")
    start, _ = arrays(g.requests)
    users = L.gatling_active_users(g.user_start_ms, g.user_end_ms, start // 1_000_000)
    inf = L.steps_from_levels(start, users)
    assert inf.levels != P.CLOSED_LEVELS
    assert any("open-loop (rate) ramp?" in n for n in inf.notes)


def check_rates_against_plan(r: P.Requests, inf: L.StepInference, rates) -> None:
    plan = P.plan_windows(r, rates)
    got = step_windows(r, inf)
    assert len(inf.steps) == len(rates)
    for s, g, w, rate in zip(inf.steps, got, plan, rates):
        assert abs(g.rps - w.rps) <= TOL * w.rps, (g, w)
        assert close(g.p50, w.p50, 0.0) or close(g.p50, w.p50, 1), (g, w)
        assert abs(s.intended_rps - rate) <= TOL * rate, (s, rate)
        assert abs(s.start_ns - w.start_ns) < 0.5 * P.NS


def test_gatling_open_model_rate_steps_found_from_user_arrivals():
    g = gatling("OpenRampSimulation")
    start, _ = arrays(g.requests)
    inf = A.steps_from_arrivals(start, arrivals_ns=np.array(g.user_start_ms, np.int64) * 1_000_000)
    check_rates_against_plan(g.requests, inf, P.GATLING_OPEN_RATES)
    # Gatling's log has no dropped work: the intended rate is the achieved one, no verdict
    assert all(s.fell_behind is None and s.dropped is None for s in inf.steps)


@pytest.mark.parametrize("name", ["k6-ramping-arrival-rate.json.gz", "k6-ramping-arrival-rate.csv.gz"])
def test_k6_arrival_rate_steps_found_without_the_plan(name):
    run = k6(name)
    start, _ = arrays(run.requests)
    inf = A.steps_from_arrivals(start, dropped_ns=np.array(run.dropped_ns))
    check_rates_against_plan(run.requests, inf, P.K6_ARRIVAL_RATES)
    plan = P.plan_windows(run.requests, P.K6_ARRIVAL_RATES)
    dropped = P.count_in_windows(run.dropped_ns, plan)
    assert [s.dropped for s in inf.steps] == dropped
    assert [s.fell_behind for s in inf.steps] == [False, False, False, False, True]
    tiled = A.steps_from_arrivals(start, dropped_ns=np.array(run.dropped_ns), transients="next")
    assert tiled.n_transient == 0 and sum(s.n_requests for s in tiled.steps) == len(start)
    assert [s.fell_behind for s in tiled.steps] == [False, False, False, False, True]


def test_oha_rate_files_are_rate_steps_that_kept_their_schedule():
    files = [P.REAL / "oha-rates" / f"oha-q{q}.csv.gz" for q in P.OHA_RATES]
    runs = [P.oha_csv(f) for f in files]
    # oha's start times are relative to each run: lay the runs end to end
    start, group, offset = [], [], 0
    for k, r in enumerate(runs):
        start += [t + offset for t in r.start_ns]
        group += [k] * len(r.start_ns)
        offset += max(r.start_ns) + P.NS
    names = [f.name.removesuffix(".csv.gz") for f in files]
    inf = S.steps_from_groups(
        np.array(start), np.array(group), intended_rps=[S.rate_from_name(n) for n in names]
    )
    for s, r, q in zip(inf.steps, runs, P.OHA_RATES):
        own = len(r.start_ns) / ((max(r.start_ns) - min(r.start_ns)) / P.NS)
        assert s.n_requests == len(r.start_ns)
        assert abs(s.sent_rps - own) <= 1e-9 * own
        assert s.intended_rps == q and abs(own - q) <= TOL * q and s.fell_behind is False

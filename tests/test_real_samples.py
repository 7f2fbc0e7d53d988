"""headroom's readers on the real samples of tests/data/formats/real/.

Counts (total requests, failed requests) are checked exactly against the
independent reader in plan_reader.py.  The readers' steps (headroom/levels.py
wired into headroom/formats/) are held against the plan's windows read by
plan_reader.py: each planned level found once, with its concurrency or rate,
per-step req/s, p50 and p99 within 5 % (or one unit of an integer-ms file).
"""

from __future__ import annotations

import functools

import numpy as np
import plan_reader as P
import pytest

from headroom import formats as F

#: tolerance of per-step figures against the plan windows
TOL = 0.05
#: p99 is compared only for steps with this many successful requests (>= 20 above it)
P99_MIN = 2000

#: sample -> (expected format, independent reader, planned levels, kind)
SAMPLES = {
    "jmeter-stacked.csv.gz": ("jmeter-csv", P.jmeter_csv, P.CLOSED_LEVELS, "concurrency"),
    "jmeter-stacked.xml.gz": ("jmeter-xml", P.jmeter_xml, P.CLOSED_LEVELS, "concurrency"),
    "jmeter-stepping.csv.gz": ("jmeter-csv", P.jmeter_csv, P.STEPPING_LEVELS, "concurrency"),
    "gatling-ClosedRampSimulation.log.gz": (
        "gatling", lambda p: P.gatling(p).requests, P.CLOSED_LEVELS, "concurrency"),
    "gatling-OpenRampSimulation.log.gz": (
        "gatling", lambda p: P.gatling(p).requests, P.GATLING_OPEN_RATES, "rate"),
    "k6-ramping-vus.json.gz": ("k6-json", lambda p: P.k6_json(p).requests, P.CLOSED_LEVELS, "concurrency"),
    "k6-ramping-vus.csv.gz": ("k6-csv", lambda p: P.k6_csv(p).requests, P.CLOSED_LEVELS, "concurrency"),
    "k6-ramping-arrival-rate.json.gz": (
        "k6-json", lambda p: P.k6_json(p).requests, P.K6_ARRIVAL_RATES, "rate"),
    "k6-ramping-arrival-rate.csv.gz": (
        "k6-csv", lambda p: P.k6_csv(p).requests, P.K6_ARRIVAL_RATES, "rate"),
    "vegeta-rates.csv.gz": ("vegeta-csv", P.vegeta_csv, P.VEGETA_RATES, "rate"),
    **{f"oha-rates/oha-q{q}.csv.gz": ("oha-csv", P.oha_csv, (q,), "one rate") for q in P.OHA_RATES},
}  # fmt: skip
#: the XML JTL (1.2 M samples) is slow to parse twice: counts only
STEPPED = [n for n in SAMPLES if not n.endswith(".xml.gz")]


@functools.cache
@functools.cache  # parsed once a session (the XML parse of jmeter-stacked.xml.gz alone takes 10-20 s)
def independent(name: str) -> P.Requests:
    return SAMPLES[name][1](P.REAL / name)


@functools.cache
def table(name: str):
    path = P.REAL / name
    return F.read_table(path, F.detect(path))


def failed(t) -> np.ndarray:
    """headroom's failed requests: ok False, or without ok a status outside 2xx."""
    if t.ok is not None:
        return ~t.ok
    return (t.status < 200) | (t.status > 299)


@pytest.mark.parametrize("name", list(SAMPLES))
def test_detected_and_counted_exactly(name):
    fmt = SAMPLES[name][0]
    assert F.detect(P.REAL / name) == fmt
    t, r = table(name), independent(name)
    assert len(t.start_ns) == len(r.start_ns)
    assert int(failed(t).sum()) == sum(1 for ok in r.ok if not ok)
    if t.relative:  # oha: seconds from the run's start, read to the ns through floats
        assert np.allclose(np.sort(t.start_ns), sorted(r.start_ns), rtol=0, atol=1000)
    else:
        assert sorted(t.start_ns.tolist()) == sorted(r.start_ns)


@pytest.mark.parametrize("name", [n for n in SAMPLES if not n.startswith("oha")])
def test_every_sample_has_the_planned_error_mix(name):
    # the plans ask ~3 % 404, ~2 % 503, ~1 % connection refused (Gatling: KO without a code)
    r = independent(name)
    n = len(r.start_ns)
    share = sum(1 for ok in r.ok if not ok) / n
    assert 0.03 < share < 0.10, share
    if r.code[0] != -1:
        for code, lo, hi in ((404, 0.015, 0.045), (503, 0.01, 0.03), (0, 0.003, 0.02)):
            assert lo < r.code.count(code) / n < hi, (code, r.code.count(code) / n)


def _reader_steps(t):
    """(level, req/s over first start .. last end) of every step of a reader's table."""
    out = []
    for k in range(len(t.step_names)):
        sel = t.step == k
        st = t.start_ns[sel]
        end = st + np.rint(t.latency_s[sel] * 1e9).astype(np.int64)
        level = t.step_concurrency[k] if t.step_concurrency else None
        out.append((level, sel.sum() / ((end.max() - st.min()) / P.NS)))
    return out


def _reader_percentiles(t, unit_s: float):
    """(p50, p99) nearest-rank of the successful requests of every reader step, in the file's unit."""
    bad = failed(t)
    out = []
    for k in range(len(t.step_names)):
        good = np.sort(t.latency_s[(t.step == k) & ~bad])
        out.append(tuple(float(P.nearest_rank(good.tolist(), p)) / unit_s for p in (50, 99)))
    return out


def _close(a, b, unit) -> bool:
    return abs(a - b) <= max(TOL * abs(b), unit)


def _check_percentiles(name, t, windows):
    # the plan reader keeps the file's unit: JMeter and Gatling integer ms (one unit of slack),
    # k6 float ms, vegeta ns
    unit_s, slack = (1e-3, 1) if name.startswith(("jmeter", "gatling")) else (1e-3, 0)
    for (p50, p99), w in zip(_reader_percentiles(t, unit_s), windows):
        assert _close(p50, w.p50, slack), (name, p50, w)
        if w.n - w.errors >= P99_MIN:
            assert _close(p99, w.p99, slack), (name, p99, w)


@pytest.mark.parametrize("name", [n for n in STEPPED if SAMPLES[n][3] == "concurrency"])
def test_reader_finds_the_planned_concurrency_steps(name):
    t, r = table(name), independent(name)
    steps = _reader_steps(t)
    assert [lv for lv, _ in steps] == list(SAMPLES[name][2])
    durations, t0 = None, None
    if "stepping" in name:
        durations = P.STEPPING_DURATIONS_S
        t0 = P.jmeter_log_time_ns(P.REAL / "jmeter-stepping.log", "Start supplying threads")
    windows = P.plan_windows(r, SAMPLES[name][2], durations_s=durations, t0_ns=t0)
    for (_, rps), w in zip(steps, windows):
        assert abs(rps - w.rps) <= TOL * w.rps, (name, rps, w)
    _check_percentiles(name, t, windows)
    assert t.step_rates is None


@pytest.mark.parametrize("name", [n for n in STEPPED if SAMPLES[n][3] == "rate" and "vegeta" not in n])
def test_reader_finds_the_planned_rate_steps(name):
    # an open-loop ramp's steps are its rates: as many steps as planned, each about as
    # long as planned (today: steps per active-user/VU count, or no rate at all)
    t, r = table(name), independent(name)
    steps = _reader_steps(t)
    assert len(steps) == len(SAMPLES[name][2])
    assert t.step_concurrency is None or all(c is None for c in t.step_concurrency)
    windows = P.plan_windows(r, SAMPLES[name][2])
    for (_, rps), w in zip(steps, windows):
        assert abs(rps - w.rps) <= TOL * w.rps, (name, rps, w)
    _check_percentiles(name, t, windows)
    # the intended rate of every step is the plan's (found from arrivals + dropped work)
    for rate, plan in zip(t.step_rates, SAMPLES[name][2]):
        assert abs(rate["intended_rps"] - plan) <= TOL * plan, (rate, plan)
    if name.startswith("k6"):
        # k6 says what it dropped: per step the dropped_iterations of the plan window, and only
        # the 400 it/s step (1,138 dropped, 8 VUs) fell behind
        run = (P.k6_json if name.endswith(".json.gz") else P.k6_csv)(P.REAL / name)
        assert [x["dropped"] for x in t.step_rates] == P.count_in_windows(run.dropped_ns, windows)
        assert [x["fell_behind"] for x in t.step_rates] == [False, False, False, False, True]
        assert any("fell behind schedule" in w and "coordinated omission" in w for w in t.warnings)
    else:  # Gatling's log has no dropped work: no verdict
        assert all(x["fell_behind"] is None and x["dropped"] is None for x in t.step_rates)


def test_vegeta_reader_steps_are_the_attacks_vegeta_reported():
    # vegeta's attacks are separate runs: their steps come from the attack names (already read);
    # the counts per step are vegeta's own report's
    import re

    t = table("vegeta-rates.csv.gz")
    text = (P.REAL / "vegeta-summary.txt").read_text()
    report = {
        b.split()[0]: int(re.search(r"\[total, rate, throughput\]\s+(\d+),", b).group(1))
        for b in text.split("== ")[1:]
    }
    assert t.step_names == [f"rate{r}" for r in P.VEGETA_RATES]
    assert [int((t.step == k).sum()) for k in range(len(t.step_names))] == [report[n] for n in t.step_names]


def test_jmeter_xml_na_gives_the_same_steps_as_the_csv_allthreads():
    # the XML JTL of the same run (Simple Data Writer): levels.py on its `na` attributes
    from headroom.levels import steps_from_levels

    csv_r, xml_r = independent("jmeter-stacked.csv.gz"), independent("jmeter-stacked.xml.gz")
    assert sorted(zip(csv_r.start_ns, csv_r.level)) == sorted(zip(xml_r.start_ns, xml_r.level))
    a = steps_from_levels(np.array(csv_r.start_ns), np.array(csv_r.level))
    b = steps_from_levels(np.array(xml_r.start_ns), np.array(xml_r.level))
    assert a.levels == b.levels == tuple(float(v) for v in P.CLOSED_LEVELS)
    assert [(s.start_ns, s.end_ns, s.n_requests) for s in a.steps] == [
        (s.start_ns, s.end_ns, s.n_requests) for s in b.steps
    ]


@pytest.mark.parametrize("sim", ["ClosedRampSimulation", "OpenRampSimulation"])
def test_gatling_own_report_counts_match(sim):
    import re

    text = (P.REAL / f"gatling-{sim}-report.txt").read_text()
    m = re.search(r"> request count\s+(\d+) \(OK=(\d+)\s+KO=(\d+)\s*\)", text)
    r = independent(f"gatling-{sim}.log.gz")
    ko = sum(1 for ok in r.ok if not ok)
    assert (int(m.group(1)), int(m.group(2)), int(m.group(3))) == (len(r.ok), len(r.ok) - ko, ko)

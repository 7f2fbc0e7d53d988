"""The capacity at the objective and its interval (issue 39, headroom/crossing.py).

Each figure is checked against an independent computation: scipy's isotonic regression, the
binomial's quantiles from scipy on the raw requests, Pearson's X**2 of per-second counts from the
raw requests, and, for coverage, simulated ramps whose true crossing is known.
"""

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT

from headroom import analyze, load_run
from headroom.crossing import dispersion, isotonic, percentile_interval, run_dispersion
from headroom.model import Requests, Run, RunMeta, parse_objective

NS = 1_000_000_000
RUN = ROOT / "data" / "runs" / "nginx-keepalive"


def test_isotonic_is_scipys_weighted_isotonic_regression():
    from scipy.optimize import isotonic_regression

    rng = np.random.default_rng(39)
    for n in (1, 2, 5, 40, 200):
        y = np.cumsum(rng.normal(0.1, 1.0, n))
        w = rng.uniform(0.1, 5.0, n)
        fit, block = isotonic(y, w)
        ref = isotonic_regression(y, weights=w).x
        assert fit == pytest.approx(ref, abs=1e-12)
        assert np.all(np.diff(fit) >= -1e-12)
        # a block is a run of equal fitted values: its fit is the weighted mean of its points
        for b in np.unique(block):
            k = block == b
            assert fit[k][0] == pytest.approx(np.average(y[k], weights=w[k]))


def test_percentile_interval_at_the_effective_n_from_the_raw_requests():
    from scipy.stats import binom

    run = load_run(str(RUN))
    t = analyze(run).table
    req = run.requests
    for phi in (1.0, 7.5):
        lo, hi, open_top = percentile_interval(t.latency, 99, 100, phi=phi)
        for k in range(req.n_steps):
            lat = np.sort(req.latency_s[req.step_offsets[k] : req.step_offsets[k + 1]])
            n = len(lat)
            n_eff = max(1, int(n / phi))
            # the 2.5 % and 97.5 % binomial quantiles at n_eff give the 1-based ranks, scaled back to n
            r_lo = max(1, int(binom.ppf(0.025, n_eff, 0.99)))
            r_hi = int(binom.ppf(0.975, n_eff, 0.99)) + 1
            lo_rank = max(1, math.floor(r_lo * n / n_eff))
            hi_rank = min(n, math.ceil(r_hi * n / n_eff))
            assert lo[k] == lat[lo_rank - 1] and hi[k] == lat[hi_rank - 1], (phi, k)
            assert open_top[k] == (math.ceil(r_hi * n / n_eff) > n or r_hi > n_eff)
            assert lo[k] <= t.latency.pct["p99"][k] <= hi[k]


def test_dispersion_is_pearsons_x2_of_the_raw_requests_per_second():
    run = load_run(str(RUN))
    obj = parse_objective("p99<=2ms")
    s = analyze(run, objective=obj)
    phi, df = run_dispersion(s.hist, s.buckets, s.table, obj)
    # recomputed from every request: its bucket (the summary's rule, one second from each step's
    # first request), the step's nearest-rank p99 from the sorted latencies, counts above it
    req, b = run.requests, s.buckets
    lat, bucket = req.latency_s, b.of_request
    step = b.step[bucket]
    x2, dof = 0.0, 0
    for k in range(req.n_steps):
        mine = step == k
        srt = np.sort(lat[mine])
        p99 = srt[math.ceil(0.99 * len(srt)) - 1]
        ids = np.unique(bucket[mine])
        n = np.array([np.sum(bucket[mine] == i) for i in ids])
        e = np.array([np.sum(lat[mine][bucket[mine] == i] > p99) for i in ids])
        p = e.sum() / n.sum()
        if len(ids) < 2 or not 0 < p < 1:
            continue
        x2 += float(np.sum((e - n * p) ** 2 / (n * p * (1 - p))))
        dof += len(ids) - 1
    assert df == dof and phi == pytest.approx(max(1.0, x2 / dof), rel=1e-9)
    assert phi > 5  # real requests cluster: a loaded machine's seconds differ far beyond the binomial


def _sim_run(seed, loads, *, n_per_s=300, secs=3, step_sd=0.1, sec_sd=0.15, req_sd=0.3, base=1e-3):
    """Steps of ``n_per_s`` requests a second; latency ``base * (1 + (load / 10)**2)`` times a factor
    per step, per second (requests of one second share it: autocorrelation) and per request."""
    rng = np.random.default_rng(seed)
    starts, lats, offs, t = [], [], [0], 1_700_000_000 * NS
    for x in loads:
        mu = base * (1 + (x / 10) ** 2) * np.exp(rng.normal(0, step_sd))
        for s in range(secs):
            starts.append(t + s * NS + np.sort(rng.integers(0, NS, n_per_s)))
            lats.append(
                np.round(mu * np.exp(rng.normal(0, sec_sd)) * np.exp(rng.normal(0, req_sd, n_per_s)), 5)
            )
        offs.append(offs[-1] + secs * n_per_s)
        t += (secs + 1) * NS
    req = Requests(np.concatenate(starts), np.concatenate(lats), np.array(offs))
    return Run(req, None, RunMeta("sim", "sim", {"concurrency": [int(x) for x in loads]}))


def _typical_log_p99_offset(n_per_s=300, secs=3, sec_sd=0.15, req_sd=0.3, reps=4000) -> float:
    """log p99 of a step minus log of its scale: the same at every load, its mean by simulation."""
    rng = np.random.default_rng(123)
    z = rng.normal(0, req_sd, (reps, secs, n_per_s)) + rng.normal(0, sec_sd, (reps, secs, 1))
    z = np.sort(z.reshape(reps, -1), axis=1)[:, math.ceil(0.99 * secs * n_per_s) - 1]
    return float(z.mean())


#: a dense ramp, and probes as a search makes them (grow, bisect, repeats near the crossing)
DESIGNS = {
    "dense": list(range(1, 31)),
    "search": [1, 2, 4, 8, 16, 32, 24, 20, 18, 19, 19, 18, 20, 19, 18, 19],
}


@pytest.mark.parametrize("design", sorted(DESIGNS))
def test_the_interval_covers_the_true_crossing_of_simulated_ramps(design):
    # the truth: where the typical step's p99 (the mean of its log over steps) reaches 10 ms
    g = _typical_log_p99_offset()
    true_load = 10 * math.sqrt(10e-3 / (1e-3 * math.exp(g)) - 1)
    covered, widths = 0, []
    n = 60
    for seed in range(n):
        a = analyze(_sim_run(seed, DESIGNS[design]), objective="p99<=10ms").capacity.at_objective
        assert a.status == "crossed"
        lo = -math.inf if a.load_low is None else a.load_low
        hi = math.inf if a.load_high is None else a.load_high
        covered += lo <= true_load <= hi
        widths.append((hi - lo) / true_load)
        assert a.low <= a.rps <= a.high
    # 95 % intervals: 57 of 60 expected; 53 is 2.4 binomial standard deviations below
    assert covered >= 53, (covered, n)
    assert np.median(widths) < 0.4  # and not by being uselessly wide


@pytest.mark.parametrize(("secs", "sec_sd", "least"), [(3, 0.10, 0.9), (10, 0.25, 0.85), (3, 0.25, 0.6)])
def test_the_step_interval_covers_only_when_the_seconds_dispersion_is_counted(secs, sec_sd, least):
    # steps whose seconds share a latency factor: the order-statistic interval of independent requests
    # covers the typical p99 far less often than 95 %; at the run's dispersion phi it covers about
    # 95 %, except with few seconds that differ much (3 s steps, sd 0.25: about 70 %): there the
    # seconds' spread is no binomial, and the capacity's interval rests on the steps' noise tau too
    g = _typical_log_p99_offset(secs=secs, sec_sd=sec_sd, reps=1500)
    run = _sim_run(7, [10] * 60, step_sd=0.0, sec_sd=sec_sd, secs=secs)
    s = analyze(run, objective="p99<=10ms")
    phi, _ = run_dispersion(s.hist, s.buckets, s.table, s.capacity.objective)
    truth = 1e-3 * 2 * math.exp(g)  # load 10: scale base * (1 + 1)
    cover = {}
    for f in (1.0, phi):
        lo, hi, _ = percentile_interval(s.table.latency, 99, 100, phi=f)
        cover[f] = float(np.mean((lo <= truth) & (truth <= hi)))
    assert phi > 2
    assert cover[1.0] < 0.8 and cover[phi] >= least and cover[phi] > cover[1.0] + 0.2, cover


def test_dispersion_of_independent_requests_is_one():
    run = _sim_run(3, [5] * 20, step_sd=0.0, sec_sd=0.0)
    s = analyze(run, objective="p99<=10ms")
    phi, df = run_dispersion(s.hist, s.buckets, s.table, s.capacity.objective)
    assert df == 20 * 2 and phi < 1.6
    # and from the histogram entries directly: every bucket exactly at the binomial's mean gives X2 = 0
    e = dispersion(
        np.array([0, 0]), np.array([0, 1]), np.array([1.0, 1.0]), np.array([10, 10]), np.array([2.0])
    )
    assert e == (1.0, 0)  # nothing above the percentile: no degrees of freedom


def test_steps_in_any_order_give_the_same_crossing():
    # a search records its loads out of order: the same steps permuted give the same figures
    run = _sim_run(11, [1, 4, 8, 12, 14, 16, 18, 19, 20, 22, 26])
    req = run.requests
    order = [5, 0, 9, 2, 7, 1, 10, 3, 8, 4, 6]
    parts = [(req.step_offsets[k], req.step_offsets[k + 1]) for k in order]
    idx = np.concatenate([np.arange(a, b) for a, b in parts])
    offs = np.concatenate([[0], np.cumsum([b - a for a, b in parts])])
    conc = [run.meta.fields["concurrency"][k] for k in order]
    perm = Run(
        Requests(req.start_ns[idx], req.latency_s[idx], offs), None, RunMeta("p", "p", {"concurrency": conc})
    )
    a = analyze(run, objective="p99<=10ms").capacity.at_objective
    b = analyze(perm, objective="p99<=10ms").capacity.at_objective
    assert a.status == b.status == "crossed"
    for key in ("rps", "low", "high", "load", "load_low", "load_high"):
        assert getattr(b, key) == pytest.approx(getattr(a, key), rel=1e-12), key
    # the steps it lies between are the same steps, by their new positions
    assert [conc[i] for i in b.steps] == [run.meta.fields["concurrency"][i] for i in a.steps]


def test_summary_json_gives_the_interval_of_the_throughput_at_the_objective(tmp_path):
    out = tmp_path / "s.json"
    args = [
        sys.executable,
        "-m",
        "headroom",
        "summary",
        str(RUN),
        "--objective",
        "p99<=2ms",
        "--json",
        str(out),
    ]
    p = subprocess.run(args, capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    at = json.loads(out.read_text())["capacity"]["at_objective"]
    assert at["status"] == "crossed" and at["low"] < at["rps"] < at["high"]
    assert at["load_low"] < at["load"] < at["load_high"] and at["interval"]["confidence"] == 0.95
    held = analyze(load_run(str(RUN)), objective="p99<=10ms").capacity.at_objective
    assert held.status == "held" and held.low is None and held.high is None


def test_throughput_is_read_between_steps_not_beyond_them():
    """At the interval's ends a load can lie beside a cluster of probes (a search's bisection):
    the line there runs through the nearest load on each side as well, so it is read between
    steps; checked against weighted least squares by numpy's lstsq on the chosen steps."""
    from headroom.crossing import Throughput

    rng = np.random.default_rng(7)
    loads = np.array([1, 2, 4, 8, 16, 16, 17, 18, 18, 18, 20, 20, 24, 24, 32], float)
    y = np.log(3600 * np.minimum(1.0, loads / 3)) + rng.normal(0, 0.04, len(loads))
    h = rng.uniform(0.5, 1.0, len(loads))
    t = Throughput(np.log(loads), y, h, tau=0.05)

    def wls(keep, x0):
        x = np.log(loads[keep]) - math.log(x0)
        a = np.column_stack([np.ones(keep.sum()), x]) * np.sqrt(h[keep])[:, None]
        coef = np.linalg.lstsq(a, y[keep] * np.sqrt(h[keep]), rcond=None)[0]
        return coef[0], 0.05 * math.sqrt(np.linalg.inv(a.T @ a)[0, 0])

    # 14.2: within x1.3 lie 16, 17, 18 only; the nearest load below, 8, joins them
    keep = np.isin(loads, [8, 16, 17, 18])
    assert t.at(14.2) == pytest.approx(wls(keep, 14.2), rel=1e-9)
    beyond = wls(np.isin(loads, [16, 17, 18]), 14.2)[1]  # the line through one side only
    assert t.at(14.2)[1] < 0.5 * beyond
    # 19: both neighbours (18, 20) lie within the window already: the window alone
    assert t.at(19.0) == pytest.approx(wls(np.isin(loads, [16, 17, 18, 20, 24]), 19.0), rel=1e-9)

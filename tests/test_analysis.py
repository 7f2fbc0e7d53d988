import math
import re
from fractions import Fraction

import numpy as np
import pytest
import reference
from conftest import BASE_NS, RUN_NAMES, RUNS, ts, write_run
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from headroom import load_run, parse_objective
from headroom.aggregate import cpu_over, per_bucket, steps_table
from headroom.binning import bin_edges, bucket_hist, by_throughput, encode_latency, nice_width
from headroom.model import PERCENTILES, CpuSamples, Requests, Run, RunMeta
from headroom.summary import analyze, to_json
from headroom.text import capacity_rows, format_summary

NS = 10**9


def nearest_rank(values, num, den):
    """Independent percentile: the ceil(q*n)-th smallest value, with exact fractions."""
    v = np.sort(np.asarray(values))
    r = max(1, math.ceil(Fraction(num, den) * len(v)))
    return v[r - 1]


def test_bucket_rule_by_hand(tmp_path):
    s0 = [(ts(0.1 * i), "0.0010") for i in range(24)]  # 0.0 .. 2.3 s, ends 2.301 s
    s1 = [(ts(5 + 0.1 * i), "0.0020") for i in range(7)]  # 0.602 s long: one short bucket
    s2 = [(ts(10 + 0.1 * i), "0.0010") for i in range(5)] + [(ts(12 + 0.1 * i), "0.0010") for i in range(10)]
    run = load_run(write_run(tmp_path / "r", [s0, s1, s2]))
    b = per_bucket(run, bucket_s=1.0)
    # step 0: [0,1) 10 req; the 0.301 s tail is merged: [1, 2.301) holds 14 req
    # step 1: a single bucket of 0.602 s; step 2: 5 req, an EMPTY second, then 10 req in 0.901 s
    np.testing.assert_array_equal(b.step, [0, 0, 1, 2, 2, 2])
    np.testing.assert_array_equal(b.count, [10, 14, 7, 5, 0, 10])
    np.testing.assert_allclose(b.length_s, [1.0, 1.301, 0.602, 1.0, 1.0, 0.901])
    np.testing.assert_allclose(b.rps, [10, 14 / 1.301, 7 / 0.602, 5, 0, 10 / 0.901])
    np.testing.assert_array_equal(b.start_ns - BASE_NS, [0, NS, 5 * NS, 10 * NS, 11 * NS, 12 * NS])
    assert b.kept == len(run.requests)
    # with a 0.25 minimum the 0.301 s tail stands as its own bucket: 4 requests
    b2 = per_bucket(run, bucket_s=1.0, min_partial=0.25)
    np.testing.assert_array_equal(b2.count[:3], [10, 10, 4])
    st_ = steps_table(run)
    np.testing.assert_allclose(st_.rps, [24 / 2.301, 7 / 0.602, 15 / 2.901])


@pytest.mark.parametrize("name", RUN_NAMES)
def test_bucket_counts_match_independent_count(name):
    run = load_run(RUNS / name)
    b = per_bucket(run, bucket_s=0.5)
    ref = reference.read_perf(RUNS / name / "perfResults.csv.gz")
    expect = []
    for sec in ref:
        starts = np.array([r[0] for r in sec])
        ends = starts + np.array([round(r[1] * 1e9) for r in sec])
        t0, dur = starts.min(), ends.max() - starts.min()
        w = NS // 2
        nfull, rem = int(dur // w), int(dur % w)
        edges = [t0 + k * w for k in range(nfull + 1)] + [t0 + dur + 1]
        counts = [int(np.sum((starts >= lo) & (starts < hi))) for lo, hi in zip(edges[:-1], edges[1:])]
        # counts now has nfull + 1 entries; the last is the partial tail
        if rem < w / 2:
            counts[-2] += counts[-1]
            counts.pop()
        expect += counts
    np.testing.assert_array_equal(b.count, expect)
    assert b.kept == len(run.requests)


def test_cpu_alignment_time_weighted():
    cpu = CpuSamples(
        time_ns=np.array([1, 2, 3, 4]) * NS,
        pct=np.array([10.0, 20, 30, 40]),
        per_cpu=None,
        cores=1,
        source="x",
    )
    got = cpu_over(cpu, np.array([0.5, 1.0, 3.5, 3.8, -2.0]) * NS, np.array([1.0, 2.0, 1.0, 1.0, 1.0]))
    # sample at t covers (t-1, t]; the first one gets the median interval, 1 s
    np.testing.assert_allclose(got[:3], [(10 * 0.5 + 20 * 0.5), (20 + 30) / 2, 40])
    assert np.isnan(got[3]) and np.isnan(got[4])  # covered 0.2 s and 0 s of 1 s


@pytest.mark.parametrize("name", RUN_NAMES)
def test_bin_percentiles_match_numpy_on_real_runs(name):
    run = load_run(RUNS / name)
    s = analyze(run, bucket_s=1.0)
    b, bins = s.buckets, s.bins
    ref = reference.read_perf(RUNS / name / "perfResults.csv.gz")
    # assign every request to a bucket from the bucket table's own time spans
    lat_by_bin = [[] for _ in range(len(bins))]
    for i in range(len(b)):
        sec = ref[b.step[i]]
        lo = b.start_ns[i]
        hi = lo + round(b.length_s[i] * 1e9)
        last = i == len(b) - 1 or b.step[i + 1] != b.step[i]
        lat_by_bin[bins.of_bucket[i]] += [r[1] for r in sec if lo <= r[0] < hi or (last and r[0] >= lo)]
    assert sum(map(len, lat_by_bin)) == len(run.requests)
    for j, lats in enumerate(lat_by_bin):
        assert bins.latency.requests[j] == len(lats)
        if not lats:
            assert np.isnan(bins.latency.pct["p99"][j])
            continue
        for pname, num, den in PERCENTILES:
            assert bins.latency.pct[pname][j] == nearest_rank(lats, num, den), (pname, j)
        assert bins.latency.pct["p50"][j] == np.quantile(lats, 0.5, method="inverted_cdf")
        assert bins.latency.max_s[j] == max(lats)
        assert bins.latency.mean_s[j] == pytest.approx(np.mean(lats), rel=1e-12)
        assert bins.rps[j] == pytest.approx(len(lats) / bins.seconds[j])
    # bin CPU is the time-weighted mean of its buckets' CPU
    for j in range(len(bins)):
        m = (bins.of_bucket == j) & np.isfinite(b.cpu_pct)
        if m.any():
            assert bins.cpu_pct[j] == pytest.approx(np.average(b.cpu_pct[m], weights=b.length_s[m]))


def test_percentile_rank_is_exact():
    # p99.5 of 1000 values must be the 995th value, not the 996th (float ceil trap)
    lat = np.arange(1, 1001) * 1e-4
    codes = encode_latency(lat)
    from headroom.binning import quantiles

    counts = np.bincount(codes.codes, minlength=len(codes.values))[None, :]
    assert quantiles(counts, codes.values, 995, 1000)[0] == lat[994]
    assert quantiles(counts, codes.values, 999, 1000)[0] == lat[998]
    assert quantiles(counts, codes.values, 1, 2)[0] == lat[499]


def test_encode_latency_non_grid_values_fall_back_to_sort():
    lat = np.array([0.1234567891, 0.5, 0.1234567891, 1e-9])
    c = encode_latency(lat)
    np.testing.assert_array_equal(c.values[c.codes], lat)
    assert np.all(np.diff(c.values) > 0)


def test_bin_edges():
    assert nice_width(24_781) == 2500 and nice_width(27_000) == 5000
    e = bin_edges(np.array([4348.0, 29129.0]))
    assert e[0] == 2500 and e[-1] >= 29129 and np.allclose(np.diff(e), 2500)
    e = bin_edges(np.array([1.0, 2.0, 7.0]), bins=3)
    np.testing.assert_allclose(e, [1, 3, 5, 7])
    e = bin_edges(np.array([1500.0, 2100.0]), width=1000)
    np.testing.assert_allclose(e, [1000, 2000, 3000])


def synthetic_run(rates, latencies, seconds=2.0, cpu_pct=None):
    """Evenly spaced requests at known rates, every request of a step the same latency."""
    starts, lats, offs = [], [], [0]
    t = 0
    cpu_t, cpu_v = [], []
    for x, lat in zip(rates, latencies):
        n = int(x * seconds)
        starts.append(t + np.round(np.arange(n) * NS / x).astype(np.int64))
        lats.append(np.full(n, lat))
        offs.append(offs[-1] + n)
        if cpu_pct is not None:
            for k in range(int(seconds)):
                cpu_t.append(t + (k + 1) * NS)
                cpu_v.append(cpu_pct(x))
        t += int((seconds + 1) * NS)
    req = Requests(np.concatenate(starts), np.concatenate(lats), np.array(offs))
    cpu = None
    if cpu_pct is not None:
        cpu = CpuSamples(np.array(cpu_t), np.array(cpu_v), None, 1.0, "synthetic")
    return Run(req, cpu, RunMeta("synthetic", "synthetic", {"lower_concurrency": 1, "concurrency_step": 1}))


def usl_rps(n, lam, sigma, kappa):
    return lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))


def test_usl_fit_recovers_known_curve_and_its_figures():
    # steps at concurrency 1..16 driven exactly at USL throughputs; latency by Little's law
    lam, sigma, kappa = 1000.0, 0.05, 0.002
    conc = np.arange(1, 17)
    rates = usl_rps(conc, lam, sigma, kappa)
    run = synthetic_run(rates, conc / rates, cpu_pct=lambda x: 5 + x / 200)
    s = analyze(run, bin_width=1000)
    m = s.capacity.model
    assert (m.lambda_rps, m.sigma, m.kappa) == pytest.approx((lam, sigma, kappa), rel=0.02)
    # peak N* = sqrt((1 - sigma) / kappa) = 21.8: beyond the ramp, so capacity is X(16), a lower bound
    assert m.peak_concurrency == pytest.approx(math.sqrt((1 - sigma) / kappa), rel=0.02)
    assert not m.peak_reached
    assert m.capacity_rps == pytest.approx(rates[-1], rel=0.01)
    # knee: maximum of X(N)^2 / N, found here by brute force on a fine grid
    grid = np.linspace(1, 16, 150_001)
    n_knee = grid[np.argmax(usl_rps(grid, lam, sigma, kappa) ** 2 / grid)]
    assert m.knee_concurrency == pytest.approx(n_knee, rel=0.02)
    assert s.capacity.knee_rps == pytest.approx(usl_rps(n_knee, lam, sigma, kappa), rel=0.02)
    lo, hi = m.ci["capacity_rps"]
    assert lo <= m.capacity_rps <= hi
    # CPU rises 1 % per 200 req/s from 5 %: it never reaches 70 % (highest step ~9,700 req/s -> 53 %)
    assert s.capacity.rps_at_cpu_target is None and s.capacity.at_cpu_target.status == "not reached"
    assert s.capacity.cpu_max_pct == pytest.approx(5 + rates.max() / 200, rel=0.01)
    assert s.capacity.cpu_at_knee == pytest.approx(5 + usl_rps(n_knee, lam, sigma, kappa) / 200, rel=0.02)
    assert s.capacity.peak_step_rps == pytest.approx(rates.max(), rel=0.01)
    # the model's figures never exceed what the ramp measured by more than the fit's error
    assert s.capacity.knee_rps <= s.capacity.capacity_rps <= s.capacity.peak_step_rps * 1.01


def test_usl_fit_finds_a_peak_inside_the_ramp():
    lam, sigma, kappa = 500.0, 0.02, 0.01
    conc = np.arange(1, 21)  # synthetic_run's metadata: concurrency 1, 2, 3 ...
    rates = usl_rps(conc, lam, sigma, kappa)
    m = analyze(synthetic_run(rates, conc / rates, seconds=2.0)).capacity.model
    n_star = math.sqrt((1 - sigma) / kappa)
    assert m.peak_reached and m.peak_concurrency == pytest.approx(n_star, rel=0.02)
    assert m.capacity_rps == pytest.approx(usl_rps(n_star, lam, sigma, kappa), rel=0.01)


def test_cpu_target_is_interpolated_between_steps_and_never_extrapolated():
    rates = np.array([1000.0, 3000, 5000, 7000, 9000])
    run = synthetic_run(rates, 1e-3 * np.ones(5), cpu_pct=lambda x: x / 100)  # 10 % ... 90 %
    cap = analyze(run).capacity
    # 70 % CPU is the step at 7,000 req/s exactly; between 50 % (5,000) and 70 % (7,000)
    assert cap.rps_at_cpu_target == pytest.approx(7000, rel=0.01)
    low = analyze(synthetic_run(rates, 1e-3 * np.ones(5), cpu_pct=lambda x: x / 1000)).capacity
    assert low.rps_at_cpu_target is None and low.cpu_max_pct == pytest.approx(9.0, rel=0.01)


def test_objective_crossing_interpolates_between_steps():
    rates = np.array([1500, 2500, 3500, 4500, 5500, 6500])
    lat = np.array([1, 2, 3, 4, 5, 6]) * 1e-3
    run = synthetic_run(rates, lat)
    s = analyze(
        run,
        objective=parse_objective("p99<=4.5ms"),
        current_load_rps=2000,
        target_load_rps=20_000,
    )
    # step throughput = requests / (last response - first start), computed here independently
    x = np.array([int(r * 2.0) / ((int(r * 2.0) - 1) / r + lt) for r, lt in zip(rates, lat)])
    # the crossing's load is interpolated between the steps around it (concurrency 4 and 5, here
    # 1 + step index); the throughput there is read off a straight line in log-log through the three
    # loads nearest it (headroom.crossing.Throughput: fewer than three lie within x1.3 of 4.5)
    load = 4 + (4.5e-3 - 4e-3) / (5e-3 - 4e-3)
    slope, icpt = np.polyfit(np.log([4, 5, 6]), np.log(x[3:6]), 1)
    expect = math.exp(icpt + slope * math.log(load))
    assert expect == pytest.approx(x[3] + 0.5 * (x[4] - x[3]), rel=0.002)  # near the plain interpolation
    cap = s.capacity
    assert cap.at_objective.status == "crossed" and cap.at_objective.steps == (3, 4)
    assert cap.at_objective.load == pytest.approx(load)
    assert cap.rps_at_objective == pytest.approx(expect, rel=1e-9)
    assert cap.headroom_pct == pytest.approx(100 * (1 - 2000 / expect))
    assert cap.instances == math.ceil(20_000 / expect)
    held = analyze(run, objective=parse_objective("p99<=10ms")).capacity
    assert held.at_objective.lower_bound and held.rps_at_objective <= x.max()
    never = analyze(run, objective=parse_objective("p99<=0.5ms")).capacity
    assert never.rps_at_objective is None and never.at_objective.status == "at lowest step"
    # the percentile is fitted as a monotone function of load (issue 39): a lone step above the bound
    # between steps below it is pooled with them (1, 2, 7, 4, 5, 6 ms -> 1, 2, 5.2, 5.2, 5.2, 6 ms),
    # so the objective holds; the same spike at the top of the ramp breaks it there
    lat2 = lat.copy()
    lat2[2] = 7e-3
    one = analyze(synthetic_run(rates, lat2), objective=parse_objective("p99<=6.5ms")).capacity
    assert one.at_objective.status == "held"
    lat3 = lat.copy()
    lat3[5] = 7e-3
    top = analyze(synthetic_run(rates, lat3), objective=parse_objective("p99<=6.5ms")).capacity
    assert top.at_objective.status == "crossed" and top.at_objective.steps == (4, 5)


@st.composite
def random_runs(draw):
    n_steps = draw(st.integers(1, 5))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    starts, lats, offs, t = [], [], [0], 0
    for _ in range(n_steps):
        n = draw(st.integers(0, 400))
        span = draw(st.floats(0.05, 4.0))
        s = t + np.sort(rng.integers(0, int(span * NS), size=n))
        starts.append(rng.permutation(s))  # completion order: shuffled
        lats.append(np.round(rng.exponential(0.002, size=n), 4))
        offs.append(offs[-1] + n)
        t += int((span + draw(st.floats(0, 2))) * NS)
    start = np.concatenate(starts).astype(np.int64)
    lat = np.concatenate(lats)
    return Run(Requests(start, lat, np.array(offs)), None, RunMeta("h", "h", {}))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run=random_runs(), bucket=st.sampled_from([0.1, 0.25, 1.0, 2.0]), nbins=st.integers(1, 12))
def test_properties_buckets_bins_percentiles(run, bucket, nbins):
    if sum(np.diff(run.requests.step_offsets) >= 2) == 0:
        return
    b = per_bucket(run, bucket_s=bucket)
    counts = np.diff(run.requests.step_offsets)
    # counts per bucket sum to the kept requests (all requests of steps with >= 2)
    assert b.count.sum() == counts[counts >= 2].sum() == b.kept
    assert np.array_equal(np.bincount(b.of_request[b.of_request >= 0], minlength=len(b)), b.count)
    # every request starts inside its bucket (the last bucket of a step runs to the step's end)
    got = b.of_request >= 0
    lo = b.start_ns[b.of_request[got]]
    assert np.all(run.requests.start_ns[got] >= lo)
    assert np.all(run.requests.start_ns[got] <= lo + np.round(b.length_s[b.of_request[got]] * NS))
    assert np.all(b.length_s > 0)
    codes = encode_latency(run.requests.latency_s)
    bins = by_throughput(
        b, bucket_hist(b, run.requests.latency_s, codes, run.requests.step_offsets), bins=nbins
    )
    # bins partition the buckets
    assert len(bins.of_bucket) == len(b) and bins.buckets.sum() == len(b)
    assert np.all(
        (b.rps >= bins.rps_lo[bins.of_bucket] - 1e-9) & (b.rps <= bins.rps_hi[bins.of_bucket] + 1e-9)
    )
    assert bins.requests.sum() == b.kept
    # percentiles are non-decreasing in q and bounded by the max
    names = [p[0] for p in PERCENTILES]
    for j in np.nonzero(bins.requests)[0]:
        seq = [bins.latency.pct[n][j] for n in names] + [bins.latency.max_s[j]]
        assert all(x <= y for x, y in zip(seq, seq[1:]))


def test_usl_interval_always_contains_its_estimate():
    """Noisy ramps whose plain percentile interval missed the estimate (capacity, lambda) now hold it."""
    from headroom.scalability import bc_interval, fit_usl

    rng = np.random.default_rng(1)
    checked = 0
    for _ in range(120):
        n = np.arange(1, 10, 1.0)
        sigma, kappa, noise = rng.uniform(0, 0.3), rng.uniform(0, 0.02), rng.uniform(0.01, 0.5)
        x = 1000 * n / (1 + sigma * (n - 1) + kappa * n * (n - 1)) * np.exp(rng.normal(0, noise, len(n)))
        m = fit_usl(n, x)
        for key, ci in m.ci.items():
            est = getattr(m, key)
            if ci is not None:
                assert ci[0] <= est <= ci[1], (key, est, ci)
                checked += 1
    assert checked > 500
    # every resample on one side (a coefficient on its bound): closed at the estimate
    assert bc_interval(np.linspace(0.1, 0.2, 100), 0.0) == (0.0, pytest.approx(0.195, abs=0.01))
    # symmetric resamples around the estimate: the plain percentile interval
    boot = np.random.default_rng(2).normal(5.0, 1.0, 4000)
    lo, hi = bc_interval(boot, float(np.median(boot)))
    assert (lo, hi) == pytest.approx(tuple(np.quantile(boot, [0.025, 0.975])), abs=0.02)


def test_poor_fit_gives_no_headline_figure():
    """Throughput that jumps about with concurrency: the USL fit is kept but yields no capacity or knee."""
    conc = np.array([1, 4, 8, 12, 16, 20, 24, 28], float)
    rates = np.array([3000, 900, 4100, 1200, 3900, 1000, 4200, 1100], float)
    run = synthetic_run(rates, conc / rates)
    s = analyze(run)
    m = s.capacity.model
    assert m is not None and m.r2_log < 0.5 and not m.trusted
    cap = s.capacity
    assert cap.capacity_rps is None and cap.knee_rps is None and cap.max_useful_rps is None
    # the plateau falls back to the three highest steps, not to the model's 90 % point
    top3 = np.sort(np.argsort(-s.table.goodput_rps)[:3])
    assert cap.plateau_steps == tuple(int(i) for i in top3)
    doc = to_json(s)["capacity"]
    assert doc["capacity_rps"] is None and doc["knee_rps"] is None and doc["max_useful_rps"] is None
    assert doc["model"]["r2_log"] == pytest.approx(m.r2_log, rel=1e-5)
    rows = dict(capacity_rows(s))
    assert rows["modelled capacity (USL)"].startswith("none: the model fits poorly (R2(log)")
    assert "knee" not in rows["max useful throughput"] or rows["max useful throughput"].startswith("unknown")


def test_order_statistic_ranks_match_the_binomial():
    from scipy.stats import binom

    from headroom.steps import order_statistic_ranks

    for n in (20, 40, 200, 999, 8694, 50_000):
        for num, den in ((1, 2), (99, 100), (999, 1000)):
            lo, hi, open_top = order_statistic_ranks(n, num, den)
            q = num / den
            assert lo == max(1, int(binom.ppf(0.025, n, q)))
            assert open_top == (int(binom.ppf(0.975, n, q)) + 1 > n)
            assert hi == min(n, int(binom.ppf(0.975, n, q)) + 1)
            if not open_top and lo > 1:  # the coverage the construction promises
                assert binom.cdf(hi - 1, n, q) - binom.cdf(lo - 1, n, q) >= 0.95


def test_cpu_target_status_is_the_same_in_json_and_terminal():
    """Never reached: no number in the JSON, "not reached" in the terminal, one word for both."""
    s = analyze(load_run(RUNS / "nginx-keepalive"), objective="p99<=5ms")
    doc = to_json(s)["capacity"]
    assert doc["at_cpu_target"] == {"rps": None, "status": "not reached", "between_steps": None}
    text = format_summary(s)
    assert re.search(r"throughput at 70 % CPU +not reached: highest CPU measured 50\.0 %", text)
    assert doc["cpu_max_pct"] == pytest.approx(float(np.nanmax(s.table.cpu_pct)), rel=1e-5)
    assert doc["at_objective"]["status"] == "held"
    assert f">= {doc['at_objective']['rps']:,.0f} req/s (held at every step: a lower bound)" in text

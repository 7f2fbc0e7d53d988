import dataclasses
import json
import math
import subprocess
import sys

import numpy as np
import pytest
import synthetic
from conftest import ROOT, RUNS

from headroom import analyze
from headroom.compare import WEIGHTS, compare_runs, pair_steps, run_level_test, weighted_holm
from headroom.io import reduce_run
from headroom.model import HeadroomError, RunMeta
from headroom.noise import DEFAULTS, LearnedNoise

NO_KA, KA, KA2 = (str(RUNS / n) for n in ("nginx-no-keepalive", "nginx-keepalive", "nginx-keepalive-repeat"))


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "headroom", "compare", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )


@pytest.mark.parametrize(
    ("base", "cand", "verdicts", "codes"),
    [
        (NO_KA, KA, {"improved"}, {0}),
        (KA, NO_KA, {"regressed"}, {1}),
        (KA, KA2, {"no change", "no regression", "inconclusive"}, {0, 3}),
        (KA2, KA, {"no change", "no regression", "inconclusive"}, {0, 3}),
    ],
)
def test_bundled_pairs(base, cand, verdicts, codes, tmp_path):
    out = tmp_path / "c.json"
    p = cli(base, cand, "--json", out)
    doc = json.loads(out.read_text())
    assert doc["verdict"] in verdicts and p.returncode in codes and p.returncode == doc["exit_code"]
    assert f"verdict: {doc['verdict'].upper()}" in p.stdout
    decided = {m["key"]: m["decision"] for m in doc["metrics"]}
    # keep-alive halves the proxy's CPU per request: the primary metric decides both ways
    if doc["verdict"] == "improved":
        assert decided["cpu_s_per_req"] == "better"
    if doc["verdict"] == "regressed":
        assert decided["cpu_s_per_req"] == "worse"
    assert all(decided[k] not in ("worse", "better") for k in decided) or doc["verdict"] in (
        "improved",
        "regressed",
    )
    assert decided["error_rate"] == "not judged"  # throughputramp files do not record failures
    assert len(doc["reason"]) < 160


def test_pairs_are_the_steps_of_equal_concurrency():
    a, b = analyze(reduce_run(KA)), analyze(reduce_run(NO_KA))
    pairs, how = pair_steps([a.table], [b.table])
    assert how == "by concurrency" and [p[0] for p in pairs] == [1, 5, 9, 13, 17, 21, 25, 29]
    c = compare_runs(a, b)
    # each pair's throughput ratio is the two steps' own throughputs, and the plateau metric
    # is the geometric mean of the ratios over the saturated pairs
    ratios = [p.candidate["rps"] / p.baseline["rps"] for p in c.pairs if p.plateau]
    assert [p.candidate["rps"] for p in c.pairs] == pytest.approx(list(b.table.goodput_rps))
    m = c.metric("paired_plateau_rps")
    assert m.pairs == len(ratios) >= 3
    assert m.change == pytest.approx(math.exp(np.mean(np.log(ratios))) - 1)


def _shift_concurrency(s, plan):
    meta = RunMeta(
        s.run.meta.label, s.run.meta.source, {"lower_concurrency": plan[0], "concurrency_step": plan[1]}
    )
    run = dataclasses.replace(s.run, meta=meta)
    return analyze(run)


def test_different_concurrency_plans_pair_by_nearest_or_are_refused():
    a = analyze(synthetic.ramp(1))
    b = _shift_concurrency(analyze(synthetic.ramp(2)), (2, 3))  # 2, 5, 8 ...: within 15 % from 8 on
    pairs, how = pair_steps([a.table], [b.table])
    assert how.startswith("by nearest concurrency")
    assert all(abs(b.table.concurrency[p[2][0]] - p[0]) <= 0.15 * p[0] for p in pairs)
    far = _shift_concurrency(analyze(synthetic.ramp(3)), (100, 50))
    with pytest.raises(HeadroomError, match="concurrency plans do not match"):
        compare_runs(a, far)


def _spec(key="cpu_s_per_req"):
    from headroom.compare.specs import specs as _specs

    return next(sp for sp in _specs(None, True) if sp.out == key)


def test_run_level_test_matches_scipy():
    from scipy import stats as sst  # the independent reference; headroom itself does not import scipy

    rng = np.random.default_rng(5)
    level = rng.normal(0, 0.05, 12)  # the same ramp shape in every run
    # one run per side: the default noise of the metric, Student's t with its df
    yb = level + rng.normal(0, 0.02, (1, 12))
    yc = level + 0.2 + rng.normal(0, 0.02, (1, 12))
    t = run_level_test(yb, yc, _spec(), None)
    sd, df = DEFAULTS["cpu_s_per_req"]
    d = yc.mean() - yb.mean()
    assert t.d == pytest.approx(d) and t.df == df and t.se == pytest.approx(sd * math.sqrt(2))
    assert t.pvalue == pytest.approx(2 * sst.t.sf(abs(d) / (sd * math.sqrt(2)), df), rel=1e-4)
    # three runs per side: the spread of the runs' means pooled with the default (its df as prior
    # information); a two-sample t statistic on the run means with that pooled variance
    yb3 = level + rng.normal(0, 0.1, (3, 1)) + rng.normal(0, 0.02, (3, 12))
    yc3 = level + 0.15 + rng.normal(0, 0.1, (3, 1)) + rng.normal(0, 0.02, (3, 12))
    t3 = run_level_test(yb3, yc3, _spec(), None)
    mb, mc = yb3.mean(axis=1), yc3.mean(axis=1)
    ss = np.sum((mb - mb.mean()) ** 2) + np.sum((mc - mc.mean()) ** 2)
    pooled = math.sqrt((ss + sd * sd * df) / (4 + df))
    stat = (mc.mean() - mb.mean()) / (pooled * math.sqrt(2 / 3))
    assert t3.df == 4 + df and t3.d / t3.se == pytest.approx(stat, rel=1e-9)
    assert t3.pvalue == pytest.approx(2 * sst.t.sf(abs(stat), 4 + df), rel=1e-4)
    # learned noise pools with the repeats: sums of squares and df add
    learned = LearnedNoise({"cpu_s_per_req": 0.5}, {"cpu_s_per_req": 10.0}, "test")
    t4 = run_level_test(yb3, yc3, _spec(), learned)
    ss = sum(float(np.sum((m - m.mean()) ** 2)) for m in (yb3.mean(axis=1), yc3.mean(axis=1)))
    assert t4.df == 14 and t4.se == pytest.approx(math.sqrt((0.5 + ss) / 14) * math.sqrt(2 / 3))
    # steps far noisier than the between-run noise: the comparison's own steps set the floor
    wild = yc + rng.normal(0, 0.5, (1, 12))
    t5 = run_level_test(yb, wild, _spec(), None)
    dd = (wild - yb)[0]
    assert t5.df == 11 and t5.se == pytest.approx(dd.std(ddof=1) / math.sqrt(12) * math.sqrt(1.4 / 0.6))
    assert run_level_test(yb[:, :2], yc[:, :2], _spec(), None) is None


def _closed_test(p: dict, w: dict, alpha: float) -> set:
    """Rejections of the closed test of weighted Bonferroni tests, by brute force over every subset."""
    import itertools

    keys = list(p)
    rejected = set()
    for k in keys:
        ok = True
        for r in range(1, len(keys) + 1):
            for sub in itertools.combinations(keys, r):
                if k not in sub:
                    continue
                tot = sum(w[j] for j in sub)
                if not any(p[j] <= alpha * w[j] / tot for j in sub):
                    ok = False
        if ok:
            rejected.add(k)
    return rejected


def test_weighted_holm_is_the_closed_test():
    rng = np.random.default_rng(7)
    keys = list(WEIGHTS)
    for _ in range(300):
        p = {k: float(x) for k, x in zip(keys, rng.uniform(0, 0.1, len(keys)) ** rng.uniform(0.5, 3))}
        w = {k: WEIGHTS[k] for k in keys}
        got = {k for k, (rej, _a) in weighted_holm(p, w, 0.05).items() if rej}
        assert got == _closed_test(p, w, 0.05), p


def test_t_tail_matches_scipy():
    from scipy import stats as sst

    from headroom.stats import t_sf

    for df in (1, 2, 3, 4, 7, 11, 30, 200, math.inf):
        for x in (0.0, 0.5, 1.3, 2.2, 3.5, 6.0):
            assert t_sf(x, df) == pytest.approx(sst.t.sf(x, df), abs=2e-6), (x, df)


def test_errors_decide_whatever_the_latency():
    base = analyze(synthetic.ramp(11))
    run = synthetic.ramp(12)
    kept = np.diff(run.requests.step_offsets)
    # 0.5 % of the candidate's requests failed at every step: above the 0.1-point threshold
    errs = np.ceil(kept * 0.005 / 0.995).astype(np.int64)
    cand = analyze(dataclasses.replace(run, step_errors=errs))
    c = compare_runs(base, cand)
    m = c.metric("error_rate")
    assert m.decision == "worse" and c.verdict == "regressed" and c.exit_code == 1
    assert m.change == pytest.approx(errs.sum() / (kept.sum() + errs.sum()), rel=1e-9)
    assert "error rate" in c.reason
    # below the threshold: not a regression on errors
    few = np.where(np.arange(len(kept)) == 0, 1, 0).astype(np.int64)
    c2 = compare_runs(base, analyze(dataclasses.replace(run, step_errors=few)))
    assert c2.metric("error_rate").decision != "worse"


# --------------------------------------------------------------------------
# calibration on seeded synthetic ramps whose noise was measured on real runs
# (tests/synthetic.py: 27 % per run for throughput and latency, 6 % for CPU per
# request, correlated steps); bench/calibrate.py runs the same at full size


@pytest.fixture(scope="module")
def pools():
    a = [analyze(synthetic.ramp(10_000 + i)) for i in range(50)]
    slow = {f: [analyze(synthetic.ramp(20_000 + i, slowdown=f)) for i in range(20)] for f in (1.25, 2.0)}
    return a, slow


def test_calibration_no_change_rarely_alarms(pools):
    a, _slow = pools
    v1 = [compare_runs(a[2 * i], a[2 * i + 1]).verdict for i in range(25)]
    v3 = [compare_runs(a[6 * i : 6 * i + 3], a[6 * i + 3 : 6 * i + 6]).verdict for i in range(8)]
    learned = [compare_runs(a[i], a[i + 1], noise_from=a[30:42]).verdict for i in range(0, 30, 2)]
    for v in (v1, v3, learned):
        assert sum(x in ("regressed", "improved") for x in v) <= 1, v
    # exit 0 is reachable for an unchanged build
    assert sum(x == "no regression" for x in v1 + v3 + learned) >= 8


def test_calibration_a_server_twice_as_slow_is_caught_never_reversed(pools):
    a, slow = pools
    for f in (1.25, 2.0):
        v = [compare_runs(a[i], slow[f][i]).verdict for i in range(20)]
        vl = [compare_runs(a[i], slow[f][i], noise_from=a[30:42]).verdict for i in range(20)]
        assert "improved" not in v + vl and "no regression" not in v + vl
        if f == 2.0:
            assert v.count("regressed") >= 19 and vl.count("regressed") >= 19, (v, vl)
    v3 = [compare_runs(a[3 * i : 3 * i + 3], slow[1.25][3 * i : 3 * i + 3]).verdict for i in range(6)]
    assert v3.count("regressed") >= 3, v3


def test_runs_needed_would_decide():
    # the smallest number of runs per side with which, if every change stayed where it is, the
    # primary's one-sided 95 % bound falls below the threshold or some metric's change is shown
    from scipy import stats as sst

    for seed in range(10_000, 10_040, 2):  # the first inconclusive A/A pair of the pool's seeds
        c = compare_runs(analyze(synthetic.ramp(seed)), analyze(synthetic.ramp(seed + 1)))
        if c.verdict == "inconclusive" and c.runs_needed:
            break
    assert c.verdict == "inconclusive" and c.runs_needed, "no inconclusive pair among 20"
    n = c.runs_needed

    def decides(k):  # would some metric decide with k runs per side, its change and noise unchanged?
        for m in c.metrics:
            if not m.decides or m.key == "error_rate" or m.change is None:
                continue
            logc, se = math.log1p(m.change), m.noise.sd * math.sqrt(2 / k)
            df = m.noise.df + 2 * (k - 1)  # the repeats add their degrees of freedom
            bad = logc if m.better == "lower" else -logc
            if m.key == "cpu_s_per_req" and bad + sst.t.ppf(0.95, df) * se < math.log1p(0.10):
                return True
            w = m.weight  # the share the comparison planned for it
            if abs(m.change) >= 0.10 and abs(logc) > sst.t.ppf(1 - 0.05 * w / 2, df) * se:
                return True
        return False

    assert decides(n) and (n == 2 or not decides(n - 1))
    assert f"about {n} interleaved runs per side" in c.reason


def test_capacity_figures_do_not_depend_on_the_bucket():
    for path in (NO_KA, KA, KA2):
        figs = []
        for bucket in (0.25, 1.0, 2.0):
            cap = analyze(reduce_run(path, bucket_s=bucket), bucket_s=bucket).capacity
            figs.append([cap.capacity_rps, cap.knee_rps, cap.plateau_rps, cap.peak_step_rps])
        figs = np.array(figs, dtype=float)
        assert np.all(np.abs(figs / figs[1] - 1) < 0.05), figs


def test_cli_repeat_flags_and_usage_errors():
    p = cli("--baseline", KA, KA2, "--candidate", NO_KA, NO_KA)
    assert p.returncode == 1 and "measured from the 2 + 2 repeat runs, pooled with" in p.stdout
    assert cli(KA).returncode == 2
    assert cli(KA, KA2, "--baseline", KA).returncode == 2
    bad = cli(KA, RUNS / "nope")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no such file or folder" in bad.stderr
    assert cli(KA, KA2, "--threshold", "150%").returncode == 2
    assert cli(KA, KA2, "--bins", "5").returncode == 2  # bins do not enter a comparison: refused
    assert cli(KA, KA2, "--run-noise", "5%").returncode == 2  # one number for all metrics: gone


def test_cli_noise_from_runs_and_history_json(tmp_path):
    aa = [RUNS / n for n in ("nginx-ka-aa1-a", "nginx-ka-aa1-b", "nginx-ka-aa2-a", "nginx-ka-aa2-b")]
    out = tmp_path / "c.json"
    p = cli(aa[0], aa[1], "--noise-from", *aa[2:], "--json", out)
    assert p.returncode in (0, 3), p.stderr
    doc = json.loads(out.read_text())
    cpu = next(m for m in doc["metrics"] if m["key"] == "cpu_s_per_req")
    # two earlier runs are 1 df: too few to trust alone, so pooled with the default (11 df) and said
    assert cpu["noise"]["df"] == 12 and "learned from 2 earlier runs" in cpu["noise"]["source"]
    assert "fewer than 4 degrees of freedom" in p.stderr and "cpu_s_per_req (1 df)" in p.stderr
    # the pooled sd: the two earlier runs' squared difference of mean log CPU per request / 2
    # (1 df) added to the default's 0.06^2 x 11, over 12 df
    runs = [analyze(reduce_run(x)) for x in aa[2:]]
    logs = [np.mean(np.log(r.table.cpu_s_per_req[np.isfinite(r.table.cpu_s_per_req)])) for r in runs]
    ss = (logs[0] - logs[1]) ** 2 / 2 + 0.06**2 * 11
    assert cpu["noise"]["sd"] == pytest.approx(math.sqrt(ss / 12), rel=1e-3)
    hist = tmp_path / "h.json"
    hist.write_text(
        json.dumps({"kind": "history", "runs": [1, 2, 3], "noise": {"cpu_s_per_req": {"sd": 0.04, "df": 9}}})
    )
    p = cli(aa[0], aa[1], "--noise-from", hist, "--json", out)
    cpu = next(m for m in json.loads(out.read_text())["metrics"] if m["key"] == "cpu_s_per_req")
    assert (
        cpu["noise"]["sd"] == 0.04
        and cpu["noise"]["df"] == 9
        and "history of 3 releases" in cpu["noise"]["source"]
    )
    hist.write_text('{"kind": "summary"}')
    bad = cli(aa[0], aa[1], "--noise-from", hist)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "not a history JSON" in bad.stderr


def test_help_documents_exit_codes_and_noise():
    p = cli("--help")
    assert p.returncode == 0
    for line in (
        "0  improved, no change, or no regression",
        "1  regressed",
        "2  bad usage or bad input",
        "3  inconclusive",
    ):
        assert line in p.stdout
    assert "--noise-from" in p.stdout and "--error-threshold" in p.stdout and "weighted Holm" in p.stdout


def test_json_document_is_deterministic(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for out in (a, b):
        assert cli(NO_KA, KA, "--objective", "p99<=5ms", "--json", out).returncode == 0
    assert a.read_bytes() == b.read_bytes()
    doc = json.loads(a.read_text())
    assert doc["schema"] == 3 and doc["kind"] == "comparison" and doc["primary"] == "cpu_s_per_req"
    assert doc["noise"] == {"source": "default", "runs": [1, 1]}
    assert [p["concurrency"] for p in doc["pairs"]] == [1, 5, 9, 13, 17, 21, 25, 29]
    for m in doc["metrics"]:
        assert m["ci"] is None or m["ci"][0] <= m["change"] <= m["ci"][1]
        if m["decides"] and m["key"] != "error_rate" and m["change"] is not None:
            assert m["noise"]["sd"] > 0 and m["smallest_detectable_change"] > 0


def _with_meta(s, **fields):
    meta = RunMeta(s.run.meta.label, s.run.meta.source, {**s.run.meta.fields, **fields})
    return analyze(dataclasses.replace(s.run, meta=meta))


def test_foreign_load_is_shown_and_warned():
    a, b = analyze(synthetic.ramp(1)), analyze(synthetic.ramp(2))
    quiet = _with_meta(a, foreign_cpu={"mean_percent": 4.0, "steal_mean_percent": 0.5})
    busy = _with_meta(b, foreign_cpu={"mean_percent": 31.0, "steal_mean_percent": 6.0})
    c = compare_runs(quiet, busy)
    assert any("other processes" in n and "baseline 4; candidate 31" in n for n in c.notes)
    assert any("stolen by the host" in n and "baseline 0; candidate 6" in n for n in c.notes)
    assert any("candidate runs were recorded under more foreign load (31 % vs 4 %" in w for w in c.warnings)
    assert not any("foreign" in w for w in compare_runs(a, b).warnings)  # not recorded: not guessed


def test_unknown_transport_errors_are_not_judged():
    a, b = analyze(synthetic.ramp(1)), analyze(synthetic.ramp(2))
    c = compare_runs(a, _with_meta(b, errors=None))  # as headroom ramp writes for hey -z
    m = c.metric("error_rate")
    assert m.decision == "not judged" and "transport errors not recorded" in m.note


def first_steps(run, k):
    """The same ramp stopped after k steps."""
    from headroom.model import Requests

    r, end = run.requests, int(run.requests.step_offsets[k])
    req = Requests(r.start_ns[:end], r.latency_s[:end], r.step_offsets[: k + 1])
    return dataclasses.replace(run, requests=req, step_errors=run.step_errors[:k])


def test_no_data_is_never_a_pass():
    # two steps: no ratio metric can be judged, only the error rate (0 = 0): inconclusive, exit 3
    c = compare_runs(first_steps(synthetic.ramp(1), 2), first_steps(synthetic.ramp(2), 2))
    assert c.metric("error_rate").decision == "same"
    assert c.verdict == "inconclusive" and c.exit_code == 3 and "could not be judged" in c.reason


def test_few_saturated_pairs_are_named_in_the_reason():
    c = compare_runs(first_steps(synthetic.ramp(1), 7), first_steps(synthetic.ramp(2), 7))
    n = sum(p.plateau for p in c.pairs)
    assert 0 < n < 5 and len(c.pairs) == 7
    assert (
        c.verdict in ("inconclusive", "no regression", "no change")
        and f"only {n} saturated step pairs" in c.reason
    )

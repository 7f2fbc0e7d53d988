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
from headroom.compare import compare_runs, estimate, pair_steps
from headroom.io import reduce_run
from headroom.model import HeadroomError, RunMeta

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
        (KA, KA2, {"no change", "inconclusive"}, {0, 3}),
        (KA2, KA, {"no change", "inconclusive"}, {0, 3}),
    ],
)
def test_bundled_pairs(base, cand, verdicts, codes, tmp_path):
    out = tmp_path / "c.json"
    p = cli(base, cand, "--json", out)
    doc = json.loads(out.read_text())
    assert doc["verdict"] in verdicts and p.returncode in codes and p.returncode == doc["exit_code"]
    assert f"verdict: {doc['verdict'].upper()}" in p.stdout
    decided = {m["key"]: m["decision"] for m in doc["metrics"]}
    if doc["verdict"] == "improved":  # latency is judged on 2 s steps, and judged better
        assert any(decided[k] == "better" for k in ("p50_s", "p90_s", "p99_s"))
    if doc["verdict"] == "regressed":
        assert any(decided[k] == "worse" for k in ("p50_s", "p90_s", "p99_s"))
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
    m = c.metric("plateau_rps")
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


def test_interval_matches_a_direct_computation():
    rng = np.random.default_rng(5)
    yb = rng.normal(0, 0.1, (1, 12))
    yc = yb + 0.2 + rng.normal(0, 0.1, (1, 12))
    e = estimate(yb, yc, run_noise=0.05, level=0.99)
    d = (yc - yb)[0]
    from scipy import stats as sst  # the independent reference; headroom itself does not import scipy

    t = sst.t.ppf(0.995, 11) * d.std(ddof=1) / math.sqrt(12)
    z = sst.norm.ppf(0.995) * 0.05 * math.sqrt(2)
    assert e.log_change == pytest.approx(d.mean())
    assert e.half == pytest.approx(math.hypot(t, z), rel=1e-3)
    # repeats: the larger of the floor and the spread between the runs' means
    yb3 = np.stack([yb[0], yb[0] + 0.3, yb[0] - 0.3])
    yc3 = np.stack([yc[0], yc[0] + 0.3, yc[0] - 0.3])
    e3 = estimate(yb3, yc3, run_noise=0.05, level=0.99)
    assert e3.run_noise == pytest.approx(0.3)  # sd of (0, +0.3, -0.3) with 2 df per side
    assert estimate(yb[:, :2], yc[:, :2], run_noise=0.05, level=0.99) is None


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
# calibration on seeded synthetic ramps with host noise (tests/synthetic.py):
# per run 5 %, per step 12 %, per second 10 %; 14 steps of 1-5 s


def _verdicts(slowdown, runs, seeds=range(20)):
    out = []
    for seed in seeds:
        base = [analyze(synthetic.ramp(2 * runs * seed + i)) for i in range(runs)]
        cand = [analyze(synthetic.ramp(2 * runs * seed + runs + i, slowdown=slowdown)) for i in range(runs)]
        out.append(compare_runs(base, cand).verdict)
    return out


@pytest.mark.parametrize("runs", [1, 3])
def test_calibration_no_change_rarely_alarms(runs):
    v = _verdicts(1.0, runs)
    assert sum(x in ("regressed", "improved") for x in v) <= 1, v


@pytest.mark.parametrize("runs", [1, 3])
def test_calibration_a_server_half_again_slower_is_caught(runs):
    v = _verdicts(1.5, runs)
    assert v.count("regressed") >= 19, v


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
    assert p.returncode == 1 and "measured from 2 + 2 repeat runs" in p.stdout
    assert cli(KA).returncode == 2
    assert cli(KA, KA2, "--baseline", KA).returncode == 2
    bad = cli(KA, RUNS / "nope")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no such file or folder" in bad.stderr
    assert cli(KA, KA2, "--threshold", "150%").returncode == 2
    assert cli(KA, KA2, "--bins", "5").returncode == 2  # bins do not enter a comparison: refused


def test_help_documents_exit_codes_and_noise():
    p = cli("--help")
    assert p.returncode == 0
    for line in ("0  improved, or no change", "1  regressed", "2  bad usage or bad input", "3  inconclusive"):
        assert line in p.stdout
    assert "--run-noise" in p.stdout and "--error-threshold" in p.stdout


def test_json_document_is_deterministic(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for out in (a, b):
        assert cli(NO_KA, KA, "--objective", "p99<=5ms", "--json", out).returncode == 0
    assert a.read_bytes() == b.read_bytes()
    doc = json.loads(a.read_text())
    assert doc["schema"] == 2 and doc["kind"] == "comparison"
    assert doc["noise"] == {"source": "default floor", "floor": 0.05, "runs": [1, 1]}
    assert [p["concurrency"] for p in doc["pairs"]] == [1, 5, 9, 13, 17, 21, 25, 29]
    for m in doc["metrics"]:
        assert m["ci"] is None or m["ci"][0] <= m["change"] <= m["ci"][1]


@pytest.mark.parametrize(
    ("base", "cand"),
    [
        ("nginx-ka-aa1-a", "nginx-ka-aa1-b"),
        ("nginx-ka-aa1-b", "nginx-ka-aa1-a"),
        ("nginx-ka-aa2-a", "nginx-ka-aa2-b"),
        ("nginx-ka-aa2-b", "nginx-ka-aa2-a"),
    ],
)
def test_real_a_a_pairs_are_never_called(base, cand):
    # recorded with `headroom ramp` on a shared 2-core machine (data/runs/README.md)
    c = compare_runs(reduce_run(RUNS / base), reduce_run(RUNS / cand))
    assert c.verdict in ("no change", "inconclusive"), c.reason


def test_real_slower_variant_is_caught():
    # the same proxy with proxy_buffering off for a 256 KiB file: slower, caught
    c = compare_runs(
        reduce_run(RUNS / "nginx-large-buffering-on"), reduce_run(RUNS / "nginx-large-buffering-off")
    )
    assert c.verdict == "regressed" and c.metric("plateau_rps").decision == "worse"

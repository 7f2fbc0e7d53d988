import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT, RUNS

from headroom import load_run
from headroom.compare import Comparison, MatchedBin, Metric, compare_runs, describe
from headroom.model import CpuSamples, Requests, Run, RunMeta
from headroom.text import format_comparison

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


def test_keepalive_gain_is_driven_by_throughput():
    c = compare_runs(load_run(NO_KA), load_run(KA))
    m = {x.key: x for x in c.metrics}
    steps_b = load_run(NO_KA)

    # independent: highest step throughput = requests / (last response - first start), per step
    def peak(run):
        best = 0.0
        for k in range(run.requests.n_steps):
            a, b = run.requests.step_offsets[k], run.requests.step_offsets[k + 1]
            st, lat = run.requests.start_ns[a:b], run.requests.latency_s[a:b]
            dur = (np.max(st + np.rint(lat * 1e9).astype(np.int64)) - st.min()) / 1e9
            best = max(best, (b - a) / dur)
        return best

    assert m["max_rps"].baseline == pytest.approx(peak(steps_b))
    assert m["max_rps"].change == pytest.approx(peak(load_run(KA)) / peak(steps_b) - 1)
    assert m["max_rps"].decision == "better" and m["max_rps"].ci[0] > 0.10
    assert "max sustained throughput is 124" in c.reason
    assert any("between-run noise is unknown" in n for n in c.notes)


def test_repeat_runs_set_a_noise_floor():
    ka, ka2, no = load_run(KA), load_run(KA2), load_run(NO_KA)
    c = compare_runs([ka, ka2], [no])
    m = {x.key: x for x in c.metrics}
    # noise floor = spread of the repeat runs' peaks: (max - min) / mean
    a = compare_runs(ka, no).metrics[4].baseline
    b = compare_runs(ka2, no).metrics[4].baseline
    assert m["max_rps"].noise_floor == pytest.approx(abs(a - b) / ((a + b) / 2))
    assert m["max_rps"].baseline == pytest.approx((a + b) / 2)
    assert c.verdict == "regressed"


def test_cli_repeat_flags_and_usage_errors():
    p = cli("--baseline", KA, KA2, "--candidate", NO_KA)
    assert p.returncode == 1 and "nginx-1.22.1-keepalive, nginx-1.22.1-keepalive" in p.stdout
    assert cli(KA).returncode == 2
    assert cli(KA, KA2, "--baseline", KA).returncode == 2
    bad = cli(KA, RUNS / "nope")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no such file or folder" in bad.stderr
    assert cli(KA, KA2, "--threshold", "150%").returncode == 2


def test_help_documents_exit_codes():
    p = cli("--help")
    assert p.returncode == 0
    for line in ("0  improved, or no change", "1  regressed", "2  bad usage or bad input", "3  inconclusive"):
        assert line in p.stdout


def test_json_schema_and_determinism(tmp_path):
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    for out, seed in ((a, 3), (b, 3), (c, 4)):
        cli(NO_KA, KA, "--seed", seed, "--objective", "p99<=5ms", "--json", out)
    assert a.read_bytes() == b.read_bytes()
    doc, other = json.loads(a.read_text()), json.loads(c.read_text())
    # the seed is used (max_rps resamples 2 blocks per step: its interval is discrete, others are not)
    assert [m["ci"] for m in doc["metrics"]] != [m["ci"] for m in other["metrics"]]
    assert doc["schema"] == 1 and doc["kind"] == "comparison"
    assert doc["baseline"] == ["nginx-1.22.1-no-keepalive"] and doc["candidate"] == ["nginx-1.22.1-keepalive"]
    assert set(doc) == {
        "schema",
        "kind",
        "verdict",
        "exit_code",
        "reason",
        "baseline",
        "candidate",
        "settings",
        "metrics",
        "bins",
        "notes",
        "warnings",
    }
    assert set(doc["settings"]) == {
        "threshold",
        "confidence",
        "metric_confidence",
        "n_boot",
        "seed",
        "min_blocks",
        "block_s",
        "bucket_s",
        "objective",
    }
    for m in doc["metrics"]:
        assert set(m) == {
            "key",
            "name",
            "unit",
            "better",
            "decides",
            "baseline",
            "candidate",
            "change",
            "ci",
            "threshold",
            "noise_floor",
            "decision",
            "note",
        }
        assert m["decision"] in {"worse", "better", "same", "unclear", "not judged", "shown"}
        assert m["ci"] is None or (len(m["ci"]) == 2 and m["ci"][0] <= m["ci"][1])
    keys = [m["key"] for m in doc["metrics"]]
    assert keys[:6] == [
        "latency_p50",
        "latency_p90",
        "latency_p99",
        "cpu_per_request",
        "max_rps",
        "rps_at_objective",
    ]
    for b in doc["bins"]:
        assert b["status"] in {"compared", "baseline only", "candidate only"} or b["status"].startswith(
            "too few"
        )
        assert b["rps_lo"] < b["rps_hi"]


def test_golden_table():
    metrics = [
        Metric(
            "latency_p99",
            "p99 latency at matched load",
            "s",
            "lower",
            True,
            0.002,
            0.0025,
            0.25,
            (0.1, 0.4),
            0.1,
            None,
            "worse",
            "2 throughput bin(s) compared",
        ),
        Metric(
            "max_rps",
            "max sustained throughput",
            "req/s",
            "higher",
            True,
            10000.0,
            9900.0,
            -0.01,
            (-0.05, 0.03),
            0.1,
            None,
            "same",
            "highest per-step throughput",
        ),
        Metric(
            "cpu_per_request",
            "CPU per request at matched load",
            "s",
            "lower",
            True,
            None,
            None,
            None,
            None,
            0.1,
            None,
            "not judged",
            "no CPU samples",
        ),
    ]
    bins = [
        MatchedBin(1000.0, 2000.0, 5000, 6000, 6, 7, "compared", {"p99": (0.002, 0.0025, 0.25, (0.1, 0.4))}),
        MatchedBin(2000.0, 3000.0, 800, 0, 3, 0, "baseline only", {}),
    ]
    c = Comparison(
        verdict="regressed",
        reason=describe(metrics[0]),
        metrics=metrics,
        bins=bins,
        baseline_labels=["v1"],
        candidate_labels=["v2"],
        threshold=0.1,
        confidence=0.95,
        metric_confidence=0.975,
        n_boot=1000,
        seed=7,
        min_blocks=5,
        block_s=1.0,
        bucket_s=1.0,
        objective=None,
        notes=["between-run noise is unknown"],
    )
    assert format_comparison(c) == (ROOT / "tests" / "golden" / "compare_table.txt").read_text()
    assert c.exit_code == 1


# --------------------------------------------------------------------------
# calibration on synthetic runs


def synthetic_ramp(seed: int, latency_factor: float = 1.0, label: str = "s") -> Run:
    """A seeded closed-ramp-like run with autocorrelated latency.

    Six 10 s steps at 150..650 req/s (mid-bin for 100 req/s bins) (each second's rate jitters 3 %), Poisson
    arrivals, lognormal latency whose median follows a queue curve and carries a
    per-second random level (the autocorrelation a block bootstrap must respect),
    4-decimal latencies as in real files, and 1 s CPU samples.
    """
    rng = np.random.default_rng(seed)
    steps_start, steps_lat = [], []
    cpu_t, cpu_v = [], []
    t = 0
    for x in (150, 250, 350, 450, 550, 650):
        st_parts, lat_parts = [], []
        for sec in range(10):
            n = rng.poisson(x * np.exp(rng.normal(0, 0.03)))
            st_parts.append(t + sec * 10**9 + np.sort(rng.integers(0, 10**9, n)))
            median = 0.004 / (1 - x / 900) * np.exp(rng.normal(0, 0.08)) * latency_factor
            lat_parts.append(np.maximum(np.round(median * np.exp(rng.normal(0, 0.4, n)), 4), 0.0001))
            cpu_t.append(t + (sec + 1) * 10**9)
            cpu_v.append(5 + x / 10 + rng.normal(0, 1))
        steps_start.append(np.concatenate(st_parts))
        steps_lat.append(np.concatenate(lat_parts))
        t += 11 * 10**9
    offs = np.cumsum([0] + [len(s) for s in steps_start])
    cpu = CpuSamples(np.array(cpu_t), np.array(cpu_v), None, 1.0, "synthetic")
    req = Requests(np.concatenate(steps_start), np.concatenate(steps_lat), offs)
    return Run(req, cpu, RunMeta(label, "synthetic", {}))


def _verdicts(factor: float, threshold: float, seeds=range(100)) -> list[str]:
    out = []
    for seed in seeds:
        a = synthetic_ramp(10_000 + 2 * seed)
        b = synthetic_ramp(10_001 + 2 * seed, latency_factor=factor)
        out.append(compare_runs(a, b, threshold=threshold, seed=seed, n_boot=400, n_boot_knee=0).verdict)
    return out


def test_calibration_no_change_rarely_alarms():
    # null hypothesis: two independent runs of the same system, default 10 % threshold
    v = _verdicts(1.0, 0.10)
    alarms = sum(x in ("regressed", "improved") for x in v)
    assert alarms <= 5, f"{alarms} false alarms in 100 seeds: {v}"


def test_resampling_unit_matters():
    """Quarter-second blocks inside autocorrelated seconds fake precision; >= 1 s blocks do not."""
    a, b = synthetic_ramp(1), synthetic_ramp(2)
    wide = compare_runs(a, b, bucket_s=0.25, block_s=1.0, n_boot=400, n_boot_knee=0)
    fake = compare_runs(a, b, bucket_s=0.25, block_s=0.25, n_boot=400, n_boot_knee=0, min_blocks=20)
    w = {m.key: m.ci[1] - m.ci[0] for m in wide.metrics if m.key.startswith("latency") and m.ci}
    f = {m.key: m.ci[1] - m.ci[0] for m in fake.metrics if m.key.startswith("latency") and m.ci}
    assert set(w) == set(f) == {"latency_p50", "latency_p90", "latency_p99"}
    # the median and p90 follow the per-second level: pseudo-blocks understate their noise badly;
    # p99 is dominated by single slow requests, so the unit matters less there
    for k in ("latency_p50", "latency_p90"):
        assert f[k] < 0.75 * w[k], (k, f[k], w[k])
    assert f["latency_p99"] < w["latency_p99"]


def test_calibration_ten_percent_slower_is_caught():
    # a real +10 % latency at every load, judged against a 5 % practical threshold
    v = _verdicts(1.10, 0.05)
    caught = sum(x == "regressed" for x in v)
    assert caught >= 95, f"caught {caught} of 100: {v}"

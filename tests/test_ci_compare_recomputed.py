"""The comparison's headline numbers recomputed from the raw files, by a plain computation.

For each bundled pair of runs (data/runs/), this file reads perfResults.csv.gz with gzip and the
csv module, cpuStats.csv and metadata.yml, and computes per step (one section of the file):

* the step's span: first request start to last response (start + response time);
* its requests per second: rows / span (the runs have no status column: every row counts);
* its CPU seconds: the mean of the CPU samples over the part of the span they cover (each
  sample's percentage holds since the previous sample, the first one for the median sampling
  period before it; 100 % = metadata ``cpu_cores``, else one core) times the span, divided by
  the step's rows: CPU seconds per request;
* its p50: the nearest-rank median of the response times.

Steps of the two runs are matched by concurrency (the metadata's plan); each side's value is
the geometric mean over the matched steps; the change is the ratio of the two, minus one.  The
paired plateau throughput takes the steps ``headroom compare`` marks saturated (its judgement,
stated in the JSON) and recomputes everything else.  These are compared with what ``headroom
compare --json`` prints now, not with a stored file; p-values and Holm levels are left alone,
and of each interval only its centre (in log units, the change itself) is checked.
"""

from __future__ import annotations

import bisect
import calendar
import csv
import gzip
import io
import json
import math
import re
import statistics
import subprocess
import sys
import time

import pytest
import yaml
from conftest import ROOT, RUNS

PAIRS = [
    ("nginx-no-keepalive", "nginx-keepalive"),
    ("nginx-large-buffering-off", "nginx-large-buffering-on"),
    ("nginx-ka-aa1-a", "nginx-ka-aa1-b"),
    ("nginx-ka-aa2-a", "nginx-ka-aa2-b"),
]


def _ns(text: str) -> int:
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?Z", text.strip())
    assert m, text
    return calendar.timegm(time.strptime(m[1], "%Y-%m-%dT%H:%M:%S")) * 10**9 + int(
        (m[2] or "0").ljust(9, "0")[:9]
    )


def raw_steps(name: str) -> dict[float, dict]:
    """concurrency -> {rps, cpu_s_per_req, p50_s} of each step, from the raw files."""
    folder = RUNS / name
    meta = yaml.safe_load((folder / "metadata.yml").read_text())
    text = gzip.decompress((folder / "perfResults.csv.gz").read_bytes()).decode()
    sections: list[list[tuple[int, float]]] = []
    for row in csv.reader(io.StringIO(text)):
        if not row:
            continue
        if row[0] == "start-time":
            sections.append([])
        else:
            sections[-1].append((_ns(row[0]), float(row[1])))
    if "concurrency" in meta:
        levels = [float(c) for c in meta["concurrency"]]
    else:
        lo, step = meta["lower_concurrency"], meta["concurrency_step"]
        levels = [float(lo + k * step) for k in range(len(sections))]
    assert len(levels) == len(sections)
    cores = float(meta.get("cpu_cores") or 1)
    with open(folder / "cpuStats.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0][0] == "timestamp"
    times = [_ns(r[0]) for r in rows[1:]]
    pcts = [sum(map(float, r[1:])) / (len(r) - 1) for r in rows[1:]]

    gaps = [b - a for a, b in zip(times, times[1:])]
    edges = [times[0] - int(statistics.median(gaps))] + times  # the first sample's period before it

    def cpu_seconds(a: int, b: int) -> tuple[float, float]:
        """(CPU seconds over [a, b] at the covered part's mean, covered seconds)."""
        area = covered = 0.0
        for i in range(max(1, bisect.bisect_left(edges, a)), len(edges)):
            lo, hi = max(edges[i - 1], a), min(edges[i], b)
            if hi > lo:
                area += pcts[i - 1] / 100.0 * cores * (hi - lo) / 1e9
                covered += (hi - lo) / 1e9
            if edges[i] >= b:
                break
        return (area / covered * (b - a) / 1e9 if covered else math.nan), covered

    out = {}
    for level, sec in zip(levels, sections):
        start = min(t for t, _ in sec)
        end = max(t + round(lat * 1e9) for t, lat in sec)
        lats = sorted(lat for _, lat in sec)
        cpu_s, covered = cpu_seconds(start, end)
        out[level] = {
            "rps": len(sec) / ((end - start) / 1e9),
            "cpu_s_per_req": cpu_s / len(sec),
            "p50_s": lats[math.ceil(0.5 * len(lats)) - 1],
            "covered": covered >= 0.5 * (end - start) / 1e9,  # less: no CPU figure for the step
        }
    return out


def _gmean(xs) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


@pytest.fixture(scope="module", params=PAIRS, ids=[f"{a}-vs-{b}" for a, b in PAIRS])
def pair(request):
    base, cand = request.param
    p = subprocess.run(
        [sys.executable, "-m", "headroom", "compare", RUNS / base, RUNS / cand, "--json", "-"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert p.returncode in (0, 1, 3), p.stderr
    return raw_steps(base), raw_steps(cand), json.loads(p.stdout)


def test_per_step_values(pair):
    b, c, doc = pair
    assert doc["pairing"] == "by concurrency" and len(doc["pairs"]) == len(set(b) & set(c)) > 3
    for p in doc["pairs"]:
        for side, raw in (("baseline", b), ("candidate", c)):
            mine = raw[p["concurrency"]]
            theirs = p[side]
            assert theirs["rps"] == pytest.approx(mine["rps"], rel=1e-4), (side, p)
            assert theirs["p50_s"] == pytest.approx(mine["p50_s"], rel=1e-5), (side, p)
            if mine["covered"]:
                assert theirs["cpu_s_per_req"] == pytest.approx(mine["cpu_s_per_req"], rel=1e-4), (side, p)


def _metric(doc, key):
    (m,) = [m for m in doc["metrics"] if m["key"] == key]
    return m


def _check_metric(m, per_base, per_cand):
    gb, gc = _gmean(per_base), _gmean(per_cand)
    assert m["pairs"] == len(per_base)
    assert m["baseline"] == pytest.approx(gb, rel=1e-4)
    assert m["candidate"] == pytest.approx(gc, rel=1e-4)
    assert m["change"] == pytest.approx(gc / gb - 1, rel=1e-4, abs=1e-5)
    if m.get("ci"):  # symmetric in log units around the change: the interval is about this estimate
        lo, hi = m["ci"]
        assert (math.log1p(lo) + math.log1p(hi)) / 2 == pytest.approx(math.log(gc / gb), abs=2e-4)
        assert lo < gc / gb - 1 < hi


def test_cpu_per_request(pair):
    b, c, doc = pair
    levels = [p["concurrency"] for p in doc["pairs"]]
    assert all(b[k]["covered"] and c[k]["covered"] for k in levels)
    _check_metric(
        _metric(doc, "cpu_s_per_req"),
        [b[k]["cpu_s_per_req"] for k in levels],
        [c[k]["cpu_s_per_req"] for k in levels],
    )


def test_p50(pair):
    b, c, doc = pair
    levels = [p["concurrency"] for p in doc["pairs"]]
    _check_metric(_metric(doc, "p50_s"), [b[k]["p50_s"] for k in levels], [c[k]["p50_s"] for k in levels])


def test_paired_plateau(pair):
    b, c, doc = pair
    levels = [p["concurrency"] for p in doc["pairs"] if p["plateau"]]
    m = _metric(doc, "paired_plateau_rps")
    if len(levels) < 3:
        assert m["change"] is None
        return
    _check_metric(m, [b[k]["rps"] for k in levels], [c[k]["rps"] for k in levels])


def test_the_headline_of_the_bundled_pair():
    """The README's numbers, from the raw files alone: CPU per request -57.5 %, paired plateau +112 %."""
    b, c = raw_steps("nginx-no-keepalive"), raw_steps("nginx-keepalive")
    levels = sorted(set(b) & set(c))
    cpu = (
        _gmean([c[k]["cpu_s_per_req"] for k in levels]) / _gmean([b[k]["cpu_s_per_req"] for k in levels]) - 1
    )
    assert round(cpu * 100, 1) == -57.5


# -- the intervals, p-values and Holm decisions, recomputed from the figures above ---------------

from scipy import stats as sps  # noqa: E402

DECIDING = ("paired_plateau_rps", "p50_s", "cpu_s_per_req")


def _raw_change(key: str, b: dict, c: dict, levels: list[float]) -> float:
    """log(candidate / baseline) of geometric means over the levels, from the raw files."""
    field = "rps" if key == "paired_plateau_rps" else key
    return math.log(_gmean([c[k][field] for k in levels]) / _gmean([b[k][field] for k in levels]))


def _check_interval(m: dict, d: float) -> None:
    """p = 2 t_sf(|d| / se, df) and the interval exp(d +- t_q se) - 1 at the stated level and df."""
    se, df = m["se_log"], m["noise"]["df"]
    # compared as the t statistic the p-value stands for: far in the tail p moves a lot with
    # the sixth digit of the printed standard error
    assert sps.t.isf(m["pvalue"] / 2, df) == pytest.approx(abs(d) / se, rel=2e-3)
    q = sps.t.ppf(1 - (1 - m["level"]) / 2, df)
    assert m["ci"][0] == pytest.approx(math.expm1(d - q * se), rel=2e-3, abs=2e-5)
    assert m["ci"][1] == pytest.approx(math.expm1(d + q * se), rel=2e-3, abs=2e-5)


def test_standard_errors_intervals_and_pvalues(pair):
    """One run per side: the standard error is the stated noise sd times sqrt(1/1 + 1/1) (or
    more, when the stated source says it was widened), and p and the interval follow from it."""
    b, c, doc = pair
    for key in DECIDING:
        m = _metric(doc, key)
        if m["pvalue"] is None:
            continue
        levels = [p["concurrency"] for p in doc["pairs"] if key != "paired_plateau_rps" or p["plateau"]]
        se = m["noise"]["sd"] * math.sqrt(2)
        if "widened" in m["noise"]["source"]:
            assert m["se_log"] >= se * (1 - 1e-4)
        else:
            assert m["se_log"] == pytest.approx(se, rel=1e-3)
        _check_interval(m, _raw_change(key, b, c, levels))


def _holm(pvalues: dict, weights: dict, alpha: float) -> tuple[set, dict]:
    """Weighted Holm written plainly: reject the smallest p / w while p <= alpha w / (sum of the rest)."""
    left, rejected, local = dict(weights), set(), {}
    while left:
        k = min(left, key=lambda j: pvalues[j] / left[j])
        a = alpha * left[k] / sum(left.values())
        if pvalues[k] > a:
            break
        rejected.add(k)
        local[k] = a
        del left[k]
    for k in left:
        local[k] = alpha * left[k] / sum(left.values())
    return rejected, local


def _check_holm(doc: dict) -> None:
    weights = doc["settings"]["weights"]
    metrics = {m["key"]: m for m in doc["metrics"] if m["key"] in weights and m["pvalue"] is not None}
    w = {k: weights[k] for k in metrics}
    rejected, local = _holm(
        {k: m["pvalue"] for k, m in metrics.items()}, w, 1 - doc["settings"]["confidence"]
    )
    threshold = doc["settings"]["threshold"]
    for k, m in metrics.items():
        assert m["level"] == pytest.approx(1 - local[k], abs=2e-6), k
        big = abs(m["change"]) >= (threshold if k != "error_rate" else doc["settings"]["error_threshold"])
        want = {"worse", "better"} if k in rejected and big else {"same", "unclear", "shown"}
        assert m["decision"] in want, (k, m)


def test_holm_decisions(pair):
    _check_holm(pair[2])


IL = ROOT / "data" / "calibration" / "interleaved" / "go-x2"


def _il_steps(name: str) -> dict[float, dict]:
    """Per level of one side of an interleaved recording: raw_steps' throughput and p50, and the
    CPU seconds the recorder measured over exactly that step (metadata step_cpu_s) per request."""
    out = raw_steps(f"../calibration/interleaved/go-x2/{name}")
    meta = yaml.safe_load((IL / name / "metadata.yml").read_text())
    for k, level in enumerate(meta["concurrency"]):
        out[float(level)]["cpu_s_per_req"] = meta["step_cpu_s"][k] / meta["step_requests"][k]
    return out


def _paired_se(d: list[list[float]]) -> tuple[float, float]:
    """The paired standard error as docs/ci.md states it, written out: residuals around each
    recording's mean; their lag-1 correlation bias-corrected ((K r + 1) / (K - 3)) and shrunk
    towards +0.45 with 40 residuals' weight, clipped to [0, 0.8]; the AR(1) inflation of a mean of
    K; df = residual df / inflation; the spread of the recordings' means when that is larger."""
    ss = df = num = den = 0.0
    for x in d:
        e = [v - statistics.fmean(x) for v in x]
        ss += sum(v * v for v in e)
        df += len(x) - 1
        num += sum(a * b for a, b in zip(e, e[1:]))
        den += sum(a * a for a in e[:-1])
    k = statistics.fmean(len(x) for x in d)
    rho = min(0.8, max(0.0, (df * (num / den * k + 1) / (k - 3) + 40 * 0.45) / (df + 40)))
    n = round(k)
    vif = 1 + 2 * sum((1 - j / n) * rho**j for j in range(1, n))
    total = sum(len(x) for x in d)
    se, eff = math.sqrt(max(ss / df, 1e-4) * vif / total), max(1.0, df / vif)
    means = [statistics.fmean(x) for x in d]
    spread = statistics.stdev(means) / math.sqrt(len(d))
    return (spread, len(d) - 1.0) if spread > se else (se, eff)


def test_an_interleaved_comparison_recomputed_from_its_raw_files():
    """go-x2 recordings 01 and 02 (raw files kept): every level's paired log ratio from the raw
    rows and the recorder's per-step CPU, then the change, standard error, df, p and interval."""
    names = ("01", "02")
    sides = [(_il_steps(f"a-{r}"), _il_steps(f"b-{r}")) for r in names]
    p = subprocess.run(
        [sys.executable, "-m", "headroom", "compare", "--baseline", *(IL / f"a-{r}" for r in names),
         "--candidate", *(IL / f"b-{r}" for r in names), "--json", "-"],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    assert doc["settings"]["design"] == "interleaved steps"
    for key in DECIDING:
        field = "rps" if key == "paired_plateau_rps" else key
        d = [[math.log(c[k][field] / a[k][field]) for k in sorted(a)] for a, c in sides]
        m = _metric(doc, key)
        mean = statistics.fmean(v for x in d for v in x)
        assert math.log1p(m["change"]) == pytest.approx(mean, abs=2e-5), key
        se, df = _paired_se(d)
        assert m["se_log"] == pytest.approx(se, rel=2e-3), key
        assert m["noise"]["df"] == pytest.approx(df, rel=2e-3), key
        _check_interval(m, mean)
    _check_holm(doc)

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
import functools
import gzip
import io
import itertools
import json
import math
import re
import statistics
import subprocess
import sys
import time

import numpy as np
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
    _check_ci(m, d)


def _check_ci(m: dict, d: float) -> None:
    """The interval exp(d +- t_q se) - 1 at the stated level and df."""
    se, df = m["se_log"], m["noise"]["df"]
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


IL = ROOT / "data" / "calibration" / "interleaved"


def _il_steps(name: str) -> list[tuple[float, dict]]:
    """Every step of one side of an interleaved recording, in order: (level, {rps, p50_s, cpu_s_per_req})
    from the raw rows, CPU from the seconds the recorder measured over exactly that step (step_cpu_s)."""
    folder = IL / name
    meta = yaml.safe_load((folder / "metadata.yml").read_text())
    text = gzip.decompress((folder / "perfResults.csv.gz").read_bytes()).decode()
    sections: list[list[tuple[int, float]]] = []
    for row in csv.reader(io.StringIO(text)):
        if row and row[0] == "start-time":
            sections.append([])
        elif row:
            sections[-1].append((_ns(row[0]), float(row[1])))
    out = []
    for k, (level, sec) in enumerate(zip(meta["concurrency"], sections)):
        start = min(t for t, _ in sec)
        end = max(t + round(lat * 1e9) for t, lat in sec)
        lats = sorted(lat for _, lat in sec)
        vals = {
            "rps": len(sec) / ((end - start) / 1e9),
            "p50_s": lats[math.ceil(0.5 * len(lats)) - 1],
            "cpu_s_per_req": meta["step_cpu_s"][k] / meta["step_requests"][k],
            # docs/ci.md: a step under 0.5 s or 50 requests drops out of its pair
            "usable": len(sec) >= 50 and (end - start) / 1e9 >= 0.5,
        }
        out.append((float(level), vals))
    return out


#: docs/ci.md's default pair noise (the prior of a recording with under 8 df of its own, with 4 df)
PRIOR_SD = {"paired_plateau_rps": 0.40, "p50_s": 0.35, "cpu_s_per_req": 0.12}


def _model(pairs: list[tuple[float, float]], key: str) -> dict:
    """docs/ci.md's model across load, written out for one recording of (level, log ratio) pairs:
    a line in log load by least squares on the pairs; pure error within levels; the levels' own noise
    from successive differences of level means (the largest left out, scaled by the trimmed mean of
    9 of 10 chi-square(1) draws, by simulation); pooled unless their F test has p <= 0.25; the F test of
    the line; each level's t test, Bonferroni over the levels; the smaller of the two p-values, doubled."""
    from scipy import stats as sps

    levels = sorted({x for x, _ in pairs})
    by = {c: [d for x, d in pairs if x == c] for c in levels}
    x = [math.log(c) for c, _ in pairs]
    d = [v for _, v in pairs]
    n = len(d)
    xm = statistics.fmean(x)
    slope = sum((a - xm) * (b - statistics.fmean(d)) for a, b in zip(x, d)) / sum((a - xm) ** 2 for a in x)
    ss_pe = sum((v - statistics.fmean(vs)) ** 2 for vs in by.values() for v in vs)
    df_pe = sum(len(vs) - 1 for vs in by.values())
    means = [statistics.fmean(by[c]) for c in levels]
    w = [(b - a) / math.sqrt(1 / len(by[c0]) + 1 / len(by[c1]))
         for a, b, c0, c1 in zip(means, means[1:], levels, levels[1:])]  # fmt: skip
    trim = _trim(len(w))
    w.remove(max(w, key=abs))
    v_d, df_d = sum(v * v for v in w) / trim / len(w), 2 * len(w) / 3
    pooled = sps.f.sf(v_d / (ss_pe / df_pe), df_d, df_pe) > 0.25
    var, df = ((ss_pe + v_d * df_d) / (df_pe + df_d), df_pe + df_d) if pooled else (v_d, df_d)
    if df < 8:
        var, df = (var * df + PRIOR_SD[key] ** 2 * 4) / (df + 4), df + 4
    se = math.sqrt(var / n)  # the average's: pairs independent (the design's correlation is 0)
    se_slope = math.sqrt(var / sum((a - xm) ** 2 for a in x))
    mean = statistics.fmean(d)
    f = ((mean / se) ** 2 + (slope / se_slope) ** 2) / 2  # the line's two coefficients are orthogonal
    p_f = sps.f.sf(f, 2, df)
    p_lv = min(1.0, len(levels) * min(2 * sps.t.sf(abs(statistics.fmean(by[c])) / math.sqrt(var / len(by[c])), df)
                                      for c in levels))  # fmt: skip
    raw = {c: (statistics.fmean(by[c]), math.sqrt(var / len(by[c]))) for c in levels}
    return {"mean": mean, "se": se, "df": df, "p_f": p_f, "p_levels": p_lv, "levels": raw}


@functools.cache
def _trim(k: int) -> float:
    """E[mean of the k-1 smallest of k chi-square(1) draws]: (k - E[max]) / (k - 1), E[max] by quadrature."""
    from scipy import integrate

    e_max, _ = integrate.quad(lambda x: 1.0 - sps.chi2.cdf(x, 1) ** k, 0, np.inf, limit=200)
    return (k - e_max) / (k - 1)


def _flip_p(pairs: list[tuple[float, float]], key: str) -> float:
    """docs/ci.md's joint test, one metric: the share of the 2^L sign patterns of whole levels whose
    line F test is at least as small as the observed one (the marginal sign-flip p-value)."""
    levels = sorted({x for x, _ in pairs})
    observed = _model(pairs, key)["p_f"]
    null = []
    for signs in itertools.product((1.0, -1.0), repeat=len(levels)):
        s = dict(zip(levels, signs))
        null.append(_model([(x, s[x] * d) for x, d in pairs], key)["p_f"])
    return sum(p <= observed * (1 + 1e-9) for p in null) / len(null)


@pytest.mark.parametrize("rec,codes", [("dev-go-aa-70/a-01", (0, 3)), ("dev-go-latency200-70/a-02", (1,))])
def test_an_interleaved_comparison_recomputed_from_its_raw_files(rec, codes):
    """Two recordings with two pairs a level, raw files kept (an A/A one, and one whose candidate
    waits 200 us a request): every pair's log ratio from the raw rows and the recorder's per-step
    CPU, then the change, its standard error, df and p-value of the model across load, and the
    interval."""
    rb = rec.replace("/a-", "/b-")
    a, b = _il_steps(rec), _il_steps(rb)
    p = subprocess.run(
        [sys.executable, "-m", "headroom", "compare", IL / rec, IL / rb, "--json", "-"],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert p.returncode in codes, p.stderr
    doc = json.loads(p.stdout)
    assert doc["settings"]["design"] == "interleaved steps"
    wants = {}
    for key in DECIDING:
        field = "rps" if key == "paired_plateau_rps" else key
        assert all(la == lb for (la, _), (lb, _) in zip(a, b))
        pairs = [
            (la, math.log(vb[field] / va[field]))
            for (la, va), (_, vb) in zip(a, b)
            if va["usable"] and vb["usable"]
        ]
        want = _model(pairs, key)
        m = _metric(doc, key)
        assert math.log1p(m["change"]) == pytest.approx(want["mean"], abs=2e-5), key
        assert m["se_log"] == pytest.approx(want["se"], rel=3e-3), key
        assert m["noise"]["df"] == pytest.approx(want["df"], rel=1e-6), key
        # the p-value the closed test judged: the line's sign-flip p over every pattern of the levels
        assert m["pvalue"] == pytest.approx(_flip_p(pairs, key), abs=1e-6), key  # JSON: 6 digits
        _check_ci(m, want["mean"])
        wants[key] = want
    for key in DECIDING:
        m = _metric(doc, key)
        if m.get("decided_at") is not None:  # a level decided: its own mean beyond the threshold that way
            d, _se = wants[key]["levels"][m["decided_at"]]
            sign = 1.0 if (m["decision"] == "worse") == (m["better"] == "lower") else -1.0
            assert sign * d >= math.log1p(0.10), key
        elif m["decision"] in ("worse", "better"):  # the average decided: beyond the threshold that way
            sign = 1.0 if (m["decision"] == "worse") == (m["better"] == "lower") else -1.0
            assert sign * wants[key]["mean"] >= math.log1p(0.10), key

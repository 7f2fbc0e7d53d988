"""Which endpoint changed (issue 51): compare's per-endpoint verdicts recomputed from the raw files.

The recordings are data/endpoints/ (``headroom ramp --engine locust --ab --interleave steps`` against
two Go test servers, B's /api/v2/cart made slower in the "cart" sets; see its README.md).  For each
recording the perfResults.csv sections are read with the csv module; a unit is section i of A beside
section i of B (A and B alternate within every level); each endpoint's nearest-rank p50 and p99 of its
2xx requests per unit (at least 10 and 100 requests a side), their log ratios, the exact two-sided
sign-flip p-value of their mean (every one of the 2**units patterns, by two halves), the exact
binomial test of the error counts, Holm over every endpoint and metric at 5 %, and a call beyond the
threshold (10 %; errors 0.1 points) with the printed interval (Student's t at the family's level)
clear of no change.  compare's JSON must agree: the change exactly, the p-value
within the Monte Carlo error of its 4,999 draws, every call.  Then the rates over the whole sets:
the slower endpoint REGRESSED in every A/B recording, at most 1 endpoint-level false alarm in 20
over the A/A recordings.
"""

from __future__ import annotations

import csv
import gzip
import json
import math
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT

DATA = ROOT / "data" / "endpoints"
ALPHA, THRESHOLD, ERR_THRESHOLD = 0.05, 0.10, 0.001
NEED = {"p50": (10, 0.5), "p99": (100, 0.99)}


def _sections(path):
    """Every section's rows (latency us, status, name), in file order."""
    out = []
    with gzip.open(path, "rt", newline="") as fh:
        for row in csv.reader(fh):
            if row[0] == "start-time":
                out.append([])
                continue
            out[-1].append((round(float(row[1]) * 1e6), int(row[2]), row[3]))
    return out


def _nearest_rank(v: list[int], q: float) -> int:
    v = sorted(v)
    return v[max(1, math.ceil(len(v) * q)) - 1]


def _exact_flip_p(d: np.ndarray) -> float:
    """Two-sided: the share of all 2**n sign patterns whose |sum| is at least the observed one."""
    n = len(d)
    h = n // 2

    def sums(x):
        signs = 1.0 - 2.0 * ((np.arange(2 ** len(x))[:, None] >> np.arange(len(x))[None, :]) & 1)
        return signs @ x

    a, b = sums(d[:h]), np.sort(sums(d[h:]))
    obs = abs(d.sum()) - 1e-9
    count = 0
    for s in a:  # |s + t| >= obs  <=>  t >= obs - s  or  t <= -obs - s
        count += (
            len(b) - np.searchsorted(b, obs - s, side="left") + np.searchsorted(b, -obs - s, side="right")
        )
    return count / 2.0**n


def _independent(rec_a, rec_b) -> dict:
    """{(name, metric): (change, p, judged)} and the calls, from the raw files."""
    from scipy.stats import binomtest
    from scipy.stats import t as t_dist

    sa, sb = _sections(rec_a), _sections(rec_b)
    assert len(sa) == len(sb)
    names = sorted({n for sec in sa + sb for _, _, n in sec})
    rows = {}
    for name in names:
        for metric, (need, q) in NEED.items():
            d = []
            for xa, xb in zip(sa, sb):
                la = [lat for lat, st, n in xa if n == name and 200 <= st <= 299]
                lb = [lat for lat, st, n in xb if n == name and 200 <= st <= 299]
                if len(la) >= need and len(lb) >= need:
                    d.append(math.log(_nearest_rank(lb, q) / _nearest_rank(la, q)))
            d = np.array(d)
            rows[(name, metric)] = (math.expm1(d.mean()), _exact_flip_p(d), d) if len(d) >= 6 else None
        fa = sum(1 for sec in sa for _, st, n in sec if n == name and not 200 <= st <= 299)
        na = sum(1 for sec in sa for _, _, n in sec if n == name)
        fb = sum(1 for sec in sb for _, st, n in sec if n == name and not 200 <= st <= 299)
        nb = sum(1 for sec in sb for _, _, n in sec if n == name)
        if fa + fb == 0:
            rows[(name, "error_rate")] = (0.0, 1.0, None, "no failure")
        else:
            rows[(name, "error_rate")] = (
                fb / nb - fa / na,
                binomtest(fb, fa + fb, nb / (na + nb)).pvalue,
                None,
            )
    # an error rate without a failed request on either side cannot be called changed: not in the family
    judged = {k: v for k, v in rows.items() if v is not None and not (k[1] == "error_rate" and len(v) == 4)}
    # a latency test whose units cannot reach the first Holm step is left out of the family
    floor = ALPHA / len(judged)
    for k, v in list(judged.items()):
        if v[2] is not None and (2.0 / 2 ** len(v[2]) if len(v[2]) <= 14 else 1 / 5000) > floor:
            del judged[k]
    order = sorted(judged, key=lambda k: judged[k][1])
    rejected = set()
    for rank, k in enumerate(order):
        if judged[k][1] > ALPHA / (len(order) - rank):
            break
        rejected.add(k)
    calls = {}
    for k, v in rows.items():
        if v is not None and len(v) == 4:  # no failure on either side
            calls[k] = "no change shown"
            continue
        if k not in judged:
            calls[k] = "not judged"
            continue
        limit = ERR_THRESHOLD if k[1] == "error_rate" else THRESHOLD
        beyond = abs(v[0]) >= limit
        if k[1] != "error_rate":  # and the interval printed beside it (Student's t, family level) clear of 0
            d = v[2]
            half = (
                t_dist.ppf(0.5 + (1 - ALPHA / len(judged)) / 2, len(d) - 1)
                * d.std(ddof=1)
                / math.sqrt(len(d))
            )
            beyond = beyond and (d.mean() - half > 0 or d.mean() + half < 0)
        calls[k] = (
            ("regressed" if v[0] > 0 else "improved") if k in rejected and beyond else "no change shown"
        )
    return {"rows": rows, "calls": calls}


def _recordings(kind: str):
    return sorted(
        (d, i) for d in DATA.glob(f"ep-go-{kind}-*") for i in range(1, 1 + len(list(d.glob("a-*"))))
    )


def _compare(d, i) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "headroom", "compare", str(d / f"a-{i:02d}"), str(d / f"b-{i:02d}"), "--json", "-"],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert out.returncode in (0, 1, 3), out.stderr
    return json.loads(out.stdout[out.stdout.index("{") :])


def _check(d, i) -> dict:
    doc = _compare(d, i)
    want = _independent(d / f"a-{i:02d}" / "perfResults.csv.gz", d / f"b-{i:02d}" / "perfResults.csv.gz")
    got = {(e["name"], m["metric"]): (e, m) for e in doc["endpoints"] for m in e["metrics"]}
    assert {k for k in got} == set(want["rows"])
    for k, row in want["rows"].items():
        e, m = got[k]
        assert m["call"] == want["calls"][k], (d.name, i, k, m, row)
        if row is None or m["call"] == "not judged" or m["p"] is None:
            continue
        assert m["change"] == pytest.approx(row[0], abs=1e-9)
        # 4,999 seeded draws: within four of their standard errors (exact for the error rate)
        tol = 4 * math.sqrt(row[1] * (1 - row[1]) / 5000) + 1e-3 if k[1] != "error_rate" else 1e-9
        assert m["p"] == pytest.approx(row[1], abs=tol)
    return doc


@pytest.mark.parametrize("d,i", _recordings("cart2x"), ids=lambda x: getattr(x, "name", str(x)))
def test_the_slower_endpoint_is_named_regressed_in_every_ab_recording(d, i):
    doc = _check(d, i)
    cart = next(e for e in doc["endpoints"] if e["name"] == "/api/v2/cart")
    assert cart["verdict"] == "regressed"
    assert doc["verdict"] == "regressed" and doc["reason"].startswith("/api/v2/cart: ")


def test_aa_recordings_raise_at_most_one_endpoint_false_alarm_in_twenty():
    judged = alarms = 0
    for d, i in _recordings("aa"):
        doc = _check(d, i)
        for e in doc["endpoints"]:
            if e["verdict"] == "not judged":
                continue
            judged += 1
            alarms += e["verdict"] in ("regressed", "improved")
    assert judged >= 18
    assert alarms * 20 <= judged

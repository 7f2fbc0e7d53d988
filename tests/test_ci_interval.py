"""Every decision metric's interval is the t interval its JSON states, recomputed with scipy.

For each metric of ``headroom compare --json`` on a bundled pair (run-level
test) and on a real interleaved recording (paired test): the interval is
``exp(log(1 + change) +- t(1 - (1 - level) / 2, df) * se) - 1`` with the
standard error, degrees of freedom and level the document states, and for
the run-level test the standard error is the stated between-run noise times
sqrt(1/n_b + 1/n_c) unless the note says it was widened to the steps.
Quantiles come from scipy, not from headroom's own t quantile.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from conftest import ROOT
from scipy import stats

IL = "data/calibration/interleaved"
CASES = {
    "bundled pair": ["data/runs/nginx-no-keepalive", "data/runs/nginx-keepalive"],
    "interleaved A/A": [f"{IL}/aa/a-01", f"{IL}/aa/b-01"],
    "interleaved 2x": [f"{IL}/go-x2/a-01", f"{IL}/go-x2/b-01"],
}


def _compare(case: str) -> dict:
    p = subprocess.run(
        [sys.executable, "-m", "headroom", "compare", *CASES[case], "--json", "-"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert p.returncode in (0, 1, 3), p.stderr
    return json.loads(p.stdout[p.stdout.index("{") :])


@pytest.fixture(scope="module", params=list(CASES))
def doc(request):
    return _compare(request.param)


@pytest.fixture(scope="module")
def run_level_doc():
    """The run-level case (a paired comparison's standard error comes from the level pairs:
    tests/test_across_load.py recomputes it)."""
    d = _compare("bundled pair")
    assert d["settings"].get("design") != "interleaved steps"
    return d


def test_intervals_are_the_stated_t_intervals(doc):
    checked = 0
    for m in doc["metrics"]:
        if not m["decides"] or m["ci"] is None or m["key"] == "error_rate":
            continue
        se, df, level = m["se_log"], m["noise"]["df"], m["level"]
        q = stats.t.ppf(1 - (1 - level) / 2, df)
        d = math.log1p(m["change"])
        lo, hi = math.expm1(d - q * se), math.expm1(d + q * se)
        # the document rounds to 6 significant digits; the level's rounding moves q a little
        assert m["ci"][0] == pytest.approx(lo, rel=2e-3, abs=2e-4), m["key"]
        assert m["ci"][1] == pytest.approx(hi, rel=2e-3, abs=2e-4), m["key"]
        checked += 1
    assert checked >= 3


def test_run_level_standard_error_is_the_stated_noise(run_level_doc):
    doc = run_level_doc
    nb, nc = len(doc["baseline"]), len(doc["candidate"])
    checked = 0
    for m in doc["metrics"]:
        if not m["decides"] or m["key"] == "error_rate" or m.get("se_log") is None:
            continue
        if "widened" in m["noise"]["source"]:
            continue  # the steps' own spread: checked by the interval test above
        assert m["se_log"] == pytest.approx(m["noise"]["sd"] * math.sqrt(1 / nb + 1 / nc), rel=1e-4), m["key"]
        checked += 1
    assert checked >= 1

"""What compare says about how it paired and what it was given (issue 30: texts that agree with
the input): a rate ramp is paired by its planned rates, a run compared with itself is named so
once, and each warning is said once."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT

REAL = ROOT / "tests" / "data" / "formats" / "real"


def compare(*paths) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "headroom", "compare", *map(str, paths)],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip


def flat(text: str) -> str:
    return " ".join(text.split())


def test_a_run_compared_with_itself_is_a_usage_error():
    """Nothing can change: compare RUN RUN is exit 2 in one line naming the file (issue 49; it was a
    warning over a verdict).  The library still compares it, saying so once and labelling the sides."""
    f = REAL / "vegeta-rates.csv.gz"
    r = compare(f, f)
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "headroom: error: the baseline and the candidate are the same"
    )
    assert "vegeta-rates.csv.gz" in lines[0] and "compare two different runs" in lines[0]
    from headroom import reduce_run
    from headroom.compare import compare_runs
    from headroom.text import format_comparison

    run = reduce_run(str(f))
    c = compare_runs(run, run)
    out = flat(format_comparison(c))
    assert "headroom compare: vegeta-rates (baseline) vs vegeta-rates (candidate)" in out
    assert "(baseline) (baseline)" not in out
    same = [w for w in c.warnings if "same run(s)" in w]
    assert len(same) == 1 and same[0].endswith("vegeta-rates.csv.gz): every change is 0")
    # the vegeta file's 3,720 failed requests of 62,000 (its README: vegeta report of each attack)
    assert sum("3,720 of 62,000 requests failed" in w for w in c.warnings) == 1


def test_rate_ramps_are_paired_by_their_planned_rates():
    from headroom import reduce_run
    from headroom.compare import compare_runs
    from headroom.text import format_comparison

    run = reduce_run(str(REAL / "vegeta-rates.csv.gz"))
    out = flat(format_comparison(compare_runs(run, run)))
    assert "steps paired by step index: open-loop rate ramps with the same planned rates" in out
    # vegeta's 250-4,000 req/s against k6's arrival-rate plan: said, not hidden
    r = compare(REAL / "k6-ramping-arrival-rate.csv.gz", REAL / "vegeta-rates.csv.gz")
    assert "open-loop rate ramps whose planned rates differ (step k against step k)" in flat(r.stdout)
    assert "concurrency unknown" not in r.stdout
    assert "same run(s)" not in r.stderr

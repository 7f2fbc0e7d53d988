"""Terminal output fits 100 columns on every bundled run, wrapping values rather than cutting them."""

import os

import pytest
from conftest import RUNS

from headroom import analyze, compare_runs, parse_objective, reduce_run
from headroom.text import format_comparison, format_summary

BUNDLED = sorted(p.name for p in RUNS.iterdir() if (p / "metadata.yml").exists())
OBJ = parse_objective("p99.9<=20ms")


@pytest.fixture(scope="module")
def summaries():
    # run from the clone's root, as a user would: the "source:" line then shows the path relative to
    # it, whatever the length of the absolute path of the clone
    old = os.getcwd()
    os.chdir(RUNS.parent.parent)
    try:
        return {
            n: analyze(reduce_run(RUNS / n), objective=OBJ, current_load_rps=5000, target_load_rps=1e5)
            for n in BUNDLED
        }
    finally:
        os.chdir(old)


def test_summary_fits_100_columns(summaries):
    assert len(BUNDLED) >= 3
    for name, s in summaries.items():
        text = format_summary(s)
        wide = [ln for ln in text.splitlines() if len(ln) > 100]
        assert wide == [], name
        # wrapped, not cut: the capacity text is all there, word for word
        flat = " ".join(text.split())
        for _, value in __import__("headroom.text", fromlist=["capacity_rows"]).capacity_rows(s):
            assert " ".join(value.split()) in flat, (name, value)


def test_compare_fits_100_columns(summaries):
    names = list(summaries)
    pairs = [(names[i], names[j]) for i in range(len(names)) for j in range(len(names)) if i != j][:12]
    for a, b in pairs:
        try:
            c = compare_runs(summaries[a], summaries[b], objective=OBJ)
        except Exception as e:  # plans that cannot be matched are refused with a message
            assert "do not match" in str(e)
            continue
        text = format_comparison(c)
        assert [ln for ln in text.splitlines() if len(ln) > 100] == [], (a, b)
        assert " ".join(c.reason.split()) in " ".join(text.split())
    # repeat runs: long lists of labels in the header wrap too
    base = [summaries[n] for n in ("nginx-ka-aa1-a", "nginx-ka-aa2-a")]
    cand = [summaries[n] for n in ("nginx-ka-aa1-b", "nginx-ka-aa2-b")]
    c = compare_runs(base, cand, objective=OBJ)
    base, cand = ", ".join(c.baseline_labels), ", ".join(c.candidate_labels)
    header = f"headroom compare: {base} (baseline) vs {cand} (candidate)"
    assert len(header) > 100  # so the header had to wrap
    assert max(len(ln) for ln in format_comparison(c).splitlines()) <= 100


def test_the_peak_step_of_an_open_loop_names_its_intended_rate():
    """vegeta's five attacks (tests/data/formats/real/README.md: 250 ... 4000 req/s): the peak step is the
    one with the most requests a second, and its row names that attack's rate, not "concurrency -"."""
    from conftest import ROOT

    from headroom.text import capacity_rows

    s = analyze(reduce_run(str(ROOT / "tests" / "data" / "formats" / "real" / "vegeta-rates.csv.gz")))
    planned = [250, 500, 1000, 2000, 4000]
    peak = int(max(range(len(s.table)), key=lambda k: s.table.rps[k]))
    row = dict(capacity_rows(s))["peak step"]
    assert f"step {peak + 1}, intended rate {planned[peak]:,} req/s;" in row
    assert "concurrency" not in row

"""The recorded search sets of data/search (issue 39's "must show"), read back with today's code.

Every folder reads as its probes say; every search took at most half its dense reference ramp's
time; and the figures data/search/README.md states (how often the search's capacity lay within
10 % of the reference's and its interval covered it, how often the A/B interval excluded or
included no change) are what the data give now: the README cannot drift from the code.
"""

from __future__ import annotations

import functools
import math
import re
import subprocess
import sys

import pytest
import yaml
from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))

import record_search as rs  # noqa: E402

DATA = ROOT / "data" / "search"
README = DATA / "README.md"


@functools.cache
def _ref(name: str) -> list[dict]:
    """A ref set's rounds as scripts/record_search.py evaluates them (read once for the tests here)."""
    return rs.evaluate_ref(name)


@functools.cache
def _ab(name: str) -> list[dict]:
    return rs.evaluate_ab(name)


def _sets(kind: dict) -> list[str]:
    return [n for n in kind if (DATA / n).is_dir()]


def _search_folders():
    """The first three rounds of every set (every folder of every round is read by the evaluation the
    README's figures come from, below; here each folder's probes are checked against its steps)."""
    for name in _sets(rs.REF):
        yield from sorted(DATA.glob(f"{name}/0[1-3]/search"))
    for name in _sets(rs.AB):
        yield from sorted(DATA.glob(f"{name}/0[1-3]/[ab]-01"))


def test_the_sets_are_there():
    assert _sets(rs.REF) and _sets(rs.AB), "data/search holds the recorded sets (scripts/record_search.py)"


@pytest.mark.parametrize("folder", list(_search_folders()), ids=lambda p: "/".join(p.parts[-3:]))
def test_a_search_folder_reads_as_its_probes(folder):
    from headroom.io import reduce_run

    meta = yaml.safe_load((folder / "metadata.yml").read_text())
    probes = meta["search"]["probes"]
    assert (
        [p["concurrency"] for p in probes]
        == meta["concurrency"]
        == list(reduce_run(str(folder)).reduced.steps.concurrency)
    )
    assert [p["step"] for p in probes] == list(range(1, len(probes) + 1))
    assert meta["search"]["stopped"] in ("precision", "noise", "budget", "held", "limit", "broken")


@pytest.mark.parametrize("name", [n for n in _sets(rs.REF) if n not in rs.DEFAULTS])
def test_every_search_took_at_most_half_its_reference_ramps_time(name):
    rows = _ref(name)
    assert rows and all(r["time_ratio"] <= 0.5 for r in rows), [r["time_ratio"] for r in rows]


@pytest.mark.parametrize("name", [n for n in _sets(rs.REF) if n in rs.DEFAULTS])
def test_the_readme_states_what_the_searches_at_their_defaults_give(name):
    """Issue 50's sets: the search at its default flags against a dense 2 s ramp recorded right before
    it: within 15 % of its crossing, its interval covering it, and the search's time at most 0.6 of the
    dense ramp's to its first step past the crossing, as README.md states them."""
    rows = _ref(name)
    n = len(rows)
    said = _stated(name)
    assert said[" within 15 %"] == (sum(bool(r["within_15"]) for r in rows), n), said
    assert said[" covered"] == (sum(bool(r["covers"]) for r in rows), n), said
    assert said[" time at most 60 % of the reference"] == (sum(r["time_ratio"] <= 0.6 for r in rows), n), said


@pytest.mark.parametrize("name", _sets(rs.REF))
def test_every_interval_holds_its_estimate(name):
    """The throughput at the objective lies inside its own 95 % interval, for the search and the dense
    ramps (the line of throughput read at the estimate's load is not always between its values at the
    interval's ends and the steps there: the interval must take it in)."""
    for r in _ref(name):
        for status, rps, low, high in [r["search"], *r["dense"]]:
            if status == "crossed":
                assert (low or 0) <= rps <= (high or float("inf")), (r["round"], rps, low, high)


def _stated(name: str) -> dict[str, tuple[int, int]]:
    """The counts README.md states for a set: ``- `NAME`: within 10 %: 4/10; covered: 8/10; ...``."""
    line = next(x for x in README.read_text().splitlines() if x.startswith(f"- `{name}`:"))
    return {
        k: (int(a), int(b)) for k, a, b in re.findall(r"([a-z0-9 %]+): (\d+)/(\d+)", line[len(name) + 5 :])
    }


@pytest.mark.parametrize("name", [n for n in _sets(rs.REF) if n not in rs.DEFAULTS])
def test_the_readme_states_what_the_reference_sets_give(name):
    rows = _ref(name)
    n = len(rows)
    near = sum(r["difference"] is not None and abs(r["difference"]) <= 0.10 for r in rows)
    covered = sum(bool(r["covers"]) for r in rows)
    said = _stated(name)
    assert said[" within 10 %"] == (near, n) and said[" covered"] == (covered, n), said
    if name in rs.SANDWICH:  # no further from the reference than it is from itself
        span = sum(bool(r["in_span"]) for r in rows)
        assert said[" within 10 % of either dense ramp or between them"] == (span, n), said
        agree = sum(bool(r["agrees"]) for r in rows)
        assert said[" agrees with the reference within their joint 95 % uncertainty"] == (agree, n), said


@pytest.mark.parametrize("name", _sets(rs.AB))
def test_the_readme_states_what_the_ab_sets_give(name):
    rows = _ab(name)
    n = len(rows)
    below = sum(r["ci"] is not None and r["ci"][1] < 0 for r in rows)
    zero = sum(r["ci"] is not None and r["ci"][0] <= 0 <= r["ci"][1] for r in rows)
    said = _stated(name)
    assert said[" below 0"] == (below, n) and said[" including 0"] == (zero, n), said


def test_an_unpaired_change_is_the_sides_own_intervals_combined():
    """Where the pairs cannot place the shift (the percentile not seen to rise near the crossings), the
    change is read from each side's own capacity interval: recomputed here from the two crossings
    with the normal distribution (scipy), as independent log-normal estimates."""
    from scipy import stats

    from headroom import analyze
    from headroom.io import reduce_run

    seen = 0
    for name in _sets(rs.AB):
        for row in _ab(name):
            if not row["note"].startswith("unpaired"):
                continue
            seen += 1
            job = DATA / name / row["round"]
            xs = [
                analyze(reduce_run(str(job / k)), objective=rs.AB[name][2]).capacity.at_objective
                for k in ("a-01", "b-01")
            ]
            z = stats.norm.ppf(0.975)
            se = math.hypot(*((math.log(x.high) - math.log(x.low)) / (2 * z) for x in xs))
            d = math.log(xs[1].rps) - math.log(xs[0].rps)
            assert row["change"] == pytest.approx(math.expm1(d), rel=1e-9)
            assert row["ci"] == pytest.approx((math.expm1(d - z * se), math.expm1(d + z * se)), rel=1e-6)
            assert row["pvalue"] == pytest.approx(2 * stats.norm.sf(abs(d) / se), rel=1e-6)
            assert "does not clearly rise" in row["note"]
    assert seen, "the recorded A/A jobs whose p99 did not clearly rise are read unpaired (ab-nginx-aa-hog)"


def test_summary_compare_and_report_read_a_search_folder(tmp_path):
    # steps in probe order, not load order: every command reads them
    folder = sorted(DATA.glob("ref-go/[0-9][0-9]/search"))[0]
    dense = folder.parent / "dense"
    obj = yaml.safe_load((folder / "metadata.yml").read_text())["search"]["objective"]

    def cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "headroom", *map(str, args)], capture_output=True, text=True, cwd=ROOT
        )

    s = cli("summary", folder, "--objective", obj)
    assert s.returncode == 0 and "95 % interval" in s.stdout, s.stderr
    c = cli("compare", dense, folder, "--objective", obj)
    assert c.returncode in (0, 1, 3), c.stderr
    out = tmp_path / "r.html"
    r = cli("report", dense, folder, "-o", out, "--objective", obj)
    assert r.returncode == 0, r.stderr
    assert "95 % interval" in out.read_text()


def test_compare_judges_the_capacity_at_the_objective_and_says_it_once():
    """An A/B search compared with its objective: the throughput at the objective is a judged metric
    (issue 39), paired (the capacity change of compare/capacity.py), in the error budget's
    throughput-led kind; the opening sentences quote its numbers once, as judged."""
    from headroom import load_run
    from headroom.compare import compare_runs, to_json
    from headroom.headline import capacity_sentence, headline
    from headroom.model import parse_objective

    job = DATA / "ab-go-cpu20" / "01"
    meta = yaml.safe_load((job / "a-01" / "metadata.yml").read_text())
    obj = meta["search"]["objective"]
    c = compare_runs(load_run(job / "a-01"), load_run(job / "b-01"), objective=parse_objective(obj))
    m = next(x for x in to_json(c)["metrics"] if x["key"] == "rps_at_objective")
    assert m["decides"] and m["weight"] and m["weight"] > 0 and m["pvalue"] is not None, m
    lines = headline(c)
    assert not any("shown, not judged" in x for x in lines), lines
    said = capacity_sentence(c)
    assert f"at {obj}" in said and f"{m['baseline']:,.0f} req/s to {m['candidate']:,.0f} req/s" in said, (
        said,
        m,
    )

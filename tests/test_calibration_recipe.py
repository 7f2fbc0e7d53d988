"""The CI recipe's calibration table of docs/ci.md, recomputed from the recordings it names (issue 48).

Every row (the held-out ``r7-*`` sets) between the ``<!-- recipe-table -->`` markers (set, way, server CPU, then the count of each
verdict) is judged again here from data/calibration/interleaved: the recipe (``--noise-from`` the two
previous A/A recordings of the same server and load, cyclically, never the judged one; the objective
``p99<=20ms``; a 10 % threshold) and the plain compare, with the server's CPU and without it (as an
imported k6, JMeter, Gatling, vegeta, oha or hey run has none).  Then the published rates are checked
on those counts against issue 48's targets, the two it misses named.
"""

from __future__ import annotations

import collections
import sys
from concurrent.futures import ProcessPoolExecutor

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))

DOC = ROOT / "docs" / "ci.md"
IL = ROOT / "data" / "calibration" / "interleaved"
VERDICTS = ("regressed", "improved", "no regression", "no change", "inconclusive")


def table() -> dict[tuple[str, str, str], tuple[int, ...]]:
    text = DOC.read_text()
    start, end = text.index("<!-- recipe-table -->"), text.index("<!-- /recipe-table -->")
    rows = {}
    for line in text[start:end].splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) >= 9 and cells[0].startswith("r7-") and cells[3].isdigit():
            rows[(cells[0], cells[1], cells[2])] = tuple(int(c) for c in cells[3:9])
    return rows


def aa_of(name: str) -> str | None:
    """The A/A set that gives a set its noise: itself for an A/A set, else the same server and load's."""
    if "-aa-" in name:
        return None
    server = "nginx" if name.startswith("r7-nginx") else "go"
    return f"r7-{server}-aa-{name.rsplit('-', 1)[1]}"


@pytest.fixture(scope="module")
def counts():
    from calibrate_recipe import jobs_for, judge

    rows = table()
    names = sorted({k[0] for k in rows})
    specs = [str(IL / n) + (f"={IL / aa_of(n)}" if aa_of(n) else "") for n in names]
    jobs = [j for s in specs for j in jobs_for(s, "p99<=20ms")]
    with ProcessPoolExecutor(2) as pool:
        got = list(pool.map(judge, jobs))
    out = collections.defaultdict(list)
    for name, way, cpu, _k, verdict, _reason in got:
        out[(name, way, cpu)].append(verdict)
    return rows, out


def test_the_published_table_is_what_the_recordings_give(counts):
    rows, got = counts
    assert len(rows) >= 64, "docs/ci.md: the recipe table lost its rows"
    for key, want in rows.items():
        c = collections.Counter(got[key])
        assert (len(got[key]), *(c[v] for v in VERDICTS)) == want, key


def test_the_published_rates_against_issue_48s_targets(counts):
    """What docs/ci.md publishes for the held-out r7 sets (two servers, about 30 % and 50-65 % foreign
    load), held against issue 48's targets: A/A false alarms at most 1 in 20 each way (the recipe: none),
    exit 0 with the CPU in at least 90 %, 2x, +25-30 % CPU a request and the 2 ms wait caught every time,
    every way, and never the wrong direction."""
    rows, _ = counts
    by = collections.defaultdict(lambda: collections.Counter())
    for (name, way, cpu), (n, *vs) in rows.items():
        kind = name.rsplit("-", 1)[0].split("-")[-1]  # r7-nginx-go-latency2ms-95: latency2ms
        c = by[(kind, way, cpu)]
        c["n"] += n
        c.update(dict(zip(VERDICTS, vs)))
    for way in ("plain", "recipe"):
        for cpu in ("with", "without"):
            aa = by[("aa", way, cpu)]
            assert aa["n"] >= 20 and (aa["regressed"] + aa["improved"]) * 20 <= aa["n"], (way, cpu, aa)
            assert way == "plain" or aa["regressed"] + aa["improved"] == 0, (way, cpu, aa)
            for kind in ("x2", "latency2ms", "cpu30", "cpu25"):
                ch = by[(kind, way, cpu)]
                assert ch["n"] and ch["regressed"] == ch["n"], (kind, way, cpu, ch)
                assert ch["improved"] == 0, (kind, way, cpu)  # never the wrong direction
        aa = by[("aa", way, "with")]
        assert aa["n"] * 0.9 <= sum(aa[v] for v in VERDICTS[1:4]), (way, aa)

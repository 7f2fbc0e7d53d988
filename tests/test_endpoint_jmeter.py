"""Which endpoint changed, on JMeter recordings made apart (issue 51): data/endpoints/jm-go-*.

Every set is rounds of four JMeter runs in the order A B B A (scripts/record_jmeter_endpoints.py:
a stepping plan of 1 to 12 threads, three labelled samplers, two Go test servers; in the "cart" set
B's /api/v2/cart does ten times the work).  Per run, every label's requests and errors in headroom's
summary equal JMeter's own statistics of that run (statistics.json of its dashboard: sampleCount,
errorCount).  Per round, ``headroom compare --baseline a1 a2 --candidate b1 b2`` judges each endpoint
at matched levels: /api/v2/cart is named REGRESSED, first, in every A/B round; over the A/A rounds
at most 1 endpoint-level false alarm in 20 endpoint judgements.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT

DATA = ROOT / "data" / "endpoints"
RUNS = sorted(DATA.glob("jm-go-*/*/results.csv.gz"))
SLOW = "/api/v2/cart"


def _json(*args: str) -> tuple[int, dict]:
    out = subprocess.run(
        [sys.executable, "-m", "headroom", *args, "--json", "-"], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode in (0, 1, 3), out.stderr
    return out.returncode, json.loads(out.stdout[out.stdout.index("{") :])


def test_the_sets_are_there():
    assert len(RUNS) >= 16, RUNS


def test_endpoint_counts_equal_jmeters_own_statistics():
    """Every run (in process: the summary's JSON of each, as ``headroom summary --json`` writes it)."""
    from headroom.io import reduce_run
    from headroom.summary import analyze, to_json

    for run in RUNS:
        stats = json.loads((run.parent / "statistics.json").read_text())
        doc = to_json(analyze(reduce_run(str(run))))
        got = {e["name"]: (e["requests"] + e["errors"], e["errors"]) for e in doc["endpoints"]}
        want = {k: (v["sampleCount"], v["errorCount"]) for k, v in stats.items() if k != "Total"}
        assert got == want, run
        assert doc["requests"]["total"] == stats["Total"]["sampleCount"], run


def _compare(folder, rnd: str) -> tuple[int, dict]:
    a = [str(folder / f"{rnd}-a{k}" / "results.csv.gz") for k in (1, 2)]
    b = [str(folder / f"{rnd}-b{k}" / "results.csv.gz") for k in (1, 2)]
    return _json("compare", "--baseline", *a, "--candidate", *b)


def _judgements(kind: str) -> list:
    out = []
    for folder in sorted(DATA.glob(f"jm-go-{kind}-*")):
        for rnd in sorted({p.name.split("-")[0] for p in folder.glob("*-a1")}):
            out.append((folder, rnd))
    return out


@pytest.mark.parametrize("folder,rnd", _judgements("cart10x"), ids=lambda x: getattr(x, "name", x))
def test_the_slower_endpoint_is_named_regressed_first_in_every_ab_round(folder, rnd):
    code, doc = _compare(folder, rnd)
    verdicts = {e["name"]: e["verdict"] for e in doc["endpoints"]}  # the most requested first
    assert verdicts[SLOW] == "regressed", verdicts
    assert code == 1 and doc["verdict"] == "regressed"
    assert doc["reason"].startswith(f"{SLOW}: ")  # named first: the surest regression


def test_aa_rounds_raise_at_most_one_endpoint_false_alarm_in_twenty():
    judged = alarms = 0
    for folder, rnd in _judgements("aa"):
        _, doc = _compare(folder, rnd)
        for e in doc["endpoints"]:
            judged += 1
            alarms += e["verdict"] in ("regressed", "improved")
    assert judged >= 9
    assert alarms * 20 <= judged, f"{alarms} endpoint false alarms in {judged}"

"""Stored JSON documents read back: golden files written by the CLI (this version and the one before)."""

import json
import subprocess
import sys

import pytest
from conftest import ROOT

from headroom.compare import to_json as comparison_json
from headroom.history import to_json as history_json
from headroom.model import HeadroomError
from headroom.serialize import from_json, read_json
from headroom.text import format_comparison

GOLDEN = ROOT / "tests" / "data" / "golden"


def test_comparison_round_trips_byte_for_byte():
    path = GOLDEN / "comparison-schema3.json"
    c = read_json(path)
    assert c.verdict == "improved" and c.exit_code == 0 and c.primary == "cpu_s_per_req"
    assert json.dumps(comparison_json(c), indent=2) == json.dumps(json.loads(path.read_text()), indent=2)


def test_the_cli_still_writes_the_golden_comparison(tmp_path):
    # the same runs and options as when the golden file was written: the same bytes
    out = tmp_path / "c.json"
    args = ["data/runs/nginx-no-keepalive", "data/runs/nginx-keepalive", "--objective", "p99<=5ms"]
    p = subprocess.run(
        [sys.executable, "-m", "headroom", "compare", *args, "--json", out],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert p.returncode == 0, p.stderr
    assert json.loads(out.read_text()) == json.loads((GOLDEN / "comparison-schema3.json").read_text())


def test_an_old_comparison_still_reads():
    # written by headroom before the per-metric noise (schema 2: one run-noise floor)
    c = read_json(GOLDEN / "comparison-schema2.json")
    assert c.verdict == "improved" and c.metric("plateau_rps").change == pytest.approx(1.123, abs=1e-3)
    assert c.metric("plateau_rps").noise.sd == 0.05
    text = format_comparison(c)
    assert "verdict: IMPROVED" in text and "default floor, 5% per run" in text and "schema 2" in text


def test_history_round_trips_and_renders():
    from headroom.history_view import format_history, history_table

    path = GOLDEN / "history-schema2.json"
    h = read_json(path)
    assert json.dumps(history_json(h)) == json.dumps(json.loads(path.read_text()))
    assert h.latest is not None and h.exit_code == {"regressed": 1, "no regression": 0}.get(
        h.latest.verdict, 3
    )
    assert "short series" in format_history(h) and "<table" in history_table(h)


def test_bad_documents_are_one_line_errors(tmp_path):
    with pytest.raises(HeadroomError, match="kind must be one of"):
        from_json({"schema": 3})
    with pytest.raises(HeadroomError, match="comparison schema 99 is not one this headroom reads"):
        from_json({"kind": "comparison", "schema": 99})
    bad = tmp_path / "bad.json"
    bad.write_text('{"kind": "comparison", "schema": 3, "verdict": "improved"}')
    with pytest.raises(HeadroomError, match=r"bad\.json: not a headroom document of the shape"):
        read_json(bad)
    bad.write_text("{not json")
    with pytest.raises(HeadroomError, match=r"bad\.json: not a readable JSON document"):
        read_json(bad)


def test_an_interleaved_comparison_round_trips_with_its_levels():
    """The change at every level (issue 37) is written and read back: JSON -> Comparison -> JSON."""
    from headroom import reduce_run
    from headroom.compare import compare_runs, to_json
    from headroom.serialize import comparison_from_json

    sets = ROOT / "data" / "calibration" / "interleaved" / "dev-go-latency200-70"
    c = compare_runs(reduce_run(str(sets / "a-03")), reduce_run(str(sets / "b-03")))
    doc = to_json(c)
    levels = next(m for m in doc["metrics"] if m["key"] == "p50_s")["levels"]
    assert [lv["load"] for lv in levels] == sorted(lv["load"] for lv in levels) and len(levels) == 11
    assert all(lv["raw_ci"][0] <= lv["raw_change"] <= lv["raw_ci"][1] for lv in levels)
    back = comparison_from_json(json.loads(json.dumps(doc)))
    assert to_json(back) == doc

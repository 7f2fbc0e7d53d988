"""Percentiles on a coarse grid (hey writes response times to 0.1 ms) are not judged near zero.

r6-nginx-aa-45/01 (an A/A recording, two pairs a level) once raised a false alarm: p50 +100 % at
c=1, 0.1 ms against 0.2 ms in both pairs: rounding, not change.  The rule: a level whose every pair
of steps has its percentile at most 3 quanta on both sides cannot decide alone (it still counts in
the line across load).  Here the raw files are read with gzip and csv, each step's nearest-rank
median is computed in integer 0.1 ms ticks, and the levels named, every level's pairs and raw
change are checked against ``headroom compare --json``.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import subprocess
import sys

import numpy as np
import pytest
import yaml
from conftest import ROOT

SET = ROOT / "data" / "calibration" / "interleaved" / "r6-nginx-aa-45"


def step_medians(folder) -> tuple[list[float], list[int]]:
    """(concurrency of each step, nearest-rank median of its response times in 0.1 ms ticks)."""
    meta = yaml.safe_load((folder / "metadata.yml").read_text())
    text = gzip.decompress((folder / "perfResults.csv.gz").read_bytes()).decode()
    sections: list[list[int]] = []
    for row in csv.reader(io.StringIO(text)):
        if not row:
            continue
        if row[0] == "start-time":
            sections.append([])
        elif row[2] == "200":
            sections[-1].append(round(float(row[1]) * 10_000))
    out = []
    for ticks in sections:
        ticks.sort()
        out.append(ticks[math.ceil(len(ticks) * 0.5) - 1])
    return [float(c) for c in meta["concurrency"]], out


def test_latency_quantum_finds_the_coarsest_grid():
    from headroom.compare.specs import coarse, latency_quantum

    assert latency_quantum(np.array([0.0001, 0.0003, 0.0012, 0.0047])) == pytest.approx(1e-4)
    assert latency_quantum(np.array([0.001, 0.002, 0.017])) == pytest.approx(1e-3)
    assert latency_quantum(np.array([0.0001, 0.00015, 0.0012])) == pytest.approx(1e-5)
    assert latency_quantum(np.array([0.000123457, 0.0004, 0.0012])) is None  # 1 ns: not coarse
    assert latency_quantum(np.array([0.0001, 0.0002])) is None  # too few to tell
    q = 1e-4
    b = np.array([0.0001, 0.0003, 0.0002, 0.0006, np.nan])
    c = np.array([0.0002, 0.0003, 0.0022, 0.0004, 0.0003])
    # the larger of the two decides, whichever side it is on: 0.2 and 0.3 ms at most 3 quanta; 2.2, 0.6 not
    assert coarse(b, c, q).tolist() == [True, True, False, False, True]
    assert coarse(c, b, q).tolist() == coarse(b, c, q).tolist()
    assert not coarse(b, c, None).any()


def test_the_false_alarm_recording_names_exactly_the_levels_within_three_ticks(tmp_path):
    ca, ta = step_medians(SET / "a-01")
    cb, tb = step_medians(SET / "b-01")
    assert ca == cb
    pairs: dict[float, list[tuple[int, int]]] = {}
    for c, a, b in zip(ca, ta, tb):
        pairs.setdefault(c, []).append((a, b))
    coarse = {c for c, ps in pairs.items() if all(max(a, b) <= 3 for a, b in ps)}
    assert 1.0 in coarse and tb[0] == 2 * ta[0]  # the false alarm: 0.1 ms vs 0.2 ms at c=1
    assert coarse != set(pairs)  # and levels that may decide remain
    out = tmp_path / "c.json"
    proc = subprocess.run(
        [sys.executable, "-m", "headroom", "compare", str(SET / "a-01"), str(SET / "b-01"), "--json", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode in (0, 3), proc.stderr
    d = json.loads(out.read_text())
    note = [n for n in d["notes"] if n.startswith("p50 latency at ")]
    assert len(note) == 1, d["notes"]
    named = {
        float(x[2:]) for x in note[0].split(": both sides")[0].removeprefix("p50 latency at ").split(", ")
    }
    assert named == coarse
    p50 = next(m for m in d["metrics"] if m["key"] == "p50_s")
    assert p50["decision"] not in ("regressed", "improved") and p50.get("decided_at") is None
    rows = {r["load"]: r for r in p50["levels"]}
    assert set(rows) == set(pairs)  # every level still in the line across load, with all its pairs
    for load, ps in pairs.items():
        assert rows[load]["pairs"] == len(ps)
        raw = math.exp(np.mean([math.log(b / a) for a, b in ps])) - 1
        assert rows[load]["raw_change"] == pytest.approx(raw, abs=1e-5)

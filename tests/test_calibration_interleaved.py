"""The gate on real interleaved recordings (data/calibration/interleaved, README there).

Recorded on this project's shared 2-core machine with a seeded CPU hog beside
the servers: nginx (A/A, +28 % and 2.3-2.5x CPU per request) and the Go test
server (A/A, x1.204, x2.004, +100 us latency without CPU).  ``aa``, ``cpu25``
and ``x2`` were recorded while the paired test was built; the ``go-*`` sets
and ``aa-2`` after it was fixed (held out).  Each recording is one
comparison (a-NN against b-NN), judged with the server's CPU and without it
(as a k6, JMeter, Gatling, vegeta, oha or hey run has none).  The bounds
below are the published rates of docs/ci.md with the binomial arithmetic in
each test.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

import pytest

from headroom import analyze, reduce_run
from headroom.compare import compare_runs
from headroom.reduce import load_run_file
from headroom.summary import to_json

ROOT = Path(__file__).resolve().parent.parent
SETS = ROOT / "data" / "calibration" / "interleaved"


def _recordings(name: str) -> list[tuple[Path, Path]]:
    d = SETS / name
    return [(a, d / ("b" + a.name[1:])) for a in sorted(d.glob("a-*")) if (d / ("b" + a.name[1:])).is_dir()]


@functools.cache
def _verdicts(name: str, cpu: bool) -> tuple[str, ...]:
    out = []
    for a, b in _recordings(name):
        ra, rb = reduce_run(str(a)), reduce_run(str(b))
        if not cpu:
            ra, rb = dataclasses.replace(ra, cpu=None), dataclasses.replace(rb, cpu=None)
        c = compare_runs(ra, rb)
        assert c.design == "interleaved steps"
        out.append(c.verdict)
    return tuple(out)


def _sets(prefix: str = "") -> list[str]:
    return sorted(p.name for p in SETS.iterdir() if p.is_dir() and p.name.startswith(prefix))


@pytest.mark.parametrize("name", _sets())
def test_kept_reduced_runs_equal_the_raw_files(name):
    """The reduced.npz kept for every run is what the raw perfResults.csv.gz reduces to."""
    raw = [r for pair in _recordings(name) for r in pair if (r / "perfResults.csv.gz").exists()]
    assert len(raw) >= 2
    for run in raw:
        a = to_json(analyze(reduce_run(str(run))))
        b = to_json(analyze(load_run_file(run / "reduced.npz")))
        assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)

"""A change that varies with load, planted into real interleaved A/A recordings, is a regression.

Most real regressions vary with load: a slower handler matters at light load, contention at heavy
load.  The one-pair test of issue 26 read such a change as noise (a Go server whose candidate slept
lost throughput at all 11 levels, x0.15 at c=1 to x0.85 at c=31, and was "inconclusive").  Here
the candidate side of real A/A recordings (two pairs a level, raw files kept) is made slower by a
factor that fades with load: its throughput x0.2 at the lowest level rising to x0.9 at the top
(linear in log concurrency), its latency divided by the same factor (each step's requests keep
their number, its start times stretched, so the step lasts 1/f as long: Little's law), its CPU per
request unchanged (the recorder's per-step CPU seconds stay with the same requests).  Judged with
and without the server's CPU, every planted recording must be "regressed" (exit 1) and name a
throughput or latency metric, and the unplanted A/A recording must not be.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from headroom import reduce_run
from headroom.compare import compare_runs
from headroom.model import Requests

ROOT = Path(__file__).resolve().parent.parent
SETS = ROOT / "data" / "calibration" / "interleaved"
RECORDINGS = [
    ("dev-go-aa-70", "01"),
    ("dev-go-aa-70", "02"),
    ("dev-nginx-aa-70", "01"),
    ("dev-nginx-aa-70", "02"),
]
SERVER_FIELDS = ("step_cpu_s", "step_sched_run_s", "step_sched_wait_s")


def fading(c: float, top: float) -> float:
    """The candidate's throughput factor at concurrency c: 0.2 at c=1, 0.9 at the top level."""
    return 0.2 + 0.7 * math.log(c) / math.log(top)


def plant(run, top: float):
    """The run with every step slowed by 1 / fading(c): latencies longer, start times stretched."""
    req = run.requests
    starts, lats = req.start_ns.copy(), req.latency_s.copy()
    for k in range(req.n_steps):
        a, b = req.step_offsets[k], req.step_offsets[k + 1]
        f = fading(run.meta.concurrency(k), top)
        t0 = starts[a:b].min()
        starts[a:b] = t0 + ((starts[a:b] - t0) / f).astype(np.int64)
        lats[a:b] = lats[a:b] / f
    return dataclasses.replace(run, requests=Requests(starts, lats, req.step_offsets), reduced=None)


def without_server(run):
    fields = {k: v for k, v in run.meta.fields.items() if k not in SERVER_FIELDS}
    return dataclasses.replace(run, cpu=None, meta=dataclasses.replace(run.meta, fields=fields))


@pytest.mark.parametrize("name,rec", RECORDINGS)
@pytest.mark.parametrize("cpu", [True, False])
def test_a_change_that_fades_with_load_is_regressed(name, rec, cpu):
    a = reduce_run(str(SETS / name / f"a-{rec}"), keep_requests=True)
    b = reduce_run(str(SETS / name / f"b-{rec}"), keep_requests=True)
    top = max(a.meta.concurrency(k) for k in range(a.requests.n_steps))
    planted = plant(b, top)
    if not cpu:
        a, b, planted = without_server(a), without_server(b), without_server(planted)
    assert compare_runs(a, b).verdict not in ("regressed", "improved")  # the recording itself: A/A
    c = compare_runs(a, planted)
    assert c.design == "interleaved steps"
    assert c.verdict == "regressed", c.reason
    worse = {m.key for m in c.metrics if m.decision == "worse"}
    assert worse & {"paired_plateau_rps", "p50_s"}, worse
    assert "cpu_s_per_req" not in worse
    # where it is largest: at light load, as planted (the level's own change beyond its interval)
    m = c.metric("paired_plateau_rps")
    assert m.levels[0].raw < m.levels[-1].raw

"""The gate on real interleaved recordings (data/calibration/interleaved, README there).

Issue 37's sets first: ``r5-*``, two A/B pairs a level (the recommended design), recorded after the
model across load was fixed, on the Go test server and on nginx, with a foreign load held near a
target by scripts/load_hog.py (the suffix: -70, -30).  Then the older one-pair sets (issue 26), which
the model across load must still judge without false alarms.

Recorded on this project's shared 2-core machine with a seeded CPU hog beside
the servers: nginx (A/A, +28 % and 2.3-2.5x CPU per request) and the Go test
server (A/A, x1.204, x2.004, +100 us latency without CPU).  ``aa``, ``cpu25``
and ``x2`` were recorded while the paired test was built; the ``go-*`` sets
and ``aa-2`` after it, then the prior weight of the lag-1 correlation was set
on them, and the ``-3`` and ``-4`` sets were recorded after that (held out; ``-4`` also
carries the server's run-queue waits per step).  Each
recording is one comparison (a-NN against b-NN), judged with the server's
CPU and without it (as a k6, JMeter, Gatling, vegeta, oha or hey run has
none).  The bounds below are the published rates of docs/ci.md with the
binomial arithmetic in each test.
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


#: what only a recorder that follows the server's processes writes (a k6, JMeter, Gatling, vegeta,
#: oha or hey run has none of it): the CPU per step and the run-queue waits per step
SERVER_FIELDS = ("step_cpu_s", "step_sched_run_s", "step_sched_wait_s")


def _without_server(run):
    """The run as a load generator alone would have recorded it: no CPU, no schedstat."""
    fields = {k: v for k, v in run.meta.fields.items() if k not in SERVER_FIELDS}
    return dataclasses.replace(run, cpu=None, meta=dataclasses.replace(run.meta, fields=fields))


@functools.cache
def _reduced(path) -> object:
    """A recording's half, read once for both ways it is judged (with and without the server's CPU)."""
    return reduce_run(str(path))


@functools.cache
def _verdicts(name: str, cpu: bool) -> tuple[str, ...]:
    out = []
    for a, b in _recordings(name):
        ra, rb = _reduced(a), _reduced(b)
        if not cpu:
            ra, rb = _without_server(ra), _without_server(rb)
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
        a = _requests_and_cpu(to_json(analyze(reduce_run(str(run)))))
        b = _requests_and_cpu(to_json(analyze(load_run_file(run / "reduced.npz"))))
        assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _requests_and_cpu(doc: dict) -> dict:
    """A summary without the memory telemetry: reduced.npz keeps the requests and the CPU, while
    memStats.csv (the -4 sets and later) is read from the run folder beside it."""
    doc = {k: v for k, v in doc.items() if k != "memory"}
    memory = ("rss_bytes", "rss_max_bytes", "heap_inuse_bytes", "gc_cpu_share", "alloc_bytes_per_req")
    doc["steps"] = [{k: v for k, v in st.items() if k not in memory} for st in doc["steps"]]
    return doc


def _count(names, cpu, *verdicts):
    v = [x for n in names for x in _verdicts(n, cpu)]
    return sum(x in verdicts for x in v), len(v)


def _r5(kind: str, load: str = "70") -> list[str]:
    """The held-out two-pair sets of one change on both servers at one foreign load."""
    return [n for n in _sets("r5-") if n.endswith(f"-{load}") and f"-{kind}" in n.removeprefix("r5-nginx-go")]


def test_r5_unchanged_builds_pass_and_never_alarm():
    """A/A, two pairs a level, Go and nginx at about 70 % foreign load (16 recordings, each
    independent).  Published (docs/ci.md): no alarm with or without the server's CPU, exit 0 in 16 of
    16 with it.  Asserted: no alarm of 16 each way (a gate alarming 15 % of the time, three times the
    5 % allowed, passes with probability 0.07 per mode); exit 0 in at least 12 of 16 with CPU (the
    issue's 60 % target: a gate at 50 % passes with probability 0.04)."""
    aa = _r5("aa")
    for cpu in (True, False):
        alarms, n = _count(aa, cpu, "regressed", "improved")
        assert n == 16 and alarms == 0, (cpu, alarms, n)
    passed, n = _count(aa, True, "improved", "no change", "no regression")
    assert passed >= 12, (passed, n)


def test_r5_changes_are_caught():
    """Two pairs a level at about 70 % foreign load, Go and nginx, 16 recordings per change.
    Published (docs/ci.md): +25-30 % CPU per request caught with the server's CPU in 16 of 16; 2x
    without it in 16 of 16; a latency change with little CPU (the Go server's handler, or nginx's
    upstream, waiting 200 us a request) without it in 14 of 16.  Asserted: at least 15, 15 and 12 of
    16 (a gate at 70 % power passes the first two with probability 0.03), never the wrong direction."""
    for kind, cpu, least in (("cpu", True, 15), ("x2", False, 15), ("latency", False, 12)):
        sets = _r5(kind)
        caught, n = _count(sets, cpu, "regressed")
        wrong, _ = _count(sets, cpu, "improved", "no change", "no regression")
        assert n == 16 and caught >= least and wrong == 0, (kind, caught, n, wrong)


def test_r5_near_quiet_machine():
    """The same design on a near-quiet machine (the -30 sets: foreign CPU 1-15 %, mean 4-6 %, as
    headroom measures it), recorded after the -70 ones: A/A on both servers (16), +30 % CPU per
    request on Go (8), the nginx proxy's upstream waiting 200 us (8).  Published (docs/ci.md): no
    alarm, exit 0 in 15 of 16 with the server's CPU; CPU caught 8 of 8 with it; the latency
    change 8 of 8 without it.  Asserted: no alarm of 16 each way, exit 0 in at least 12 of 16 with
    CPU, at least 7 of 8 caught in each change row, never the wrong direction."""
    aa = _r5("aa", "30")
    for cpu in (True, False):
        alarms, n = _count(aa, cpu, "regressed", "improved")
        assert n == 16 and alarms == 0, (cpu, alarms, n)
    passed, n = _count(aa, True, "improved", "no change", "no regression")
    assert passed >= 12, (passed, n)
    for kind, cpu in (("cpu", True), ("latency", False)):
        sets = _r5(kind, "30")
        caught, n = _count(sets, cpu, "regressed")
        wrong, _ = _count(sets, cpu, "improved", "no change", "no regression")
        assert n == 8 and caught >= 7 and wrong == 0, (kind, caught, n, wrong)


def test_unchanged_builds_pass_and_never_alarm():
    """A/A: every recording of aa, aa-2, go-aa, go-aa-3 and go-aa-4 (52 recordings, each
    independent; go-aa-3 and go-aa-4 recorded after the method was fixed).

    Published: no false alarm in 52 with or without the server's CPU, exit 0 in 46 (88 %)
    with it.  Asserted: at most 1 alarm of 52 each way (a gate that alarms 10 % of the time,
    twice the 5 % allowed, passes this with probability 0.03 per mode, 8e-4 for both); exit 0
    in at least 75 % with CPU (a gate at two thirds of 88 %, 59 %, passes with probability 0.01).
    """
    aa = ["aa", "aa-2", "go-aa", "go-aa-3", "go-aa-4"]
    for cpu in (True, False):
        alarms, n = _count(aa, cpu, "regressed", "improved")
        assert n == 52 and alarms <= 1, (cpu, alarms, n)
    passed, n = _count(aa, True, "improved", "no change", "no regression")
    assert passed >= 0.75 * n, (passed, n)


def test_a_cpu_per_request_change_is_caught_with_the_servers_cpu():
    """cpu25 (+28 %), go-cpu20 and go-cpu20-3 (x1.2): published 100 % caught (24 of 24);
    asserted all but one (a gate with two thirds of that power, 67 %, passes with probability
    8e-4); never improved."""
    sets = ["cpu25", "go-cpu20", "go-cpu20-3"]
    caught, n = _count(sets, True, "regressed")
    wrong, _ = _count(sets, True, "improved", "no change", "no regression")
    assert n == 24 and caught >= n - 1 and wrong == 0, (caught, n)


def test_a_2x_change_is_caught_without_the_servers_cpu():
    """x2 (nginx 2.3-2.5x), go-x2, go-x2-3 and go-x2-4 (x2.0; the last two recorded after the
    method was fixed), judged on throughput and latency alone, as a k6, JMeter, Gatling, vegeta,
    oha or hey run is: published 31 of 32 (97 %; 15 of 16 held out); asserted at least 29 of 32
    (a gate with two thirds of 90 %, 60 %, passes with probability 1e-4; one at 80 % with 0.09);
    never improved."""
    sets = ["x2", "go-x2", "go-x2-3", "go-x2-4"]
    caught, n = _count(sets, False, "regressed")
    wrong, _ = _count(sets, False, "improved", "no change", "no regression")
    assert n == 32 and caught >= n - 3 and wrong == 0, (caught, n)

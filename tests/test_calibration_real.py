"""The gate on real interleaved runs recorded on a loaded, shared machine (data/calibration).

54 ramps of nginx recorded with `headroom ramp --ab` beside a CPU hog while
other jobs used most of the machine (data/calibration/README.md): 38 of an
unchanged keep-alive proxy (sets aa, aa-2, and the A side of every set), and
4 + 4 interleaved runs of each of two real changes, twice: +28 % CPU per
request (gzip, access log, headers, sub_filter) and 2.3-2.5x CPU per request
(no upstream keep-alive), sizes measured with psutil while recording.  The
truth of each comparison is known from how the runs were made; the tests
assert the rates the issue asks for, on every pair.
"""

import itertools

import pytest
from conftest import ROOT

from headroom import analyze, reduce_run
from headroom.compare import compare_runs

CAL = ROOT / "data" / "calibration"


@pytest.fixture(scope="module")
def sets():
    out = {}
    for folder in sorted(p for p in CAL.iterdir() if p.is_dir()):
        a = [analyze(reduce_run(p)) for p in sorted(folder.glob("a-*"))]
        b = [analyze(reduce_run(p)) for p in sorted(folder.glob("b-*"))]
        out[folder.name] = (a + b, []) if folder.name.startswith("aa") else (a, b)
    assert sum(len(a) for a, b in out.values() if not b) + sum(len(a) for a, b in out.values() if b) == 38
    return out


def archive(sets, name):
    """The project's earlier unchanged runs: every unchanged run of the other sets."""
    return [r for n, (a, _b) in sets.items() if n != name for r in a]


def rate(verdicts, *which):
    return sum(v in which for v in verdicts) / len(verdicts)


def test_a_a_pairs_rarely_alarm_and_never_with_defaults(sets):
    """Out of sample: the default noise (headroom/noise.py) was measured on ``aa``, so its false
    alarms are counted on the unchanged runs recorded after it (aa-2 and the A runs of cpu25,
    cpu25-2, x2, x2-2); learned noise comes from the other sets' runs, never the pair's own.

    The pairs within a set share runs: of the 69 default pairs only 13 are disjoint (every run
    in one pair), so 69 is not 69 independent trials.  Published: no alarm (docs/ci.md).
    Asserted: no alarm in the 13 disjoint pairs and at most 5 % of all 69; a gate that alarms
    10 % of the time would pass the disjoint half with probability 0.9^13 = 0.25 only.
    """
    default, disjoint, learned = [], [], []
    for name, (a, _b) in sets.items():
        if name == "aa":
            continue
        for x, y in itertools.combinations(a, 2):
            default.append(compare_runs(x, y).verdict)
        disjoint += [compare_runs(x, y).verdict for x, y in zip(a[0::2], a[1::2])]
    for name, (a, b) in sets.items():
        for x, y in itertools.combinations(a, 2) if not b else ():
            learned.append(compare_runs(x, y, noise_from=archive(sets, name)).verdict)
    assert (len(default), len(disjoint), len(learned)) == (69, 13, 111)
    assert rate(disjoint, "regressed", "improved") == 0
    assert rate(default, "regressed", "improved") <= 0.05
    assert rate(learned, "regressed", "improved") <= 0.05
    assert rate(learned, "no regression", "no change") > 0  # exit 0 is reachable


@pytest.mark.parametrize(
    ("change", "least_default", "least_learned"), [("x2", 0.97, 0.97), ("cpu25", 0.5, 0.85)]
)
def test_real_changes_are_caught_and_never_reversed(sets, change, least_default, least_learned):
    """Published (docs/ci.md): x2 100 %, cpu25 56 % (defaults) and 91 % (learned) of 32 pairs.

    The 32 pairs are every A run against every B run of two sets of 4 + 4 runs: 16 runs, each in
    4 pairs, so they are not 32 independent trials.  The bounds sit just under the published
    rates (x2: at most one pair missed; cpu25 learned: at most 4 of 32, defaults: at most 16).
    cpu25 with the defaults fell from 94 % when the error budget became maximin over the kinds of
    regression (issue 37): CPU per request keeps 0.23 of it, latency the rest, so one run a side
    with the shared machine's default noise catches +28 % CPU about half the time (the misses are
    inconclusive, never exit 0).  The out-of-sample, independent check of the
    interleaved design is tests/test_calibration_interleaved.py."""
    default, learned = [], []
    for name, (a, b) in sets.items():
        if name.split("-")[0] != change:
            continue
        for x, y in itertools.product(a, b):
            default.append(compare_runs(x, y).verdict)
            learned.append(compare_runs(x, y, noise_from=archive(sets, name)).verdict)
    assert len(default) == 32
    assert rate(default, "regressed") >= least_default and rate(learned, "regressed") >= least_learned
    assert rate(default + learned, "improved", "no regression", "no change") == 0


def test_three_against_three(sets):
    # interleaved A/A: alternate runs of each A/A set against each other, noise learned or measured
    learned, measured = [], []
    for name, (a, b) in sets.items():
        if not b:
            for x in itertools.combinations(a[0::2], 3):
                for y in itertools.combinations(a[1::2], 3):
                    learned.append(compare_runs(list(x), list(y), noise_from=archive(sets, name)).verdict)
                    measured.append(compare_runs(list(x), list(y)).verdict)
    assert len(learned) == 500
    assert rate(learned, "regressed", "improved") <= 0.05 and rate(measured, "regressed", "improved") <= 0.05
    assert rate(learned, "no regression", "no change") >= 0.5  # most unchanged builds pass the gate
    # all baseline runs first, no interleaving: 3 unchanged runs against the next 3
    order = sorted(
        (r for a, b in sets.values() for r in a), key=lambda s: str(s.run.meta.fields["start_time"])
    )
    first = [
        compare_runs(order[i : i + 3], order[i + 3 : i + 6]).verdict for i in range(0, len(order) - 5, 3)
    ]
    assert rate(first, "regressed", "improved") <= 0.05
    # the +28 % CPU change, 3 runs a side
    cpu = [
        compare_runs(list(x), list(y)).verdict
        for name in ("cpu25", "cpu25-2")
        for x in itertools.combinations(sets[name][0], 3)
        for y in itertools.combinations(sets[name][1], 3)
    ]
    assert rate(cpu, "regressed") >= 0.95


def test_history_of_three_real_releases_whose_latest_lost_a_quarter(tmp_path):
    # two unchanged releases, then the +28 % CPU variant (plateau -31 %): exit 1, or 3 naming the short series
    import json
    import subprocess
    import sys

    # each run is its own release (labels a-01, a-02, b-01 from the recording)
    links = [CAL / "cpu25-2" / "a-01", CAL / "cpu25-2" / "a-02", CAL / "cpu25-2" / "b-01"]
    out = tmp_path / "h.json"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "headroom",
            "history",
            *map(str, links),
            "--cache",
            "none",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    doc = json.loads(out.read_text())
    assert len(doc["runs"]) == 3
    assert p.returncode in (1, 3), p.stdout
    assert "no regression" not in p.stdout.split("verdict:")[-1]
    if p.returncode == 3:
        assert "short series" in p.stdout

"""When compare cannot pair the runs' steps, its one-line reason says which levels are missing and
why: a step dropped as too short (the same plan, too little of it usable) or a different plan.

The runs are the bundled keep-alive run and copies of it with some steps cut to a few dozen
requests; which steps are too short is worked out here from the rows written, with the thresholds
of headroom.steps."""

import gzip
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT, RUNS

from headroom import HeadroomError, analyze, compare_runs, reduce_run
from headroom.steps import MIN_STEP_REQUESTS, MIN_STEP_S

KA = RUNS / "nginx-keepalive"
LEVELS = [1 + 4 * k for k in range(8)]  # metadata.yml: lower_concurrency 1, concurrency_step 4
SHORT_NOTE = f"(under {MIN_STEP_S:g} s or {MIN_STEP_REQUESTS} requests)"


def sections() -> list[list[str]]:
    out: list[list[str]] = []
    for ln in gzip.decompress((KA / "perfResults.csv.gz").read_bytes()).decode().splitlines():
        if ln.startswith("start-time"):
            out.append([])
        elif ln:
            out[-1].append(ln)
    return out


def too_short(rows: list[str]) -> bool:
    """A step headroom leaves out of a comparison, from its rows alone."""
    start = np.array([np.datetime64(r.split(",")[0].removesuffix("Z"), "ns") for r in rows]).astype(np.int64)
    end = start + np.rint(np.array([float(r.split(",")[1]) for r in rows]) * 1e9).astype(np.int64)
    return len(rows) < MIN_STEP_REQUESTS or (end.max() - start.min()) / 1e9 < MIN_STEP_S


def write(folder, secs) -> str:
    """A throughputramp run folder of these sections, with the bundled run's metadata."""
    folder.mkdir()
    text = "".join("start-time,response-time\n" + "".join(r + "\n" for r in s) for s in secs)
    (folder / "perfResults.csv").write_text(text)
    shutil.copy(KA / "metadata.yml", folder)
    return str(folder)


@pytest.fixture(scope="module")
def base():
    return analyze(reduce_run(KA))


def test_steps_dropped_as_too_short_are_named_not_called_a_different_plan(tmp_path, base):
    secs = sections()
    cut = [s if k < 2 else s[:40] for k, s in enumerate(secs)]  # the same 8 levels, 6 of them cut
    short = [c for c, s in zip(LEVELS, cut) if too_short(s)]
    assert short == LEVELS[2:] and not any(too_short(s) for s in secs)
    cand = analyze(reduce_run(write(tmp_path / "cand", cut)))
    with pytest.raises(HeadroomError) as e:
        compare_runs(base, cand)
    assert str(e.value) == (
        "the runs ran the same concurrency levels, but only 2 level(s) usable in every run, 3 needed: "
        f"candidate steps at concurrency {', '.join(map(str, short))} were dropped as too short "
        f"{SHORT_NOTE}: give those steps more time or requests"
    )
    assert "do not match" not in str(e.value)
    # the other way round: the baseline's steps are the short ones
    with pytest.raises(
        HeadroomError, match=r"but only 2 level\(s\) usable .*: baseline steps at concurrency 9, "
    ):
        compare_runs(cand, base)


def test_a_different_plan_and_short_steps_are_told_apart(tmp_path, base):
    secs = sections()[:5]  # the candidate stopped after 5 levels, and its last 3 are cut short
    cut = [s if k < 2 else s[:30] for k, s in enumerate(secs)]
    cand = analyze(reduce_run(write(tmp_path / "cand", cut)))
    assert cand.table.concurrency.tolist() == LEVELS[:5]
    with pytest.raises(HeadroomError) as e:
        compare_runs(base, cand)
    assert str(e.value) == (
        "the runs' concurrency plans do not match (only 2 level(s) usable in every run, 3 needed): "
        "candidate has no step at concurrency 21, 25, 29; "
        f"candidate steps at concurrency 9, 13, 17 were dropped as too short {SHORT_NOTE}: "
        "record baseline and candidate with the same concurrency steps"
    )


def test_the_cli_prints_the_reason_in_one_line_and_exits_2(tmp_path):
    cut = [s if k < 2 else s[:40] for k, s in enumerate(sections())]
    cand = write(tmp_path / "cand", cut)
    p = subprocess.run(
        [sys.executable, "-m", "headroom", "compare", str(KA), cand], capture_output=True, text=True, cwd=ROOT
    )
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "were dropped as too short" in p.stderr and "candidate steps at concurrency 9, 13" in p.stderr

"""Every example in the --help of summary, compare, report, history and profiles runs (issue 49).

Each example line is read from the command's own ``--help`` (not copied here), its placeholder
paths are given real data in a scratch folder (``old/`` and ``new/`` are the bundled pair, ``aa/``
A/A runs, ``a-01/`` ... interleaved recordings, ``runs/old_perfResults.csv`` a throughputramp
baseline with the ``old_`` prefix, ``hey.csv`` a hey file), and the line runs as a shell would run
it, from that folder.  It must exit as the command documents (0, 1 or 3: never 2, never a
traceback) and write what it says it writes.  ``headroom ramp``'s examples record minutes of load
each; they are run, shortened, by tests/test_ramp.py, tests/test_ramp_interleave.py and
tests/test_search.py.  A new example whose placeholders are not given here fails this test.
"""

from __future__ import annotations

import gzip
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

DATA = ROOT / "data"
IL = DATA / "calibration" / "interleaved" / "r6-go-cpu30-70"
AA = DATA / "calibration" / "interleaved" / "r6-go-aa-70"
COMMANDS = ("summary", "compare", "report", "history", "profiles")
#: examples run elsewhere, and why
ELSEWHERE = {
    "--dask": "needs a Dask scheduler: tests/test_dask_once.py reduces runs on a Dask cluster",
    "headroom ramp": "records minutes of load: tests/test_ramp*.py and tests/test_search.py",
}


def examples(command: str) -> list[str]:
    text = subprocess.run([sys.executable, "-m", "headroom", command, "--help"], capture_output=True,
                          text=True, timeout=60, cwd=ROOT).stdout  # fmt: skip
    body = text[text.index("examples") :] if "examples" in text else ""
    out = []
    for line in body.splitlines():
        s = line.strip()
        if s.startswith("headroom "):
            out.append(s.split("  #")[0].strip())
    return out


def _link(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.symlink_to(src, target_is_directory=src.is_dir())


def workspace(tmp: Path, command: str, example: str = "") -> Path:
    """A folder where the example's relative paths name real runs."""
    _link(DATA, tmp / "data")
    runs = DATA / "runs"
    if command == "history":
        for i, name in enumerate(("nginx-ka-aa1-a", "nginx-ka-aa1-b", "nginx-ka-aa2-a", "nginx-ka-aa2-b")):
            shutil.copytree(runs / name, tmp / "runs" / f"v1.{i}")
        return tmp
    if command == "profiles":
        _link(DATA / "profiles" / "base-01", tmp / "runs" / "base")
        _link(DATA / "profiles" / "regexp-01", tmp / "runs" / "candidate")
        _link(DATA / "profiles" / "regexp-01", tmp / "runs" / "x")
        _link(DATA / "profiles" / "regexp-01" / "profiles", tmp / "my-profiles")
        return tmp
    _link(runs / "nginx-no-keepalive", tmp / "old")
    _link(runs / "nginx-no-keepalive", tmp / "run")
    _link(runs / "nginx-keepalive", tmp / "new")
    _link(runs / "nginx-keepalive", tmp / "aa" / "run-1")
    _link(runs / "nginx-keepalive-repeat", tmp / "aa" / "run-2")
    if command == "report":  # report's --noise-from aa/a-01 aa/b-01: an interleaved A/A recording
        shutil.rmtree(tmp / "aa")
        for side in ("a", "b"):
            _link(AA / f"{side}-01", tmp / "aa" / f"{side}-01")
    for k in (1, 2, 3):
        for side in ("a", "b"):
            _link(IL / f"{side}-0{k}", tmp / f"{side}-0{k}")
            _link(IL / f"{side}-0{k}", tmp / "ab" / f"{side}-0{k}")
    _link(IL / "a-01", tmp / "runs" / "il" / "a-01")
    _link(IL / "b-01", tmp / "runs" / "il" / "b-01")
    src = runs / "nginx-no-keepalive"  # a historic baseline: old_ files in one folder
    (tmp / "runs" / "old_perfResults.csv").write_bytes(
        gzip.decompress((src / "perfResults.csv.gz").read_bytes())
    )
    shutil.copy(src / "cpuStats.csv", tmp / "runs" / "old_cpuStats.csv")
    shutil.copy(src / "metadata.yml", tmp / "runs" / "old_metadata.yml")
    shutil.copy(ROOT / "tests" / "data" / "formats" / "hey-ramp.csv", tmp / "hey.csv")
    if "history.json" in example:  # compare --noise-from history.json: a history of A/A runs
        subprocess.run([sys.executable, "-m", "headroom", "history", *(str(runs / n) for n in (
            "nginx-ka-aa1-a", "nginx-ka-aa1-b", "nginx-ka-aa2-a", "nginx-ka-aa2-b")), "--cache", "none",
            "--json", str(tmp / "history.json")], capture_output=True, timeout=300, check=False)  # fmt: skip
    return tmp


ALL = [(c, e) for c in COMMANDS for e in examples(c)]
CASES = [(c, e) for c, e in ALL if not any(k in e for k in ELSEWHERE)]


def test_every_command_has_examples_and_every_example_is_run_somewhere():
    assert {c for c, _ in CASES} == set(COMMANDS)
    assert len(ALL) - len(CASES) <= 2, [
        e for c, e in ALL if (c, e) not in CASES
    ]  # --dask, compare's ramp line


def expand(argv: list[str], ws: Path) -> list[str]:
    """Shell globs (``aa/run-*``, ``runs/*``) as the shell would expand them in ``ws``."""
    out = []
    for a in argv:
        hits = sorted(str(p.relative_to(ws)) for p in ws.glob(a)) if "*" in a else []
        out += hits or [a]
    return out


@pytest.mark.parametrize("command,example", CASES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(CASES)])
def test_the_example_runs(tmp_path, command, example):
    ws = workspace(tmp_path, command, example)
    argv = expand(shlex.split(example), ws)
    env = {**os.environ, "MPLBACKEND": "Agg"}
    p = subprocess.run(
        [sys.executable, "-m", *argv], cwd=ws, capture_output=True, text=True, timeout=600, env=env
    )
    assert p.returncode in (0, 1, 3), f"{example}: exit {p.returncode}\n{p.stderr[-2000:]}"
    assert "Traceback" not in p.stderr, p.stderr[-2000:]
    for flag in ("--json", "-o", "--keep-notebook"):  # what it says it writes is there and not empty
        if flag in argv:
            target = argv[argv.index(flag) + 1]
            if target != "-":
                assert (ws / target).stat().st_size > 0, (example, target)
    if "-o" not in argv and "--json" not in argv:
        assert p.stdout.strip(), example

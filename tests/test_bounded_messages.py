"""Every message that quotes input is cut to a bounded length (issue 49: a hey CSV whose header
line was 1 MB got a 1,048,836-character error echoing it)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT

HEY = "response-time,DNS+dialup,DNS,Request-write,Response-delay,Response-read,status-code,offset"
MB = 1 << 20


def _files(tmp_path):
    out = {}
    out["header"] = tmp_path / "hey-header.csv"
    out["header"].write_text(HEY + ",x" * (MB // 2) + "\n0.001,0,0,0,0.001,0,200,0.1\n")
    out["field"] = tmp_path / "hey-field.csv"
    out["field"].write_text(HEY + "\n0.001,0,0,0,0.001,0,200," + "7" * MB + "\n")
    out["text-field"] = tmp_path / "hey-text.csv"
    out["text-field"].write_text(HEY + "\n0.001,0,0,0,0.001,0," + "x" * MB + ",0.1\n")
    out["ramp"] = tmp_path / "perfResults.csv"
    out["ramp"].write_text("start-time,response-time\n" + "y" * MB + ",0.001\n")
    return out


@pytest.mark.parametrize("kind", ["header", "field", "text-field", "ramp"])
def test_a_megabyte_of_input_gets_one_short_line(tmp_path, kind):
    path = _files(tmp_path)[kind]
    p = subprocess.run(
        [sys.executable, "-m", "headroom", "summary", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert p.returncode == 2, p.stderr[:500]
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, lines[:3]
    assert len(lines[0]) <= 450, len(lines[0])
    assert lines[0].startswith("headroom: error: ") and path.name in lines[0], lines[0][:200]


def test_one_line_keeps_the_start_and_the_end():
    from headroom.cli import one_line

    msg = "run/hey.csv:2: expected 9 fields (" + "a," * 10000 + "), got 8: 'x'\nsecond line"
    got = one_line(msg, 200)
    assert len(got) <= 200 and "\n" not in got
    assert got.startswith("run/hey.csv:2: expected 9 fields") and got.endswith("second line")
    assert one_line("short") == "short"

"""Every message headroom gives for a file it cannot read is one line within 300 characters (issue 41):
every reader given every sample file of the other formats (its own scan, as a forced --format would
reach it), detection and --format resolution of every file, and every bad run of tests/data/bad read
whole.  The file's path is counted as 60 characters (a message may not grow with a long path, but the
path is the user's); anything but a HeadroomError is a failure."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT

from headroom import formats as F
from headroom.formats._batch import join
from headroom.model import HeadroomError

DATA = ROOT / "tests" / "data"
LIMIT = 300
PATH_BUDGET = 60
_SKIP = (".md", ".txt", ".py", ".jsonl", ".log", ".jmx", ".processor")
SAMPLES = sorted(
    p
    for p in (DATA / "formats").rglob("*")
    if p.is_file() and not p.name.endswith(_SKIP) and p.stat().st_size < 4e6
)


def budget(message: str, path: Path) -> int:
    """The message's length with its path counted as PATH_BUDGET characters."""
    return len(message.replace(str(path), "P" * PATH_BUDGET))


def own_format(path: Path) -> str | None:
    try:
        return F.detect(path)
    except HeadroomError:
        return None


@pytest.mark.parametrize("name", list(F.FORMATS))
def test_a_reader_given_other_formats_files_says_so_in_one_short_line(name):
    reader, seen = F.FORMATS[name], 0
    for p in SAMPLES:
        if own_format(p) == name and p.stat().st_size > 200_000:
            continue  # its own large samples read well (tests of the format); small ones may be refused
        try:
            scan = reader.open(p)
            join(list(scan.batches()))
        except HeadroomError as e:
            msg = str(e)
            assert "\n" not in msg, msg
            assert budget(msg, p) <= LIMIT, (len(msg), msg)
            seen += 1
    assert seen > 0


def test_detection_and_forced_formats_of_every_file():
    for p in SAMPLES:
        head = F.head_bytes(p)
        for name in [None, *F.FORMATS, *F.ALIASES]:
            try:
                F.detect(p, head) if name is None else F.resolve(name, p, head)
            except HeadroomError as e:
                msg = str(e)
                assert "\n" not in msg and budget(msg, p) <= LIMIT, (len(msg), msg)


@pytest.mark.parametrize("run", sorted(p for p in (DATA / "bad").iterdir()), ids=lambda p: p.name)
def test_every_bad_run_is_one_short_line(run):
    import headroom

    try:
        headroom.reduce_run(run)
    except HeadroomError as e:
        msg = str(e)
        assert "\n" not in msg and budget(msg, run) <= LIMIT, (len(msg), msg)

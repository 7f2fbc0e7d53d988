"""hey CSV with relative offsets, streamed through the spool (HeySource): the numbers of the whole file.

A seeded hey ramp of several appended runs (an empty section, failed
requests, one at the very end) is read back with Python's csv module and
numpy (each section placed where the previous one ended, anchored at
``--hey-start`` or at the file's modification time, 2xx kept) and held
against ``headroom summary``'s JSON; the streamed path, in pieces of a few
kilobytes and spooled to disk, against the same file read as one
batch in memory, JSON and errors alike.
"""

from __future__ import annotations

import csv
import datetime as dt
import gzip
import json
import os
from pathlib import Path

import numpy as np
import pytest

from headroom import reading, sources, spool
from headroom.cli import main as cli_main
from headroom.formats import _batch

HEADER = "response-time,DNS+dialup,DNS,Request-write,Response-delay,Response-read,status-code,offset\n"
DATA = Path(__file__).parent / "data" / "formats"
MTIME_NS = 1_700_000_000 * 10**9
START, START_NS = "2024-01-02T03:04:05.25Z", 1_704_164_645_250_000_000


def _section(rng, n: int, conc: int, fail: float) -> list[str]:
    lat = np.round(rng.lognormal(np.log(0.002 * conc), 0.5, n), 4)
    off = np.round(np.sort(rng.uniform(0, n * 0.002 / conc + 0.3, n)), 4)
    code = np.where(rng.random(n) < fail, rng.choice([0, 404, 503], n), 200)
    order = np.argsort(off + lat, kind="stable")  # hey writes in completion order
    return [f"{lat[i]:.4f},0.0002,0.0000,0.0000,{lat[i]:.4f},0.0000,{code[i]},{off[i]:.4f}\n" for i in order]


def write_ramp(path: Path, seed: int = 1, gz: bool = False) -> Path:
    """Five appended hey runs: the third empty, the last ending with a failed request."""
    rng = np.random.default_rng(seed)
    secs = [_section(rng, n, c, 0.02) for n, c in ((1500, 1), (2500, 2), (0, 3), (4000, 4), (3000, 8))]
    last = secs[-1][-1].split(",")
    secs[-1][-1] = ",".join([*last[:6], "500", last[7]])
    text = "".join(HEADER + "".join(s) for s in secs)
    (gzip.open(path, "wt") if gz else open(path, "w")).write(text)
    os.utime(path, ns=(MTIME_NS, MTIME_NS))
    return path


def reference(path: Path, base_ns: int | None):
    """Per step (start ns, latency s, failed) of the kept and failed rows, anchored: csv module + numpy."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="") as f:
        rows = list(csv.reader(f))
    steps: list[list] = []
    for r in rows:
        if r[0] == "response-time":
            steps.append([])
        else:
            steps[-1].append((round(float(r[7]) * 1e9), float(r[0]), not 200 <= int(r[6]) <= 299))
    out, shift = [], 0
    for s in steps:
        t = np.array([x[0] for x in s], np.int64) + shift
        lat = np.array([x[1] for x in s])
        bad = np.array([x[2] for x in s], bool)
        out.append((t, lat, bad))
        if len(s):
            shift = int((t + np.round(lat * 1e9).astype(np.int64)).max())
    if base_ns is None:  # the file's modification time is the kept rows' last response
        end = max(
            int((t[~b] + np.round(la[~b] * 1e9).astype(np.int64)).max()) for t, la, b in out if (~b).any()
        )
        base_ns = os.stat(path).st_mtime_ns - end
    return [(t + base_ns, la, b) for t, la, b in out]


def iso(ns: int) -> str:
    s, frac = divmod(int(ns), 10**9)
    return dt.datetime.fromtimestamp(s, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{frac:09d}Z"


def summary(path, capsys, *extra) -> dict:
    assert cli_main(["summary", str(path), "--json", "-", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def check_against_reference(doc: dict, ref) -> None:
    assert len(doc["steps"]) == len(ref)
    for s, (t, lat, bad) in zip(doc["steps"], ref):
        ok_t, ok_lat = t[~bad], lat[~bad]
        assert (s["requests"], s["errors"]) == (len(ok_t), int(bad.sum()))
        if not len(ok_t):
            assert s["start"] is None
            continue
        for q, key in ((50, "p50_s"), (90, "p90_s"), (99, "p99_s"), (99.9, "p999_s")):
            assert s[key] == pytest.approx(np.percentile(ok_lat, q, method="inverted_cdf"), abs=1e-12), key
        assert s["max_s"] == pytest.approx(ok_lat.max(), abs=1e-12)
        assert s["mean_s"] == pytest.approx(ok_lat.mean(), rel=1e-5)
        assert s["start"] == iso(ok_t.min())
        assert s["end"] == iso((ok_t + np.round(ok_lat * 1e9).astype(np.int64)).max())


@pytest.fixture
def small_pieces(monkeypatch):
    """Pieces of 4 kB (many per section) and spools on disk beyond 3,000 rows, read 700 rows at a time."""
    monkeypatch.setattr(_batch, "CHUNK_BYTES", 4096)
    monkeypatch.setattr(spool, "BUDGET_BYTES", 3000 * 41)
    monkeypatch.setattr(spool.Spool.chunks, "__defaults__", (700,))


def whole_file(monkeypatch):
    """The whole file as one batch, its rows in memory in one chunk: the in-memory table of the reader
    protocol (the same reduction, a different cut of the rows)."""
    monkeypatch.setattr(_batch, "CHUNK_BYTES", 1 << 30)
    monkeypatch.setattr(spool, "BUDGET_BYTES", 1 << 40)
    monkeypatch.setattr(spool, "CHUNK_ROWS", 1 << 22)
    monkeypatch.setattr(spool.Spool.chunks, "__defaults__", (1 << 22,))


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("start", [None, START])
def test_streamed_hey_equals_an_independent_reading(tmp_path, capsys, small_pieces, gz, start):
    path = write_ramp(tmp_path / ("ramp.csv.gz" if gz else "ramp.csv"), gz=gz)
    doc = summary(path, capsys, *(["--hey-start", start] if start else []))
    ref = reference(path, None if start is None else START_NS)
    check_against_reference(doc, ref)
    bad = sum(int(b.sum()) for _, _, b in ref)
    assert doc["format"] == "hey" and sum(s["errors"] for s in doc["steps"]) == bad
    assert f"{path}: 4 hey runs appended one after another" in " ".join(doc["warnings"])
    assert ("modification time" in " ".join(doc["warnings"])) == (start is None)


def test_source_is_the_spool_for_relative_offsets_only(tmp_path):
    from headroom.runfolder import locate_run

    s = sources.ReadSettings()
    rel = write_ramp(tmp_path / "rel.csv")
    fork = tmp_path / "fork.csv"
    fork.write_text("response-time,status-code,start-time\n0.0010,200,2024-01-02T03:04:05Z\n")
    assert type(sources.source_for(locate_run(rel), rel, s)) is sources.HeySource
    assert type(sources.source_for(locate_run(fork), fork, s)) is sources.CsvSource
    with pytest.raises(reading.HeadroomError, match="--steps is for files without steps of their own"):
        sources.source_for(locate_run(rel), rel, sources.ReadSettings(steps="1s"))


CASES = {
    "ramp": ("", ()),
    "ramp-concurrency": ("", ("--concurrency", "1,2,4,8,16")),
    "ramp-early-start": ("", ("--hey-start", "1995-01-01T00:00:00Z")),
    "bad-row": ("bad", ()),
    "bad-row-skipped": ("bad", ("--skip-bad-rows",)),
    "truncated": ("trunc", ()),
    "late-section": ("late", ()),
    "far-start": ("far", ()),
    "long-latency": ("long", ()),
    "no-status": ("nostatus", ()),
    "header-only": ("header", ()),
    "all-failed": ("allfailed", ()),
}


def variant(tmp_path: Path, kind: str) -> Path:
    """The seeded ramp, damaged in one way."""
    p = write_ramp(tmp_path / "ramp.csv")
    lines = p.read_text().splitlines(keepends=True)
    if kind == "bad":
        lines[2000] = "0.0010,0,0,0,0,0,200,abc\n"
    elif kind == "trunc":
        lines.append("0.00")
    elif kind == "late":  # the fourth run's offsets start after 4000 s
        a = [i for i, ln in enumerate(lines) if ln == HEADER][3]
        lines[a + 1 : a + 4001] = [f"{ln.rsplit(',', 1)[0]},{4000 + float(ln.rsplit(',', 1)[1]):.4f}\n"
                                   for ln in lines[a + 1 : a + 4001]]  # fmt: skip
    elif kind == "far":
        lines[3000] = "0.0010,0,0,0,0,0,200,900.0000\n"
    elif kind == "long":
        lines[3001] = "700.0000,0,0,0,0,0,200,0.5000\n"
    elif kind == "nostatus":
        lines = [",".join(ln.split(",")[:6] + ln.split(",")[7:]) for ln in lines]
    elif kind == "header":
        lines = [HEADER]
    elif kind == "allfailed":
        lines = [HEADER] + [ln.replace(",200,", ",503,") for ln in lines[1:1500]]
    if kind:
        p.write_text("".join(lines))
        os.utime(p, ns=(MTIME_NS, MTIME_NS))
    return p


def run_cli(path, extra, capsys):
    """(exit code, stderr lines, JSON)."""
    rc = cli_main(["summary", str(path), "--json", "-", *extra])
    out, err = capsys.readouterr()
    return rc, err.strip().splitlines(), json.loads(out) if rc == 0 else None


@pytest.mark.parametrize("case", list(CASES))
def test_streamed_equals_the_whole_file_reader(tmp_path, capsys, monkeypatch, small_pieces, case):
    """JSON, warnings and errors (exit 2, one line naming the file and line) as load_run's reader gives."""
    kind, extra = CASES[case]
    path = variant(tmp_path, kind)
    streamed = run_cli(path, extra, capsys)
    whole_file(monkeypatch)
    assert streamed == run_cli(path, extra, capsys)
    rc, err, doc = streamed
    if case in ("bad-row", "late-section", "far-start", "long-latency", "header-only", "all-failed"):
        assert rc == 2 and len(err) == 1 and err[0].startswith(f"headroom: error: {path}")
    else:
        assert rc == 0 and doc["steps"]
    if case in ("bad-row", "late-section", "far-start", "long-latency"):
        assert err[0].startswith(f"headroom: error: {path}:{bad_line(path, kind)}: ")


def bad_line(path: Path, kind: str) -> int:
    """The line an error must name: the damaged row's, or the first request of the late run."""
    if kind != "late":
        return {"bad": 2001, "far": 3001, "long": 3002}[kind]
    lines = path.read_text().splitlines()
    a, b = [i for i, ln in enumerate(lines) if ln + "\n" == HEADER][3:5]
    offsets = [float(ln.rsplit(",", 1)[1]) for ln in lines[a + 1 : b]]
    return a + 2 + int(np.argmin(offsets))


def test_bundled_hey_ramp_streamed_equals_the_whole_file(capsys, monkeypatch, small_pieces):
    """tests/data/formats/hey-ramp.csv: as the whole-file reader, and as the csv module reads it."""
    path = DATA / "hey-ramp.csv"
    for extra in ((), ("--hey-start", START, "--concurrency", "3,5,7")):
        streamed = summary(path, capsys, *extra)
        with monkeypatch.context() as m:
            whole_file(m)
            assert streamed == summary(path, capsys, *extra)
    check_against_reference(streamed, reference(path, START_NS))
    assert [s["concurrency"] for s in streamed["steps"]] == [3, 5, 7]

"""A folder of one request file per step, streamed file by file (StepFilesSource): the numbers of the files.

A seeded folder of oha files named by rate (failed requests, relative
times) is read back with Python's csv module and numpy (each file placed
where the previous one ended, anchored at ``--hey-start``, 2xx kept, the
rate sent from the first to the last start) and held against ``headroom
summary``'s JSON; the streamed path, spooled to disk in small chunks, against
the same files read each as one batch in memory (the reader protocol's
in-memory table) on the real folders and on synthetic ones
(oha by concurrency and by rate, vegeta and k6 files cut in time, ``--steps``,
``--concurrency``).
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np
import pytest

from headroom import reading, sources, spool
from headroom.cli import main as cli_main
from headroom.formats import _batch

DATA = Path(__file__).parent / "data" / "formats"
OHA_HEADER = "request-start,DNS,DNS+dialup,Response-delay,request-duration,bytes,status\n"
START, START_NS = "2024-01-02T03:04:05.25Z", 1_704_164_645_250_000_000
MTIME_NS = 1_700_000_000 * 10**9


def write_oha(path: Path, rng, n: int, rate: float, fail: float) -> None:
    st = np.sort(rng.uniform(0, n / rate, n))
    lat = np.round(rng.lognormal(np.log(0.003), 0.5, n), 6)
    code = np.where(rng.random(n) < fail, rng.choice([0, 503], n), 200)
    path.write_text(OHA_HEADER + "".join(f"{a:.6f},0.0,0.0001,{b:.6f},{b:.6f},612,{c}\n"
                                         for a, b, c in zip(st, lat, code)))  # fmt: skip
    os.utime(path, ns=(MTIME_NS, MTIME_NS))


def oha_folder(folder: Path, names=("oha-q100.csv", "oha-q200.csv", "oha-q400.csv"), seed=5) -> Path:
    folder.mkdir()
    rng = np.random.default_rng(seed)
    for name, rate in zip(names, (100, 200, 400)):
        write_oha(folder / name, rng, 3 * rate, rate, 0.03)
    return folder


def reference(folder: Path, base_ns: int):
    """Per file (start ns anchored, latency s, failed), each placed after the previous one's last response."""
    out, shift = [], 0
    for p in sorted(folder.iterdir()):
        with open(p, newline="") as f:
            rows = list(csv.DictReader(f))
        t = np.array([round(float(r["request-start"]) * 1e9) for r in rows], np.int64) + shift
        lat = np.array([float(r["request-duration"]) for r in rows])
        bad = np.array([not 200 <= int(r["status"]) <= 299 for r in rows])
        out.append((t, lat, bad))
        shift = int((t + np.round(lat * 1e9).astype(np.int64)).max())
    return [(t + base_ns, lat, b) for t, lat, b in out]


def summary(path, capsys, *extra) -> dict:
    assert cli_main(["summary", str(path), "--json", "-", *extra]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def small_chunks(monkeypatch):
    """Batches of 4 kB and spools on disk beyond 2,000 rows, read 500 rows at a time."""
    monkeypatch.setattr(_batch, "CHUNK_BYTES", 4096)
    monkeypatch.setattr(spool, "BUDGET_BYTES", 2000 * 41)
    monkeypatch.setattr(spool.Spool.chunks, "__defaults__", (500,))


def whole_tables(monkeypatch):
    """The whole file as one batch, its rows in memory in one chunk: the in-memory table of the reader
    protocol (the same reduction, a different cut of the rows)."""
    monkeypatch.setattr(_batch, "CHUNK_BYTES", 1 << 30)
    monkeypatch.setattr(spool, "BUDGET_BYTES", 1 << 40)
    monkeypatch.setattr(spool, "CHUNK_ROWS", 1 << 22)
    monkeypatch.setattr(spool.Spool.chunks, "__defaults__", (1 << 22,))


def test_streamed_folder_equals_an_independent_reading(tmp_path, capsys, small_chunks):
    folder = oha_folder(tmp_path / "ramp")
    doc = summary(folder, capsys, "--hey-start", START)
    ref = reference(folder, START_NS)
    assert len(doc["steps"]) == 3
    for s, (t, lat, bad), rate in zip(doc["steps"], ref, (100, 200, 400)):
        ok_t, ok_lat = t[~bad], lat[~bad]
        assert (s["requests"], s["errors"]) == (len(ok_t), int(bad.sum()))
        for q, key in ((50, "p50_s"), (99, "p99_s"), (99.9, "p999_s")):
            want = np.percentile(ok_lat, q, method="inverted_cdf")
            assert s[key] == pytest.approx(want, abs=1e-6), key  # to the microsecond (stated in a warning)
        assert s["mean_s"] == pytest.approx(ok_lat.mean(), rel=1e-5)  # JSON: 6 digits
        assert s["start"] == iso(ok_t.min())
        assert s["intended_rps"] == rate
        assert s["sent_rps"] == pytest.approx(len(t) / ((t.max() - t.min()) / 1e9), rel=1e-5)
    assert f"{folder}: 3 files with relative times are read as one ramp" in " ".join(doc["warnings"])


def iso(ns: int) -> str:
    import datetime as dt

    s, frac = divmod(int(ns), 10**9)
    return dt.datetime.fromtimestamp(s, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{frac:09d}Z"


def _split_by_time(src: Path, folder: Path, names: list[str], keep_head: int = 0, key=None) -> Path:
    """``src``'s rows (after ``keep_head`` header lines) in len(names) files, cut in time order."""
    folder.mkdir()
    lines = src.read_text().splitlines(keepends=True)
    head, body = lines[:keep_head], lines[keep_head:]
    t = np.array([key(ln) for ln in body])
    for name, part in zip(names, np.array_split(np.argsort(t, kind="stable"), len(names))):
        (folder / name).write_text("".join(head) + "".join(body[j] for j in sorted(part)))
    return folder


def _k6_time(line: str):
    return json.loads(line)["data"]["time"] if '"Point"' in line else ""


def folders(tmp: Path) -> dict[str, Path]:
    """Real and synthetic folders of one file per step."""
    rng = np.random.default_rng(9)
    plain = tmp / "oha-plain"
    plain.mkdir()
    for name, rate in (("a.csv", 50), ("b.csv", 80), ("c.csv", 120)):
        write_oha(plain / name, rng, 2 * rate, rate, 0.05)
    failed = tmp / "oha-one-all-failed"
    failed.mkdir()
    write_oha(failed / "x-q100.csv", rng, 300, 100, 0.0)
    write_oha(failed / "y-q200.csv", rng, 400, 200, 1.0)
    k6 = tmp / "k6-split"
    k6.mkdir()
    lines = (DATA / "k6.json").read_text().splitlines(keepends=True)
    meta, pts = [x for x in lines if '"Point"' not in x], [x for x in lines if '"Point"' in x]
    order = np.argsort([_k6_time(x) for x in pts], kind="stable")
    for i, part in enumerate(np.array_split(order, 3)):
        (k6 / f"s{i}.json").write_text("".join(meta) + "".join(pts[j] for j in sorted(part)))
    return {
        "oha-ramp": DATA / "oha-ramp",
        "oha-rates": DATA / "real" / "oha-rates",
        "oha-q": oha_folder(tmp / "oha-q"),
        "oha-c": oha_folder(tmp / "oha-c", names=("run-c1.csv", "run-c2.csv", "run-c4.csv")),
        "oha-plain": plain,
        "oha-one-all-failed": failed,
        "vegeta-split": _split_by_time(
            DATA / "vegeta.csv",
            tmp / "vegeta-split",
            ["v1.csv", "v2.csv", "v3.csv"],
            key=lambda ln: int(ln.split(",")[0]),
        ),  # fmt: skip
        "k6-split": k6,
    }


CASES = [
    ("oha-ramp", ()), ("oha-rates", ()), ("oha-rates", ("--bucket", "250ms")), ("oha-q", ("--hey-start", START)),
    ("oha-q", ("--concurrency", "1,2,3")), ("oha-c", ()), ("oha-c", ("--steps", "0,2.5,4")),
    ("oha-plain", ("--concurrency", "1,2,3")), ("oha-plain", ("--steps", "1s")), ("oha-one-all-failed", ()),
    ("vegeta-split", ()), ("vegeta-split", ("--steps", "2s")), ("k6-split", ()),
]  # fmt: skip


@pytest.mark.parametrize("name,extra", CASES)
def test_streamed_folder_equals_the_whole_tables(tmp_path, capsys, monkeypatch, small_chunks, name, extra):
    path = folders(tmp_path)[name]
    rc = cli_main(["summary", str(path), "--json", "-", *extra])
    streamed = rc, capsys.readouterr()
    whole_tables(monkeypatch)
    assert cli_main(["summary", str(path), "--json", "-", *extra]) == rc
    assert capsys.readouterr() == streamed[1]
    if rc == 0:
        doc = json.loads(streamed[1].out)
        assert len(doc["steps"]) >= 2
    else:  # a stated concurrency on rate steps: one line, exit 2
        assert rc == 2 and len(streamed[1].err.strip().splitlines()) == 1


def test_folder_plan(tmp_path):
    """A relative-time folder is one StepFilesSource; a folder of hey files is refused in one line."""
    from headroom.runfolder import locate_run

    folder = oha_folder(tmp_path / "r")
    mode, srcs = reading.plan(locate_run(folder), sources.ReadSettings())
    assert mode == "one" and type(srcs[0]) is sources.StepFilesSource
    hey = tmp_path / "hey"
    hey.mkdir()
    for i in range(2):
        (hey / f"h{i}.csv").write_text("response-time,status-code,offset\n0.0010,200,0.5\n")
    with pytest.raises(reading.HeadroomError, match="append hey runs to one file instead"):
        reading.plan(locate_run(hey), sources.ReadSettings())


def test_damaged_file_is_named_with_its_line(tmp_path, capsys):
    folder = oha_folder(tmp_path / "bad")
    p = folder / "oha-q200.csv"
    lines = p.read_text().splitlines(keepends=True)
    lines[41] = "0.5,0.0,0.0,0.1,-0.25,612,200\n"
    p.write_text("".join(lines))
    assert cli_main(["summary", str(folder)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"headroom: error: {p}:42: ")

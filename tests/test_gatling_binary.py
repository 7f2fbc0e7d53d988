"""Gatling 3.13+ binary simulation.log: the real samples of tests/data/formats/real/ (Gatling 3.16.0 and
3.13.5 against nginx on 127.0.0.1, the same closed and open ramps as the 3.11 text samples) read
exactly, against the independent record-by-record reader in reference.py and Gatling's own report
of the same logs; steps against the plans (plan_reader.py); bad logs in one line, exit 2."""

from __future__ import annotations

import functools
import gzip
import re
import struct
import subprocess
import sys

import numpy as np
import plan_reader as P
import pytest
import reference as R
from conftest import ROOT
from test_real_samples import TOL, _check_percentiles, _reader_steps

from headroom import formats as F
from headroom.formats import gatling_bin

VERSIONS = ("3_16_0", "3_13_5")
SIMS = {
    "ClosedRampSimulation": (P.CLOSED_LEVELS, "concurrency"),
    "OpenRampSimulation": (P.GATLING_OPEN_RATES, "rate"),
}
NAMES = [f"gatling{v}-{s}.log.gz" for v in VERSIONS for s in SIMS]


def cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "headroom", *map(str, args)], capture_output=True, text=True, cwd=ROOT
    )


@functools.cache
def ref(name):
    return R.read_gatling_binary(P.REAL / name)


@functools.cache
def table(name):
    path = P.REAL / name
    return F.read_table(path, F.detect(path))


def ref_requests(name) -> P.Requests:
    g = ref(name)
    t0 = g["run_start_ms"]
    r = P.Requests([], [], [], [])
    for _, s, e, ok, _ in g["requests"]:
        r.start_ns.append((t0 + s) * 1_000_000)
        r.latency.append(e - s)
        r.ok.append(ok)
        r.code.append(-1)
    return r


@pytest.mark.parametrize("name", NAMES)
def test_every_request_read_exactly(name):
    assert F.detect(P.REAL / name) == "gatling"
    t, g = table(name), ref(name)
    assert g["version"] == name[7:13].replace("_", ".")
    t0 = g["run_start_ms"]
    mine = sorted(zip(t.start_ns.tolist(), np.rint(t.latency_s * 1e3).astype(int).tolist(), t.ok.tolist()))
    theirs = sorted(((t0 + s) * 1_000_000, e - s, ok) for _, s, e, ok, _ in g["requests"])
    assert mine == theirs
    assert t.status is None and t.fmt == "gatling"


@pytest.mark.parametrize("name", NAMES)
def test_counts_equal_gatlings_own_report(name):
    text = (P.REAL / name.replace(".log.gz", "-report.txt")).read_text()
    m = re.search(r"> request count\s+\|\s+([\d,]+) \|\s+([\d,]+) \|\s+([\d,]+)", text)
    total, ok, ko = (int(x.replace(",", "")) for x in m.groups())
    t = table(name)
    assert (len(t.ok), int(t.ok.sum()), int((~t.ok).sum())) == (total, ok, ko)
    # Gatling's max (OK column) is exact; its percentiles come from a digest (docs/tools.md)
    mx = int(re.search(r"> max response time \(ms\)\s+\|\s+[\d,]+ \|\s+([\d,]+)", text)[1].replace(",", ""))
    assert round(float(t.latency_s[t.ok].max()) * 1e3) == mx
    # the error mix of the plan: ~3 % 404, ~2 % 503, ~1 % refused, by message
    msgs = [m for *_, ok, m in ref(name)["requests"] if not ok]
    n = len(ref(name)["requests"])
    for frag, lo, hi in (("found 404", 0.015, 0.045), ("found 503", 0.01, 0.03), ("refused", 0.003, 0.02)):
        assert lo < sum(frag in m for m in msgs) / n < hi, frag


@pytest.mark.parametrize("name", NAMES)
def test_user_records_and_steps_follow_the_plan(name):
    sim = name.split("-", 1)[1].removesuffix(".log.gz")
    levels, kind = SIMS[sim]
    t, r = table(name), ref_requests(name)
    users = ref(name)["users"]
    assert sum(s for _, s, _ in users) == sum(not s for _, s, _ in users)  # every user started and ended
    # the USER times as the log keeps them (int32 ms since the run's start) and that start
    sc = gatling_bin.scan(P.REAL / name)
    for _ in sc.batches():
        pass
    assert sc.side["user_base_ms"] == ref(name)["run_start_ms"]
    for is_start, key in ((True, "user_start_ms"), (False, "user_end_ms")):
        assert sc.side[key].dtype == np.int32
        assert sc.side[key].tolist() == [u for _, s, u in users if s == is_start], key
    steps = _reader_steps(t)
    windows = P.plan_windows(r, levels)
    if kind == "concurrency":
        assert [lv for lv, _ in steps] == list(levels)
        assert t.step_rates is None
    else:
        assert len(steps) == len(levels)
        for rate, plan in zip(t.step_rates, levels):
            assert abs(rate["intended_rps"] - plan) <= TOL * plan, (rate, plan)
            assert rate["fell_behind"] is None and rate["dropped"] is None
    for (_, rps), w in zip(steps, windows):
        assert abs(rps - w.rps) <= TOL * w.rps, (name, rps, w)
    _check_percentiles(name, t, windows)


def test_block_size_does_not_change_a_thing():
    # records cut at every block edge (64 KB blocks), carried over: the same rows as 4 MB blocks
    from headroom.formats._batch import join

    path = P.REAL / NAMES[0]
    a = gatling_bin.scan(path, chunk_bytes=1 << 16)
    b = gatling_bin.scan(path, chunk_bytes=4 << 20)
    ra, rb = join(list(a.batches())), join(list(b.batches()))
    for col in ("start_ns", "latency_s", "ok", "line"):
        assert np.array_equal(getattr(ra, col), getattr(rb, col)), col
    assert np.array_equal(a.side["user_start_ms"], b.side["user_start_ms"])
    assert np.array_equal(a.side["user_end_ms"], b.side["user_end_ms"])


def test_streamed_and_whole_table_agree():
    import headroom

    path = P.REAL / NAMES[1]
    whole = headroom.analyze(headroom.load_run(path)).table
    streamed = headroom.analyze(headroom.reduce_run(path)).table
    assert list(whole.requests) == list(streamed.requests)
    assert list(whole.errors) == list(streamed.errors)
    for p in ("p50", "p99"):
        assert list(whole.latency.pct[p]) == list(streamed.latency.pct[p])


def test_the_text_log_of_311_still_reads():
    t = table("gatling-ClosedRampSimulation.log.gz")
    assert [c for c in t.step_concurrency] == list(P.CLOSED_LEVELS)


# ---------------------------------------------------------------- bad logs


def _raw(name=NAMES[1]) -> bytes:
    return gzip.decompress((P.REAL / name).read_bytes())


def _one_line(p, path, fragment):
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.startswith(f"headroom: error: {path}:"), p.stderr
    assert fragment in p.stderr, p.stderr


def test_truncated_log_names_the_record(tmp_path):
    raw = _raw()
    path = tmp_path / "simulation.log"
    path.write_bytes(raw[: len(raw) - 7])  # cut inside the last record
    g = ref(NAMES[1])
    last = 1 + len(g["requests"]) + len(g["users"]) + g["groups"] + g["errors"]
    _one_line(cli("summary", path), path, f"record {last:,} is cut off: the log is truncated")


@pytest.mark.parametrize("version", ["3.12.1", "3.17.0", "4.0.0"])
def test_unsupported_version_says_which_and_what_to_do(tmp_path, version):
    raw = _raw()
    n = struct.unpack(">i", raw[1:5])[0]
    v = version.encode()
    path = tmp_path / "simulation.log"
    path.write_bytes(raw[:1] + struct.pack(">i", len(v)) + v + raw[5 + n :])
    _one_line(cli("summary", path), path, f"a binary simulation.log of Gatling {version}: headroom reads")


def test_unknown_record_type_names_the_record(tmp_path):
    raw = bytearray(_raw())
    g = ref(NAMES[1])
    # the first record after the RUN record starts right after it: find it as the reader does
    r = gatling_bin._Reader(tmp_path)
    end, _, _ = gatling_bin._run_record(r, bytes(raw))
    raw[end] = 9
    path = tmp_path / "simulation.log"
    path.write_bytes(bytes(raw))
    assert g["requests"]
    _one_line(cli("summary", path), path, "record 2: not a Gatling 3.13+ binary log record (record type 9)")


def test_damaged_binary_gatling_looking_file_is_refused(tmp_path):
    path = tmp_path / "simulation.log"
    path.write_bytes(b"\x00\x01simulation log of gatling\x00")
    p = cli("summary", path)
    assert p.returncode == 2 and "binary Gatling simulation.log" in p.stderr, p.stderr

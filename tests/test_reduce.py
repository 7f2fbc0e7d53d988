"""One mergeable reduction: histograms add exactly, generator files merge into the whole run,
a reduced run saves and loads, a Dask cluster gives the same result as this process."""

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import RUNS, ts, write_run

from headroom import HeadroomError, analyze, load_run, reduce_run, to_json
from headroom.binning import quantiles
from headroom.formats import _scan
from headroom.reduce import LatencyHist, load_run_file, save_run

RUN = RUNS / "nginx-keepalive"


def doc(run, **kw):
    d = to_json(analyze(run, **kw))
    d.pop("source")
    d["warnings"] = [w for w in d["warnings"] if "load generators" not in w and "cpuStats" not in w]
    return json.dumps(d, sort_keys=True)


def test_latency_hist_adds_over_the_union_of_values():
    rng = np.random.default_rng(3)
    lat = np.round(rng.exponential(0.01, 5000), 4)
    group = rng.integers(0, 7, 5000)
    whole = LatencyHist.of(group, lat, 7)
    a, b = LatencyHist.of(group[:1234], lat[:1234], 7), LatencyHist.of(group[1234:], lat[1234:], 7)
    assert a + b == whole and b + a == whole and a != whole
    assert whole.total == 5000 and np.array_equal(whole.values, np.unique(lat))
    # exact counts per (group, value): against numpy on the same data
    for g in range(7):
        sel = whole.group == g
        vals, cnt = np.unique(lat[group == g], return_counts=True)
        np.testing.assert_array_equal(whole.values[whole.index[sel]], vals)
        np.testing.assert_array_equal(whole.count[sel], cnt)
    # nanosecond latencies (no decimal grid) stay exact too
    ns = rng.integers(1, 10**9, 3000) / 1e9
    zeros = np.zeros(1500, np.int64)
    h = LatencyHist.of(zeros, ns[:1500], 1) + LatencyHist.of(zeros, ns[1500:], 1)
    counts = np.zeros((1, len(h.values)), np.int64)
    counts[0, h.index] = h.count
    assert quantiles(counts, h.values, 99, 100)[0] == np.percentile(ns, 99, method="inverted_cdf")


def _split(folder, n, *, by="row"):
    """The bundled run's rows dealt into n generator files (every section in each), or its sections split."""
    lines = gzip.decompress((RUN / "perfResults.csv.gz").read_bytes()).decode().splitlines(keepends=True)
    folder.mkdir()
    files, i, sec = [[] for _ in range(n)], 0, -1
    for ln in lines:
        if ln.startswith("start-time"):
            sec += 1
            for k, f in enumerate(files):
                if by == "row" or k == sec * n // 8:
                    f.append(ln)
            continue
        files[i % n if by == "row" else sec * n // 8].append(ln)
        i += 1
    for k, f in enumerate(files):
        (folder / f"gen{k + 1}.csv").write_text("".join(f))
    for name in ("cpuStats.csv", "metadata.yml"):
        shutil.copy(RUN / name, folder)
    return sorted(folder.glob("gen*.csv"))


@pytest.mark.parametrize("layout", ["disjoint", "touching", "overlapping", "one group"])
def test_latency_hist_sum_of_many_parts(layout):
    """The sum of parts cut from rows in time order (groups disjoint, sharing one group at each cut,
    or mixed) counts every (group, latency) as a plain count of the rows does."""
    rng = np.random.default_rng(11)
    n = 20_000
    group = np.sort(rng.integers(0, 40, n)) if layout != "one group" else np.zeros(n, np.int64)
    if layout == "overlapping":
        group = rng.integers(0, 40, n)
    lat = rng.integers(1, 400, n) / 1e4
    cuts = np.sort(rng.choice(np.arange(1, n), 9, replace=False))
    if layout == "disjoint":  # cut where the group changes
        cuts = np.flatnonzero(np.diff(group))[::4] + 1
    parts = [LatencyHist.of(group[p], lat[p], 40) for p in np.split(np.arange(n), cuts)]
    h = LatencyHist.sum(parts)
    want = {}
    for g, v in zip(group.tolist(), lat.tolist()):
        want[(g, v)] = want.get((g, v), 0) + 1
    got = {(int(g), float(h.values[i])): int(c) for g, i, c in zip(h.group, h.index, h.count)}
    assert got == want
    key = h.group * len(h.values) + h.index
    assert (np.diff(key) > 0).all()  # sorted, no entry twice


@pytest.mark.parametrize("n", [2, 3])
def test_generator_files_merge_into_the_whole_run(tmp_path, n):
    files = _split(tmp_path / "gens", n)
    whole = reduce_run(RUN)
    merged = reduce_run(tmp_path / "gens")
    assert doc(merged) == doc(whole)
    steps_a, _, hist_a = whole.reduced
    steps_b, _, hist_b = merged.reduced
    np.testing.assert_array_equal(steps_a.requests, steps_b.requests)
    np.testing.assert_array_equal(hist_a.count, hist_b.count)
    assert any("load generators" in w for w in merged.warnings)
    # the same files given one by one, and without the folder's metadata: same steps
    listed = reduce_run([str(f) for f in files])
    np.testing.assert_array_equal(listed.reduced.steps.requests, steps_a.requests)


def test_files_in_sequence_are_steps(tmp_path):
    _split(tmp_path / "seq", 2, by="section")
    whole, seq = reduce_run(RUN), reduce_run(tmp_path / "seq")
    assert seq.n_steps == 8 and doc(seq) == doc(whole)
    assert not any("load generators" in w for w in seq.warnings)


def test_saved_reduced_run_loads_and_analyses_identically(tmp_path):
    run = reduce_run(RUN, bucket_s=0.5)
    save_run(run, tmp_path / "r.npz")
    assert (tmp_path / "r.npz").stat().st_size < (RUN / "perfResults.csv.gz").stat().st_size / 20
    back = load_run_file(tmp_path / "r.npz")
    assert to_json(analyze(back, bucket_s=0.5)) == to_json(analyze(run, bucket_s=0.5))
    assert back.label == run.label and back.warnings == run.warnings
    # load_run is reduce_run keeping the requests: what it saves is the reduced run, the same
    save_run(load_run(RUN), tmp_path / "x.npz")
    again = load_run_file(tmp_path / "x.npz")
    assert to_json(analyze(again)) == to_json(analyze(reduce_run(RUN)))
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(HeadroomError, match="not a reduced run file"):
        load_run_file(tmp_path / "bad.npz")


def test_a_newer_file_version_is_refused(tmp_path):
    run = reduce_run(RUN)
    save_run(run, tmp_path / "r.npz")
    with np.load(tmp_path / "r.npz") as z:
        arrays = {k: z[k] for k in z.files}
    head = json.loads(bytes(arrays["header"]).decode())
    head["version"] = 99
    arrays["header"] = np.frombuffer(json.dumps(head).encode(), np.uint8)
    np.savez(tmp_path / "new.npz", **arrays)
    with pytest.raises(HeadroomError, match="version 99"):
        load_run_file(tmp_path / "new.npz")


def test_chunked_reading_counts_no_lines(tmp_path, monkeypatch):
    # line numbers are counted only for error messages: a clean file in many chunks never counts
    calls = []
    real = _scan.line_at
    monkeypatch.setattr(_scan, "line_at", lambda *a: calls.append(1) or real(*a))
    from headroom.formats import throughputramp

    monkeypatch.setattr(throughputramp, "line_at", _scan.line_at)
    a = reduce_run(RUN, chunk_bytes=20_000)
    assert calls == [] and a.n_requests == load_run(RUN).n_requests
    # and a bad row in a late chunk is still named at its own line
    rows = [(ts(0.001 * i), "0.0010") for i in range(3000)]
    rows[2500] = (ts(2.5), "x")
    folder = write_run(tmp_path / "bad", [rows])
    with pytest.raises(HeadroomError, match=r"perfResults.csv:2502: bad response-time 'x'"):
        reduce_run(folder, chunk_bytes=5_000)


def test_forced_format_that_does_not_fit_is_one_line(tmp_path):
    data = RUNS.parent.parent / "tests" / "data" / "formats"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "headroom",
            "summary",
            str(data / "gatling-simulation.log"),
            "--format",
            "jmeter-csv",
        ],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "gatling-simulation.log: --format jmeter-csv" in p.stderr and "timeStamp and elapsed" in p.stderr


def test_dask_local_cluster_gives_the_same_json(tmp_path):
    distributed = pytest.importorskip("distributed")
    _split(tmp_path / "gens", 2)
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cl:
        with distributed.Client(cl) as client:
            for path in (
                RUN,
                tmp_path / "gens",
                RUNS.parent.parent / "tests" / "data" / "formats" / "k6.json",
            ):
                local = to_json(analyze(reduce_run(path)))
                remote = to_json(analyze(reduce_run(path, client=client)))
                assert json.dumps(remote) == json.dumps(local), path


def test_summary_dask_option_gives_the_same_json(tmp_path, capsys):
    distributed = pytest.importorskip("distributed")
    from headroom.cli import main

    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
    ) as cl:
        assert main(["summary", str(RUN), "--json", str(tmp_path / "local.json")]) == 0
        assert (
            main(["summary", str(RUN), "--dask", cl.scheduler_address, "--json", str(tmp_path / "d.json")])
            == 0
        )
    assert (tmp_path / "d.json").read_bytes() == (tmp_path / "local.json").read_bytes()
    # a scheduler that is not there: one line, no traceback
    with pytest.raises(HeadroomError, match="--dask tcp://127.0.0.1:9: cannot reach"):
        reduce_run(RUN, client="tcp://127.0.0.1:9")


def test_generators_of_an_open_loop_ramp_add_their_rates(tmp_path):
    """Two generators each running the real 5-attack vegeta ramp: rates, requests and dropped add up."""
    src = Path(__file__).parent / "data" / "formats" / "real" / "vegeta-rates.csv.gz"
    one = reduce_run(src)
    for k in (1, 2):
        shutil.copy(src, tmp_path / f"gen{k}.csv.gz")
    two = reduce_run([str(tmp_path / "gen1.csv.gz"), str(tmp_path / "gen2.csv.gz")])
    assert two.n_steps == one.n_steps == 5
    np.testing.assert_array_equal(two.reduced.steps.requests, 2 * one.reduced.steps.requests)
    for a, b in zip(one.meta.step_rates, two.meta.step_rates):
        assert b["intended_rps"] == 2 * a["intended_rps"]
        assert b["sent_rps"] == pytest.approx(2 * a["sent_rps"])
        assert b["fell_behind"] == a["fell_behind"]


def test_latency_hist_sum_with_a_part_inside_one_shared_group():
    """A middle part all of one group that its neighbours share on both sides adds up once."""
    g = [np.array(x) for x in ([0, 0, 1], [1], [1, 1, 2], [2, 3])]
    lat = [np.array(x) / 1e4 for x in ([5, 6, 5], [5], [7, 5, 1], [1, 2])]
    h = LatencyHist.sum([LatencyHist.of(a, b, 4) for a, b in zip(g, lat)])
    got = sorted(zip(h.group.tolist(), h.values[h.index].tolist(), h.count.tolist()))
    assert got == [(0, 5e-4, 1), (0, 6e-4, 1), (1, 5e-4, 3), (1, 7e-4, 1), (2, 1e-4, 2), (3, 2e-4, 1)]


@pytest.mark.parametrize("order", ["in order", "out of order"])
def test_latency_hist_counts_past_int32_add_exactly(order):
    """Entries are kept in 4 bytes while they fit; counts whose sum could pass 2**31 are added in 8."""
    big = 2**31 - 10
    one = np.array([0], np.int32)
    a = LatencyHist(one, one, np.array([big], np.int32), np.array([0.001]))
    b = LatencyHist(np.array([0, 1], np.int32), np.array([0, 0], np.int32), np.array([big, 3], np.int32),
                    np.array([0.001]))  # fmt: skip
    h = LatencyHist.sum([a, b] if order == "in order" else [b, a])
    assert h.count.tolist() == [2 * big, 3]  # python ints: no wrap-around
    assert h.group.tolist() == [0, 1]


def test_drain_empties_the_list_and_equals_a_plain_count():
    """``drain`` takes its parts out of the caller's list (their memory freed) and counts as ``of``
    counts all the rows at once; entries stay 4 bytes."""
    rng = np.random.default_rng(5)
    group = np.sort(rng.integers(0, 30, 5000))
    lat = rng.integers(1, 900, 5000) / 1e5
    parts = [LatencyHist.of(group[p], lat[p], 30) for p in np.array_split(np.arange(5000), 7)]
    h = LatencyHist.drain(parts)
    assert parts == []
    assert h == LatencyHist.of(group, lat, 30)
    assert {h.group.dtype, h.index.dtype, h.count.dtype} == {np.dtype(np.int32)}

"""The spooled reading path: held levels found batch by batch, the spool, and whole runs.

The batch-by-batch step inference (RunBuilder, LevelSteps) is held against
the whole-array inference (:func:`headroom.levels.steps_from_levels`) on the
real JMeter ramp read independently with the csv module (plan_reader.py) and
on seeded ramps with ties and out-of-order rows; the spooled reduction of
every real sample in small chunks on disk against the same file as one batch in memory.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import plan_reader as P
import pytest

from headroom import levels as L
from headroom import spool
from headroom.cli import main as cli_main
from headroom.formats import _batch

REAL = Path(__file__).parent / "data" / "formats" / "real"


def _batches(n, k, rng):
    """Cut 0..n into k random batches (file order)."""
    cuts = np.sort(rng.choice(np.arange(1, n), size=k - 1, replace=False))
    return np.split(np.arange(n), cuts)


def _streamed(t, lv, end, parts, transients="next"):
    rb = L.RunBuilder()
    for p in parts:
        rb.add(t[p], lv[p], end[p])
    runs = rb.finish(int(end.max()))
    dwell = L.dwell_for(t, end)
    ls = L.LevelSteps(runs, int(t.min()), min_dwell_s=dwell, max_gap_s=L.MAX_GAP_S, transients=transients)
    sid = np.concatenate([ls.assign(t[p], lv[p]) for p in parts])
    return rb.exact, ls.inference(sid, "x")


def _whole(t, lv, end, transients="next"):
    return L.steps_from_levels(t, lv, end_ns=end, min_dwell_s=L.dwell_for(t, end), transients=transients,
                               source="x")  # fmt: skip


@pytest.fixture(scope="module")
def jmeter_real():
    r = P.jmeter_csv(REAL / "jmeter-stepping.csv.gz")
    t = np.asarray(r.start_ns, np.int64)
    end = t + np.asarray(r.latency, np.int64) * 1_000_000
    return t, np.asarray(r.level, np.int64), end


@pytest.mark.parametrize("k", [1, 7, 300, 3000])
def test_levels_batch_by_batch_equal_the_whole_run(jmeter_real, k):
    """The real JMeter ramp (file order: completion) cut into k batches: same steps, ids and notes."""
    t, lv, end = jmeter_real
    exact, got = _streamed(t, lv, end, _batches(len(t), k, np.random.default_rng(k)))
    want = _whole(t, lv, end)
    assert exact
    assert got.steps == want.steps and got.notes == want.notes and got.n_transient == want.n_transient
    assert np.array_equal(got.step_id, want.step_id)
    assert [s.level for s in want.steps] == [float(v) for v in P.STEPPING_LEVELS]  # the .jmx plan


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("transients", ["next", "drop"])
def test_levels_with_ties_and_flicker(seed, transients):
    """Millisecond ties, rows a little out of order, flickering levels between steps: same as whole."""
    rng = np.random.default_rng(seed)
    levels = rng.choice([1, 2, 3, 5, 8], size=6)
    n_per = rng.integers(200, 2000, size=6)
    t = np.concatenate([i * 3_000 + np.sort(rng.integers(0, 3_000, m)) for i, m in enumerate(n_per)])
    lv = np.repeat(levels, n_per)
    flick = rng.random(len(t)) < 0.03
    lv = np.where(flick, rng.choice([1, 2, 3, 5, 8], size=len(t)), lv)
    t = t * 1_000_000  # ms ticks: many ties
    jitter = rng.integers(0, 5, len(t)) * 1_000_000  # written a little out of start order
    order = np.argsort(t + jitter, kind="stable")
    t, lv = t[order], lv[order]
    end = t + rng.integers(0, 5, len(t)) * 1_000_000
    exact, got = _streamed(t, lv, end, _batches(len(t), 40, rng), transients)
    want = _whole(t, lv, end, transients)
    assert exact
    assert got.steps == want.steps and got.notes == want.notes
    assert np.array_equal(got.step_id, want.step_id)


def test_run_builder_says_when_a_batch_goes_back_in_time():
    rb = L.RunBuilder(margin_ns=0)
    rb.add(np.array([10, 11, 12]), np.array([1, 1, 1]))
    rb.add(np.array([20, 21]), np.array([2, 2]))  # 10..12 final now
    rb.add(np.array([5]), np.array([3]))  # earlier than rows already final
    assert not rb.exact


@pytest.mark.parametrize("budget", [0, 4000, 1 << 20])
def test_spool_round_trip(tmp_path, monkeypatch, budget):
    """Rows come back in order, in chunks, whether held in memory, on disk, or partly each."""
    monkeypatch.setattr(spool, "BUDGET_BYTES", budget * 16)
    rng = np.random.default_rng(3)
    a = rng.integers(0, 1 << 62, 10_001)
    b = rng.random(10_001)
    with spool.Spool({"a": np.int64, "b": np.float64}, where=str(tmp_path)) as s:
        for part in np.array_split(np.arange(10_001), 7):
            s.append(a=a[part], b=b[part])
        chunks = list(s.chunks(("a", "b"), rows=999))
        assert sum(len(c["a"]) for c in chunks) == 10_001 and max(len(c["a"]) for c in chunks) <= 999
        assert np.array_equal(np.concatenate([c["a"] for c in chunks]), a)
        assert np.array_equal(np.concatenate([c["b"] for c in chunks]), b)
        assert np.array_equal(s.column("b"), b)
        assert (s.dir is None) == (budget >= 10_001)
        where = Path(s.dir) if s.dir else None
        if where:
            assert where.parent == tmp_path
    assert where is None or not where.exists()
    assert spool._buffered[0] == 0


def test_spool_read_while_another_spills(tmp_path, monkeypatch):
    """Reading a spool while appending to another over the budget moves the first to disk mid-read:
    every row still comes back once, in order."""
    monkeypatch.setattr(spool, "BUDGET_BYTES", 10_000 * 8 + 100)
    monkeypatch.setattr(spool, "CHUNK_ROWS", 999)
    a = np.arange(10_000, dtype=np.int64)
    with spool.Spool({"a": np.int64}, where=str(tmp_path)) as s, spool.Spool({"k": np.int32}) as k:
        for part in np.array_split(a, 13):
            s.append(a=part)
        assert s.dir is None
        got = []
        for c in s.chunks(("a",)):
            got.append(c["a"].copy())
            k.append(k=np.zeros(len(c["a"]), np.int32))  # pushes the budget over: s is spilled
        assert s.dir is not None
        assert np.array_equal(np.concatenate(got), a)
        cur = spool.Cursor(k, ("k",))
        assert sum(len(cur.take(m)["k"]) for m in (1, 2_500, 7_000, 5_000)) == 10_000


@pytest.mark.parametrize("order", ["steps in order", "steps interleaved"])
def test_bucket_steps_equals_bucket_step_per_step(order):
    """One pass over rows of mixed steps gives each step the part bucket_step gives its rows alone
    (buckets, counts, histogram), whatever the order of the rows and the cut into batches."""
    from headroom.reduce import Frame, bucket_step, bucket_steps, span_of

    rng = np.random.default_rng(7)
    n, k = 40_000, 5
    step = np.sort(rng.integers(0, k, n)) if order == "steps in order" else rng.integers(0, k, n)
    step[step == 3] = 4  # step 3 has no rows
    st = 1_800_000_000 * 10**9 + step * 30 * 10**9 + rng.integers(0, 20 * 10**9, n)
    lat = rng.integers(1, 300_000, n) / 1e6
    one = np.flatnonzero(step == 2)[:1]  # step 2: a single row (too short to bucket)
    keep = (step != 2) | np.isin(np.arange(n), one)
    st, lat, step = st[keep], lat[keep], step[keep]
    frames = {j: span_of([(st[step == j], lat[step == j])]) for j in range(k)}
    frames[3] = Frame(0, 0, 0)
    cuts = np.sort(rng.choice(np.arange(1, len(st)), 6, replace=False))
    parts = bucket_steps(lambda: ((st[p], lat[p], step[p].astype(np.int32)) for p in np.split(np.arange(len(st)), cuts)),
                         frames, bucket_ns=10**9, min_partial=0.5, where="x")  # fmt: skip
    for j in range(k):
        sel = step == j
        want = bucket_step(lambda sel=sel: iter([(st[sel], lat[sel])]), frames[j], bucket_ns=10**9,
                           min_partial=0.5, where="x", step=j)  # fmt: skip
        got = parts[j]
        assert (got.t0, got.t1, got.n) == (want.t0, want.t1, want.n)
        for name in ("lengths", "counts"):
            a, b = getattr(got, name), getattr(want, name)
            assert (a is None and b is None) or np.array_equal(a, b)
        if want.sums is not None:
            assert np.allclose(got.sums, want.sums, rtol=1e-12)
        for name in ("hist", "loose"):
            a, b = getattr(got, name), getattr(want, name)
            if b is None:
                assert a is None
            else:  # equal as histograms: the same counts of the same latencies in each group
                assert _same_hist(a, b)


def _same_hist(a, b) -> bool:
    pa = sorted(zip(a.group.tolist(), a.values[a.index].tolist(), a.count.tolist()))
    pb = sorted(zip(b.group.tolist(), b.values[b.index].tolist(), b.count.tolist()))
    return pa == pb


def _summary_json(path, capsys, extra=()):
    assert cli_main(["summary", str(path), "--json", "-", *extra]) == 0
    return json.loads(capsys.readouterr().out)


SAMPLES = sorted(p.name for p in REAL.iterdir() if p.name.endswith(".gz")) + ["oha-rates"]


def one_batch(monkeypatch):
    """The whole file as one batch, its rows in memory in one chunk: the in-memory table of the reader
    protocol (the same reduction, a different cut of the rows)."""
    monkeypatch.setattr(_batch, "CHUNK_BYTES", 1 << 30)
    monkeypatch.setattr(spool, "BUDGET_BYTES", 1 << 40)
    monkeypatch.setattr(spool, "CHUNK_ROWS", 1 << 22)
    monkeypatch.setattr(spool.Spool.chunks, "__defaults__", (1 << 22,))


@pytest.mark.parametrize("name", SAMPLES)
def test_spooled_equals_the_whole_table(name, capsys, monkeypatch):
    """Every real sample, spooled in chunks of 777 rows (beyond 5,000 rows on disk), gives the JSON of
    the file read as one batch in memory."""
    path = REAL / name
    monkeypatch.setattr(spool, "BUDGET_BYTES", 5000 * 41)
    monkeypatch.setattr(spool, "CHUNK_ROWS", 777)
    streamed = _summary_json(path, capsys)

    one_batch(monkeypatch)
    table = _summary_json(path, capsys)
    assert streamed == table


def test_steps_option_over_a_spooled_file(capsys):
    """--steps 10s on the real JMeter ramp: 4 steps of 10 s, the same requests as the whole file."""
    whole = _summary_json(REAL / "jmeter-stepping.csv.gz", capsys)
    cut = _summary_json(REAL / "jmeter-stepping.csv.gz", capsys, ["--steps", "10s"])
    r = P.jmeter_csv(REAL / "jmeter-stepping.csv.gz")
    t = np.asarray(r.start_ns, np.int64)
    k = (t - t.min()) // 10_000_000_000
    want = np.bincount(k[np.asarray(r.ok)])
    got = [s["requests"] for s in cut["steps"]]
    assert got == want.tolist()
    assert sum(got) == sum(s["requests"] for s in whole["steps"])


@pytest.mark.parametrize("steps", ["0.25s", "3,7.5,20"])
def test_steps_option_spooled_equals_the_whole_table(steps, capsys, monkeypatch):
    """--steps cutting the real JMeter ramp into 160 steps (or at three times): as the whole table."""
    path = REAL / "jmeter-stepping.csv.gz"
    streamed = _summary_json(path, capsys, ["--steps", steps])

    one_batch(monkeypatch)
    assert streamed == _summary_json(path, capsys, ["--steps", steps])
    assert len(streamed["steps"]) == (4 if "," in steps else 161)


def test_k6_bad_vus_value_counts_as_zero_in_any_block(tmp_path, capsys):
    """A vus sample whose value is not a number reads as 0 (as k6's whole-file reader did), also
    when numbers are parsed by pyarrow block by block: the same JSON as a file with 0 written there."""
    import gzip

    text = gzip.decompress((REAL / "k6-ramping-vus.csv.gz").read_bytes()).decode().splitlines(keepends=True)
    vus = [i for i, ln in enumerate(text) if ln.startswith("vus,")]
    bad, zero = list(text), list(text)
    for i, v in ((vus[3], "x1"), (vus[-5], "")):
        f = text[i].split(",")
        bad[i] = ",".join([*f[:2], v, *f[3:]])
        zero[i] = ",".join([*f[:2], "0", *f[3:]])
    (tmp_path / "bad.csv").write_text("".join(bad))
    (tmp_path / "zero.csv").write_text("".join(zero))
    got = _summary_json(tmp_path / "bad.csv", capsys)
    want = _summary_json(tmp_path / "zero.csv", capsys)
    for d in (got, want):
        d.pop("source"), d.pop("label", None)
        d["warnings"] = [w.split(": ", 1)[1] for w in d["warnings"]]
    assert got == want


@pytest.mark.parametrize("seed", range(6))
def test_step_quartiles_equal_numpys_inverted_cdf(seed, monkeypatch):
    """A long step's start quartiles from two passes over the spool (chunks of 500 rows, on disk beyond
    2,000): numpy's inverted_cdf percentiles of the step's rows, failed rows (key -2 - k) included."""
    from headroom.spooled import KEYS, RAW, StepStats, step_quartiles

    monkeypatch.setattr(spool, "BUDGET_BYTES", 2000 * 41)
    monkeypatch.setattr(spool.Spool.chunks, "__defaults__", (500,))
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 9000))
    start = 1_795_430_000 * 10**9 + rng.integers(0, 10**12, n) // rng.choice([1, 10**6, 10**9])
    key = rng.integers(-1, 3, n)
    key = np.where((key >= 0) & (rng.random(n) < 0.1), -2 - key, key)  # some failed rows
    raw, keys = spool.Spool(RAW, zeros=("name",)), spool.Spool(KEYS)
    z = np.zeros(n, np.int64)
    raw.append(start_ns=start, latency_s=z / 1.0, status=z, ok=z.astype(bool), key=z, line=z)
    keys.append(step=key.astype(np.int32))
    for k in range(3):
        mine = start[(key == k) | (key == -2 - k)]
        if len(mine):
            want = np.percentile(mine, [25, 50, 75], method="inverted_cdf")
            stats = StepStats(n=len(mine), lo=int(mine.min()), hi=int(mine.max()))
            assert list(step_quartiles(raw, keys, k, stats)) == [int(x) for x in want]
    raw.close()
    keys.close()


def _judged(check) -> str:
    from headroom.model import HeadroomError

    try:
        check()
        return "ok"
    except HeadroomError:
        return "far"


def _edge_step(rng, trial: int):
    """A long step's starts and latencies; on odd trials its last start at the edge of the tolerance."""
    n = int(rng.integers(50, 6000))
    span = int(rng.integers(700, 20_000)) * 10**9
    start = 1_795_430_000 * 10**9 + np.sort(rng.integers(0, span, n))
    q25, mid, q75 = np.percentile(start, [25, 50, 75], method="inverted_cdf").astype(np.int64)
    tol = max(600e9, 10.0 * float(q75 - q25))
    if trial % 2:  # just inside or just outside the tolerance (else: starts spread evenly)
        edge = int(mid + tol) + int(rng.integers(-3, 4)) * int(rng.choice([1, 10**6, 10**9]))
        start[-1] = max(edge, int(start[-2]))
    return start, rng.random(n) * 0.5


def _judge_spooled(start, lat):
    """plausible_step's verdict on the rows, from a spool; whether the exact quartiles were read."""
    from headroom.spooled import KEYS, RAW, StartQuartiles, StepStats, plausible_step

    n = len(start)
    raw, keys = spool.Spool(RAW, zeros=("name",)), spool.Spool(KEYS)
    z = np.zeros(n, np.int64)
    raw.append(start_ns=start, latency_s=lat, status=z, ok=z.astype(bool), key=z, line=z + 2)
    keys.append(step=np.zeros(n, np.int32))
    try:
        s = StepStats(n=n, lo=int(start.min()), hi=int(start.max()), max_lat=float(lat.max()))
        q = StartQuartiles(raw, keys, 0, s)
        assert all(a <= x <= b for (a, b), x in zip(q.bounds(), q.exact()))
        calls, exact = [], q.exact
        q.exact = lambda: calls.append(1) or exact()
        rows = (start, lat, lambda i: i + 2)
        return _judged(lambda: plausible_step("f", s, lambda: rows, 0, lambda: q)), bool(calls)
    finally:
        raw.close()
        keys.close()


@pytest.mark.parametrize("seed", range(4))
def test_long_step_verdict_from_quartile_bins_equals_the_whole_check(seed, monkeypatch):
    """A long step judged from the bins that hold its start quartiles (one pass), else from the exact
    quartiles: the same verdict as ``check_plausible`` on all its rows, on steps built at the edge of
    the tolerance (one far start placed just inside and just outside it) and on steps with no far
    start (which the bins decide alone); the bins hold the exact quartiles."""
    from headroom.formats._checks import check_plausible

    monkeypatch.setattr(spool, "BUDGET_BYTES", 3000 * 41)
    rng = np.random.default_rng(100 + seed)
    verdicts, decided_by_bins = [], 0
    for trial in range(60):
        start, lat = _edge_step(rng, trial)
        mine, exact_read = _judge_spooled(start, lat)
        want = _judged(lambda start=start, lat=lat: check_plausible("f", start, lat, lambda i: i + 2))
        assert mine == want, (trial, len(start))
        verdicts.append(mine)
        decided_by_bins += not exact_read and mine == "ok"
    assert "ok" in verdicts and "far" in verdicts  # both sides of the edge were met
    assert decided_by_bins > 10  # and the one-pass shortcut decided some

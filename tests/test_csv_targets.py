"""The streamed throughputramp/hey CSV path: one pass per step, pieces parsed ahead, bounded memory.

The speed and memory figures themselves are measured by bench/bench_summary.py
(5M and 50M rows, also with steps larger than the chunk); these tests pin the
rules that make them possible without changing a result.
"""

import json
import threading

import numpy as np
import pytest
from conftest import RUNS, ts, write_run

from headroom import analyze, load_run, reduce_run, to_json
from headroom.formats import _scan
from headroom.formats.throughputramp import CsvFile
from headroom.model import HeadroomError
from headroom.reduce import bucket_batch, bucket_step, bucket_stream, span_of

OPTS = dict(bucket_ns=10**9, min_partial=0.5, where="x", step=3)


def doc(run):
    return json.dumps(to_json(analyze(run)), sort_keys=True)


def rows_of(seed, n=4000, span_s=9.7, decimals=4):
    rng = np.random.default_rng(seed)
    st = 1_700_000_000 * 10**9 + np.sort(rng.integers(0, int(span_s * 1e9), n))
    lat = np.round(rng.gamma(2.0, 0.002, n), decimals)
    done = st + np.rint(lat * 1e9).astype(np.int64)
    order = np.argsort(done, kind="stable")  # completion order, as load generators write
    return st[order].astype(np.int64), lat[order]


def same_part(a, b, exact_sums=True):
    assert (a.t0, a.t1, a.n, a.rounded) == (b.t0, b.t1, b.n, b.rounded)
    assert np.array_equal(a.lengths, b.lengths) and np.array_equal(a.counts, b.counts)
    assert a.hist == b.hist
    if exact_sums:
        assert np.array_equal(a.sums, b.sums)
    else:
        np.testing.assert_allclose(a.sums, b.sums, rtol=1e-12)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("decimals", [4, 7, 9])
def test_one_batch_is_bucket_step_bit_for_bit(seed, decimals):
    st, lat = rows_of(seed, decimals=decimals)
    parts = [(st, lat)]
    same_part(bucket_batch(st, lat, **OPTS), bucket_step(lambda: iter(parts), span_of(parts), **OPTS))


# 9.2 s: a short last bucket joined to the one before; 0.3 s: one bucket
@pytest.mark.parametrize("span_s", [9.2, 9.7, 0.3])
@pytest.mark.parametrize("pieces", [2, 7, 40])
def test_one_pass_over_batches_equals_two(span_s, pieces):
    st, lat = rows_of(11, span_s=span_s)
    cuts = np.linspace(0, len(st), pieces + 1).astype(int)
    batches = [(st[a:b], lat[a:b]) for a, b in zip(cuts[:-1], cuts[1:])]
    # the earliest start must be in the first batch for the one-pass anchor
    i = int(np.argmin(st))
    st[[0, i]], lat[[0, i]] = st[[i, 0]], lat[[i, 0]]
    part, frame = bucket_stream(iter(batches), **OPTS)
    assert frame == span_of(batches)
    same_part(part, bucket_step(lambda: iter(batches), frame, **OPTS), exact_sums=False)


def test_one_pass_gives_up_when_a_later_batch_starts_earlier():
    st, lat = rows_of(5)
    i = int(np.argmin(st))
    st[[i, -1]], lat[[i, -1]] = st[[-1, i]], lat[[-1, i]]  # the earliest start comes last
    batches = [(st[:2000], lat[:2000]), (st[2000:], lat[2000:])]
    part, frame = bucket_stream(iter(batches), **OPTS)
    assert part is None and frame == span_of(batches)


def test_one_pass_damaged_span_is_refused_like_two_passes():
    st, lat = rows_of(6, n=50)
    st[-1] += 10**9 * 10**7  # a start months later: buckets would outnumber the rows
    batches = [(st[:25], lat[:25]), (st[25:], lat[25:])]
    part, frame = bucket_stream(iter(batches), **OPTS)
    assert part is None
    with pytest.raises(HeadroomError, match="timestamps are damaged"):
        bucket_step(lambda: iter(batches), frame, **OPTS)


def test_slow_first_request_in_a_later_piece(tmp_path):
    # the step's earliest request is slow: it completes (is written) after many others, in a later
    # piece than the first; the streamed read reduces that step again in its frame
    rows = [(ts(0.5 + 0.001 * i), "0.0010") for i in range(3000)]
    rows.insert(2500, (ts(0.0), "3.1000"))
    folder = write_run(tmp_path / "r", [rows, rows[:900]])
    for chunk in (5_000, 64 << 20):
        assert doc(reduce_run(folder, chunk_bytes=chunk)) == doc(load_run(folder))


@pytest.mark.parametrize("chunk_bytes", [3_000, 20_000])
def test_pieces_of_the_bundled_run_equal_the_whole_read(chunk_bytes):
    name = "nginx-keepalive"
    assert doc(reduce_run(RUNS / name, chunk_bytes=chunk_bytes)) == doc(load_run(RUNS / name))


def test_prefetch_keeps_order_and_raises_in_order():
    seen = []

    def fn(x):
        seen.append(threading.current_thread().name)
        if x == 5:
            raise ValueError("five")
        return x * 2

    got = []
    with pytest.raises(ValueError, match="five"):
        for y in _scan.prefetch(fn, range(10), ahead=2, workers=2):
            got.append(y)
    assert got == [0, 2, 4, 6, 8]
    assert all(name.startswith("headroom-parse") for name in seen)
    assert list(_scan.prefetch(lambda x: x + 1, range(5), ahead=0)) == [1, 2, 3, 4, 5]


def test_prefetch_stopped_early_finishes_its_threads():
    before = threading.active_count()
    gen = _scan.prefetch(lambda x: x, range(100), ahead=3, workers=2)
    assert next(gen) == 0
    gen.close()
    assert threading.active_count() == before


def test_pieces_are_read_without_mapping_the_file(tmp_path):
    rows = [(ts(0.001 * i), "0.0010") for i in range(20_000)]
    folder = write_run(tmp_path / "r", [rows])
    with CsvFile(folder / "perfResults.csv") as f:
        s, e = f.sections[0]
        released = []
        ranges = _scan.chunks(f.buf.raw, s, e, 50_000, release=lambda a, b: released.append((a, b)))
        assert len(ranges) > 5 and ranges[0][0] == s and ranges[-1][1] == e
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
        assert released and released[-1][1] == e  # every byte searched is let go
        whole = bytes(f.buf.data[s:e])
        assert bytes(f.buf.arrow_slice(s, e)) == whole
        assert bytes(f.buf.arrow_slice(s + 10, s + 90, prefix=b"head\n")) == b"head\n" + whole[10:90]


def test_line_at_counts_in_windows():
    data = memoryview(b"a\nbb\n" * 2_000_000)  # 10 MB: three windows
    assert _scan.line_at(data, 0) == 1
    assert _scan.line_at(data, 5 * 1_000_000) == 2_000_001
    released = []
    _scan.line_at(data, len(data), release=lambda a, b: released.append(b - a))
    assert sum(released) == len(data)


def test_a_short_last_bucket_joins_the_one_before_in_one_pass():
    # raw bucket 2 holds one request 1 ns into it: joined to bucket 1, where its entry meets another
    st = np.array([0, 10**9, 2 * 10**9 + 1], np.int64) + 1_700_000_000 * 10**9
    lat = np.array([0.001, 0.001, 0.001])
    batches = [(st[:1], lat[:1]), (st[1:], lat[1:])]
    part, frame = bucket_stream(iter(batches), **OPTS)
    assert list(part.counts) == [1, 2] and list(part.hist.group) == [0, 1] and list(part.hist.count) == [1, 2]
    same_part(part, bucket_step(lambda: iter(batches), frame, **OPTS))


def test_bad_rows_in_many_pieces_are_named_at_their_lines_counting_once(tmp_path, monkeypatch):
    rows = [(ts(0.001 * i), "0.0010") for i in range(3000)]
    for i in range(100, 3000, 250):
        rows[i] = (ts(0.001 * i), "x")
    folder = write_run(tmp_path / "bad", [rows[:1500], rows[1500:]])
    counted = []
    real = _scan.line_at
    from headroom.formats import throughputramp

    def spy(data, offset, release=None, start=0):
        counted.append(offset - start)
        return real(data, offset, release, start)

    monkeypatch.setattr(throughputramp, "line_at", spy)
    whole = reduce_run(folder, skip_bad_rows=True)
    counted.clear()
    pieces = reduce_run(folder, skip_bad_rows=True, chunk_bytes=2_000)
    warn = [w for w in pieces.warnings if "skipped" in w or "dropped" in w]
    assert warn and warn == [w for w in whole.warnings if "skipped" in w or "dropped" in w]
    assert "skipped 12 bad row(s)" in warn[0] and "first: line 102:" in warn[0]  # the line after a piece's
    # last line end is no row: it was counted as one bad row per piece with a bad row
    size = (folder / "perfResults.csv").stat().st_size
    assert sum(counted) <= size  # each byte counted at most once, however many pieces had bad rows
